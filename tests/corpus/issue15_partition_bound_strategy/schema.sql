CREATE TABLE tasks (
    id bigint NOT NULL,
    tool_id int NOT NULL
) PARTITION BY HASH (tool_id);
CREATE TABLE tasks_p0 PARTITION OF tasks FOR VALUES IN (1, 2);
