CREATE SCHEMA app;
CREATE TABLE app.customers (id bigint PRIMARY KEY, name text NOT NULL, note text);
CREATE TABLE app.orders (
    id bigint PRIMARY KEY,
    customer_id bigint REFERENCES app.customers,
    total int NOT NULL
);
