-- Partitioning DDL PostgreSQL accepts, which the catalog must accept too.
CREATE TABLE events (
    id bigint NOT NULL,
    kind text,
    at date NOT NULL,
    n int NOT NULL,
    body jsonb
) PARTITION BY LIST (kind);
-- A renamed key column stays the key: the primary key names it by its new name.
ALTER TABLE events RENAME COLUMN kind TO category;
ALTER TABLE events ADD PRIMARY KEY (id, category);
-- Unique indexes that include the key: with an expression beside it, or partial.
CREATE UNIQUE INDEX events_body_id ON events ((body ->> 'id'), category);
CREATE UNIQUE INDEX events_n ON events (n, category) WHERE n > 0;
CREATE TABLE events_null PARTITION OF events FOR VALUES IN (NULL);
CREATE TABLE events_ab PARTITION OF events FOR VALUES IN ('a', 'b');
-- Sub-partitioned by a key every inherited unique index includes.
CREATE TABLE events_c PARTITION OF events FOR VALUES IN ('c', 'd') PARTITION BY LIST (category);
CREATE TABLE events_c_0 PARTITION OF events_c FOR VALUES IN ('c');
CREATE TABLE events_rest PARTITION OF events DEFAULT;
-- Detached, a partition's values are free for another.
ALTER TABLE events DETACH PARTITION events_ab;
CREATE TABLE events_b PARTITION OF events FOR VALUES IN ('b');
-- Hash partitions of mixed moduli that divide one another.
CREATE TABLE shards (id int NOT NULL, PRIMARY KEY (id)) PARTITION BY HASH (id);
CREATE TABLE shards_0 PARTITION OF shards FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE shards_1 PARTITION OF shards FOR VALUES WITH (MODULUS 4, REMAINDER 1);
CREATE TABLE shards_3 PARTITION OF shards FOR VALUES WITH (MODULUS 8, REMAINDER 3);
CREATE TABLE shards_7 PARTITION OF shards FOR VALUES WITH (MODULUS 8, REMAINDER 7);
-- Multi-column ranges that touch but do not overlap.
CREATE TABLE ticks (at date NOT NULL, n int NOT NULL) PARTITION BY RANGE (at, n);
CREATE TABLE ticks_low PARTITION OF ticks FOR VALUES FROM (MINVALUE, MINVALUE) TO ('2026-01-01', 0);
CREATE TABLE ticks_mid PARTITION OF ticks FOR VALUES FROM ('2026-01-01', 0) TO ('2026-01-01', 100);
CREATE TABLE ticks_high PARTITION OF ticks FOR VALUES FROM ('2026-01-01', 100) TO (MAXVALUE, MAXVALUE);
-- A partition key over an expression, without unique constraints.
CREATE TABLE readings (taken_at timestamp NOT NULL, v float8) PARTITION BY RANGE ((taken_at::date));
CREATE TABLE readings_2026 PARTITION OF readings FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
