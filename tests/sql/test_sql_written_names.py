"""Function names as the user wrote them, differentially: sqlglot reads some other dialects'
functions as calls of its own (IFNULL and NVL as COALESCE, LEN as LENGTH, SUBSTR as SUBSTRING,
CHARINDEX as POSITION, ...). PostgreSQL resolves the name written: the analyzer must reject what
PostgreSQL rejects, with PostgreSQL's message, and accept what it accepts."""

from __future__ import annotations

import psycopg
import pytest
from conftest import CORPUS_JOBS_SCHEMA
from corpus.run import analyzer_signature, positional, postgres_signature
from pydb.plugin.sql.analyzer.analyzer import analyze
from pydb.plugin.sql.catalog.model import Catalog
from pydb.plugin.sql.frontend import build_catalog
from support.pg import Cluster, scratch_database

CALLS = [
    "SELECT IFNULL(nickname, name) FROM app.users",
    "SELECT NVL(nickname, name) FROM app.users",
    "SELECT ISNULL(nickname, name) FROM app.users",
    "SELECT LEN(name) FROM app.users",
    "SELECT GETDATE()",
    "SELECT SUBSTR(name, 1, 2) FROM app.users",
    "SELECT CHARINDEX('a', name) FROM app.users",
    "SELECT LCASE(name) FROM app.users",
    "SELECT TRUNCATE(1.5)",
    "SELECT UUID()",
    "SELECT STR_TO_DATE('2020', 'YYYY')",
    "SELECT COALESCE(nickname, name) FROM app.users",
    "SELECT GREATEST(1, 2), LEAST(1, 2), NULLIF(1, 2)",
    "SELECT count(*) FROM app.users",
    "UPDATE app.users SET nickname = IFNULL(@nick, 'x') WHERE id = @id",
    "UPDATE app.users SET nickname = COALESCE(@nick, 'x') WHERE id = @id",
    "SELECT id FROM app.users WHERE nickname = NVL(@nick, name)",
]


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    built, problems = build_catalog(CORPUS_JOBS_SCHEMA.read_text(encoding="utf-8"))
    assert not [p for p in problems if p.severity == "error"]
    return built


def postgres_error(conn: psycopg.Connection, sql: str) -> str | None:
    try:
        conn.execute(f"PREPARE written_name AS {positional(sql)[0]}")
    except psycopg.Error as err:
        return str(err).split("\n")[0]
    try:  # the planner chooses ON CONFLICT's arbiter index: plan it too
        nulls = ", ".join("NULL" for _ in positional(sql)[1])
        conn.execute(f"EXPLAIN EXECUTE written_name{f'({nulls})' if nulls else ''}")
    except psycopg.Error as err:
        return str(err).split("\n")[0]
    finally:
        conn.execute("DEALLOCATE written_name")
    return None


@pytest.mark.parametrize("sql", CALLS)
def test_the_name_written_is_resolved(catalog: Catalog, corpus_db: psycopg.Connection, sql: str) -> None:
    _, problems = analyze(sql, catalog)
    errors = [p.message for p in problems if p.severity == "error"]
    expected = postgres_error(corpus_db, sql)
    if expected is None:
        assert errors == []
    else:
        assert errors and errors[0].startswith(expected), (errors, expected)


COMPOSITE_SCHEMA = """
CREATE TYPE address AS (street text, city text);
CREATE TABLE shops (id int PRIMARY KEY, location address);
"""

FIELDS = [
    "SELECT id FROM shops WHERE (location).street = @street",
    "SELECT (location).city FROM shops",
    "SELECT (s.location).city FROM shops s",
    "SELECT (location).nope FROM shops",
    "SELECT (id).nope FROM shops",
]


@pytest.mark.parametrize("sql", FIELDS)
def test_a_composite_field_is_typed_or_refused_as_postgresql_does(
    pg_server: tuple[str, Cluster | None], sql: str
) -> None:
    built, problems = build_catalog(COMPOSITE_SCHEMA)
    assert not problems
    analysis, found = analyze(sql, built)
    errors = [p.message for p in found if p.severity == "error"]
    with scratch_database(pg_server[0], schema=None) as url, psycopg.connect(url, autocommit=True) as conn:
        conn.execute(COMPOSITE_SCHEMA)
        expected = postgres_error(conn, sql)
        if expected is not None:
            assert errors and errors[0] == expected, (errors, expected)
            return
        assert errors == [] and analysis is not None
        assert analyzer_signature(analysis) == postgres_signature(conn, sql)


PARTIAL_SCHEMA = """
CREATE TABLE members (id serial PRIMARY KEY, email text NOT NULL, handle text);
CREATE UNIQUE INDEX members_email ON members (email) WHERE handle IS NOT NULL;
"""

CONFLICTS = [
    "INSERT INTO members (email) VALUES (@e) ON CONFLICT (email) WHERE handle IS NOT NULL DO NOTHING",
    "INSERT INTO members (email) VALUES (@e) ON CONFLICT (email) WHERE handle IS NOT NULL AND id > 0 DO NOTHING",
    "INSERT INTO members (email) VALUES (@e) ON CONFLICT (email) WHERE handle IS NULL DO NOTHING",
    "INSERT INTO members (email) VALUES (@e) ON CONFLICT (email) DO NOTHING",
]


@pytest.mark.parametrize("sql", CONFLICTS)
def test_on_conflict_infers_a_partial_index_as_postgresql_does(pg_server: tuple[str, Cluster | None], sql: str) -> None:
    built, problems = build_catalog(PARTIAL_SCHEMA)
    assert not problems
    _, found = analyze(sql, built)
    errors = [p.message for p in found if p.severity == "error"]
    with scratch_database(pg_server[0], schema=None) as url, psycopg.connect(url, autocommit=True) as conn:
        conn.execute(PARTIAL_SCHEMA)
        expected = postgres_error(conn, sql)
    if expected is None:
        assert errors == []
    else:  # ours names the columns after PostgreSQL's message
        assert len(errors) == 1 and errors[0].startswith(expected), (errors, expected)


OPERATOR_SCHEMA = """
CREATE TABLE hosts (id int PRIMARY KEY, addr inet NOT NULL, span int4range);
"""

#: Operators sqlglot cannot read (a stand-in is parsed in their place) or reads without a meaning.
OPERATORS = [
    "SELECT id FROM hosts WHERE addr <<= @net::inet",
    "SELECT id FROM hosts WHERE addr >>= @net",
    "SELECT id FROM hosts WHERE (addr) <<= (@net::inet) AND id > 1",
    "SELECT id, addr << '10.0.0.0/8' AS inside FROM hosts",
    "SELECT point '(1,2)' <-> point '(3,4)' AS d",
    "SELECT span -|- '[2,3)'::int4range AS a, span &< '[2,3)' AS b FROM hosts",
    "SELECT 1 << 2 AS a, 5 & 3 AS b, 5 | 3 AS c, 5 # 3 AS d",
    "SELECT id FROM hosts WHERE addr <<= 5",
]


@pytest.mark.parametrize("sql", OPERATORS)
def test_an_operator_sqlglot_cannot_read_is_resolved_as_postgresql_does(
    pg_server: tuple[str, Cluster | None], sql: str
) -> None:
    built, problems = build_catalog(OPERATOR_SCHEMA)
    assert not problems
    analysis, found = analyze(sql, built)
    errors = [p.message for p in found if p.severity == "error"]
    with scratch_database(pg_server[0], schema=None) as url, psycopg.connect(url, autocommit=True) as conn:
        conn.execute(OPERATOR_SCHEMA)
        expected = postgres_error(conn, sql)
        if expected is not None:
            assert errors and errors[0].startswith(expected), (errors, expected)
            return
        assert errors == [] and analysis is not None
        assert analyzer_signature(analysis) == postgres_signature(conn, sql)
