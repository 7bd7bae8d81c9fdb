CREATE TABLE quotes (id bigint PRIMARY KEY, body text NOT NULL);
