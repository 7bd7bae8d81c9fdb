CREATE TABLE logs (id int PRIMARY KEY, at timestamptz NOT NULL);
CREATE INDEX CONCURRENTLY logs_at ON logs (at);
