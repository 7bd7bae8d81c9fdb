CREATE TABLE tasks (
    id bigint PRIMARY KEY,
    tool_id int NOT NULL,
    status text NOT NULL
) PARTITION BY HASH (tool_id);
