CREATE SCHEMA app;
CREATE TYPE app.mood AS ENUM ('happy', 'sad', 'meh');
CREATE TABLE app.people (
    id bigint PRIMARY KEY,
    mood app.mood NOT NULL,
    past app.mood[] NOT NULL DEFAULT '{}',
    wished app.mood[]
);
