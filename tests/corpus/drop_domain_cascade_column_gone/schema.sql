CREATE DOMAIN code AS varchar(8) CHECK (VALUE <> '');
CREATE DOMAIN short_code AS code;
CREATE DOMAIN positive_money AS numeric(12, 2) CHECK (VALUE > 0);
CREATE TYPE line AS (item code, qty int);
CREATE TABLE orders (
    id bigint PRIMARY KEY,
    code short_code,
    codes code[],
    total positive_money NOT NULL,
    totals positive_money[]
);
-- drops short_code, orders.code, orders.codes and line.item with it
DROP DOMAIN code CASCADE;
