"""The test corpus (tests/corpus/<case>/, see its README.md): every case gives exactly what its
`expected/` directory holds, every location points where it says, and PostgreSQL agrees.

- A failing case's `expected/stderr.txt` is the whole text protoc shows; nothing is generated.
- A case that generates has `expected/analysis.txt`: per RPC the parameters and result columns
  (PostgreSQL types, nullability) the SQL front end infers; the generated modules compile.
- Differential: with each case's schema applied to a real PostgreSQL, every statement the SQL front
  end accepts PREPAREs (and plans), every statement it rejects PostgreSQL rejects too, and for the
  cases that generate the parameter and column types are PostgreSQL's. Where the plugin is stricter
  on purpose, the case is listed below with the reason, and each listing is asserted to still hold.

After an intended change: `python tests/corpus/run.py --update` (or `make corpus-update`), and
review the diff.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from corpus.run import (
    ANALYSIS,
    CATALOGUE,
    CORPUS,
    DOC,
    KNOWN_GAPS,
    ROOT,
    STDERR,
    Corpus,
    analyzer_signature,
    case_names,
    postgres_error,
    postgres_signature,
    proto_name,
    read_expected,
    render_catalogue,
)
from pydb import include_dir
from pydb.plugin.sql.analyzer.analyzer import analyze
from pydb.plugin.sql.frontend import build_catalog
from pydb.v1 import options_pb2
from support.pg import Cluster, schema_statements, scratch_database
from support.plugin_harness import WELL_KNOWN, compile_protos, run_plugin

REPO = ROOT.parent
CASES = case_names()
LOCATION = re.compile(r"^(?P<path>[\w/.]+):(?P<line>\d+):(?P<col>\d+): (?P<severity>error|warning): ", re.MULTILINE)


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return Corpus()


def failing(corpus: Corpus) -> list[str]:
    return [case for case in CASES if corpus.outcomes[case].error]


def test_the_corpus_covers_many_error_classes_and_valid_statements(corpus: Corpus) -> None:
    assert len(failing(corpus)) >= 90
    assert len([case for case in CASES if not corpus.outcomes[case].error]) >= 20


@pytest.mark.parametrize("case", CASES)
def test_case_gives_exactly_its_expected_output(corpus: Corpus, case: str) -> None:
    outcome = corpus.outcomes[case]
    assert corpus.expected(case) == read_expected(case), f"run `python tests/corpus/run.py {case}` to see the diff"
    assert "internal error" not in outcome.transcript()
    assert "Traceback" not in outcome.transcript()
    if outcome.error:
        assert outcome.files == {}, "no file may be generated when there is an error"
    else:
        stem = proto_name(case).removesuffix(".proto")
        assert sorted(outcome.files) == [f"{stem}_pydb.py", f"{stem}_pydb_server.py"]
        for path, content in outcome.files.items():
            compile(content, path, "exec")  # generated code is valid Python
        assert "error:" not in read_expected(case)[ANALYSIS]


def test_every_case_has_an_expectation_and_nothing_else() -> None:
    for case in CASES:
        names = {p.name for p in (CORPUS / case / "expected").iterdir()}
        assert names and names <= {STDERR, ANALYSIS}, (case, names)
    assert {p.parent.name for p in CORPUS.glob("*/expected")} <= set(CASES)


@pytest.mark.parametrize("case", CASES)
def test_every_diagnostic_names_a_real_location(corpus: Corpus, case: str) -> None:
    """path:line:col points into the file it names (the option in the .proto, or the schema
    statement); the SQL line shown is line L of the statement (or schema), and the caret sits
    at column C of it, L and C being the "(SQL line L, column C)" printed below."""
    text = corpus.outcomes[case].transcript().rstrip("\n")
    if not text:
        return
    heads = list(LOCATION.finditer(text))
    assert heads, text
    for head in heads:
        lines = (ROOT / head["path"]).read_text(encoding="utf-8").split("\n")
        line, col = int(head["line"]), int(head["col"])
        assert 1 <= line <= len(lines) and 1 <= col <= len(lines[line - 1]) + 1, head.group(0)
        at = lines[line - 1][col - 1 :]
        if head["path"].endswith(".proto") and "schema file" not in text:
            # A problem of a message's field (shared by RPCs) is reported once, at the field.
            site = re.match(r"[\w.]+\.(\w+): ", text[head.end() :])
            at_field = site is not None and re.match(rf"(optional |repeated )?[\w.]+ {site[1]} = \d+", at)
            # A problem in the statement is placed at its token inside the string literal(s);
            # a problem of the annotation as a whole at the option.
            at_sql = text[head.end() :].split("\n", 1)[-1].startswith("    ")
            assert at.startswith("option (pydb.v1.sql)") or at_field or at_sql, head.group(0)
        elif head["path"].endswith(".sql"):
            assert at.strip(), f"{head.group(0)} points at nothing"
    queries = corpus.queries(case)
    rows = text.split("\n")
    source = ""  # the SQL the current diagnostic is about: a statement or the schema file
    here = ""  # the text of the file at the current diagnostic's line:col
    for i, row in enumerate(rows):
        at_head = LOCATION.match(row)
        if at_head is not None:
            site_lines = (ROOT / at_head["path"]).read_text(encoding="utf-8").split("\n")
            here = site_lines[int(at_head["line"]) - 1][int(at_head["col"]) - 1 :]
            rpc = row[at_head.end() :].split(":", 1)[0]
            source = queries.get(rpc) or (ROOT / at_head["path"]).read_text(encoding="utf-8")
        elif row.strip() and set(row.strip()) == {"^"}:
            sql_line = rows[i - 1]
            assert len(row.rstrip()) <= len(sql_line) + 1, (sql_line, row)
            position = re.fullmatch(r"    \(SQL line (\d+), column (\d+)\)", rows[i + 1])
            assert position is not None, rows[i + 1]
            assert row.index("^") - 4 + 1 == int(position[2]), (row, rows[i + 1])
            assert source.split("\n")[int(position[1]) - 1] == sql_line[4:], (sql_line, position[0])
            fragment = sql_line[row.index("^") : len(row.rstrip())]
            if not set(fragment) & {'"', "\\", "\t"} and fragment.isascii():
                # line:col is the fragment's own place in the file, inside the .proto's literal
                assert here.startswith(fragment), (rows[i - 3], fragment, here)


def test_all_errors_of_all_files_are_reported_in_one_run(corpus: Corpus) -> None:
    outcome = corpus.run("unknown_table", "enum_label_comparison", "tricky")
    paths = [m["path"] for m in LOCATION.finditer(outcome.error)]
    assert outcome.error.startswith("2 errors in SQL annotations:\n")
    assert paths == [proto_name("enum_label_comparison"), proto_name("unknown_table")]
    assert outcome.files == {}


def test_warnings_go_to_stderr_and_do_not_stop_generation(tmp_path: Path) -> None:
    proto = tmp_path / "warn" / "unused.proto"
    proto.parent.mkdir()
    proto.write_text(
        'syntax = "proto3";\npackage warn;\nimport "corpus/_shared/tasks/common.proto";\n'
        'import "pydb/v1/options.proto";\noption (pydb.v1.schema) = "../corpus/_shared/tasks/schema.sql";\n'
        "message Req {\n  int64 id = 1;\n  string note = 2;\n}\n"
        "service S {\n  rpc Get(Req) returns (corpus.tasks.v1.TaskReply) {\n    option (pydb.v1.sql) = {\n"
        '      query: "SELECT * FROM app.tasks WHERE id = @id"\n      cardinality: CARDINALITY_ONE\n'
        '      result_field: "task"\n    };\n  }\n}\n',
        encoding="utf-8",
    )
    shared = tmp_path / "corpus" / "_shared" / "tasks"
    shared.mkdir(parents=True)
    for name in ("common.proto", "schema.sql"):
        (shared / name).write_text((CORPUS / "_shared" / "tasks" / name).read_text(encoding="utf-8"), encoding="utf-8")
    descriptors = compile_protos(tmp_path, ["warn/unused.proto"])
    outcome = run_plugin(descriptors, ["warn/unused.proto"], cwd=tmp_path)
    assert outcome.error == ""
    assert "warn/unused_pydb.py" in outcome.files
    assert outcome.warnings == (
        "warn/unused.proto:12:5: warning: Get: request field warn.Req.note is not used by the statement\n"
    )


# -- protoc end to end ---------------------------------------------------------------------------


def run_protoc(target: str, out: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    command = [sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT}", f"-I{include_dir()}", f"-I{WELL_KNOWN}"]
    command += [f"--pydb_out={out}", "--pydb_opt=proto_path=.", target]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False)


def test_protoc_fails_and_writes_nothing_on_error(tmp_path: Path) -> None:
    result = run_protoc(proto_name("many_errors_one_run"), tmp_path)
    assert result.returncode != 0
    error_block = read_expected("many_errors_one_run")[STDERR].split("\n--- warnings ---\n")[0].rstrip("\n")
    assert error_block in result.stderr
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_protoc_generates_a_valid_case(tmp_path: Path) -> None:
    result = run_protoc(proto_name("tricky"), tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert (tmp_path / CORPUS.name / "tricky" / "query_pydb.py").is_file()


# -- the same statements and schemas on a real PostgreSQL ------------------------------------------

#: Statements PostgreSQL prepares but the plugin rejects on purpose, by case, with the reason.
FRONT_END_STRICTER = {
    # Constraint violations: PostgreSQL finds them when the statement runs, not when it is prepared.
    "insert_null_into_not_null": "NULL inserted into a NOT NULL column",
    "null_into_not_null": "a NOT NULL column set to NULL",
    # A proto message cannot hold two fields of one name, nor a field of no type.
    "result_duplicate_column": "two result columns of one name",
    "result_duplicate_column_from_star": "two result columns of one name, one from *",
    "result_untyped_null": "an untyped NULL column (PostgreSQL makes it text)",
    # Valid SQL that no RPC can be: pydb runs SELECT, INSERT, UPDATE and DELETE.
    "unsupported_statement": "TRUNCATE",
    "copy_wrong_statement": "COPY TO STDOUT and COPY with options (a client stream takes COPY FROM STDIN)",
    # The catalog does not run procedural code: it warns at the DO block, and errs where a statement
    # uses what the block created.
    "issue11_do_block_ddl": "a table created inside a DO block",
}

#: Schema files PostgreSQL applies but the plugin's catalog refuses, by case, with the reason.
#: None today: the catalog reads every statement of the corpus' schemas the way PostgreSQL does.
SCHEMA_STRICTER: dict[str, str] = {}

#: Where the analyzer knowingly infers another (compatible) parameter type than PostgreSQL, by
#: (case or queue, rpc, param): the analyzer's type, PostgreSQL's. Each is asserted to still differ.
#: Empty: every parameter of the corpus and the queue types as PostgreSQL's PREPARE says (context
#: types reach only a bare parameter, tests/sql/test_sql_context_types.py).
KNOWN_DIFFERENCES: dict[tuple[str, str, str], tuple[str, str]] = {}


SchemaDatabase = Callable[[Path], tuple[psycopg.Connection | None, str | None]]


@pytest.fixture(scope="module")
def schema_database(pg_server: tuple[str, Cluster | None]) -> Iterator[SchemaDatabase]:
    """A scratch database per schema file, made on first use: (connection, None), or (None,
    PostgreSQL's error) when PostgreSQL refuses the schema."""
    made: dict[Path, tuple[psycopg.Connection | None, str | None]] = {}
    with contextlib.ExitStack() as stack:

        def database(schema: Path) -> tuple[psycopg.Connection | None, str | None]:
            if schema not in made:
                url = stack.enter_context(scratch_database(pg_server[0], schema=None))
                conn = stack.enter_context(psycopg.connect(url, autocommit=True))
                try:
                    for statement in schema_statements(schema.read_text(encoding="utf-8")):
                        conn.execute(statement)
                    made[schema] = (conn, None)
                except psycopg.Error as err:
                    made[schema] = (None, str(err).split("\n")[0])
            return made[schema]

        yield database


def assert_same_signature(
    key: tuple[str, str],
    ours: tuple[dict[str, str], list[tuple[str, str]]],
    postgres: tuple[dict[str, str], list[tuple[str, str]]],
) -> None:
    our_params, our_columns = ours
    pg_params, pg_columns = postgres
    assert our_columns == pg_columns, key
    assert sorted(our_params) == sorted(pg_params), key
    for name, pg_type in pg_params.items():
        known = KNOWN_DIFFERENCES.get((*key, name))
        if known is not None:
            assert (our_params[name], pg_type) == known, f"{key} @{name}: the known difference changed"
        else:
            assert our_params[name] == pg_type, f"{key} @{name}: analyzer {our_params[name]}, PostgreSQL {pg_type}"


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(case, marks=pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[case]))
        if case in KNOWN_GAPS
        else case
        for case in CASES
    ],
)
def test_postgres_agrees_with_the_case(corpus: Corpus, schema_database: SchemaDatabase, case: str) -> None:
    schema = corpus.schema_path(case)
    if not schema.is_file():
        assert corpus.outcomes[case].error, "a case without its schema file must fail"
        return
    conn, schema_error = schema_database(schema)
    catalog_accepts = corpus.catalog(case) is not None
    if case in SCHEMA_STRICTER:
        assert schema_error is None and not catalog_accepts, f"{case}: no longer stricter than PostgreSQL; unlist it"
        return
    assert catalog_accepts == (schema_error is None), f"{case}: catalog accepts {catalog_accepts}, {schema_error}"
    if conn is None:
        return
    verdicts = []
    for rpc, analysis, errors in corpus.analyses(case):
        if not rpc.query.strip():
            continue
        postgres = postgres_error(conn, rpc.query)
        verdicts.append((rpc.name, errors, postgres))
        if analysis is not None and not errors and not corpus.outcomes[case].error:
            assert_same_signature((case, rpc.name), analyzer_signature(analysis), postgres_signature(conn, rpc.query))
    disagree = [(rpc, errors, postgres) for rpc, errors, postgres in verdicts if bool(errors) != (postgres is not None)]
    if case in FRONT_END_STRICTER:
        assert disagree and all(errors and postgres is None for _, errors, postgres in disagree), (
            f"{case}: the plugin is no longer stricter than PostgreSQL here; unlist it"
        )
    else:
        assert disagree == [], "plugin and PostgreSQL disagree (front-end errors, PostgreSQL's error)"


QUEUE_ROOT = REPO / "example_protos"
QUEUE_PROTO = "generation/task/v1/task.proto"
QUEUE_SCHEMA = QUEUE_ROOT / "generation/task/v1/schema.sql"


def test_queue_types_match_postgres(schema_database: SchemaDatabase) -> None:
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
    conn, error = schema_database(QUEUE_SCHEMA)
    assert conn is not None, error
    for rpc, sql in queries:
        analysis, problems = analyze(sql, catalog)
        assert analysis is not None and not [p for p in problems if p.severity == "error"], problems
        assert_same_signature(("queue", rpc), analyzer_signature(analysis), postgres_signature(conn, sql))


# -- docs/diagnostics.md shows every failing case, as reported -------------------------------------


def test_the_docs_show_every_failing_case_as_reported(corpus: Corpus) -> None:
    found = CATALOGUE.search(DOC.read_text(encoding="utf-8"))
    assert found is not None, "docs/diagnostics.md has no catalogue section"
    assert found.group(1) == render_catalogue(corpus), "run `python tests/corpus/run.py --update`"
    for case in failing(corpus):
        assert f"(../tests/corpus/{case}/query.proto)" in found.group(1), case
