"""DDL the catalog accepts or rejects as PostgreSQL does: each example of issue 11's "Why" run
through PostgreSQL and the catalog (both accept it or both reject it), then the catalog's own
behaviours: name folding, error positions, partial catalogs, the search path, DO blocks. The
rich-database differential (pg_dump against pg_catalog) is test_sql_catalog.py."""

from __future__ import annotations

import psycopg
import pytest
from pydb.plugin.sql.analyzer.analyzer import analyze
from pydb.plugin.sql.frontend import build_catalog, load_catalog
from pydb.plugin.sql.schema.source import SchemaFile, up_sections
from pydb.plugin.sql.syntax.pgparse import parse
from support.pg import Cluster, scratch_database

# -- issue 11's examples: accepted or rejected as PostgreSQL does ----------------------------------
#: (name, DDL, a statement over it or None). PostgreSQL's verdict on the DDL is the expectation.
EXAMPLES = [
    (
        "unqualified enum",
        "CREATE TYPE status AS ENUM ('a', 'b');\nCREATE TABLE t (id int, s status);",
        "SELECT s FROM t",
    ),
    ("folded identifiers", "CREATE TABLE T (F int, groupId int, MaxDate date);", "SELECT F, GROUPID, maxdate FROM T"),
    ("quoted identifiers kept", 'CREATE TABLE "Mixed" ("Col" int);', 'SELECT "Col" FROM "Mixed"'),
    ("extension", 'CREATE EXTENSION IF NOT EXISTS "uuid-ossp";\nCREATE TABLE t (id uuid);', "SELECT id FROM t"),
    ("DO block", "CREATE TABLE t (id int);\nDO $$ BEGIN PERFORM 1; END $$;", "SELECT id FROM t"),
    ("view", "CREATE TABLE t (id int NOT NULL);\nCREATE VIEW v AS SELECT id FROM t;", "SELECT id FROM v"),
    (
        "materialized view",
        "CREATE TABLE t (id int);\nCREATE MATERIALIZED VIEW m AS SELECT id FROM t;",
        "SELECT id FROM m",
    ),
    (
        "partitions",
        "CREATE TABLE t (id int, at date) PARTITION BY RANGE (at);\n"
        "CREATE TABLE t_1 PARTITION OF t FOR VALUES FROM ('2020-01-01') TO ('2021-01-01');",
        "SELECT id, at FROM t_1",
    ),
    ("create table as", "CREATE TABLE t (id int);\nCREATE TABLE c AS SELECT id FROM t;", "SELECT id FROM c"),
    ("drop", "CREATE TABLE t (id int);\nCREATE TABLE gone (x int);\nDROP TABLE gone;", "SELECT id FROM t"),
    (
        "alter table variants",
        "CREATE TABLE t (id int, old int, x int, CONSTRAINT c CHECK (x > 0));\n"
        "ALTER TABLE t RENAME TO u;\nALTER TABLE u RENAME COLUMN old TO new;\n"
        "ALTER TABLE u DROP CONSTRAINT c;\nALTER TABLE u DROP COLUMN x;",
        "SELECT id, new FROM u",
    ),
    ("composite type", "CREATE TYPE pair AS (a int, b text);\nCREATE TABLE t (p pair);", "SELECT p FROM t"),
    (
        "sequences",
        "CREATE TABLE t (id int);\nCREATE SEQUENCE s;\nALTER SEQUENCE s OWNED BY t.id;",
        "SELECT id FROM t",
    ),
    ("set", "SET search_path = public;\nSET statement_timeout = 0;\nCREATE TABLE t (id int);", "SELECT id FROM t"),
    (
        "set_config",
        "SELECT pg_catalog.set_config('search_path', 'public', false);\nCREATE TABLE t (id int);",
        "SELECT id FROM t",
    ),
    ("bit inet cid", "CREATE TABLE t (b bit(3), i inet, c cid);", "SELECT b, i, c FROM t"),
    (
        "temporary tables",
        "CREATE TABLE t (v int);\nCREATE TABLE pg_temp.m (v int);\nCREATE TEMP TABLE tt (v int);",
        "SELECT m.v AS m_v, tt.v AS tt_v FROM m, tt",
    ),
    (
        "IF EXISTS of what is not there",
        "ALTER TABLE IF EXISTS nope ADD COLUMN x int;\nALTER TABLE IF EXISTS nope SET SCHEMA nowhere;\n"
        "ALTER TABLE IF EXISTS nope RENAME TO other;\nDROP TABLE IF EXISTS nope;\nDROP TYPE IF EXISTS nope;",
        None,
    ),
    (
        "what migration directories carry besides DDL",
        "CREATE TABLE t (id int, a int, CONSTRAINT a_pos CHECK (a > 0) NOT VALID);\n"
        "BEGIN;\nINSERT INTO t VALUES (1, 1);\nUPDATE t SET a = 2;\nDELETE FROM t WHERE id = 0;\nCOMMIT;\n"
        "CREATE SEQUENCE s;\nSELECT setval('s', 5);\n"
        "CREATE INDEX CONCURRENTLY t_a ON t (a);\nDROP INDEX IF EXISTS nope;\nDROP INDEX CONCURRENTLY IF EXISTS t_a;\n"
        "ALTER TABLE t VALIDATE CONSTRAINT a_pos;\nALTER TABLE t DROP CONSTRAINT IF EXISTS nope;\n"
        "DROP VIEW IF EXISTS nope;\nDROP TRIGGER IF EXISTS nope ON t;\nDROP TYPE IF EXISTS nope;\n"
        "CREATE TYPE r AS RANGE (subtype = int8);\nALTER TYPE r RENAME TO r8;\n"
        "CREATE TABLE u (b bit varying(4), x int, UNIQUE NULLS DISTINCT (x));\n"
        "CREATE UNIQUE INDEX u_x_part ON u (x) WHERE b IS NULL;\n"
        "GRANT SELECT ON t TO PUBLIC;\nREVOKE SELECT ON t FROM PUBLIC;\n"
        "CREATE ROLE pydb_catalog_test_role;\nDROP ROLE pydb_catalog_test_role;\n"
        "CREATE FUNCTION trg() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$;\n"
        "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW EXECUTE FUNCTION trg();\n"
        "ANALYZE t;\nVACUUM t;\nNOTIFY ch;\n"
        "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM t) THEN RAISE NOTICE 'empty'; END IF; END $$;",
        "SELECT id, a FROM t WHERE id = @id",
    ),
    (
        "DROP ... CASCADE takes dependent views and foreign keys along",
        "CREATE TABLE p (id int PRIMARY KEY);\nCREATE TABLE c (p_id int REFERENCES p);\n"
        "CREATE VIEW v AS SELECT id FROM p;\nCREATE VIEW vv AS SELECT id FROM v;\nALTER TABLE p RENAME TO q;\n"
        "DROP TABLE q CASCADE;\nCREATE VIEW v AS SELECT p_id FROM c;",
        "SELECT p_id FROM v",
    ),
    (
        "DROP of a table a view reads",
        "CREATE TABLE t (id int);\nCREATE VIEW v AS SELECT id FROM t;\nDROP TABLE t;",
        None,
    ),
    (
        "DROP of a table a foreign key references",
        "CREATE TABLE p (id int PRIMARY KEY);\nCREATE TABLE c (p_id int REFERENCES p);\nDROP TABLE p;",
        None,
    ),
    ("id STRING", "CREATE TABLE t (id STRING);", None),
    ("INHERITS conflict", "CREATE TABLE p (a int);\nCREATE TABLE c (a text) INHERITS (p);", None),
    (
        "duplicate CREATE FUNCTION",
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1';\n"
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 2';",
        None,
    ),
    (
        "CREATE OR REPLACE FUNCTION",
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1';\n"
        "CREATE OR REPLACE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 2';",
        None,
    ),
    ("bad FK", "CREATE TABLE p (id int);\nCREATE TABLE c (p_id int REFERENCES p (id));", None),
    ("unknown index column", "CREATE TABLE t (id int);\nCREATE INDEX ON t (nope);", None),
    ("duplicate table", "CREATE TABLE t (id int);\nCREATE TABLE T (id int);", None),
]


def postgres_accepts(server_url: str, ddl: str) -> bool:
    """Statement by statement, as psql runs a file (CREATE INDEX CONCURRENTLY and VACUUM cannot
    run in the one transaction a multi-statement query is)."""
    with scratch_database(server_url, schema=None) as url, psycopg.connect(url, autocommit=True) as conn:
        try:
            for stmt in parse(ddl):
                conn.execute(ddl[stmt.start : stmt.end])
        except psycopg.Error:
            return False
        return True


@pytest.mark.parametrize(("name", "ddl", "sql"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_issue_examples_behave_as_postgres(
    pg_server: tuple[str, Cluster | None], name: str, ddl: str, sql: str | None
) -> None:
    catalog, problems = build_catalog(ddl)
    errors = [p.message for p in problems if p.severity == "error"]
    assert (errors == []) == postgres_accepts(pg_server[0], ddl), errors
    if sql is not None:
        _, statement_problems = analyze(sql, catalog)
        assert [p.message for p in statement_problems if p.severity == "error"] == []


def test_unquoted_names_are_folded_and_quoted_ones_kept() -> None:
    catalog, problems = build_catalog('CREATE TABLE T (F int, groupId int, "MaxDate" date);')
    assert problems == []
    table = catalog.table(None, "t")
    assert table is not None and [c.name for c in table.columns] == ["f", "groupid", "MaxDate"]
    assert catalog.table(None, "T") is None  # a quoted "T" is another name


def test_an_error_is_placed_at_its_file_line_and_column() -> None:
    text = "CREATE TABLE ok (id int);\nCREATE TABLE t (\n    id STRING\n);\n"
    _, diagnostics = load_catalog([SchemaFile("db/schema.sql", text, up_sections(text))])
    assert [(d.path, d.line, d.col, d.message) for d in diagnostics] == [
        ("db/schema.sql", 3, 8, "type string does not exist (column id); PostgreSQL calls it text")
    ]


def test_a_schema_with_errors_still_yields_what_applied() -> None:
    catalog, problems = build_catalog(
        "CREATE TABLE a (id int);\nCREATE TABLE b (x nosuchtype);\nCREATE TABLE c (id int);"
    )
    assert [p.message for p in problems] == ["type nosuchtype does not exist (column x)"]
    assert catalog.table(None, "a") is not None and catalog.table(None, "c") is not None


def test_lookups_follow_the_search_path() -> None:
    catalog, problems = build_catalog(
        "CREATE SCHEMA s;\nSET search_path = s, public;\nCREATE TYPE mood AS ENUM ('x');\n"
        "CREATE TABLE t (m mood);\nCREATE FUNCTION f(a int) RETURNS int LANGUAGE sql AS 'SELECT a';\n"
        "RESET search_path;\nCREATE TABLE t (id int);"
    )
    assert problems == []
    table = catalog.table(None, "t")
    assert table is not None and table.qualified == "public.t"
    s_table = catalog.table("s", "t")
    assert s_table is not None and str(s_table.columns[0].type) == "s.mood"
    assert catalog.type(None, "mood") is None  # s is not on the default search path
    assert catalog.enum("s", "mood") == ("x",)
    assert [f"{f.schema}.{f.name}" for f in catalog.functions("s", "f")] == ["s.f"]
    assert catalog.functions(None, "f") == ()
    assert catalog.type(None, "integer") is None and str(catalog.type(None, "int4")) == "int4"


def test_ddl_inside_a_do_block_is_a_warning_naming_it() -> None:
    _, problems = build_catalog("DO $$ BEGIN EXECUTE 'x'; CREATE TABLE hidden (id int); END $$;")
    assert [(p.severity, p.message.split(":")[0]) for p in problems] == [("warning", "DO block")]
    assert "CREATE TABLE" in problems[0].message


def test_owned_by_a_single_name_is_refused_not_a_crash() -> None:
    _, problems = build_catalog("CREATE TABLE t (id int);\nCREATE SEQUENCE s OWNED BY id;")
    assert [p.message for p in problems] == ["invalid OWNED BY option; specify OWNED BY table.column or OWNED BY NONE"]
