CREATE TABLE orders (id int PRIMARY KEY, customer text NOT NULL, total numeric(10, 2) NOT NULL);
CREATE VIEW big_orders AS SELECT id, customer, total FROM orders WHERE total > 100;
CREATE MATERIALIZED VIEW customer_totals AS
    SELECT customer, sum(total) AS total, count(*) AS orders FROM orders GROUP BY customer;
