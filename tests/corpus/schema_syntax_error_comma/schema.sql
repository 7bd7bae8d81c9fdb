CREATE SCHEMA app;

CREATE TABLE app.jobs (
    id uuid PRIMARY KEY,,
    kind text NOT NULL
);
