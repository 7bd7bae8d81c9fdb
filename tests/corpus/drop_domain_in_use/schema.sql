CREATE DOMAIN positive_money AS numeric(12, 2) CHECK (VALUE > 0);
CREATE TABLE orders (
    id bigint PRIMARY KEY,
    total positive_money NOT NULL
);
DROP DOMAIN positive_money;
