"""Statement classes real applications' queries use that PostgreSQL 15 prepares, differentially
against PostgreSQL: the analyzer must accept each, with the parameter types, output names and
types PostgreSQL describes; where the statement takes no parameters it also runs on sample rows
holding NULLs, where a column the analyzer calls NOT NULL must hold none. Near misses that
PostgreSQL rejects stay errors."""

from __future__ import annotations

import psycopg
import pytest
from corpus.run import positional
from pydb.plugin.sql.analyzer.analyzer import analyze
from pydb.plugin.sql.analyzer.result import Analysis
from pydb.plugin.sql.catalog.model import Catalog
from support.sql_oracle import describe, ours, schema_fixtures

SCHEMA = """
CREATE SCHEMA crew;
CREATE TYPE point2 AS (x int4, y int4);
CREATE TYPE idspan AS RANGE (subtype = uuid);
CREATE TYPE "Level" AS ENUM ('low', 'high');
CREATE TABLE people (
    id bigserial PRIMARY KEY,
    email text NOT NULL,
    alias text,
    skills text[] NOT NULL DEFAULT '{}',
    profile jsonb,
    shift tstzrange,
    leave tstzmultirange,
    grades int4range,
    spot point2,
    keys idspan
);
CREATE UNIQUE INDEX people_email_ci ON people (lower(email));
CREATE TABLE tasks (
    id bigserial PRIMARY KEY,
    person_id bigint NOT NULL REFERENCES people (id),
    title text NOT NULL,
    meta jsonb NOT NULL DEFAULT '{}',
    due timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE notes (id bigserial PRIMARY KEY, task_id bigint REFERENCES tasks (id), text text);
CREATE FUNCTION tasks_of(p bigint) RETURNS SETOF tasks
    LANGUAGE sql STABLE AS $$ SELECT * FROM tasks WHERE person_id = p $$;
CREATE FUNCTION crew.tasks_of(p bigint) RETURNS SETOF tasks
    LANGUAGE sql STABLE AS $$ SELECT * FROM tasks WHERE person_id = p $$;
CREATE FUNCTION crew.grid(n int) RETURNS TABLE (cell int, name text)
    LANGUAGE sql STABLE AS $$ SELECT g, 'c' || g FROM generate_series(1, n) AS g $$;
CREATE FUNCTION crew.spot_of(p bigint) RETURNS point2
    LANGUAGE sql STABLE AS $$ SELECT spot FROM people WHERE id = p $$;
"""

SAMPLE_ROWS = """
INSERT INTO people (email, alias, profile, shift, leave, grades, spot) VALUES
    ('ann@example.com', NULL, '{"ui": {"theme": "dark"}, "k": 1}', tstzrange(now(), now() + interval '1 day'),
     tstzmultirange(tstzrange(now(), now() + interval '1 hour')), int4range(1, 5), ROW(1, 2)),
    ('bob@example.com', 'b', NULL, NULL, NULL, NULL, NULL);
INSERT INTO tasks (person_id, title) VALUES (1, 'a'), (1, 'b'), (2, 'c');
INSERT INTO notes (task_id, text) VALUES (1, NULL), (NULL, 'loose');
"""

catalog, conn = schema_fixtures(SCHEMA, SAMPLE_ROWS)


def analysed(sql: str, catalog: Catalog) -> Analysis:
    analysis, problems = analyze(sql, catalog)
    assert not [p.message for p in problems if p.severity != "warning"]
    assert analysis is not None
    return analysis


#: (statement, the nullability of each output column)
PREPARED: list[tuple[str, list[bool]]] = [
    # 1. op ALL(array), op ANY(array)
    ("SELECT id FROM people WHERE email <> ALL(@emails::text[])", [False]),
    ("SELECT id FROM people WHERE id <> ALL(@ids) AND id > ALL(ARRAY[0, -1])", [False]),
    ("SELECT id FROM people WHERE email LIKE ALL(ARRAY['%@%', '%.%']) AND email ILIKE ANY(@p::text[])", [False]),
    ("SELECT id FROM people WHERE id = ANY(@ids::int[]) OR id < ALL(SELECT person_id FROM tasks)", [False]),
    # 2. jsonb #-
    ("SELECT profile #- '{ui,theme}' AS p, profile #- @path::text[] AS q FROM people", [True, True]),
    # 3. -> inside a call's arguments
    ("SELECT coalesce(profile->'ui'->>'theme', '') AS theme FROM people", [False]),
    (
        "SELECT coalesce(profile->'ui', '{}') AS ui, lower(profile->'ui'->>'theme' || 'x') AS t FROM people",
        [False, True],
    ),
    # 4. ON CONFLICT (expression) against a unique expression index
    (
        "INSERT INTO people (email) VALUES (@email) ON CONFLICT (lower(email)) DO UPDATE SET alias = EXCLUDED.alias "
        "RETURNING id",
        [False],
    ),
    ("INSERT INTO people (email) VALUES (@email) ON CONFLICT ((lower(email))) DO NOTHING", []),
    # 5. position(a IN b) over calls
    ("SELECT position(lower(@q) IN lower(email)) AS at, position('@' IN email) AS sign FROM people", [False, False]),
    # 6. ORDER BY an output name that is also an input column, in a grouped query
    ("SELECT title AS person_id, count(*) AS n FROM tasks GROUP BY title ORDER BY person_id", [False, False]),
    ("SELECT date_trunc('day', due) AS due, count(*) AS n FROM tasks GROUP BY 1 ORDER BY due DESC", [False, False]),
    # 7. a column definition list
    ("SELECT r.id, r.name FROM jsonb_to_recordset(@rows::jsonb) AS r(id int8, name text)", [True, True]),
    ("SELECT * FROM json_to_record(@row::json) AS r(a int, b text[], c timestamptz)", [True, True, True]),
    # 8. SETOF-table functions in FROM, (f).* and a composite's fields
    ("SELECT t.id, t.title FROM crew.tasks_of(@p) AS t", [True, True]),
    ("SELECT * FROM tasks_of(@p)", [True] * 5),
    ("SELECT (t).* FROM tasks_of(@p) AS t", [True] * 5),
    ("SELECT (crew.spot_of(@p)).*", [True, True]),
    ("SELECT (spot).* FROM people", [True, True]),
    ("SELECT t FROM tasks_of(@p) AS t", [False]),
    # 9. agg(DISTINCT x), agg(x ORDER BY y), FILTER (WHERE ...)
    (
        "SELECT jsonb_agg(DISTINCT title) AS a, json_agg(DISTINCT title ORDER BY title) AS b, "
        "jsonb_agg(title ORDER BY due) AS c, array_agg(DISTINCT title ORDER BY title) AS d FROM tasks",
        [True, True, True, True],
    ),
    (
        "SELECT count(*) FILTER (WHERE title = 'a') AS n, jsonb_agg(meta) FILTER (WHERE id > 1) AS m, "
        "sum(id) FILTER (WHERE true) AS s, jsonb_object_agg(title, id ORDER BY id) FILTER (WHERE id > 0) AS o FROM tasks",
        [False, True, True, True],
    ),
    # 10. jsonb_build_object with untyped literals and jsonb values
    ("SELECT jsonb_build_object('title', title, 'k', meta->'k', 'n', 1, 'x', 'y') AS o FROM tasks", [False]),
    ("SELECT jsonb_build_object('who', @who::text, 'at', due) AS o FROM tasks", [False]),
    # 11. one parameter cast to two types: its first use types it, the other casts it
    ("SELECT id FROM people WHERE id = @key::bigint OR email = @key::text", [False]),
    ("SELECT @k::uuid AS a, @k::text AS b", [False, False]),
    ("SELECT @k::int4 AS a, @k::int8 AS b, @k::numeric AS c", [False, False, False]),
    # 12. unnest(...) AS u as a value
    ("SELECT u, u || '!' AS loud FROM unnest(@words::text[]) AS u", [False, False]),
    ("SELECT u FROM unnest(ARRAY[1, 2]) AS u ORDER BY u", [True]),
    # 13. range and multirange operators and functions
    ("SELECT id FROM people WHERE shift @> @at::timestamptz OR shift && tstzrange(@a, @b)", [False]),
    ("SELECT id FROM people WHERE leave && @r::tstzmultirange OR leave @> now() OR grades <@ int4range(0, 9)", [False]),
    ("SELECT id FROM people WHERE grades -|- int4range(@lo, @hi) OR grades << int4range(10, 20)", [False]),
    (
        "SELECT lower(shift) AS lo, upper(leave) AS hi, isempty(grades) AS e, upper_inf(shift) AS inf, "
        "grades * int4range(2, 3) AS i FROM people",
        [True, True, True, True, True],
    ),
    # a range type the schema declares, under pg_catalog's anyrange operators
    ("SELECT id FROM people WHERE keys @> @k::uuid OR keys && idspan(@a, @b) OR @k::uuid <@ keys", [False]),
    ("SELECT id, keys * @r AS overlap, keys + keys AS joined FROM people WHERE keys -|- @r", [False, True, True]),
    ("SELECT id FROM people WHERE keys @> @whole", [False]),
    # 14. parenthesised join trees
    (
        "SELECT p.email, t.title, n.text FROM (people p JOIN tasks t ON t.person_id = p.id) "
        "LEFT JOIN notes n ON n.task_id = t.id",
        [False, False, True],
    ),
    (
        "SELECT n.text, p.email FROM notes n LEFT JOIN (tasks t JOIN people p ON p.id = t.person_id) "
        "ON t.id = n.task_id",
        [True, True],
    ),
    ("SELECT j.title FROM (people p JOIN tasks t ON t.person_id = p.id) AS j", [False]),
    # 15. a schema-qualified function in FROM
    ("SELECT cell, name FROM crew.grid(3)", [True, True]),
    ("SELECT g.cell FROM crew.grid(@n) AS g", [True]),
    # 16. decode(NULLIF(@p, ''), 'hex') and other calls sqlglot models around a call
    ("SELECT decode(NULLIF(@hex, ''), 'hex') AS raw, encode(NULLIF(@b::bytea, ''), 'hex') AS h", [True, True]),
    ("SELECT decode(coalesce(@hex::text, ''), 'base64') AS raw", [False]),
    # a function of one OUT column in FROM: its alias is the value; `t.*` as an argument is the row
    ("SELECT r->>'min' AS lo FROM jsonb_array_elements(@ranges::jsonb) AS r WHERE (r->>'max')::int > 0", [True]),
    ("SELECT e FROM jsonb_array_elements('[1, 2]') AS e", [True]),
    (
        "SELECT p.id, json_agg(t.*) AS tasks, count(t.*) AS n FROM people p JOIN tasks t ON t.person_id = p.id GROUP BY p.id",
        [False, True, False],
    ),
    (
        "SELECT t.*, count(n.*) AS notes FROM tasks t LEFT JOIN notes n ON n.task_id = t.id GROUP BY t.id",
        [False] * 5 + [False],
    ),
    (
        "SELECT s.*, count(*) AS n FROM (SELECT title, person_id FROM tasks) s GROUP BY s.title, s.person_id",
        [False] * 3,
    ),
    # a cast's type name glued to AS
    ('SELECT unnest(cast(@levels::text[] as"Level"[])) AS level, cast(\'low\' as"Level") AS low', [False, False]),
    # array slices
    ("SELECT skills[2:] AS a, skills[:1] AS b, skills[@i:@j] AS c FROM people", [True, True, True]),
]


@pytest.mark.parametrize(("sql", "nullable"), PREPARED)
def test_postgresql_prepares_it_and_so_does_the_analyzer(
    sql: str, nullable: list[bool], catalog: Catalog, conn: psycopg.Connection
) -> None:
    analysis = analysed(sql, catalog)
    assert ours(analysis) == describe(conn, sql)
    assert [c.nullable for c in analysis.columns or ()] == nullable
    if analysis.params or analysis.columns is None:
        return
    with conn.transaction(force_rollback=True):
        rows = conn.execute(sql.encode()).fetchall()
    assert rows, "the sample rows exercise the statement"
    for row in rows:
        for value, may_be_null in zip(row, nullable, strict=True):
            assert may_be_null or value is not None, row


#: Near misses PostgreSQL rejects (parse analysis, or planning for ON CONFLICT): so must the analyzer.
REJECTED = [
    "SELECT id FROM people WHERE email <> ALL(@ids::int[])",
    "SELECT profile #- 1 FROM people",
    "SELECT coalesce(profile->'ui'->>'theme', 1) FROM people",
    "INSERT INTO people (email) VALUES (@email) ON CONFLICT (upper(email)) DO NOTHING",
    "INSERT INTO people (email) VALUES (@email) ON CONFLICT (lower(nosuch)) DO NOTHING",
    "SELECT title AS t, count(*) FROM tasks GROUP BY title ORDER BY person_id",
    "SELECT title AS person_id, count(*) FROM tasks GROUP BY title ORDER BY person_id + 1",
    "SELECT r.nosuch FROM jsonb_to_recordset(@rows::jsonb) AS r(id int8)",
    "SELECT t.nosuch FROM tasks_of(@p) AS t",
    "SELECT (t).nosuch FROM tasks_of(@p) AS t",
    "SELECT @k::int AS a, @k::uuid AS b",
    "SELECT id FROM people WHERE shift @> 1",
    "SELECT id FROM people WHERE keys @> 1",
    "SELECT id FROM people WHERE keys && shift",
    "SELECT p.title FROM (people p JOIN tasks t ON t.person_id = p.id) AS j",
    "SELECT * FROM nosuch.grid(3)",
    "SELECT decode(NULLIF(@hex, 1), 'hex')",
    "SELECT to_jsonb(t.*) AS row, count(*) AS n FROM tasks t",
    "SELECT t.*, count(*) AS n FROM tasks t GROUP BY t.title",
]


@pytest.mark.parametrize("sql", REJECTED)
def test_a_near_miss_postgresql_rejects_is_an_error(sql: str, catalog: Catalog, conn: psycopg.Connection) -> None:
    _, problems = analyze(sql, catalog)
    assert [p for p in problems if p.severity != "warning"]
    text, order = positional(sql)
    pgconn = conn.pgconn
    pgconn.exec_(b"BEGIN")
    try:
        result = pgconn.prepare(b"", text.encode())
        if result.status == psycopg.pq.ExecStatus.COMMAND_OK:
            result = pgconn.exec_prepared(b"", [None] * len(order))  # type: ignore[list-item]
    finally:
        pgconn.exec_(b"ROLLBACK")
    assert result.status == psycopg.pq.ExecStatus.FATAL_ERROR
