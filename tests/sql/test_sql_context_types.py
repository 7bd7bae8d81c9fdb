"""Where a parameter's type comes from, differentially against PostgreSQL: parse analysis is bottom
up, so the type a context needs (LIMIT's bigint, a column's type in INSERT or SET, the other side
of `=`, a function's argument) reaches only a bare parameter or untyped literal. COALESCE,
GREATEST, LEAST, CASE and ARRAY[] first resolve their arguments' common type (all untyped: text),
NULLIF is the operator `a = b`; only their result is then coerced to the context's type. So
`LIMIT COALESCE(NULLIF(@limit, 0), 100)` types @limit int4, and `LIMIT COALESCE(@a, @b)` is an
error. The analyzer's parameter and column types must be what PREPARE describes, and where
PostgreSQL refuses the statement the analyzer must refuse it with PostgreSQL's message."""

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
    f float8,
    created timestamptz
);
"""

#: Statements PostgreSQL takes: parameter and column types must agree.
TYPED = [
    # LIMIT / OFFSET / FETCH FIRST: bigint reaches a bare parameter only
    "SELECT id FROM t LIMIT @limit",
    "SELECT id FROM t LIMIT (@limit)",
    "SELECT id FROM t LIMIT COALESCE(NULLIF(@limit, 0), 100)",
    "SELECT id FROM t LIMIT COALESCE(@limit, 100)",
    "SELECT id FROM t LIMIT COALESCE((@a), 5)",
    "SELECT id FROM t OFFSET NULLIF(@off, 0)",
    "SELECT id FROM t LIMIT GREATEST(@a, 1)",
    "SELECT id FROM t LIMIT LEAST(@a, 1000)",
    "SELECT id FROM t LIMIT CASE WHEN @flag THEN @a ELSE 10 END",
    "SELECT id FROM t ORDER BY id LIMIT COALESCE(@a, 10) OFFSET COALESCE(@b, 0)",
    "SELECT id FROM t FETCH FIRST COALESCE(@a, 3) ROWS ONLY",
    "SELECT id FROM t LIMIT COALESCE(@a, 10)::int8",
    "SELECT id FROM t LIMIT COALESCE(@a::int8, 10)",
    # the other side of an operator
    "SELECT id FROM t WHERE id = COALESCE(@a, 0)",
    "SELECT id FROM t WHERE id = COALESCE(@a, id)",
    "SELECT id FROM t WHERE id = COALESCE(@a, 0, id)",
    "SELECT id FROM t WHERE id = NULLIF(@a, 0)",
    "SELECT id FROM t WHERE id = CASE WHEN @flag THEN @a ELSE 0 END",
    "SELECT id FROM t WHERE id IN (COALESCE(@a, 0), 5)",
    "SELECT id FROM t WHERE id IN (NULLIF(@a, 0))",
    "SELECT id FROM t WHERE n = COALESCE(@a, 0::int8)",
    "SELECT id FROM t WHERE s = COALESCE(@a, 0)",
    "SELECT id FROM t WHERE total = COALESCE(@a, 0)",
    "SELECT id FROM t WHERE name = COALESCE(@a, @b)",
    "SELECT id FROM t WHERE name = COALESCE(@a, 'x')",
    "SELECT id FROM t WHERE f > GREATEST(@a, 0)",
    "SELECT id FROM t WHERE id = GREATEST(@a, n)",
    "SELECT id FROM t WHERE n = NULLIF(@a, id)",
    "SELECT id FROM t WHERE created > COALESCE(@since, now())",
    "SELECT id FROM t WHERE id + COALESCE(@a, 0) > 3",
    "SELECT id FROM t WHERE id = COALESCE(@a, 0) + 1",
    "SELECT id FROM t WHERE (id, n) = (COALESCE(@a, 0), @b)",
    "SELECT id FROM t WHERE id BETWEEN COALESCE(@lo, 0) AND @hi",
    "SELECT id FROM t WHERE id = ANY(ARRAY[@a, 1])",
    "SELECT id FROM t WHERE ids = ARRAY[@a, 1]::int8[]",
    "SELECT id FROM t WHERE ids @> ARRAY[@a]::int8[]",
    "SELECT id FROM t WHERE ids && ARRAY[id, @a]",
    # function arguments
    "SELECT substr(name, COALESCE(@n, 1)) AS v FROM t",
    "SELECT id FROM t WHERE created > now() - make_interval(days => COALESCE(@d, 1))",
    # stored into a column (INSERT, SET, ON CONFLICT)
    "INSERT INTO t (id) VALUES (COALESCE(@id, 0))",
    "INSERT INTO t (id, s) VALUES (1, COALESCE(@s, 0))",
    "INSERT INTO t (id, total) VALUES (1, COALESCE(@total, 0))",
    "INSERT INTO t (id, f) VALUES (1, COALESCE(@f, 0))",
    "INSERT INTO t (id, name) VALUES (1, COALESCE(@a, 0))",
    "INSERT INTO t (id) VALUES (CASE WHEN @flag THEN @a ELSE 0 END)",
    "INSERT INTO t (id) VALUES (NULLIF(@a, 0))",
    "INSERT INTO t (id) SELECT COALESCE(@a, 0)",
    "INSERT INTO t (id, ids) VALUES (1, ARRAY[@a, 1])",
    "INSERT INTO t (id, n) VALUES (COALESCE(@a, 0), @b) ON CONFLICT (id) DO UPDATE SET n = COALESCE(@c, 0)",
    "UPDATE t SET id = COALESCE(@a, 0) WHERE n = 1",
    "UPDATE t SET s = GREATEST(@a, 1) WHERE n = 1",
    "UPDATE t SET name = COALESCE(@a, name) WHERE n = 1",
    "UPDATE t SET n = CASE WHEN @flag THEN @a ELSE n END WHERE id = @id",
    "UPDATE t SET ids = ARRAY[@a, id] WHERE id = 1",
    # the constructs' own types: common type, all untyped is text, NULLIF is its left operand's
    "SELECT COALESCE(@a, 0)::int8 AS v",
    "SELECT CAST(NULLIF(@a, 0) AS bigint) AS v",
    "SELECT (CASE WHEN @flag THEN @a END)::int8 AS v",
    "SELECT COALESCE(@a, 0) AS v UNION SELECT 1::int8",
    "SELECT NULLIF(n, 2.5) AS v FROM t",
    "SELECT NULLIF(@a, @b) AS v",
    "SELECT NULLIF(total, @a) AS v FROM t",
    "SELECT CASE WHEN @flag THEN @a END AS v",
    "SELECT CASE WHEN @flag THEN NULL END AS v",
    "SELECT ARRAY[@a, @b] AS v",
    "SELECT ARRAY[@a, 1.5] AS v",
    "SELECT ARRAY[ARRAY[@a, 1], ARRAY[2, 3]] AS v",
]

#: Statements PostgreSQL refuses because the construct resolved to text before the context saw it.
REFUSED = [
    "SELECT id FROM t LIMIT COALESCE(@a, @b)",
    "SELECT id FROM t LIMIT COALESCE(@a, NULL)",
    "SELECT id FROM t LIMIT NULLIF(@a, @b)",
    "SELECT id FROM t LIMIT CASE WHEN @flag THEN @a ELSE @b END",
    "SELECT id FROM t LIMIT CASE WHEN @flag THEN @a END",
    "SELECT id FROM t OFFSET COALESCE(@a, @b)",
    "SELECT id FROM t LIMIT 'x'::text",
    "SELECT id FROM t WHERE id = COALESCE(@a, @b)",
    "SELECT id FROM t WHERE id = COALESCE(NULL, @a)",
    "SELECT id FROM t WHERE id = ANY(ARRAY[@a, @b])",
    "INSERT INTO t (id) VALUES (COALESCE(@a, @b))",
    "INSERT INTO t (id, ids) VALUES (1, ARRAY[@a, @b])",
    "SELECT id FROM t WHERE ids @> ARRAY[@a]",
    "SELECT id FROM t WHERE ids @> ARRAY[@a, 1]",
]


catalog, conn = schema_fixtures(SCHEMA)


@pytest.mark.parametrize("sql", TYPED)
def test_a_parameter_types_in_postgres_order(sql: str, catalog: Catalog, conn: psycopg.Connection) -> None:
    assert_typed_like_postgres(sql, catalog, conn)


@pytest.mark.parametrize("sql", REFUSED)
def test_a_construct_resolved_to_text_is_refused_like_postgres(
    sql: str, catalog: Catalog, conn: psycopg.Connection
) -> None:
    assert_refused_like_postgres(sql, catalog, conn)
