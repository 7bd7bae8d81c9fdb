CREATE TABLE counters (name text PRIMARY KEY, value bigint NOT NULL DEFAULT 0);
