"""What a name means where it is written: system relations and their NOT NULL columns, SQL value
functions (current_schema ...), a quoted keyword as a name, ORDER BY naming an output column,
ambiguous input columns and JOIN ... USING columns, and next to them a unit parameter of
date_trunc, a function's one OUT parameter naming the column, INSERT leaving out a NOT NULL
column and ON CONFLICT without an arbiter. Differentially: the analyzer's parameter and output
column names and types must be what PostgreSQL describes, and a column the analyzer calls NOT NULL
must be one PostgreSQL holds NOT NULL."""

from __future__ import annotations

import psycopg
import pytest
from pydb.plugin.sql.analyzer.analyzer import analyze
from pydb.plugin.sql.catalog.model import Catalog
from support.sql_oracle import describe, ours, schema_fixtures
from test_sql_constructs import analysed, expanded

SCHEMA = """
CREATE TABLE writers (
    id bigserial PRIMARY KEY,
    name text NOT NULL,
    bio text
);
CREATE TABLE events (id bigserial PRIMARY KEY, happened date NOT NULL);
CREATE SEQUENCE ticket_numbers AS integer;
CREATE VIEW public_tables AS SELECT tablename, hasindexes FROM pg_tables WHERE schemaname = 'public';
CREATE TABLE pens (writer_id bigint, colour text);
CREATE TABLE books (writer_id bigint, title text);
CREATE FUNCTION add_writer(name text, bio text, OUT id bigint) LANGUAGE sql
    AS $$ INSERT INTO writers (name, bio) VALUES (name, bio) RETURNING id $$;
CREATE TABLE stamped (id bigserial PRIMARY KEY, label text NOT NULL, stamp text NOT NULL);
CREATE FUNCTION fill_stamp() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.stamp := 'filled'; RETURN NEW; END $$;
CREATE TRIGGER stamped_fill BEFORE INSERT ON stamped
    FOR EACH ROW EXECUTE FUNCTION fill_stamp();
CREATE FUNCTION no_op(x int, OUT int) LANGUAGE sql AS $$ SELECT x $$;
"""


catalog, conn = schema_fixtures(SCHEMA)


# -- system catalogs and views ------------------------------------------------------------------

SYSTEM_RELATIONS = [
    "SELECT * FROM pg_catalog.pg_timezone_names",
    "SELECT * FROM pg_timezone_names WHERE abbrev = @abbrev",
    "SELECT * FROM pg_tables WHERE schemaname = @schema",
    "SELECT pid, datname, query, state FROM pg_stat_activity",
    "SELECT * FROM information_schema.columns WHERE table_name = @table",
    "SELECT table_name, column_name, ordinal_position FROM information_schema.columns",
    "SELECT c.relname, n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace",
    "SELECT * FROM pg_catalog.pg_type",
    "SELECT a.attname, a.attnotnull FROM pg_attribute a WHERE a.attrelid = @rel::regclass",
    # A sequence is a relation too: its one row.
    "SELECT last_value FROM ticket_numbers",
    "SELECT * FROM public.ticket_numbers t WHERE t.is_called",
]


@pytest.mark.parametrize("sql", SYSTEM_RELATIONS)
def test_system_relation_is_described_like_postgresql(sql: str, catalog: Catalog, conn: psycopg.Connection) -> None:
    assert ours(analysed(sql, catalog)) == describe(conn, sql)


def test_system_catalog_not_null_is_pg_attribute_s(catalog: Catalog, conn: psycopg.Connection) -> None:
    analysis = analysed("SELECT * FROM pg_class", catalog)
    assert analysis.columns is not None
    not_null = {
        name
        for (name,) in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = 'pg_class'::regclass AND attnum > 0 AND attnotnull"
        ).fetchall()
    }
    assert not_null and {c.name for c in analysis.columns if not c.nullable} == not_null
    sequence = analysed("SELECT * FROM ticket_numbers", catalog)
    assert sequence.columns is not None and not any(c.nullable for c in sequence.columns)
    view = analysed("SELECT * FROM pg_tables", catalog)
    assert view.columns is not None and all(c.nullable for c in view.columns)


@pytest.mark.parametrize(
    "sql",
    ["SELECT * FROM pg_timezone_names", "SELECT s.* FROM pg_catalog.pg_stat_activity s", "SELECT * FROM public_tables"],
)
def test_system_relation_star_expansion_describes_like_the_star(
    sql: str, catalog: Catalog, conn: psycopg.Connection
) -> None:
    analysis = analysed(sql, catalog)
    assert analysis.expansions
    assert describe(conn, expanded(sql, analysis)) == describe(conn, sql) == ours(analysis)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM pg_catalog.no_such_view",
        "SELECT * FROM information_schema.no_such_view",
        "SELECT * FROM pg_tablez",
    ],
)
def test_unknown_system_relation_is_an_error(sql: str, catalog: Catalog, conn: psycopg.Connection) -> None:
    _, problems = analyze(sql, catalog)
    assert [p.message for p in problems if "does not exist" in p.message]
    with pytest.raises(psycopg.errors.UndefinedTable):
        conn.execute(sql)


# -- SQL value functions (CURRENT_DATE, USER, ...): a function in FROM, a keyword in a list ------

SQL_VALUE_FUNCTIONS = [
    "SELECT * FROM CURRENT_DATE",
    "SELECT * FROM current_timestamp AS t",
    "SELECT * FROM LOCALTIME",
    "SELECT * FROM localtimestamp l (at)",
    "SELECT * FROM current_user",
    "SELECT * FROM session_user, current_catalog",
    "SELECT * FROM user u",
    "SELECT * FROM current_time(2)",
    "SELECT current_role, user, session_user, current_catalog, localtime",
    "SELECT e.id FROM events e, current_date WHERE e.happened < current_date",
]


def test_current_schema_may_be_null(catalog: Catalog, conn: psycopg.Connection) -> None:
    for sql in ("SELECT * FROM current_schema", "SELECT current_schema AS s", "SELECT current_schema() AS s"):
        analysis = analysed(sql, catalog)
        assert ours(analysis) == describe(conn, sql)
        assert analysis.columns is not None and analysis.columns[0].nullable
        with conn.transaction():
            conn.execute("SET LOCAL search_path = no_such_schema")
            assert conn.execute(sql).fetchone() == (None,)


@pytest.mark.parametrize("sql", SQL_VALUE_FUNCTIONS)
def test_sql_value_function_is_described_like_postgresql(sql: str, catalog: Catalog, conn: psycopg.Connection) -> None:
    analysis = analysed(sql, catalog)
    assert ours(analysis) == describe(conn, sql)
    assert analysis.columns is not None and not any(c.nullable for c in analysis.columns)


def test_quoted_keyword_is_a_name(catalog: Catalog, conn: psycopg.Connection) -> None:
    sql = 'SELECT * FROM "current_date"'
    _, problems = analyze(sql, catalog)
    assert [p.message for p in problems] == ["table current_date does not exist"]
    with pytest.raises(psycopg.errors.UndefinedTable):
        conn.execute(sql)


# -- ORDER BY a bare name: an output column first (PostgreSQL's findTargetlistEntrySQL92) --------

ORDER_BY_OUTPUT = [
    "SELECT a.name FROM writers a JOIN writers b ON a.id = b.id ORDER BY name",
    "SELECT a.bio AS name FROM writers a JOIN writers b ON a.id = b.id ORDER BY name DESC",
    "SELECT a.name AS label FROM writers a JOIN writers b ON a.id = b.id ORDER BY label, b.id",
]


@pytest.mark.parametrize("sql", ORDER_BY_OUTPUT)
def test_order_by_output_column_name(sql: str, catalog: Catalog, conn: psycopg.Connection) -> None:
    assert ours(analysed(sql, catalog)) == describe(conn, sql)


@pytest.mark.parametrize(
    "sql",
    [
        # In an expression the name is an input column again: a and b both have one.
        "SELECT a.name FROM writers a JOIN writers b ON a.id = b.id ORDER BY name || ''",
        # GROUP BY prefers the FROM item's column, which is ambiguous.
        "SELECT a.name FROM writers a JOIN writers b ON a.id = b.id GROUP BY name",
    ],
)
def test_ambiguous_input_column_is_still_an_error(sql: str, catalog: Catalog, conn: psycopg.Connection) -> None:
    _, problems = analyze(sql, catalog)
    assert any("ambiguous" in p.message for p in problems)
    with pytest.raises(psycopg.errors.AmbiguousColumn):
        conn.execute(sql)


# -- JOIN ... USING (k) GROUP BY k: the merged column is one side's column ----------------------

USING_GROUPED = [
    "SELECT p.writer_id, count(b.title) FROM pens p JOIN books b USING (writer_id) GROUP BY writer_id",
    "SELECT pens.writer_id, sum(books.writer_id) FROM pens JOIN books USING (writer_id) GROUP BY writer_id",
    "SELECT p.writer_id FROM pens p LEFT JOIN books b USING (writer_id) GROUP BY writer_id",
    "SELECT b.writer_id FROM pens p RIGHT JOIN books b USING (writer_id) GROUP BY writer_id",
    "SELECT writer_id, count(*) FROM pens p JOIN books b USING (writer_id) GROUP BY p.writer_id",
]

USING_NOT_GROUPED = [
    "SELECT b.writer_id FROM pens p JOIN books b USING (writer_id) GROUP BY writer_id",
    "SELECT p.writer_id FROM pens p RIGHT JOIN books b USING (writer_id) GROUP BY writer_id",
    "SELECT p.writer_id FROM pens p FULL JOIN books b USING (writer_id) GROUP BY writer_id",
    "SELECT writer_id FROM pens p FULL JOIN books b USING (writer_id) GROUP BY p.writer_id",
]


@pytest.mark.parametrize("sql", USING_GROUPED)
def test_using_column_groups_its_side(sql: str, catalog: Catalog, conn: psycopg.Connection) -> None:
    assert ours(analysed(sql, catalog)) == describe(conn, sql)


@pytest.mark.parametrize("sql", USING_NOT_GROUPED)
def test_using_column_does_not_group_the_other_side(sql: str, catalog: Catalog, conn: psycopg.Connection) -> None:
    _, problems = analyze(sql, catalog)
    assert any("must appear in the GROUP BY clause" in p.message for p in problems)
    with pytest.raises(psycopg.errors.GroupingError):
        conn.execute(sql)


# -- date_trunc(@unit, x): sqlglot keeps the unit apart, PostgreSQL takes it first ---------------

DATE_TRUNC = [
    "SELECT date_trunc(@unit, happened) FROM events",
    "SELECT date_trunc(@unit, happened)::text AS day, @unit AS unit FROM events",
    "SELECT date_trunc(@unit, now(), @zone)",
    "SELECT date_trunc(lower(@unit), happened) FROM events",
    "SELECT d.day::text AS day, coalesce(c.n, 0) AS n"
    " FROM (SELECT date_trunc(@unit, happened) AS day, count(*) AS n FROM events"
    " WHERE happened BETWEEN @since AND @until GROUP BY 1) AS c"
    " RIGHT JOIN (SELECT * FROM generate_series(@since, @until, concat('1 ', @unit)::interval)"
    " AS day) AS d ON date_trunc(@unit, d.day) = c.day ORDER BY 1",
]


@pytest.mark.parametrize("sql", DATE_TRUNC)
def test_date_trunc_unit_parameter(sql: str, catalog: Catalog, conn: psycopg.Connection) -> None:
    assert ours(analysed(sql, catalog)) == describe(conn, sql)


# -- a function with one OUT parameter: in FROM its column is named after the parameter -----------

ONE_OUT_PARAMETER = [
    "SELECT * FROM add_writer(@name, @bio)",
    "SELECT * FROM add_writer(@name, @bio) AS w",
    "SELECT * FROM add_writer(@name, @bio) AS w (new_id)",
    "SELECT w.id FROM add_writer(@name, @bio) AS w",
    "SELECT w FROM add_writer(@name, @bio) AS w",
    "SELECT add_writer(@name, @bio)",
    "SELECT * FROM no_op(1)",
    "SELECT * FROM no_op(1) n",
]


@pytest.mark.parametrize("sql", ONE_OUT_PARAMETER)
def test_one_out_parameter_names_the_column(sql: str, catalog: Catalog, conn: psycopg.Connection) -> None:
    assert ours(analysed(sql, catalog)) == describe(conn, sql)


# -- an INSERT that leaves out a NOT NULL column: PostgreSQL prepares it (a trigger may fill it) --


def test_insert_leaving_out_not_null_column_is_a_warning(catalog: Catalog, conn: psycopg.Connection) -> None:
    sql = "INSERT INTO stamped (label) VALUES (@label) RETURNING id, stamp"
    analysis, problems = analyze(sql, catalog)
    assert analysis is not None
    assert [(p.severity, "column stamp of public.stamped is NOT NULL" in p.message) for p in problems] == [
        ("warning", True)
    ]
    assert ours(analysis) == describe(conn, sql)
    # The BEFORE trigger sets it: the statement runs.
    assert conn.execute("INSERT INTO stamped (label) VALUES ('x') RETURNING stamp").fetchone() == ("filled",)


# -- ON CONFLICT without a matching unique index: PostgreSQL prepares it, and plans it never ------


def test_on_conflict_without_arbiter_fails_every_execution(catalog: Catalog, conn: psycopg.Connection) -> None:
    """PREPARE (parse analysis) takes it; the planner looks for the arbiter index, so the first
    EXECUTE, whatever the values, fails: the analyzer rejects it, as a compiler should."""
    sql = "INSERT INTO writers (name, bio) VALUES ('a', 'b') ON CONFLICT (name) DO UPDATE SET bio = excluded.bio"
    _, problems = analyze(sql, catalog)
    assert [p.severity for p in problems if "no unique or exclusion constraint" in p.message] == ["error"]
    assert conn.pgconn.prepare(b"", sql.encode()).status == psycopg.pq.ExecStatus.COMMAND_OK
    with pytest.raises(psycopg.errors.InvalidColumnReference):
        conn.execute(f"EXPLAIN {sql}")
    arbiter = "INSERT INTO writers (id, name) VALUES (@id, @name) ON CONFLICT (id) DO UPDATE SET name = excluded.name"
    assert ours(analysed(arbiter, catalog)) == describe(conn, arbiter)
