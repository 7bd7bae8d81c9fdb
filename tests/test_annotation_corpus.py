"""The diagnostics corpus (tests/annotation_corpus): every bad annotation is reported with its
exact message and location and nothing is generated; every valid tricky statement generates.

Each `bad/NAME.proto` has a `bad/NAME.expected` with the full text protoc would show (the error
block, then any warnings). Regenerate with `python tests/annotation_corpus/runner.py --update`
and review the diff. The statements are also checked against a real PostgreSQL: the valid ones
must PREPARE, and the bad ones whose error is a SQL error must fail to.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from annotation_corpus.pgcheck import annotated_queries, postgres_error, postgres_signature
from annotation_corpus.runner import CORPUS, ROOT, WELL_KNOWN, Corpus, case_names, compile_protos, proto_name
from pg import Cluster, scratch_database
from pydb import include_dir
from pydb.plugin.sql.analyze import analyze
from pydb.plugin.sql.catalog import Catalog, build_catalog
from pydb.v1 import options_pb2

REPO = Path(__file__).resolve().parent.parent
BAD = case_names("bad")
VALID = case_names("valid")
LOCATION = re.compile(r"^(?P<path>[\w/.]+):(?P<line>\d+):(?P<col>\d+): (?P<severity>error|warning): ", re.MULTILINE)


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return Corpus()


def test_corpus_has_at_least_40_error_cases(corpus: Corpus) -> None:
    failing = [name for name in BAD if corpus.run("bad", name).error]
    assert len(failing) >= 40, failing
    assert len(VALID) >= 10


@pytest.mark.parametrize("name", BAD)
def test_bad_annotation_is_reported_exactly(corpus: Corpus, name: str) -> None:
    outcome = corpus.run("bad", name)
    expected = (CORPUS / "bad" / f"{name}.expected").read_text(encoding="utf-8")
    assert outcome.transcript() == expected
    assert "internal error" not in outcome.transcript()
    assert "Traceback" not in outcome.transcript()
    if outcome.error:
        assert outcome.files == {}, "no file may be generated when there is an error"
    else:
        assert outcome.warnings, f"{name} is in bad/ but reports nothing"


@pytest.mark.parametrize("name", BAD)
def test_every_diagnostic_names_a_real_location(corpus: Corpus, name: str) -> None:
    """path:line:col points into the file it names (the option in the .proto, or the schema
    statement); the SQL line shown is line L of the statement (or schema), and the caret sits
    at column C of it, L and C being the "(SQL line L, column C)" printed below."""
    text = corpus.run("bad", name).transcript()
    heads = list(LOCATION.finditer(text))
    assert heads, text
    for head in heads:
        path = ROOT / head["path"]
        lines = path.read_text(encoding="utf-8").split("\n")
        line, col = int(head["line"]), int(head["col"])
        assert 1 <= line <= len(lines) and 1 <= col <= len(lines[line - 1]) + 1, head.group(0)
        if head["path"].endswith(".proto") and head["path"] != proto_name("bad", "schema_file_not_found"):
            at_line = lines[line - 1][col - 1 :]
            # A problem of a message's field (shared by RPCs) is reported once, at the field.
            site = re.match(r"[\w.]+\.(\w+): ", text[head.end() :])
            at_field = site is not None and re.match(rf"(optional |repeated )?[\w.]+ {site[1]} = \d+", at_line)
            assert at_line.startswith("option (pydb.v1.sql)") or at_field, head.group(0)
    queries = dict(annotated_queries("bad", name))
    blocks = text.split("\n")
    source = ""  # the SQL the current diagnostic is about: a statement or the schema file
    for i, row in enumerate(blocks):
        at = LOCATION.match(row)
        if at is not None:
            rpc = row[at.end() :].split(":", 1)[0]
            source = queries.get(rpc) or (ROOT / at["path"]).read_text(encoding="utf-8")
        elif row.strip() and set(row.strip()) == {"^"}:
            sql_line = blocks[i - 1]
            assert len(row.rstrip()) <= len(sql_line) + 1, (sql_line, row)
            position = re.fullmatch(r"    \(SQL line (\d+), column (\d+)\)", blocks[i + 1])
            assert position is not None, blocks[i + 1]
            assert row.index("^") - 4 + 1 == int(position[2]), (row, blocks[i + 1])
            assert source.split("\n")[int(position[1]) - 1] == sql_line[4:], (sql_line, position[0])


@pytest.mark.parametrize("name", VALID)
def test_valid_statement_generates(corpus: Corpus, name: str) -> None:
    outcome = corpus.run("valid", name)
    assert outcome.error == ""
    assert outcome.warnings == ""
    stem = proto_name("valid", name).removesuffix(".proto")
    assert sorted(outcome.files) == [f"{stem}_pydb.py", f"{stem}_pydb_server.py"]
    for path, content in outcome.files.items():
        compile(content, path, "exec")  # generated code is valid Python


# --- the same statements against a real PostgreSQL -------------------------------------------


#: Bad cases whose error is a SQL error, with the start of Postgres' own message for them: the
#: database must reject the statement too (so the plugin is never stricter than Postgres, and
#: the corpus case really exercises what it says). The other bad cases are about the proto side.
SQL_ERRORS = {
    "aggregate_in_where": "aggregate functions are not allowed in WHERE",
    "aggregate_nested": "aggregate function calls cannot be nested",
    "ambiguous_column": 'column reference "created_at" is ambiguous',
    "arithmetic_type_mismatch": "operator does not exist: character varying + integer",
    "duplicate_table_name": 'table name "jobs" specified more than once',
    "insert_fewer_values": "INSERT has more target columns than expressions",
    "insert_more_values": "INSERT has more expressions than target columns",
    "insert_select_type_mismatch": 'column "owner_id" is of type bigint but expression is of type timestamp',
    "insert_unknown_column": 'column "priority" of relation "jobs" does not exist',
    "json_operator_on_text": "operator does not exist: character varying ->> unknown",
    "literal_invalid_uuid": 'invalid input syntax for type uuid: "not-a-uuid"',
    "literal_number_for_bool": "operator does not exist: boolean = integer",
    "literal_number_for_timestamp": 'column "created_at" is of type timestamp with time zone but expression is of type integer',
    "literal_string_for_bigint": 'invalid input syntax for type bigint: "abc"',
    "missing_from_entry": 'missing FROM-clause entry for table "jobs"',
    "on_conflict_no_unique_key": "there is no unique or exclusion constraint matching the ON CONFLICT specification",
    "on_conflict_unknown_column": 'column "knd" does not exist',
    "operator_type_mismatch": "operator does not exist: bigint = timestamp with time zone",
    "sql_syntax_error": 'syntax error at or near "="',
    "subquery_too_many_columns": "subquery must return only one column",
    "ungrouped_column": 'column "jobs.kind" must appear in the GROUP BY clause',
    "union_column_count": "each UNION query must have the same number of columns",
    "unknown_cast_type": 'type "uuidd" does not exist',
    "unknown_column": 'column "stat" does not exist',
    "unknown_enum_label_assignment": 'invalid input value for enum app.job_state: "finished"',
    "unknown_enum_label_comparison": 'invalid input value for enum app.job_state: "runing"',
    "unknown_function": "function frobnicate(character varying) does not exist",
    "unknown_qualified_column": "column j.atempts does not exist",
    "unknown_schema": 'relation "ap.jobs" does not exist',
    "unknown_table": 'relation "app.job" does not exist',
    "unnest_non_array": "function unnest(character varying) does not exist",
    "update_unknown_column": 'column "atempts" of relation "jobs" does not exist',
    "where_not_boolean": "argument of AND must be type boolean",
    "window_in_where": "window functions are not allowed in WHERE",
    "stray_comma": 'syntax error at or near ","',
    "literal_invalid_date": 'invalid input syntax for type date: "tomorow"',
    "literal_malformed_array": 'malformed array literal: "6f1c2d3e-4a5b-4c6d-8e7f-901234567890"',
    "json_equality": "operator does not exist: json = json",
    "jsonb_key_type": "operator does not exist: jsonb -> boolean",
    "max_of_uuid": "function max(uuid) does not exist",
    "union_type_mismatch": "UNION types character varying and integer cannot be matched",
    "distinct_on_order_mismatch": "SELECT DISTINCT ON expressions must match initial ORDER BY expressions",
    "order_by_constant": "non-integer constant in ORDER BY",
    "aggregate_in_update_where": "aggregate functions are not allowed in WHERE",
    "values_length_mismatch": "VALUES lists must all be the same length",
    "text_minus_literal": "operator does not exist: character varying - unknown",
    "number_divided_by_interval": "operator does not exist: integer / interval",
    "cast_not_possible": "cannot cast type uuid to integer",
    "update_same_column_twice": 'multiple assignments to same column "attempts"',
}


def test_sql_error_cases_exist() -> None:
    assert set(SQL_ERRORS) <= set(BAD)


@pytest.mark.parametrize("name", VALID)
def test_valid_statements_prepare_in_postgres(corpus_db: psycopg.Connection, name: str) -> None:
    queries = list(annotated_queries("valid", name))
    assert queries
    for rpc, sql in queries:
        assert postgres_error(corpus_db, sql) is None, f"{name}.{rpc}: {postgres_error(corpus_db, sql)}"


@pytest.mark.parametrize("name", sorted(SQL_ERRORS))
def test_sql_error_cases_fail_in_postgres(corpus_db: psycopg.Connection, name: str) -> None:
    queries = list(annotated_queries("bad", name))
    assert len(queries) == 1
    error = postgres_error(corpus_db, queries[0][1], execute=True)
    assert error is not None and error.startswith("ERROR:  " + SQL_ERRORS[name]), error


#: Broken schema files (schemas/NAME.sql, used by bad/NAME.proto) and Postgres' message for them.
#: schemas/schema_unsupported_statement.sql is valid SQL (a view) that the catalog refuses to read.
SCHEMA_ERRORS = {
    "schema_alter_unknown_column": 'column "knd" of relation "jobs" does not exist',
    "schema_duplicate_column": 'column "kind" specified more than once',
    "schema_index_unknown_column": 'column "knd" does not exist',
    "schema_missing_schema": 'schema "app" does not exist',
    "schema_syntax_error": 'syntax error at or near ","',
    "schema_unknown_reference": 'relation "app.owners" does not exist',
    "schema_unknown_type": 'type "citext" does not exist',
}


def test_schema_error_cases_fail_in_postgres(pg_server: tuple[str, Cluster | None]) -> None:
    assert set(SCHEMA_ERRORS) | {"schema_unsupported_statement"} == {p.stem for p in (CORPUS / "schemas").glob("*.sql")}
    with scratch_database(pg_server[0], schema=None) as url, psycopg.connect(url, autocommit=True) as conn:
        for name, message in SCHEMA_ERRORS.items():
            with pytest.raises(psycopg.Error) as failure:
                conn.execute((CORPUS / "schemas" / f"{name}.sql").read_text(encoding="utf-8"))
            assert str(failure.value).startswith(message), (name, str(failure.value))


# --- the analyzer's types are Postgres' types ------------------------------------------------

QUEUE_ROOT = REPO / "example_protos"
QUEUE_PROTO = "generation/task/v1/task.proto"
QUEUE_SCHEMA = QUEUE_ROOT / "generation/task/v1/schema.sql"


def analyzer_signature(sql: str, catalog: Catalog) -> tuple[dict[str, str], list[tuple[str, str]]]:
    analysis, problems = analyze(sql, catalog)
    assert analysis is not None and not [p for p in problems if p.severity == "error"], problems
    params = {p.name: str(p.type) for p in analysis.params}
    columns = [(c.name, str(c.type)) for c in analysis.columns or []]
    return params, columns


#: Where the analyzer knowingly infers another (compatible) type than Postgres, by (rpc, param):
#: the analyzer's type, Postgres' type. Each entry is asserted to still differ, so none goes stale.
KNOWN_DIFFERENCES: dict[tuple[str, str], tuple[str, str]] = {
    # `LIMIT COALESCE(NULLIF(@limit, 0), n)`: LIMIT wants int8, Postgres types @limit from NULLIF's 0.
    ("ListStaleTasks", "limit"): ("int8", "int4"),
    ("Search", "limit"): ("int8", "int4"),
}


def assert_same_signature(
    rpc: str, ours: tuple[dict[str, str], list[tuple[str, str]]], postgres: tuple[dict[str, str], list[tuple[str, str]]]
) -> None:
    our_params, our_columns = ours
    pg_params, pg_columns = postgres
    assert our_columns == pg_columns, rpc
    assert sorted(our_params) == sorted(pg_params), rpc
    for name, pg_type in pg_params.items():
        known = KNOWN_DIFFERENCES.get((rpc, name))
        if known is not None:
            assert (our_params[name], pg_type) == known, f"{rpc} @{name}: the known difference changed"
        else:
            assert our_params[name] == pg_type, f"{rpc} @{name}: analyzer {our_params[name]}, Postgres {pg_type}"


def test_valid_corpus_types_match_postgres(corpus_db: psycopg.Connection) -> None:
    """For every valid statement, the parameter types and the result columns (names and types)
    the analyzer infers offline are the ones Postgres infers."""
    catalog, problems = build_catalog((CORPUS / "schema.sql").read_text(encoding="utf-8"))
    assert problems == []
    checked = 0
    for name in VALID:
        for rpc, sql in annotated_queries("valid", name):
            assert_same_signature(rpc, analyzer_signature(sql, catalog), postgres_signature(corpus_db, sql))
            checked += 1
    assert checked >= 20


def test_queue_types_match_postgres(pg_server: tuple[str, Cluster | None]) -> None:
    """The same for the flagship task queue (example_protos/generation/task/v1)."""
    catalog, problems = build_catalog(QUEUE_SCHEMA.read_text(encoding="utf-8"))
    assert [p for p in problems if p.severity == "error"] == []
    descriptors = compile_protos(QUEUE_ROOT, [QUEUE_PROTO])
    queries = [
        (method.name, method.options.Extensions[options_pb2.sql].query)
        for file in descriptors.file
        if file.name == QUEUE_PROTO
        for service in file.service
        for method in service.method
        if method.options.HasExtension(options_pb2.sql)
    ]
    assert len(queries) >= 10
    with scratch_database(pg_server[0], schema=QUEUE_SCHEMA) as url, psycopg.connect(url, autocommit=True) as conn:
        for rpc, sql in queries:
            assert_same_signature(rpc, analyzer_signature(sql, catalog), postgres_signature(conn, sql))


# --- end to end: protoc itself ----------------------------------------------------------------


def run_protoc(target: str, out: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{ROOT}",
            f"-I{include_dir()}",
            f"-I{WELL_KNOWN}",
            f"--pydb_out={out}",
            "--pydb_opt=proto_path=.",
            target,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_protoc_fails_and_writes_nothing_on_error(tmp_path: Path) -> None:
    result = run_protoc(proto_name("bad", "many_errors_one_run"), tmp_path)
    assert result.returncode != 0
    expected = (CORPUS / "bad" / "many_errors_one_run.expected").read_text(encoding="utf-8")
    error_block = expected.split("\n--- warnings ---\n")[0].rstrip("\n")
    assert error_block in result.stderr
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_protoc_generates_a_valid_file(tmp_path: Path) -> None:
    result = run_protoc(proto_name("valid", "skip_locked_claim"), tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / CORPUS.name / "valid" / "skip_locked_claim_pydb.py").is_file()
