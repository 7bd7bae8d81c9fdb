-- A queue partitioned by tool (every unique key includes tool_id), and a log partitioned by
-- status whose terminal partition is itself partitioned by date.
CREATE TABLE tools (
    id int PRIMARY KEY,
    name text NOT NULL UNIQUE
);
CREATE TYPE task_status AS ENUM ('queued', 'processing', 'completed', 'failed');
CREATE TABLE tasks (
    id bigint NOT NULL,
    tool_id int NOT NULL REFERENCES tools (id),
    status task_status NOT NULL DEFAULT 'queued',
    billing_key text,
    lease_token uuid,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id, tool_id),
    UNIQUE (billing_key, tool_id)
) PARTITION BY HASH (tool_id);
CREATE TABLE tasks_p0 PARTITION OF tasks FOR VALUES WITH (MODULUS 4, REMAINDER 0);
CREATE TABLE tasks_p2 PARTITION OF tasks FOR VALUES WITH (MODULUS 4, REMAINDER 2);
CREATE TABLE tasks_odd PARTITION OF tasks FOR VALUES WITH (MODULUS 2, REMAINDER 1);
-- The claim index, created on the partitioned table: each partition gets its own.
CREATE INDEX tasks_claim ON tasks (tool_id, created_at) WHERE status = 'queued';

CREATE TABLE task_log (
    task_id bigint NOT NULL,
    status task_status NOT NULL,
    logged_on date NOT NULL,
    note text
) PARTITION BY LIST (status);
CREATE TABLE task_log_live PARTITION OF task_log FOR VALUES IN ('queued', 'processing');
CREATE TABLE task_log_done PARTITION OF task_log FOR VALUES IN ('completed', 'failed') PARTITION BY RANGE (logged_on);
CREATE TABLE task_log_2026 PARTITION OF task_log_done FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
CREATE TABLE task_log_2027 (LIKE task_log);
ALTER TABLE task_log_done ATTACH PARTITION task_log_2027 FOR VALUES FROM ('2027-01-01') TO ('2028-01-01');
ALTER TABLE task_log_done DETACH PARTITION task_log_2027;
-- Detached, its range is free again.
CREATE TABLE task_log_2027b PARTITION OF task_log_done FOR VALUES FROM ('2027-01-01') TO ('2028-01-01');
CREATE TABLE task_log_older PARTITION OF task_log_done DEFAULT;
