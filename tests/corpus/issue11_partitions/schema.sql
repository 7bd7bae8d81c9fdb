CREATE TABLE measurements (
    id bigint NOT NULL,
    taken_on date NOT NULL,
    value double precision
) PARTITION BY RANGE (taken_on);
CREATE TABLE measurements_2026 PARTITION OF measurements
    FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
