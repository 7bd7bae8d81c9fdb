CREATE SCHEMA "Shop";
CREATE TABLE "Shop"."Order" (
    "Id" bigint PRIMARY KEY,
    "limit" int NOT NULL,
    "state of play" text NOT NULL
);
