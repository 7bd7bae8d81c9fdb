CREATE TABLE routes (
    id bigint PRIMARY KEY,
    "from" text NOT NULL,
    "to" text NOT NULL,
    "class" int NOT NULL,
    "global" bool NOT NULL
);
