CREATE SEQUENCE invoice_numbers START 1000;
CREATE TABLE invoices (id int PRIMARY KEY, number bigint NOT NULL DEFAULT nextval('invoice_numbers'));
ALTER SEQUENCE invoice_numbers OWNED BY invoices.number;
