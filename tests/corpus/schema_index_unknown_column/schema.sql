CREATE SCHEMA app;
CREATE TABLE app.jobs (id uuid PRIMARY KEY, kind text);
CREATE INDEX jobs_kind ON app.jobs (knd);
