CREATE SCHEMA app;
CREATE TABLE app.jobs (id uuid PRIMARY KEY);
CREATE VIEW app.recent AS SELECT * FROM app.jobs;
CREATE TABLE app.legacy (id STRING);
