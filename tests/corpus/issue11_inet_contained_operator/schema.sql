CREATE TABLE hosts (
    id int PRIMARY KEY,
    addr inet NOT NULL,
    flags bit(8) NOT NULL,
    cmd cid
);
