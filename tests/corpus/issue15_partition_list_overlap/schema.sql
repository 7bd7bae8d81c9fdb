CREATE TYPE task_status AS ENUM ('queued', 'processing', 'completed', 'failed');
CREATE TABLE tasks (
    id bigint NOT NULL,
    status task_status NOT NULL,
    PRIMARY KEY (id, status)
) PARTITION BY LIST (status);
CREATE TABLE tasks_live PARTITION OF tasks FOR VALUES IN ('queued', 'processing');
CREATE TABLE tasks_terminal PARTITION OF tasks FOR VALUES IN ('completed', 'failed', 'processing');
