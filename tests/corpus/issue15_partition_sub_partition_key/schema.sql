CREATE TABLE tasks (
    id bigint NOT NULL,
    status text NOT NULL,
    tool_id int NOT NULL,
    PRIMARY KEY (id, status)
) PARTITION BY LIST (status);
CREATE TABLE tasks_live PARTITION OF tasks FOR VALUES IN ('queued', 'processing') PARTITION BY HASH (tool_id);
