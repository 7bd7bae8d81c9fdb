CREATE DOMAIN positive_money AS numeric(12, 2) CHECK (VALUE > 0);
CREATE TABLE orders (id bigint PRIMARY KEY, total positive_money, note text);
CREATE VIEW priced AS SELECT * FROM orders;
CREATE VIEW notes AS SELECT id, note FROM orders;
-- drops orders.total and priced (its * took total); notes refers to no column of the domain
DROP DOMAIN positive_money CASCADE;
