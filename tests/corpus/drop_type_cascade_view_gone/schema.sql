CREATE TYPE order_state AS ENUM ('open', 'shipped');
CREATE TABLE orders (id bigint PRIMARY KEY, state order_state NOT NULL, note text);
CREATE VIEW open_orders AS SELECT id FROM orders WHERE state = 'open';
CREATE VIEW open_order_ids AS SELECT id FROM open_orders;
-- drops orders.state, open_orders (it reads that column) and open_order_ids (it reads open_orders)
DROP TYPE order_state CASCADE;
