CREATE TABLE sessions (name text PRIMARY KEY, idle bigint NOT NULL DEFAULT 0);
