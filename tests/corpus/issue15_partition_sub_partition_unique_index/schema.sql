CREATE TABLE events (
    id bigint NOT NULL,
    category text NOT NULL,
    n int NOT NULL,
    PRIMARY KEY (id, category)
) PARTITION BY LIST (category);
CREATE UNIQUE INDEX events_n ON events (n, category) WHERE n > 0;
CREATE TABLE events_c PARTITION OF events FOR VALUES IN ('c') PARTITION BY HASH (id);
CREATE TABLE events_c_0 PARTITION OF events_c FOR VALUES WITH (MODULUS 2, REMAINDER 0);
