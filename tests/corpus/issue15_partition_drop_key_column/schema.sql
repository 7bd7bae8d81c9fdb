CREATE TABLE tasks (
    id bigint NOT NULL,
    tool_id int NOT NULL
) PARTITION BY HASH (tool_id);
ALTER TABLE tasks RENAME COLUMN tool_id TO tool;
ALTER TABLE tasks DROP COLUMN tool;
