"""PostgreSQL's grammar decides annotation syntax (plugin/sql/grammar.py).

The differential test sends each broken statement, with `@name` as `$n` exactly as the checker
parsed it, to a real PostgreSQL and compares the error and its position with the checker's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import psycopg
import pytest
from pydb.plugin.diagnostics import Diagnostic, SqlSpan
from pydb.plugin.sql.analyzer.analyzer import analyze
from pydb.plugin.sql.catalog import types as t
from pydb.plugin.sql.catalog.signatures import OperatorSig
from pydb.plugin.sql.frontend import build_catalog
from pydb.plugin.sql.syntax.grammar import check_statement, line_col, split_statements, syntax_error_problem
from pydb.plugin.sql.syntax.pgparse import PgSyntaxError, parse
from support.pg import scratch_database

BROKEN = [
    "selectt id, x FROM t",
    "SELECT id, FROM t",
    "SELECT id FROM t WHERE id = = @id",
    "SELECT * FROM t WHERE",
    "SELECT * FROM t WHERE id = @id AND",
    "SELECT (1 + 2 FROM t",
    "SELECT 1 + 2) FROM t",
    "SELECT * FORM t",
    "INSERT INTO t (a, b) VALUES (@a, @b",
    "INSERT INTO t (a, b) VALUES (@a,, @b)",
    "INSERT INTO t VALUES",
    "UPDATE t SET WHERE id = @id",
    "UPDATE t SET a = @a,",
    "DELETE t WHERE id = @id",
    "DELETE FROM WHERE id = @id",
    "SELECT * FROM t ORDER BY",
    "SELECT * FROM t GROUP id",
    "SELECT * FROM t LIMIT",
    "SELECT 'abc",
    'SELECT "abc FROM t',
    "SELECT 1 /* never closed",
    "SELECT $$body",
    "SELECT x FROM t WHERE y = E'abc",
    "SELECT * FROM t WHERE id IN ()",
    "SELECT * FROM t t2 t3",
    "SELECT * FROM t JOIN u",
    "SELECT * FROM t JOIN u ON",
    "SELECT CASE WHEN a THEN 1 FROM t",
    "SELECT count(*) FROM t HAVING",
    "WITH x AS (SELECT 1) SELECT * FROM x y z",
    "WITH x AS SELECT 1 SELECT 1",
    "SELECT * FROM t WHERE a = @a\n  AND b = = @b",
    "SELECT id,\n       name\n  FROM t\n WHERE name = @name\n   AND AND id = @id",
    "SELECT 'é', \"ünï\" FROM t WHERE x = = 1",
    "SELECT '日本語' AS 名前 FROM t WHERE WHERE",
    "SELECT @é FROM t WHERE @é = = 1",
    "SELECT * FROM t WHERE a = 'x' 'y'",
    "SELECT @a @b",
    "SELECT * FROM t WHERE id = @id @other",
    "SELECT 1 UNION",
    "SELECT 1 UNION ALL ALL SELECT 2",
    "INSERT INTO t (a) SELECT FROM",
    "INSERT INTO t (a) VALUES (1) ON CONFLICT DO",
    "INSERT INTO t (a) VALUES (1) RETURNING",
    "SELECT a::: int FROM t",
    "SELECT a:: FROM t",
    "SELECT * FROM t WHERE a BETWEEN 1",
    "SELECT * FROM t WHERE a NOT",
    "SELECT ARRAY[1, 2 FROM t",
    "SELECT * FROM t -- a comment\nWHERE",
    "SELECT * FROM t WHERE x = 1 -- trailing comment\n  AND",
    "SELECT (SELECT 1 FROM t",
    "SELECT 1 FROM t WHERE @a::int = @b::int::",
    "SELECT\tid,\tFROM t",
    "SELECT 1 FROM t FOR",
    "SELECT 1 LIMIT 1, 2",
    "SELECT 1 FROM t WHERE x = @x LIMIT @offset, @count",
    "SELECT 123abc FROM t",
    "SELECT E'\\u00zz' FROM t",
    "SELECT U&'\\zzzz' FROM t",
    'SELECT "" FROM t',
]


@pytest.fixture(scope="module")
def server(pg_server: tuple[str, object]) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with scratch_database(pg_server[0], schema=None) as url, psycopg.connect(url, autocommit=True) as conn:
        yield conn


def _postgres_error(conn: psycopg.Connection[tuple[object, ...]], text: str) -> tuple[str, int]:
    """PostgreSQL's syntax error for `text`: (primary message, 1-based character position).
    Lexical errors in a literal are class 22 (invalid escape), the others 42601."""
    with pytest.raises(psycopg.Error) as raised:
        conn.execute(text.encode(), prepare=False)
    assert raised.value.sqlstate in ("42601", "22025", "42602"), raised.value
    diag = raised.value.diag
    assert diag.message_primary is not None and diag.statement_position is not None
    return diag.message_primary, int(diag.statement_position)


def test_there_are_about_fifty_broken_statements() -> None:
    assert len(BROKEN) >= 50
    assert len(set(BROKEN)) == len(BROKEN)


@pytest.mark.parametrize("sql", BROKEN)
def test_syntax_errors_are_postgres_own_at_its_position(
    server: psycopg.Connection[tuple[object, ...]], sql: str
) -> None:
    check = check_statement(sql)
    assert len(check.problems) == 1, check.problems
    problem = check.problems[0]
    assert problem.span is not None
    message, position = _postgres_error(server, check.positional)
    # PostgreSQL quotes `$n`; the checker quotes what the user wrote.
    for param in check.parameters:
        message = message.replace(f'"${param.number}"', f'"@{param.name}"')
    if message == "LIMIT #,# syntax is not supported":
        assert problem.message.startswith(message + "; write LIMIT ")
    else:
        assert problem.message == message
    if position == len(check.positional) + 1:
        assert message == "syntax error at end of input"
        assert problem.span == SqlSpan(len(sql.rstrip()), len(sql.rstrip()))
    else:
        assert problem.span.start == check.original_offset(position - 1)
        near = 'at or near "'
        if near in message:  # independent of the offset mapping: what PostgreSQL quotes is there
            assert sql.startswith(message.rpartition(near)[2][:-1], problem.span.start)
        at_param = [p for p in check.parameters if p.span.start == problem.span.start]
        if at_param:  # PostgreSQL points at a parameter: the whole `@name` is marked
            assert problem.span == at_param[0].span


def test_the_differential_includes_non_ascii_multi_line_and_parameter_positions() -> None:
    assert any(not s.isascii() for s in BROKEN)
    assert any("\n" in s for s in BROKEN)
    assert any(check_statement(s).problems[0].message.endswith('"@b"') for s in BROKEN)


def test_the_misspelt_keyword_is_reported_not_the_comma_after_it() -> None:
    (problem,) = check_statement("selectt id, x FROM t").problems
    assert problem.message == 'syntax error at or near "selectt"'
    assert problem.span == SqlSpan(0, 6)


def test_a_multi_line_error_has_its_line_and_column() -> None:
    sql = "SELECT id\n  FROM t\n WHERE é = @é\n   AND AND id = @id"
    (problem,) = check_statement(sql).problems
    assert problem.span is not None
    assert line_col(sql, problem.span.start) == (4, 8)
    shown = Diagnostic("x.proto", 1, 1, problem.message, sql=sql, span=problem.span).format()
    assert shown.splitlines()[1:] == ["       AND AND id = @id", "           ^^^", "    (SQL line 4, column 8)"]


def test_the_caret_lines_up_under_wide_characters_tabs_and_the_end_of_input() -> None:
    sql = "SELECT '日本',\tx = = 1"
    (problem,) = check_statement(sql).problems
    shown = Diagnostic("x.proto", 1, 1, problem.message, sql=sql, span=problem.span).format().splitlines()
    assert shown[2] == "    " + " " * 14 + "\t" + " " * 4 + "^"
    sql = "SELECT 1 FROM\n"
    (problem,) = check_statement(sql).problems
    shown = Diagnostic("x.proto", 1, 1, problem.message, sql=sql, span=problem.span).format().splitlines()
    assert shown[1:] == ["    SELECT 1 FROM", "                 ^", "    (SQL line 1, column 14)"]


def test_a_diagnostic_stays_on_one_line_and_nul_is_refused() -> None:
    (problem,) = check_statement("SELECT 'abc\n  FROM t").problems
    assert (problem.message, problem.span) == ('unterminated quoted string at or near "\'abc..."', SqlSpan(7, 10))
    (problem,) = check_statement("SELECT 1\0 FROM t").problems
    assert (problem.message, problem.span) == ('invalid byte sequence for encoding "UTF8": 0x00', SqlSpan(8, 8))


# -- parameters -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "params"),
    [
        ("SELECT @a::int", ["@a"]),
        ("SELECT 1 WHERE @a::text = 'x' AND @b", ["@a", "@b"]),
        ("SELECT '@s', \"@q\", E'\\'@e', $$ @d $$, $t$ @d $t$ /* @c */ -- @l\n", []),
        ("SELECT x FROM t WHERE x=@y AND z<>@w", ["@y", "@w"]),
        ("SELECT x FROM t WHERE tags @> @want AND tags <@ @have", ["@want", "@have"]),
        ("SELECT x FROM t WHERE tags<@other", []),  # contained-by, applied to the column other
        ("SELECT x FROM t WHERE doc @? '$.a' AND doc @@ '$.a == 1'", []),
        ("SELECT x FROM t WHERE to_tsvector(body) @@ plainto_tsquery(@query)", ["@query"]),
        ("SELECT x FROM t WHERE body ^@ @prefix", ["@prefix"]),
        ("SELECT @ -5, @ x FROM t", []),  # PostgreSQL's absolute-value operator
        ("SELECT x FROM t LIMIT @limit OFFSET @offset", ["@limit", "@offset"]),
        ("SELECT x FROM t WHERE x = -@n OR x = 1+@n", ["@n", "@n"]),
    ],
)
def test_parameters_are_found_by_postgres_lexer(sql: str, params: list[str]) -> None:
    check = check_statement(sql)
    assert not check.problems
    assert [sql[p.span.start : p.span.end + 1] for p in check.parameters] == params


def test_parameter_spans_and_numbers() -> None:
    sql = "SELECT x@y, @y::int, @zé FROM t"
    check = check_statement(sql)
    assert check.parameter_spans == {"y": [SqlSpan(8, 9), SqlSpan(12, 13)], "zé": [SqlSpan(21, 23)]}
    # `x@y` must not become the identifier `x$1`.
    assert check.positional == "SELECT x $1, $1::int, $2 FROM t"


def test_the_positional_text_prepares_on_postgres(server: psycopg.Connection[tuple[object, ...]]) -> None:
    sql = "SELECT @a::int + @b::int AS s, @a::int AS a, '@not' AS c -- @nor"
    check = check_statement(sql)
    assert not check.problems
    server.pgconn.prepare(b"grammar_probe", check.positional.encode())
    described = server.pgconn.describe_prepared(b"grammar_probe")
    assert described.nparams == 2
    server.execute("DEALLOCATE grammar_probe")


# -- teaching errors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "written", "advice"),
    [
        ("SELECT x FROM t WHERE id = ?", "?", "use @name, named after the request field"),
        ("SELECT x FROM t WHERE id=? AND y = 1", "?", "use @name, named after the request field"),
        ("SELECT x FROM t WHERE id = ? + 1", "?", "use @name, named after the request field"),
        ("SELECT x || ? || 'x' FROM t", "?", "use @name, named after the request field"),
        ("SELECT x FROM t WHERE id = :id", ":id", "use @id"),
        ("SELECT x FROM t WHERE id = :id::int", ":id", "use @id"),
        ("SELECT x FROM t WHERE id = %(id)s", "%(id)s", "use @id"),
        ("SELECT x FROM t WHERE id = %s LIMIT 1", "%s", "use @name, named after the request field"),
        ("SELECT x FROM t WHERE id = $1", "$1", "use @name, named after the request field"),
    ],
)
def test_other_dialects_placeholders_teach_at_name(sql: str, written: str, advice: str) -> None:
    (problem,) = check_statement(sql).problems
    assert problem.message == f'"{written}" is not a pydb parameter; {advice}'
    assert problem.span is not None
    assert sql[problem.span.start : problem.span.end + 1] == written


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1 WHERE 1 = ?",
        "SELECT 1 WHERE 1 = ? + 1",
        "SELECT :x",
        "SELECT %(x)s",
        "SELECT 1 WHERE 1 = %s",
        "SELECT 1 LIMIT 0, 10",
        "SELECT 1 == 1",
    ],
)
def test_postgres_rejects_what_the_teaching_errors_name(
    server: psycopg.Connection[tuple[object, ...]], sql: str
) -> None:
    """Each teaching error replaces a real PostgreSQL error (syntax, or no such operator) and
    stands where PostgreSQL's error is, or before it."""
    (problem,) = check_statement(sql).problems
    assert problem.span is not None
    with pytest.raises(psycopg.Error) as raised:
        server.execute(sql.encode(), prepare=False)
    assert raised.value.sqlstate in ("42601", "42883")
    position = raised.value.diag.statement_position
    assert position is not None and problem.span.start <= int(position) - 1


def test_every_placeholder_is_named_and_a_real_error_still_reported() -> None:
    sql = "SELECT x FROM t WHERE a = ? AND b = :b AND c = %(c)s AND d = = 1"
    messages = [p.message for p in check_statement(sql).problems]
    assert messages == [
        '"?" is not a pydb parameter; use @name, named after the request field',
        '":b" is not a pydb parameter; use @b',
        '"%(c)s" is not a pydb parameter; use @c',
        'syntax error at or near "="',
    ]


def test_jsonb_question_mark_and_array_slices_are_no_placeholders() -> None:
    assert not check_statement(
        "SELECT x FROM t WHERE doc ? 'k' AND doc ?| array['a'] AND arr[1:2] = arr[@i:@j]"
    ).problems
    problems = check_statement("SELECT x FROM t WHERE doc ? 'k' AND id = ?").problems
    assert [(p.message.split(";")[0], p.span) for p in problems] == [('"?" is not a pydb parameter', SqlSpan(41, 41))]


@pytest.mark.parametrize(
    ("sql", "advice"),
    [
        ("SELECT x FROM t LIMIT 0, 10", "write LIMIT 10 OFFSET 0"),
        ("SELECT x FROM t ORDER BY x LIMIT @skip, @take FOR UPDATE", "write LIMIT @take OFFSET @skip"),
        ("SELECT x FROM (SELECT x FROM t LIMIT (2 * @page), @size) s", "write LIMIT @size OFFSET (2 * @page)"),
    ],
)
def test_mysql_limit_teaches_offset(sql: str, advice: str) -> None:
    (problem,) = check_statement(sql).problems
    assert problem.message == f"LIMIT #,# syntax is not supported; {advice}"
    assert problem.span is not None
    assert sql[problem.span.start : problem.span.end + 1] == "LIMIT"


def test_double_equals_is_not_an_operator_unless_the_schema_declares_it() -> None:
    sql = "SELECT x FROM t WHERE a == @b"
    (problem,) = check_statement(sql).problems
    assert problem.message == "operator does not exist: ==; did you mean =?"
    assert problem.span == SqlSpan(24, 25)
    assert not check_statement(sql, declared_operators=frozenset({"=="})).problems


# -- one statement, its kind ------------------------------------------------------------------


def test_exactly_one_statement() -> None:
    assert not check_statement("SELECT 1;").problems
    (problem,) = check_statement("SELECT 1; SELECT 2\n").problems
    assert (problem.message, problem.span) == ("expected exactly one SQL statement, found 2", SqlSpan(10, 17))
    (problem,) = check_statement("  -- nothing\n").problems
    assert problem.message == "expected exactly one SQL statement, found 0"


@pytest.mark.parametrize(
    ("sql", "kind", "read_only"),
    [
        ("SELECT x FROM t", "select", True),
        ("SELECT x FROM t UNION SELECT y FROM u", "select", True),
        ("WITH a AS (SELECT 1) SELECT * FROM a", "select", True),
        ("SELECT x FROM t FOR UPDATE SKIP LOCKED", "select", False),
        ("SELECT x FROM (SELECT x FROM t FOR SHARE) s", "select", False),
        ("WITH d AS (DELETE FROM t RETURNING x) SELECT x FROM d", "select", False),
        ("INSERT INTO t (x) VALUES (@x)", "insert", False),
        ("UPDATE t SET x = @x", "update", False),
        ("DELETE FROM t", "delete", False),
        ("VACUUM t", "other", False),
    ],
)
def test_statement_kind_and_read_only(sql: str, kind: str, read_only: bool) -> None:
    check = check_statement(sql)
    assert (check.kind, check.read_only()) == (kind, read_only)


def test_read_only_asks_the_function_catalog_about_volatility() -> None:
    check = check_statement("SELECT nextval('s'), pg_catalog.lower(@x)")
    assert check.function_calls() == [("nextval",), ("pg_catalog", "lower")]
    assert check.read_only()
    assert not check.read_only(is_volatile=lambda name: name[-1] == "nextval")


# -- analysis stops where PostgreSQL's grammar does --------------------------------------------


def test_analyze_reports_the_grammar_and_stops() -> None:
    catalog, problems = build_catalog("CREATE TABLE t (a int);")
    assert not problems
    analysis, found = analyze("SELECT a FROM t WHERE a = ?", catalog)
    assert analysis is None
    assert [p.message for p in found] == ['"?" is not a pydb parameter; use @name, named after the request field']
    analysis, found = analyze("SELECT a, FROM t", catalog)
    assert analysis is None
    assert [(p.message, p.span) for p in found] == [('syntax error at or near "FROM"', SqlSpan(10, 13))]


def test_analyze_passes_the_schema_operators_to_the_grammar() -> None:
    """An operator the catalog holds (here a `==`) is no misspelt `=`: analyze() hands the
    catalog's operators to the grammar check."""
    catalog, _ = build_catalog("CREATE TABLE t (a int);")
    with_eq = dataclasses.replace(catalog, operators=(OperatorSig("public", "==", t.INT4, t.INT4, t.BOOL),))
    assert [p.message for p in analyze("SELECT a FROM t WHERE a == 1", catalog)[1]] == [
        "operator does not exist: ==; did you mean =?"
    ]
    assert not any("==" in p.message for p in analyze("SELECT a FROM t WHERE a == 1", with_eq)[1])


def test_what_postgres_accepts_but_sqlglot_cannot_read_is_a_limit_of_pydb_not_a_syntax_error() -> None:
    catalog, problems = build_catalog("CREATE TABLE t (a int);")
    assert not problems
    sql = "SELECT COLLATION FOR (a) FROM t"
    assert not check_statement(sql).problems
    analysis, found = analyze(sql, catalog)
    assert analysis is None
    assert [(p.message, p.span) for p in found] == [
        (
            'pydb cannot analyse this statement at or near "FOR" (PostgreSQL accepts it; please report it)',
            SqlSpan(17, 19),
        )
    ]


# -- schema files ---------------------------------------------------------------------------


def test_schema_statements_split_on_postgres_lexer_and_errors_placed() -> None:
    text = (
        "CREATE TABLE a (s text DEFAULT ';');\n"
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT CASE WHEN true THEN 1 END; END;\n"
        "CREATE TABLE b (x int,, y int);\n"
        "CREATE FUNCTION g() RETURNS int AS $$ SELECT 1; $$ LANGUAGE sql;\n"
    )
    spans, problem = split_statements(text)
    assert problem is None
    assert [text[s.start : s.end + 1].split()[:3] for s in spans] == [
        ["CREATE", "TABLE", "a"],
        ["CREATE", "FUNCTION", "f()"],
        ["CREATE", "TABLE", "b"],
        ["CREATE", "FUNCTION", "g()"],
    ]
    bad = spans[2]
    with pytest.raises(PgSyntaxError) as raised:
        parse(text[bad.start : bad.end + 1])
    found = syntax_error_problem(text, raised.value, bad.start, bad.end + 1)
    assert found.message == 'syntax error at or near ","'
    assert found.span is not None and line_col(text, found.span.start) == (3, 23)


def test_a_lexical_error_inside_a_token_keeps_the_statements_before_it() -> None:
    text = "CREATE TABLE a (x int);\nCREATE TABLE b (s text DEFAULT E'\\u00');\n"
    spans, problem = split_statements(text)
    assert [text[s.start : s.end + 1] for s in spans] == ["CREATE TABLE a (x int)"]
    assert problem is not None and problem.message == "invalid Unicode escape"


def test_an_unterminated_string_in_a_schema_keeps_the_statements_before_it() -> None:
    text = "CREATE TABLE a (x int);\nCREATE TABLE b (s text DEFAULT 'oops);\n"
    spans, problem = split_statements(text)
    assert [text[s.start : s.end + 1] for s in spans] == ["CREATE TABLE a (x int)"]
    assert problem is not None and problem.message.startswith("unterminated quoted string")
    assert problem.span is not None and line_col(text, problem.span.start) == (2, 32)


@pytest.mark.parametrize(
    ("sql", "advice"),
    [
        ("SELECT now() - INTERVAL @age AS v", "@age::INTERVAL"),
        ("SELECT date @d AS v", "@d::date"),
        ("SELECT created - interval @d minute AS v FROM t", "@d::interval"),
    ],
)
def test_a_type_name_before_a_parameter_is_postgres_syntax_error(
    server: psycopg.Connection[tuple[object, ...]], sql: str, advice: str
) -> None:
    # The parser pglast wraps takes `INTERVAL $1`; PostgreSQL's grammar wants a string literal.
    (problem,) = check_statement(sql).problems
    message, position = _postgres_error(server, check_statement(sql).positional)
    param = check_statement(sql).parameters[0]
    assert message == f'syntax error at or near "${param.number}"'
    assert problem.message == f'syntax error at or near "@{param.name}"; write {advice}'
    assert problem.span == param.span
    assert check_statement(sql).original_offset(position - 1) == param.span.start
