CREATE TABLE Groups (
    groupId int PRIMARY KEY,
    MaxDate date,
    dictTree jsonb
);
