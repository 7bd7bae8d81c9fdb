-- COPY's formats: every column of `typed` goes in PostgreSQL's binary format, `stamped` (a uuid,
-- a timestamp, a numeric, a smallint fed by an int32) in its text format.
CREATE TYPE mood AS ENUM ('calm', 'busy');
CREATE DOMAIN positive AS integer CHECK (VALUE > 0);

CREATE TABLE typed (
  t text NOT NULL,
  v varchar(5),
  c char(3),
  e mood,
  es mood,
  i4 integer,
  i8 bigint,
  i8s bigint,
  f4 real,
  f8 double precision,
  f8f double precision,
  b boolean,
  by bytea,
  d positive,
  w text
);

CREATE TABLE stamped (
  id uuid NOT NULL,
  at timestamptz,
  amount numeric,
  small smallint
);
