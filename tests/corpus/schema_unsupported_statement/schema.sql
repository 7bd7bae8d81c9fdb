CREATE SCHEMA app;
DO $$ BEGIN RAISE NOTICE 'statements the catalog does not model are passed over'; END $$;
CREATE TABLE app.t (id int PRIMARY KEY);
CREATE VIEW app.v AS SELECT id FROM app.t;
CREATE TABLE app.child (id text) INHERITS (app.t);
CREATE FUNCTION app.f() RETURNS int LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION app.f() RETURNS int LANGUAGE sql AS 'SELECT 2';
