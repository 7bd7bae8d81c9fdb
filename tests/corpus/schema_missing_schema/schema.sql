CREATE TABLE app.jobs (id uuid PRIMARY KEY);
