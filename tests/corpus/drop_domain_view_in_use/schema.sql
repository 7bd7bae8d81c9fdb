CREATE DOMAIN positive_money AS numeric(12, 2) CHECK (VALUE > 0);
CREATE TABLE orders (id bigint PRIMARY KEY, amount numeric NOT NULL);
-- no column has the domain, but the view's query casts to it
CREATE VIEW valid_orders AS SELECT id FROM orders WHERE amount::positive_money IS NOT NULL;
DROP DOMAIN positive_money;
