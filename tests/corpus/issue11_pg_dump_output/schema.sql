--
-- PostgreSQL database dump
--


-- Dumped from database version 15.20 (Debian 15.20-0+deb12u1)
-- Dumped by pg_dump version 15.20 (Debian 15.20-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: shop; Type: SCHEMA; Schema: -; Owner: postgres
--

CREATE SCHEMA shop;


ALTER SCHEMA shop OWNER TO postgres;

--
-- Name: citext; Type: EXTENSION; Schema: -; Owner: -
--

CREATE EXTENSION IF NOT EXISTS citext WITH SCHEMA public;


--
-- Name: EXTENSION citext; Type: COMMENT; Schema: -; Owner: 
--

COMMENT ON EXTENSION citext IS 'data type for case-insensitive character strings';


--
-- Name: pgcrypto; Type: EXTENSION; Schema: -; Owner: -
--

CREATE EXTENSION IF NOT EXISTS pgcrypto WITH SCHEMA public;


--
-- Name: EXTENSION pgcrypto; Type: COMMENT; Schema: -; Owner: 
--

COMMENT ON EXTENSION pgcrypto IS 'cryptographic functions';


--
-- Name: address; Type: TYPE; Schema: shop; Owner: postgres
--

CREATE TYPE shop.address AS (
	street text,
	city text
);


ALTER TYPE shop.address OWNER TO postgres;

--
-- Name: order_state; Type: TYPE; Schema: shop; Owner: postgres
--

CREATE TYPE shop.order_state AS ENUM (
    'new',
    'paid',
    'shipped'
);


ALTER TYPE shop.order_state OWNER TO postgres;

--
-- Name: positive_money; Type: DOMAIN; Schema: shop; Owner: postgres
--

CREATE DOMAIN shop.positive_money AS numeric(12,2)
	CONSTRAINT positive_money_check CHECK ((VALUE > (0)::numeric));


ALTER DOMAIN shop.positive_money OWNER TO postgres;

--
-- Name: order_count(bigint); Type: FUNCTION; Schema: shop; Owner: postgres
--

CREATE FUNCTION shop.order_count(c bigint) RETURNS bigint
    LANGUAGE sql STABLE
    AS $$ SELECT count(*) FROM shop.orders WHERE customer_id = c $$;


ALTER FUNCTION shop.order_count(c bigint) OWNER TO postgres;

--
-- Name: touch(); Type: FUNCTION; Schema: shop; Owner: postgres
--

CREATE FUNCTION shop.touch() RETURNS trigger
    LANGUAGE plpgsql
    AS $$ BEGIN NEW.updated_at := now(); RETURN NEW; END $$;


ALTER FUNCTION shop.touch() OWNER TO postgres;

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: customers; Type: TABLE; Schema: shop; Owner: postgres
--

CREATE TABLE shop.customers (
    id bigint NOT NULL,
    email public.citext NOT NULL,
    name text NOT NULL,
    home shop.address
);


ALTER TABLE shop.customers OWNER TO postgres;

--
-- Name: customers_id_seq; Type: SEQUENCE; Schema: shop; Owner: postgres
--

ALTER TABLE shop.customers ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME shop.customers_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: events; Type: TABLE; Schema: shop; Owner: postgres
--

CREATE TABLE shop.events (
    id bigint NOT NULL,
    at date NOT NULL,
    body jsonb
)
PARTITION BY RANGE (at);


ALTER TABLE shop.events OWNER TO postgres;

--
-- Name: events_2026; Type: TABLE; Schema: shop; Owner: postgres
--

CREATE TABLE shop.events_2026 (
    id bigint NOT NULL,
    at date NOT NULL,
    body jsonb
);


ALTER TABLE shop.events_2026 OWNER TO postgres;

--
-- Name: orders; Type: TABLE; Schema: shop; Owner: postgres
--

CREATE TABLE shop.orders (
    id bigint NOT NULL,
    customer_id bigint NOT NULL,
    state shop.order_state DEFAULT 'new'::shop.order_state NOT NULL,
    total shop.positive_money NOT NULL,
    placed_on date DEFAULT CURRENT_DATE NOT NULL,
    updated_at timestamp with time zone
);


ALTER TABLE shop.orders OWNER TO postgres;

--
-- Name: TABLE orders; Type: COMMENT; Schema: shop; Owner: postgres
--

COMMENT ON TABLE shop.orders IS 'Orders';


--
-- Name: invoice_no; Type: SEQUENCE; Schema: shop; Owner: postgres
--

CREATE SEQUENCE shop.invoice_no
    START WITH 1000
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER TABLE shop.invoice_no OWNER TO postgres;

--
-- Name: invoice_no; Type: SEQUENCE OWNED BY; Schema: shop; Owner: postgres
--

ALTER SEQUENCE shop.invoice_no OWNED BY shop.orders.id;


--
-- Name: open_orders; Type: VIEW; Schema: shop; Owner: postgres
--

CREATE VIEW shop.open_orders AS
 SELECT orders.id,
    orders.customer_id,
    orders.total
   FROM shop.orders
  WHERE (orders.state <> 'shipped'::shop.order_state);


ALTER TABLE shop.open_orders OWNER TO postgres;

--
-- Name: orders_id_seq; Type: SEQUENCE; Schema: shop; Owner: postgres
--

CREATE SEQUENCE shop.orders_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER TABLE shop.orders_id_seq OWNER TO postgres;

--
-- Name: orders_id_seq; Type: SEQUENCE OWNED BY; Schema: shop; Owner: postgres
--

ALTER SEQUENCE shop.orders_id_seq OWNED BY shop.orders.id;


--
-- Name: revenue; Type: MATERIALIZED VIEW; Schema: shop; Owner: postgres
--

CREATE MATERIALIZED VIEW shop.revenue AS
 SELECT orders.customer_id,
    sum((orders.total)::numeric) AS revenue
   FROM shop.orders
  GROUP BY orders.customer_id
  WITH NO DATA;


ALTER TABLE shop.revenue OWNER TO postgres;

--
-- Name: events_2026; Type: TABLE ATTACH; Schema: shop; Owner: postgres
--

ALTER TABLE ONLY shop.events ATTACH PARTITION shop.events_2026 FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');


--
-- Name: orders id; Type: DEFAULT; Schema: shop; Owner: postgres
--

ALTER TABLE ONLY shop.orders ALTER COLUMN id SET DEFAULT nextval('shop.orders_id_seq'::regclass);


--
-- Name: customers customers_email_key; Type: CONSTRAINT; Schema: shop; Owner: postgres
--

ALTER TABLE ONLY shop.customers
    ADD CONSTRAINT customers_email_key UNIQUE (email);


--
-- Name: customers customers_pkey; Type: CONSTRAINT; Schema: shop; Owner: postgres
--

ALTER TABLE ONLY shop.customers
    ADD CONSTRAINT customers_pkey PRIMARY KEY (id);


--
-- Name: orders orders_pkey; Type: CONSTRAINT; Schema: shop; Owner: postgres
--

ALTER TABLE ONLY shop.orders
    ADD CONSTRAINT orders_pkey PRIMARY KEY (id);


--
-- Name: orders_placed; Type: INDEX; Schema: shop; Owner: postgres
--

CREATE INDEX orders_placed ON shop.orders USING btree (placed_on) WHERE (state = 'new'::shop.order_state);


--
-- Name: orders orders_touch; Type: TRIGGER; Schema: shop; Owner: postgres
--

CREATE TRIGGER orders_touch BEFORE UPDATE ON shop.orders FOR EACH ROW EXECUTE FUNCTION shop.touch();


--
-- Name: orders orders_customer_id_fkey; Type: FK CONSTRAINT; Schema: shop; Owner: postgres
--

ALTER TABLE ONLY shop.orders
    ADD CONSTRAINT orders_customer_id_fkey FOREIGN KEY (customer_id) REFERENCES shop.customers(id);


--
-- PostgreSQL database dump complete
--
