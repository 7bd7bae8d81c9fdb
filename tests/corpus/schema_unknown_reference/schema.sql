CREATE SCHEMA app;
CREATE TABLE app.jobs (
    id uuid PRIMARY KEY,
    owner_id bigint REFERENCES app.owners (id)
);
