CREATE TABLE jobs (id uuid PRIMARY KEY, tool text NOT NULL);
