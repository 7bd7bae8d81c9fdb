-- A queue partitioned by tool: its billing key is unique per tool, (billing_key, tool_id).
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

