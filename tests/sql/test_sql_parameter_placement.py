"""Where a parameter may stand: variations of accepted statements that PostgreSQL still takes (a
parameter in parentheses, an operator written twice around a parameter used twice, a parameter as a
sort or group key, next to a timestamp, or typed by an earlier use) and variations it refuses (UNION
of a type without equality, `date + @n`), differentially: the analyzer's parameter and column types
must be what PREPARE describes, and where PostgreSQL refuses the statement the analyzer must refuse
it with PostgreSQL's message."""

from __future__ import annotations

import psycopg
import pytest
from pydb.plugin.sql.catalog.model import Catalog
from support.sql_oracle import assert_refused_like_postgres, assert_typed_like_postgres, schema_fixtures

SCHEMA = """
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE TABLE hosts (
    id bigint PRIMARY KEY,
    addr inet NOT NULL,
    tags text[] NOT NULL,
    timeout interval,
    seen timestamptz,
    doc json
);
"""

#: Statements PostgreSQL takes: parameter and column types must agree.
TYPED = [
    # `(@p)` is the parameter itself: untyped, it takes its type from the context
    "SELECT id FROM hosts WHERE (@tag) = ANY(tags)",
    # `ROW(...)` is the row constructor `(...)`, not a function row(): a record, or compared field by field
    "SELECT ROW(1, 2)",
    "SELECT ROW(id, addr) AS r FROM hosts",
    "SELECT id FROM hosts WHERE ROW(id, addr) = ROW(@id, @addr)",
    "SELECT id FROM hosts WHERE ROW(id) IN (ROW(@id), ROW(@other))",
    "SELECT id FROM hosts WHERE id = ((@id))",
    "SELECT id FROM hosts WHERE addr <<= (@net)::inet",
    "SELECT id FROM hosts WHERE tags && (@any_of)::text[]",
    "SELECT id FROM hosts WHERE id = ANY((@ids)::int8[])",
    "SELECT seen + (@extra) AS v FROM hosts",
    "SELECT id FROM hosts WHERE seen < now() - (@grace) * INTERVAL '1 second'",
    "UPDATE hosts SET timeout = timeout + (@extra) WHERE id = @id",
    "SELECT id FROM hosts WHERE host(addr) % (@q)",
    "SELECT id FROM hosts WHERE id IN ((@a), (@b))",
    "INSERT INTO hosts (id, addr, tags) VALUES ((@id), (@addr), (@tags))",
    "SELECT lower((@a)) AS v",
    # a parameter used twice has no single place in the text: the operator is still the one written
    "SELECT id FROM hosts WHERE addr <<= @net::inet AND addr <<= @net::inet",
    "SELECT id FROM hosts WHERE addr <<= @net::inet OR addr >>= @net::inet",
    "SELECT id FROM hosts WHERE @net::inet >>= addr AND @net::inet >>= addr",
    "SELECT id FROM hosts WHERE addr <<= @net::inet UNION ALL SELECT id FROM hosts WHERE addr <<= @net::inet",
    # a sort or group key no context types is text
    "SELECT id FROM hosts ORDER BY @key",
    "SELECT id FROM hosts ORDER BY (@key), id",
    "SELECT id FROM hosts GROUP BY id, @key",
    "SELECT DISTINCT ON (@key) id FROM hosts",
    "SELECT id FROM hosts WHERE id = @id ORDER BY @id",
    # string_agg(text, text) or (bytea, bytea): a varchar value's separator is text
    "SELECT string_agg(host(addr)::varchar, @sep) AS v FROM hosts",
    "SELECT string_agg(host(addr)::varchar, @sep ORDER BY id) AS v FROM hosts",
    "SELECT string_agg(host(addr)::bytea, @sep) AS v FROM hosts",
    # a parameter next to a date, time or interval: PostgreSQL's operator resolution
    "SELECT seen - @t AS v FROM hosts",
    "SELECT seen + @d AS v FROM hosts",
    "SELECT seen::timestamp - @t AS v FROM hosts",
    "SELECT current_date - @d AS v",
    "SELECT localtime - @t AS v",
    "SELECT @n * INTERVAL '1 second' AS v",
    "SELECT INTERVAL '1 second' / @n AS v",
    "SELECT INTERVAL '1 second' - @i AS v",
    "SELECT id FROM hosts WHERE seen > @t AND seen < @t + INTERVAL '1 day'",
    # a parameter an earlier use typed keeps that type where it would otherwise be unknown
    "SELECT id FROM hosts WHERE (@p = id OR @p = @q)",
    "SELECT id FROM hosts WHERE id = @p AND @q < @p",
    "SELECT id FROM hosts WHERE (@p = id OR CASE WHEN true THEN @p END = 0)",
    "SELECT id FROM hosts WHERE id = @p AND CASE WHEN @f THEN @p ELSE 0 END > 1",
    # without ALL the rows are compared: types with equality are fine, ALL needs none
    "SELECT addr FROM hosts UNION SELECT @addr",
    "SELECT doc FROM hosts UNION ALL SELECT @doc",
    "SELECT id, tags FROM hosts INTERSECT SELECT @id, @tags",
]

#: Statements PostgreSQL refuses.
REFUSED = [
    "SELECT current_date + @n AS v",
    "SELECT @n + current_date AS v",
    "SELECT id FROM hosts WHERE seen > now() - @age",
    "SELECT doc FROM hosts UNION SELECT @doc",
    "SELECT id, doc FROM hosts INTERSECT SELECT @id, @doc",
    "SELECT doc FROM hosts EXCEPT SELECT doc FROM hosts",
    "SELECT pg_advisory_lock(@id) AS v UNION SELECT pg_advisory_lock(@id)",
    "SELECT id FROM hosts WHERE addr <<= (@net)::int8",
]

catalog, conn = schema_fixtures(SCHEMA)


@pytest.mark.parametrize("sql", TYPED)
def test_variation_typed_like_postgres(sql: str, catalog: Catalog, conn: psycopg.Connection) -> None:
    assert_typed_like_postgres(sql, catalog, conn)


@pytest.mark.parametrize("sql", REFUSED)
def test_variation_refused_like_postgres(sql: str, catalog: Catalog, conn: psycopg.Connection) -> None:
    assert_refused_like_postgres(sql, catalog, conn)
