"""Untyped outputs, differentially against PostgreSQL: a SELECT that is a branch of UNION,
INTERSECT or EXCEPT (or INSERT's source) leaves `@u`, 'x' and NULL in its select list untyped,
and the set operation gives them the common type of the column across its branches
(`SELECT ids FROM t UNION SELECT @u` types @u bigint[]); a nested set operation or a VALUES list
has resolved its own columns first. Any other SELECT makes an untyped output text (a scalar
subquery, a CTE, `SELECT @a` itself, RETURNING), so `id = (SELECT @a)` compares bigint with text.
The analyzer's parameter and column types must be what PREPARE describes, and where PostgreSQL
refuses the statement the analyzer must refuse it with PostgreSQL's message."""

from __future__ import annotations

import psycopg
import pytest
from pydb.plugin.sql.catalog.model import Catalog
from support.sql_oracle import assert_refused_like_postgres, assert_typed_like_postgres, schema_fixtures

SCHEMA = """
CREATE DOMAIN positive_money AS numeric(12, 2) CHECK (VALUE > 0);
CREATE TABLE t (
    id bigint PRIMARY KEY,
    n int,
    s smallint,
    name text,
    total positive_money,
    ids bigint[],
    created timestamptz
);
CREATE TABLE u (id bigint PRIMARY KEY, t_id bigint, note text);
"""

#: Statements PostgreSQL takes: parameter and column types must agree.
TYPED = [
    # the other branch's column type, whichever side the parameter is on
    "SELECT ids FROM t UNION SELECT @u",
    "SELECT @u UNION SELECT ids FROM t",
    "SELECT id FROM t UNION ALL SELECT @u",
    "SELECT id FROM t INTERSECT SELECT @u",
    "SELECT id FROM t INTERSECT ALL SELECT @u",
    "SELECT id FROM t EXCEPT SELECT @u",
    "SELECT id FROM t EXCEPT ALL SELECT (@u)",
    "SELECT id, name FROM t UNION SELECT @a, @b",
    "SELECT created FROM t UNION SELECT @a",
    "SELECT 1 UNION SELECT @a",
    "SELECT 1.5 UNION SELECT @a",
    "(SELECT @a) UNION SELECT 1",
    # a domain column meets an untyped one: the common type is the base type
    "SELECT total FROM t UNION SELECT @a",
    "SELECT * FROM t UNION SELECT 1, 2, 3, 'x', @total, NULL, now()",
    # every branch untyped: text
    "SELECT @a UNION SELECT @b",
    "SELECT 'x' UNION SELECT @a",
    "SELECT NULL UNION SELECT @a",
    # nested set operations: the inner one's common type first
    "SELECT @a UNION (SELECT @b UNION SELECT 1)",
    "SELECT id FROM t UNION SELECT @a UNION SELECT @b",
    "SELECT @a UNION SELECT id FROM t UNION SELECT @b",
    "SELECT n FROM t UNION SELECT @a UNION SELECT s FROM t",
    "SELECT s FROM t UNION SELECT n FROM t UNION SELECT @a",
    "SELECT @a::int UNION SELECT @b",
    "SELECT id FROM t UNION SELECT @a ORDER BY 1 LIMIT @l",
    # VALUES: the column's common type across its rows
    "VALUES (1), (@a)",
    "VALUES (@a), (1)",
    "VALUES (@a), (@b)",
    "VALUES (1, @x), (@a, 'y')",
    "SELECT * FROM (VALUES (1), (@a)) v(x)",
    # INSERT ... SELECT: a set operation's common type, then the column's
    "INSERT INTO t (id) SELECT @a UNION SELECT 1",
    "INSERT INTO t (id, name) SELECT @a, @b UNION ALL SELECT 2, 'x'",
    "INSERT INTO t (id) VALUES (1), (@a)",
    # set operations in CTEs and subqueries
    "WITH c AS (SELECT id FROM t UNION SELECT @a) SELECT * FROM c",
    "WITH c AS (SELECT @a AS x UNION SELECT id FROM t) SELECT x FROM c",
    "SELECT * FROM (SELECT id FROM t UNION SELECT @a) s",
    "SELECT id FROM t WHERE id IN (SELECT @a UNION SELECT 1)",
    "SELECT id FROM t WHERE id = (SELECT @a UNION SELECT 1)",
    "SELECT (SELECT id FROM t UNION SELECT @a LIMIT 1) AS v",
    "SELECT id FROM t WHERE (id, name) IN (SELECT @a, @b UNION SELECT 1, 'x')",
    # any other SELECT: an untyped output is text
    "SELECT @a AS v",
    "SELECT (SELECT @a) AS v",
    "WITH c AS (SELECT @a AS x) SELECT x FROM c",
    "SELECT x FROM (SELECT @a AS x) s WHERE x = 'q'",
    "SELECT id FROM t WHERE name = (SELECT @a)",
    "SELECT id FROM t WHERE name IN (SELECT @a)",
    "INSERT INTO t (id) VALUES (@a) RETURNING @b AS v",
    # a row compared with a subquery's rows, column by column
    "SELECT id FROM t WHERE (id, name) IN (SELECT t_id, note FROM u)",
    "SELECT id FROM t WHERE (id, name) NOT IN (SELECT t_id, note FROM u WHERE u.id = @x)",
    "SELECT id FROM t WHERE (id, @p) IN (SELECT t_id, note FROM u)",
]

#: Statements PostgreSQL refuses.
REFUSED = [
    # the inner set operation resolved its untyped branches to text first
    "SELECT @a UNION ALL SELECT @b UNION SELECT 1",
    "SELECT * FROM (SELECT @a) s(x) UNION SELECT 1",
    "VALUES (@a) UNION SELECT 1",
    "SELECT 1 UNION VALUES (@a)",
    # a subquery's untyped output is text
    "SELECT id FROM t WHERE id = (SELECT @a)",
    "SELECT id = (SELECT @a) AS v FROM t",
    "SELECT id FROM t WHERE (SELECT @a) = id",
    "SELECT id FROM t WHERE id IN (SELECT @a)",
    "SELECT id FROM t WHERE id = ANY(SELECT @a)",
    "SELECT id FROM t WHERE id < ALL(SELECT @a)",
    "SELECT id FROM t WHERE id IN (SELECT @a UNION SELECT @b)",
    "SELECT id FROM t WHERE n = (SELECT 'x')",
    "SELECT id + (SELECT @a) AS v FROM t",
    # a row against a subquery of another width
    "SELECT id FROM t WHERE (id, name) IN (SELECT t_id FROM u)",
    "SELECT id FROM t WHERE (id, name) IN (SELECT t_id, note, id FROM u)",
    "SELECT id FROM t WHERE id IN (SELECT t_id, note FROM u)",
    "SELECT id FROM t WHERE (id, n) IN (SELECT t_id, note FROM u)",
]

catalog, conn = schema_fixtures(SCHEMA)


@pytest.mark.parametrize("sql", TYPED)
def test_untyped_outputs_take_postgres_types(sql: str, catalog: Catalog, conn: psycopg.Connection) -> None:
    assert_typed_like_postgres(sql, catalog, conn)


@pytest.mark.parametrize("sql", REFUSED)
def test_untyped_outputs_refused_like_postgres(sql: str, catalog: Catalog, conn: psycopg.Connection) -> None:
    assert_refused_like_postgres(sql, catalog, conn)
