CREATE DOMAIN code AS varchar(8) CHECK (VALUE <> '');
CREATE DOMAIN short_code AS code;
CREATE TYPE line AS (item code, qty int);
CREATE FUNCTION normalized(c code) RETURNS text LANGUAGE sql AS 'SELECT lower(c)';
DROP DOMAIN code;
