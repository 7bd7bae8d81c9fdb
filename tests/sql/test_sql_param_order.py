"""A parameter's type is fixed by its first typing use in PostgreSQL's transformation order, not
in the statement's text order: a SELECT's FROM (and JOIN ... ON) first, then its select list,
WHERE, HAVING, ORDER BY, GROUP BY, DISTINCT ON, LIMIT, and a window's clauses; an UPDATE's or DELETE's WHERE before its RETURNING, and an
UPDATE's SET after both; an INSERT's VALUES before its ON CONFLICT ... WHERE, which comes before
RETURNING. A use that leaves the parameter untyped (`@p IS NULL`) before its type is fixed is
PostgreSQL's "could not determine data type of parameter"; after, it is fine. Differential: the
analyzer must type, or refuse, each statement as PREPARE does."""

from __future__ import annotations

import psycopg
import pytest
from pydb.plugin.sql.catalog.model import Catalog
from support.sql_oracle import assert_refused_like_postgres, assert_typed_like_postgres, schema_fixtures

SCHEMA = """
CREATE TABLE items (id integer PRIMARY KEY, name text, n bigint);
CREATE TABLE tags (id integer, item_id integer, label text);
"""

#: Statements PostgreSQL takes: the typing use comes first in its order.
TYPED = [
    # WHERE before ORDER BY
    "SELECT id FROM items WHERE id = @a ORDER BY @a IS NULL",
    # WHERE before HAVING
    "SELECT id FROM items WHERE id = @a GROUP BY id HAVING @a IS NULL",
    # JOIN ... ON before WHERE
    "SELECT items.id FROM items JOIN tags ON tags.label = @a WHERE @a IS NULL",
    # UPDATE: WHERE before RETURNING
    "UPDATE items SET name = 'a' WHERE id = @a RETURNING @a IS NULL",
    # UPDATE ... FROM: the operands of AND left to right
    "UPDATE items SET name = 'a' FROM tags WHERE tags.label = @a AND @a IS NULL",
    # WHERE, HAVING, ORDER BY before GROUP BY and DISTINCT ON; GROUP BY's keys left to right
    "SELECT count(*) FROM items WHERE id = @a GROUP BY @a IS NULL",
    "SELECT count(*) FROM items GROUP BY @a IS NULL HAVING max(id) = @a",
    "SELECT count(*) FROM items GROUP BY @a IS NULL ORDER BY max(id) = @a",
    "SELECT count(*) FROM items GROUP BY id = @a, @a IS NULL",
    "SELECT DISTINCT ON (@a IS NULL) id FROM items WHERE id = @a ORDER BY @a IS NULL",
    # a window's clauses, inline or named, last of all
    "SELECT id, row_number() OVER (ORDER BY @a IS NULL) FROM items WHERE id = @a",
    "SELECT id, row_number() OVER w FROM items WHERE id = @a WINDOW w AS (ORDER BY @a IS NULL)",
    # the typing use inside the same clause, first
    "SELECT id FROM items WHERE coalesce(@a, 0) = 0 OR @a IS NULL",
    # INSERT: VALUES before ON CONFLICT ... WHERE
    "INSERT INTO items (id, name) VALUES (1, @a) ON CONFLICT (id) DO UPDATE SET name = 'x' WHERE @a IS NULL",
]

#: Statements PostgreSQL refuses: the untyped use comes first in its order.
REFUSED = [
    "SELECT id FROM items WHERE @a IS NULL OR id = @a",
    # the select list before WHERE
    "SELECT @a IS NULL AS x FROM items WHERE id = @a",
    "SELECT @a IS NULL, id = @a FROM items",
    "SELECT id FROM items ORDER BY @a IS NULL, id = @a",
    # a subquery's or CTE's WHERE is typed before the outer one's
    "SELECT (SELECT @a IS NULL) AS x FROM items WHERE id = @a",
    "WITH c AS (SELECT id FROM items WHERE @a IS NULL) SELECT id FROM c WHERE id = @a",
    # an untyped output is made text at the end, after WHERE or a later output typed it
    "SELECT @a AS x FROM items WHERE id = @a",
    "SELECT @a, id = @a FROM items",
    # JOIN ... ON before WHERE
    "SELECT items.id FROM items JOIN tags ON @a IS NULL WHERE tags.label = @a",
    # HAVING before GROUP BY's and ORDER BY's uses; WHERE before HAVING
    "SELECT id FROM items GROUP BY id HAVING @a IS NULL OR id = @a",
    "SELECT id FROM items WHERE @a IS NULL GROUP BY id HAVING id = @a",
    # WHERE, ORDER BY before LIMIT
    "SELECT id FROM items WHERE @a IS NULL LIMIT @a",
    "SELECT id FROM items ORDER BY @a IS NULL LIMIT @a",
    # UPDATE: WHERE before RETURNING, both before SET
    "UPDATE items SET name = 'a' WHERE @a IS NULL OR id = @a",
    "UPDATE items SET name = 'a' WHERE @a IS NULL RETURNING id = @a",
    "UPDATE items SET name = @a WHERE @a IS NULL",
    # DELETE: USING, then WHERE, then RETURNING
    "DELETE FROM items WHERE @a IS NULL RETURNING id = @a",
    "DELETE FROM items USING tags WHERE @a IS NULL AND tags.label = @a",
    # INSERT: ON CONFLICT ... WHERE before RETURNING
    "INSERT INTO items (id, name) VALUES (1, 'a') ON CONFLICT (id) DO UPDATE SET name = 'x' WHERE @a IS NULL RETURNING id = @a",
]

catalog, conn = schema_fixtures(SCHEMA)


@pytest.mark.parametrize("sql", TYPED)
def test_param_order_typed_like_postgres(sql: str, catalog: Catalog, conn: psycopg.Connection) -> None:
    assert_typed_like_postgres(sql, catalog, conn)


@pytest.mark.parametrize("sql", REFUSED)
def test_param_order_refused_like_postgres(sql: str, catalog: Catalog, conn: psycopg.Connection) -> None:
    assert_refused_like_postgres(sql, catalog, conn)
