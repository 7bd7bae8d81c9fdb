CREATE TABLE tasks (
    id bigint NOT NULL,
    tool_id int NOT NULL
) PARTITION BY HASH (tool);
