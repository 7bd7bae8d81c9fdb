CREATE SCHEMA shop;
CREATE TABLE shop.orders (id bigserial PRIMARY KEY, customer_id bigint NOT NULL);
CREATE FUNCTION shop.order_count(c bigint) RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM shop.orders WHERE customer_id = c
$$;
