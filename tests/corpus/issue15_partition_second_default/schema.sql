CREATE TABLE tasks (
    id bigint NOT NULL,
    status text NOT NULL
) PARTITION BY LIST (status);
CREATE TABLE tasks_rest PARTITION OF tasks DEFAULT;
CREATE TABLE tasks_other (id bigint NOT NULL, status text NOT NULL);
ALTER TABLE tasks ATTACH PARTITION tasks_other DEFAULT;
