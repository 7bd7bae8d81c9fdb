"""Type names in casts, differentially against PostgreSQL: every spelling PostgreSQL's grammar has
for a type (SQL keywords, typmods, `float(p)`, interval fields, `"char"` against `char`, arrays,
schema-qualified and user-defined names, domains) is cast to in several ways, and the analyzer's
parameter and column types must be what PostgreSQL's describe says; a name PostgreSQL does not
know must be refused by both with PostgreSQL's message."""

from __future__ import annotations

import re

import psycopg
import pytest
from pydb.plugin.sql.catalog.model import Catalog
from support.sql_oracle import analyzer, assert_typed_like_postgres, postgres, schema_fixtures

SCHEMA = """
CREATE SCHEMA app;
CREATE TYPE public.mood AS ENUM ('calm', 'busy');
CREATE TYPE app.status AS ENUM ('new', 'done');
CREATE TYPE "Mixed" AS ENUM ('A');
CREATE DOMAIN public.positive_money AS numeric(12, 2) CHECK (VALUE > 0);
CREATE DOMAIN app.code AS varchar(8) CHECK (VALUE <> '');
CREATE DOMAIN app.short_code AS app.code;
CREATE TYPE public.pair AS (a int, b text);
CREATE TABLE public.items (id bigint PRIMARY KEY, name text);
CREATE TABLE app.events (id bigint PRIMARY KEY, at timestamptz);
CREATE TABLE public.orders (
    id int PRIMARY KEY,
    total positive_money,
    code app.short_code,
    mood_code app.code,
    totals positive_money[]
);
CREATE FUNCTION public.with_fee(amount positive_money) RETURNS numeric LANGUAGE sql AS 'SELECT amount + 1';
"""

#: Spellings of built-in types, as PostgreSQL's grammar reads them (gram.y's SimpleTypename and
#: GenericType), and names the catalog resolves through the search path.
SPELLINGS = [
    # numbers
    *("int", "integer", "INT", "Integer", "int2", "int4", "int8", "smallint", "bigint"),
    *("real", "float", "float(1)", "float(24)", "float(25)", "float(53)", "float4", "float8"),
    *("double precision", "DOUBLE   PRECISION", "decimal", "decimal(10)", "decimal(10, 2)", "dec", "dec(3,1)"),
    *("numeric", "numeric(5)", "numeric(5, 2)", "boolean", "bool", "oid", "money"),
    # characters: the keyword CHARACTER is bpchar, the quoted "char" the one-byte type
    *("text", "character", "char", "CHAR", "char(3)", "character(3)", '"char"', "pg_catalog.char"),
    *('pg_catalog."char"', "bpchar", '"bpchar"', "bpchar(4)", "nchar", "nchar(2)", "national character"),
    *("national character varying(3)", "national char varying", "character varying", "character varying(10)"),
    *("char varying", "char varying(4)", "varchar", "varchar(5)", "VarChar(5)", "name", '"name"'),
    # bits
    *("bit", "bit(3)", "bit varying", "bit varying(5)", "varbit", "varbit(2)"),
    # date and time
    *("timestamp", "timestamp(3)", "timestamp without time zone", "timestamp(0) without time zone"),
    *("timestamp with time zone", "timestamp(2) with time zone", "timestamptz", "timestamptz(3)"),
    *("time", "time(3)", "time with time zone", "time(1) with time zone", "time without time zone"),
    *("timetz", "date", "interval", "interval(3)", "interval year", "interval month", "interval day"),
    *("interval hour", "interval minute", "interval second", "interval second(2)", "interval year to month"),
    *("interval day to hour", "interval day to minute", "interval day to second", "interval day to second(3)"),
    *("interval hour to minute", "interval hour to second", "interval minute to second(1)"),
    # other built-ins, qualified or quoted as pg_type names
    *("uuid", "json", "jsonb", "jsonpath", "bytea", "xml", "inet", "cidr", "macaddr", "macaddr8"),
    *("point", "box", "line", "lseg", "path", "polygon", "circle", "tsvector", "tsquery", "pg_lsn"),
    *("int4range", "numrange", "tstzrange", "daterange", "int4multirange", "regclass", "regtype", "regproc"),
    *("pg_catalog.int4", "PG_CATALOG.INT4", "pg_catalog.varchar", "pg_catalog.timestamptz", '"int4"', '"text"'),
    *("pg_catalog.bpchar", '"timestamptz"', "pg_catalog.float8", "txid_snapshot", "pg_snapshot", "xid8"),
    # user-defined: enums, domains, composites, row types, along the search path
    *("mood", "public.mood", "app.status", '"Mixed"', "public.positive_money", "positive_money"),
    *("app.code", "app.short_code", "pair", "public.pair", "items", "public.items", "app.events"),
]

#: The same as arrays, in the grammar's ways of writing one.
ARRAYS = [
    *("int[]", "integer[3]", "int ARRAY", "int ARRAY[4]", "text[][]", "character(3)[]", '"char"[]'),
    *("char[]", "varchar(5)[]", "double precision[]", "float(30)[]", "numeric(5,2)[]", "bit varying[]"),
    *("timestamp with time zone[]", "timestamp(3) without time zone[]", "time with time zone[]"),
    *("interval year to month[]", "interval[]", "uuid[]", "jsonb[]", "pg_catalog.int4[]", "_int4", "_text"),
    *('"_char"', "_bpchar", "pg_catalog._int8", "mood[]", "public.mood[]", "app.status[]", '"Mixed"[]'),
    *("pair[]", "items[]", "app.events[]", "int4range[]", "_mood"),
    # arrays over domains stay the domain's array type (parameters and result columns alike)
    *("positive_money[]", "public.positive_money[]", "app.code[]", "app.short_code ARRAY", "_positive_money"),
]

#: Names PostgreSQL has no type for: both must refuse them with its message.
UNKNOWN = ['"integer"', '"int"', "string", "int64", "app.mood", "public.status", "nosuch.int4", "mixed"]
UNKNOWN += ['"double precision"', '"character varying"', '"Mood"', "_nosuch", "app._mood", "datetime"]

#: How each spelling is cast: a parameter (CAST and ::), NULL, and a typed-literal form.
FORMS = ["SELECT CAST(@p AS {t}) AS v", "SELECT @p::{t} AS v", "SELECT NULL::{t} AS v", "SELECT (@p::{t}) IS NULL AS v"]


catalog, conn = schema_fixtures(SCHEMA)


@pytest.mark.parametrize("spelling", SPELLINGS + ARRAYS)
@pytest.mark.parametrize("form", FORMS)
def test_a_cast_types_like_postgres(form: str, spelling: str, catalog: Catalog, conn: psycopg.Connection) -> None:
    sql = form.format(t=spelling)
    assert_typed_like_postgres(sql, catalog, conn)


#: Where PostgreSQL types a parameter as a domain (stored into a domain column, passed to a domain
#: argument, cast to it) and where as the base type (operators and common types reduce a domain
#: to its base type).
DOMAIN_STATEMENTS = [
    "INSERT INTO orders (id, total, code) VALUES (@id, @total, @code)",
    "INSERT INTO orders (id, total) VALUES (@a, @b), (@c, @d)",
    "INSERT INTO orders (id, total) SELECT @id, @total",
    "INSERT INTO orders (id, total) VALUES (@id, @total) ON CONFLICT (id) DO UPDATE SET total = @new_total",
    "UPDATE orders SET total = @total, code = @code WHERE id = @id",
    "UPDATE orders SET (total, mood_code) = (@total, @code) WHERE id = @id",
    "UPDATE orders SET total = @total WHERE total = @old",
    "SELECT id FROM orders WHERE total = @total OR total > @low OR @high = total",
    "SELECT id FROM orders WHERE total IN (@a, @b)",
    "SELECT id FROM orders WHERE code = @code",
    "SELECT with_fee(@amount) AS v",
    "SELECT COALESCE(total, @fallback) AS v FROM orders",
    "SELECT @p::positive_money + 1 AS v",
    "SELECT total, code FROM orders WHERE id = @id",
    # an array over a domain: PostgreSQL keeps the array type (its describe too); its element is
    # the domain where stored, the base type under a scalar operator
    "INSERT INTO orders (id, totals) VALUES (@id, @totals)",
    "INSERT INTO orders (id, totals) SELECT @id, @totals",
    "INSERT INTO orders (id, totals) VALUES (@id, ARRAY[@a, @b]::positive_money[])",
    "UPDATE orders SET totals = @totals WHERE id = @id",
    "UPDATE orders SET totals[1] = @one WHERE id = @id",
    "SELECT id FROM orders WHERE totals = @totals",
    "SELECT id FROM orders WHERE @x = ANY(totals)",
    "SELECT id FROM orders WHERE total = ANY(@xs)",
    "SELECT totals, totals[1] AS first FROM orders",
    "SELECT COALESCE(totals, @d) AS v FROM orders",
    "SELECT array_append(totals, @x) AS v FROM orders",
    "SELECT @p::positive_money[] || totals AS v FROM orders",
    "SELECT totals || total AS v FROM orders",
    "SELECT unnest(@xs::positive_money[]) AS v",
    "SELECT cardinality(totals) AS v FROM orders",
    "SELECT id FROM orders WHERE totals && @xs",
]


@pytest.mark.parametrize("sql", DOMAIN_STATEMENTS)
def test_a_domain_parameter_types_like_postgres(sql: str, catalog: Catalog, conn: psycopg.Connection) -> None:
    assert_typed_like_postgres(sql, catalog, conn)


@pytest.mark.parametrize("spelling", UNKNOWN)
def test_an_unknown_type_name_is_refused_like_postgres(
    spelling: str, catalog: Catalog, conn: psycopg.Connection
) -> None:
    sql = FORMS[1].format(t=spelling)
    expected = postgres(conn, sql)
    assert isinstance(expected, str), f"PostgreSQL takes {sql}"
    # pydb writes a type's name unquoted in its messages (as for the schema's DDL).
    assert analyzer(sql, catalog) == re.sub(r'^type "(.*)" does not exist$', r"type \1 does not exist", expected)


#: Literals of a type written with it: `'x'::"char"` is the one-byte type, `'x'::char` is bpchar.
LITERALS = [
    "SELECT 'x'::\"char\" AS v",
    "SELECT 'x'::char AS v",
    "SELECT 'ab'::character(2) AS v",
    "SELECT 'x'::pg_catalog.\"char\" AS v",
    "SELECT CAST('x' AS \"char\") AS v",
    "SELECT char 'x' AS v",
    "SELECT \"char\" 'x' AS v",
    "SELECT varchar 'x' AS v",
    "SELECT timestamp with time zone '2020-01-01 00:00+00' AS v",
    "SELECT timestamp '2020-01-01' AS v",
    "SELECT time with time zone '10:00+01' AS v",
    "SELECT interval '1 day' AS v",
    "SELECT interval '1' year AS v",
    "SELECT date '2020-01-01' AS v",
    "SELECT double precision '1.5' AS v",
    "SELECT bit '101' AS v",
    "SELECT int4 '7' AS v",
    "SELECT 7::float(3) AS v",
    "SELECT 7::decimal(4, 1) AS v",
    "SELECT '{1,2}'::int ARRAY AS v",
    "SELECT ARRAY['a']::\"char\"[] AS v",
    "SELECT ARRAY[@a, @b]::character(2)[] AS v",
    "SELECT 'calm'::mood AS v",
    "SELECT 'new'::app.status AS v",
    "SELECT 12.5::positive_money AS v",
    "SELECT '(1,x)'::pair AS v",
    "SELECT @p::\"char\" = 'x' AS v",
    "SELECT @p::character = 'x' AS v",
    'INSERT INTO items (id, name) VALUES (@id::int, @name::"char") RETURNING id, name',
]


@pytest.mark.parametrize("sql", LITERALS)
def test_a_typed_literal_types_like_postgres(sql: str, catalog: Catalog, conn: psycopg.Connection) -> None:
    assert_typed_like_postgres(sql, catalog, conn)
