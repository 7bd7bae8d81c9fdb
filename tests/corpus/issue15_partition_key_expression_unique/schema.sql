CREATE TABLE readings (
    id bigint NOT NULL,
    taken_at timestamp NOT NULL
) PARTITION BY RANGE ((taken_at::date));
ALTER TABLE readings ADD PRIMARY KEY (id, taken_at);
