CREATE SCHEMA app;
CREATE TABLE app.jobs (
    id uuid PRIMARY KEY,
    email citext NOT NULL
);
