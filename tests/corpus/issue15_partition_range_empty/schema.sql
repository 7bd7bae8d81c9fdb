CREATE TABLE readings (
    id bigint NOT NULL,
    n int NOT NULL
) PARTITION BY RANGE (n);
CREATE TABLE readings_a PARTITION OF readings FOR VALUES FROM (10) TO (10);
