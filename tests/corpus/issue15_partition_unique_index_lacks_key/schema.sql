CREATE TABLE tasks (
    id bigint NOT NULL,
    tool_id int NOT NULL,
    billing_key text,
    PRIMARY KEY (id, tool_id)
) PARTITION BY HASH (tool_id);
CREATE UNIQUE INDEX tasks_billing_key ON tasks (billing_key);
