"""pglast's grammar is PostgreSQL 18's; the server pydb targets is 15. Differentially against the
server: what 16 to 18 added (SQL/JSON constructors and functions, IS JSON, JSON_TABLE, RETURNING
WITH (OLD/NEW), MERGE ... RETURNING and WHEN NOT MATCHED BY, AT LOCAL, SYSTEM_USER, alias-less
subqueries in FROM, hex/octal/binary and underscored numbers, VACUUM/ANALYZE ONLY, VIRTUAL and NOT
ENFORCED in DDL) is refused by the grammar check exactly as 15 refuses it (message and position),
and what 15 only refuses later (a function or column 15 does not have) passes the grammar, as in 15."""

from __future__ import annotations

import psycopg
import pytest
from corpus.run import pg_type_names, positional
from pglast import keywords
from pydb.plugin.sql.analyzer.analyzer import analyze
from pydb.plugin.sql.catalog.model import Catalog
from pydb.plugin.sql.frontend import build_catalog
from pydb.plugin.sql.syntax.grammar import check_statement
from pydb.plugin.sql.syntax.pg15 import NEWER_KEYWORDS
from pydb.plugin.sql.syntax.pgparse import PgSyntaxError, parse
from support.sql_oracle import schema_fixtures

SCHEMA = """
CREATE TABLE t (id int PRIMARY KEY, a text, j jsonb, source text, path text);
CREATE TABLE s (id int, a text);
"""

#: Each with what PostgreSQL 15 says; the test asks the server, the comment is for the reader.
STATEMENTS = [
    # RETURNING WITH (OLD/NEW) (18): syntax error at WITH
    "UPDATE t SET a = 'x' RETURNING WITH (OLD AS o, NEW AS n) o.a, n.a",
    "DELETE FROM t WHERE id = @id RETURNING WITH (OLD AS o) o.a",
    "INSERT INTO t (id) VALUES (@id) RETURNING WITH (NEW AS n) n.id",
    "WITH d AS (DELETE FROM t RETURNING WITH (OLD AS o) o.id) SELECT * FROM d",
    # RETURNING old.x without WITH: 15's grammar takes it (then: no FROM entry old)
    "UPDATE t SET a = 'x' RETURNING old.a",
    # SQL/JSON constructors (16) and query functions (17): function calls in 15
    "SELECT JSON_OBJECT('a' : 1)",
    "SELECT JSON_OBJECT('a' VALUE @v)",
    "SELECT json_object(@k : @v RETURNING text)",
    "SELECT JSON_OBJECT(a: id ABSENT ON NULL WITH UNIQUE KEYS) FROM t",
    "SELECT JSON_OBJECT()",
    "SELECT JSON_OBJECT('a', 1)",
    "SELECT json_object('{a,b}')",
    "SELECT JSON_ARRAY(1, 2)",
    "SELECT JSON_ARRAY(SELECT 1)",
    "SELECT JSON_ARRAY(1 RETURNING jsonb)",
    "SELECT JSON_ARRAY(1 FORMAT JSON)",
    "SELECT JSON_ARRAYAGG(id) FROM t",
    "SELECT JSON_ARRAYAGG(id NULL ON NULL) FROM t",
    "SELECT JSON_ARRAYAGG(id ORDER BY id) FROM t",
    "SELECT JSON_OBJECTAGG(a : id) FROM t",
    "SELECT JSON_OBJECTAGG(a VALUE id) FROM t",
    "SELECT JSON('{}')",
    "SELECT JSON(a WITH UNIQUE KEYS) FROM t",
    "SELECT JSON_SCALAR(1)",
    "SELECT JSON_SERIALIZE('{}' RETURNING bytea)",
    "SELECT JSON_QUERY(j, '$.a') FROM t",
    "SELECT JSON_QUERY(j, '$.a' WITH WRAPPER) FROM t",
    "SELECT JSON_VALUE(j, '$.a' RETURNING int) FROM t",
    "SELECT JSON_EXISTS(j, '$.a' PASSING 1 AS x) FROM t",
    "SELECT * FROM JSON_TABLE('{}'::jsonb, '$' COLUMNS (x int PATH '$.x')) jt",
    "SELECT * FROM t, JSON_TABLE(t.j, '$' COLUMNS (x int)) AS jt",
    # IS JSON (16)
    "SELECT a IS JSON FROM t",
    "SELECT a IS NOT JSON OBJECT FROM t",
    "SELECT * FROM t WHERE a IS JSON ARRAY WITH UNIQUE KEYS",
    "SELECT (SELECT 1) IS JSON",
    "SELECT a IS JSON FROM t WHERE 1_0 = 1",
    # MERGE (17: RETURNING, NOT MATCHED BY SOURCE/TARGET)
    "MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE RETURNING t.id",
    "MERGE INTO t USING s ON t.id = s.id WHEN NOT MATCHED BY SOURCE THEN DELETE",
    "MERGE INTO t USING s ON t.id = s.id WHEN NOT MATCHED BY TARGET THEN INSERT VALUES (s.id, s.a, NULL)",
    "MERGE INTO t USING (SELECT id FROM s) AS s ON t.id = s.id WHEN MATCHED THEN UPDATE SET a = @a",
    "WITH x AS (MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE RETURNING t.id) SELECT * FROM x",
    "SELECT merge_action()",
    # SYSTEM_USER (16) is a column reference in 15; new unreserved words are names
    "SELECT SYSTEM_USER",
    "SELECT source, path FROM t",
    "SELECT 1 AS target, 2 AS keys, 3 AS format",
    "SELECT t.source AS string FROM t AS plan",
    # AT LOCAL (17)
    "SELECT now() AT LOCAL",
    "SELECT now() AT TIME ZONE 'utc'",
    # numeric literals (16): trailing junk in 15
    "SELECT 0x1F",
    "SELECT 0X1F",
    "SELECT 0o17",
    "SELECT 0b101",
    "SELECT 1_000",
    "SELECT 1_000.5",
    "SELECT 1.5e1_0",
    "SELECT 1e1_0",
    "SELECT 1.5_5",
    "SELECT 1.e5_5",
    "SELECT 0x_1F",
    "SELECT 0_1",
    "SELECT .1_0",
    "SELECT 0x",
    "SELECT 0b",
    "SELECT 0o",
    "SELECT 1a",
    "SELECT 'é', 0x1F",
    "SELECT * FROM t WHERE id = @id AND id > 1_0",
    "SELECT 1 FROM t WHERE 1_0 = 1 AND a IS JSON",
    "SELECT 1_000 FROM (SELECT 1)",
    "SELECT 1e5, 1.5, .5, 5., 1e-3",
    # subqueries and VALUES in FROM without an alias (16)
    "SELECT * FROM (SELECT 1)",
    "SELECT * FROM ((SELECT 1))",
    "SELECT * FROM (VALUES (1))",
    "SELECT * FROM LATERAL (SELECT 1)",
    "SELECT * FROM (SELECT 1) , (VALUES (2))",
    "SELECT * FROM t JOIN (SELECT 1 AS x) ON true",
    "SELECT * FROM t WHERE id IN (SELECT id FROM (SELECT 1 AS id))",
    "SELECT x FROM t, (SELECT DISTINCT ON (id) id AS x FROM t ORDER BY id) NATURAL JOIN s",
    "SELECT * FROM (SELECT 1_0)",
    "SELECT * FROM (SELECT 1) AS x, (VALUES (2)) v",
    # VACUUM / ANALYZE ONLY (18)
    "VACUUM ONLY t",
    "ANALYZE ONLY t",
    "VACUUM (VERBOSE) ONLY t",
    "ANALYZE t",
    # DDL (18): virtual generated columns, NOT ENFORCED
    "CREATE TABLE g (a int, b int GENERATED ALWAYS AS (a * 2) VIRTUAL)",
    "CREATE TABLE g (a int CHECK (a > 0) NOT ENFORCED)",
    "CREATE TABLE g (a int, b int GENERATED ALWAYS AS (a * 2) STORED)",
]


catalog, conn = schema_fixtures(SCHEMA)


def server_verdict(conn: psycopg.Connection, sql: str) -> tuple[str, str, int] | None:
    """(SQLSTATE, message, 0-based character offset) of PostgreSQL's error, None if it takes it.
    A utility statement runs in a transaction rolled back (PREPARE takes only DML)."""
    text, _ = positional(sql)
    pgconn = conn.pgconn
    pgconn.exec_(b"BEGIN")
    try:
        dml = text.split()[0].upper() in ("SELECT", "INSERT", "UPDATE", "DELETE", "MERGE", "WITH", "VALUES")
        result = pgconn.prepare(b"", text.encode()) if dml else pgconn.exec_(text.encode())
        if result.status in (psycopg.pq.ExecStatus.COMMAND_OK, psycopg.pq.ExecStatus.TUPLES_OK):
            return None
        state = (result.error_field(psycopg.pq.DiagnosticField.SQLSTATE) or b"").decode()
        message = (result.error_field(psycopg.pq.DiagnosticField.MESSAGE_PRIMARY) or b"").decode()
        position = int(result.error_field(psycopg.pq.DiagnosticField.STATEMENT_POSITION) or b"0") - 1
        return state, message, position
    finally:
        pgconn.exec_(b"ROLLBACK")


def original_offset(sql: str, positional_offset: int) -> int:
    """An offset into the `$n` text as one into `sql` (the @names written)."""
    check = check_statement(sql)
    return check.original_offset(positional_offset)


def test_the_newer_keywords_are_pglasts_less_the_servers(conn: psycopg.Connection) -> None:
    server: dict[str, str] = dict(conn.execute("SELECT word, catcode FROM pg_get_keywords()").fetchall())
    ours = {
        word: code
        for code, words in (
            ("U", keywords.UNRESERVED_KEYWORDS),
            ("C", keywords.COL_NAME_KEYWORDS),
            ("T", keywords.TYPE_FUNC_NAME_KEYWORDS),
            ("R", keywords.RESERVED_KEYWORDS),
        )
        for word in words
    }
    assert {word for word in ours if word not in server} == NEWER_KEYWORDS
    # A word both grammars have is of the same category (reserved or not) in both.
    assert {word: code for word, code in ours.items() if word in server and server[word] != code} == {}


@pytest.mark.parametrize("sql", STATEMENTS)
def test_the_grammar_check_refuses_what_postgres_15_refuses(sql: str, conn: psycopg.Connection) -> None:
    verdict = server_verdict(conn, sql)
    problems = check_statement(sql).problems
    if verdict is not None and verdict[0] == "42601":  # syntax_error: PostgreSQL's grammar or lexer
        _, message, position = verdict
        assert [(p.message, p.span.start if p.span else None) for p in problems[:1]] == [
            (message, original_offset(sql, position))
        ]
    else:
        assert problems == (), f"PostgreSQL 15's grammar takes it ({verdict}): {[p.message for p in problems]}"


#: Statements 15's grammar takes and its analysis refuses (a function or column 15 lacks): the
#: analyzer refuses them with the same message (pydb writes the name unquoted).
SEMANTIC = [
    "SELECT JSON_OBJECT()",
    "SELECT JSON_OBJECT('a', 1)",
    "SELECT JSON_VALUE(j, '$.a') FROM t",
    "SELECT JSON_ARRAY(1, 2)",
    "SELECT JSON_ARRAYAGG(id) FROM t",
    "SELECT JSON_SCALAR(1)",
    "SELECT JSON_QUERY(j, '$.a') FROM t",
    "SELECT JSON_EXISTS(j, '$.a') FROM t",
    "SELECT merge_action()",
    "SELECT SYSTEM_USER",
    "UPDATE t SET a = 'x' RETURNING old.a",
]


@pytest.mark.parametrize("sql", SEMANTIC)
def test_what_15_refuses_after_its_grammar_the_analyzer_refuses(
    sql: str, catalog: Catalog, conn: psycopg.Connection
) -> None:
    verdict = server_verdict(conn, sql)
    assert verdict is not None and verdict[0] != "42601"
    _, problems = analyze(sql, catalog)
    assert problems, sql
    # pydb may add the candidates it knows: "function json_object() does not exist (candidates: ...)"
    assert problems[0].message.startswith(verdict[1].replace('"', "")), problems[0].message


#: SQL/JSON names 15 calls as plain functions (json_object(text[]) exists there): typed as 15 types them.
PLAIN_CALLS = [
    "SELECT json_object('{a,b}') AS o",
    "SELECT JSON_OBJECT(ARRAY['a'], ARRAY['b']) AS o",
    "SELECT json_object(@keys::text[]) AS o",
    "SELECT json_object(@keys, @values) AS o",
    "SELECT JSON('{}') AS j",
]


@pytest.mark.parametrize("sql", PLAIN_CALLS)
def test_a_plain_json_call_types_like_postgres_15(sql: str, catalog: Catalog, conn: psycopg.Connection) -> None:
    text, order = positional(sql)
    prepared = conn.pgconn.prepare(b"", text.encode())
    assert prepared.status == psycopg.pq.ExecStatus.COMMAND_OK, (prepared.error_message or b"").decode()
    described = conn.pgconn.describe_prepared(b"")
    names = pg_type_names(conn)
    expected = (
        {name: names[described.param_type(i)] for i, name in enumerate(order)},
        [names[described.ftype(i)] for i in range(described.nfields)],
    )
    analysis, problems = analyze(sql, catalog)
    assert not problems and analysis is not None, [p.message for p in problems]
    assert ({p.name: str(p.type) for p in analysis.params}, [str(c.type) for c in analysis.columns or ()]) == expected


def test_a_schema_file_is_read_as_15_reads_it(conn: psycopg.Connection) -> None:
    """`pgparse.parse` serves schema files too: a VIRTUAL generated column is 15's syntax error."""
    sql = "CREATE TABLE g (a int, b int GENERATED ALWAYS AS (a * 2) VIRTUAL)"
    with pytest.raises(PgSyntaxError) as refused:
        parse(sql)
    verdict = server_verdict(conn, sql)
    assert verdict is not None
    assert (refused.value.message, refused.value.offset) == (verdict[1], verdict[2])
    _, problems = build_catalog(sql)
    assert [p.message for p in problems] == ['syntax error at or near "VIRTUAL"']
