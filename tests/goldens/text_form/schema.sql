CREATE EXTENSION citext;
CREATE SCHEMA app;
CREATE TYPE app.point_type AS (x int, label text);
CREATE TABLE app.hosts (
    id bigint PRIMARY KEY,
    name citext NOT NULL,
    addr inet,
    aliases citext[],
    ports int4range[],
    zones box[],
    origin app.point_type
);
