"""The diagnostics corpus (tests/diagnostics_corpus): every bad annotation is reported with its
exact message and location and nothing is generated; every valid tricky statement generates.

`bad/NAME.proto` has a `bad/NAME.expected` holding the whole text protoc would print: the
`path:line:col: error: ...` lines, the SQL line, the caret line and the position in the SQL.
After an intended change of the messages, rewrite them with

    PYDB_UPDATE_EXPECTED=1 .venv/bin/pytest tests/test_diagnostics.py

and review the diff. The .proto files are parsed once, in-process (grpc_tools' protoc); each
case is then one CodeGeneratorRequest handed to `pydb.plugin.main.generate` (tests/plugin_harness.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from google.protobuf import descriptor_pb2
from pg import scratch_database
from plugin_harness import compile_protos, run_plugin
from pydb import include_dir

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(__file__).resolve().parent / "diagnostics_corpus"
UPDATE = os.environ.get("PYDB_UPDATE_EXPECTED") == "1"

BAD = sorted(p.stem for p in (CORPUS / "bad").glob("*.proto"))
VALID = sorted(p.stem for p in (CORPUS / "valid").glob("*.proto"))
HEAD = re.compile(r"^(?P<path>[\w/.]+):(?P<line>\d+):(?P<col>\d+): (?P<severity>error|warning): (?P<msg>.*)$", re.M)


@pytest.fixture(scope="module")
def descriptors() -> descriptor_pb2.FileDescriptorSet:
    files = [f"bad/{n}.proto" for n in BAD] + [f"valid/{n}.proto" for n in VALID]
    return compile_protos(CORPUS, files)


def test_the_corpus_covers_at_least_40_error_classes() -> None:
    assert len(BAD) >= 40
    assert VALID


@pytest.mark.parametrize("name", BAD)
def test_bad_annotation_is_reported_exactly(descriptors: descriptor_pb2.FileDescriptorSet, name: str) -> None:
    outcome = run_plugin(descriptors, [f"bad/{name}.proto"], cwd=CORPUS)
    expected_file = CORPUS / "bad" / f"{name}.expected"
    if UPDATE:
        expected_file.write_text(outcome.transcript(), encoding="utf-8")
    assert outcome.error, f"bad/{name}.proto generated without an error"
    assert outcome.files == {}, "no file may be generated when there is an error"
    assert "internal error" not in outcome.transcript()
    assert "Traceback" not in outcome.transcript()
    assert outcome.transcript() == expected_file.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", BAD)
def test_every_location_points_at_the_annotation_or_schema_line(
    descriptors: descriptor_pb2.FileDescriptorSet, name: str
) -> None:
    """path:line:col points into the file it names: at `option (pydb.v1.sql)` in a .proto, or
    at the offending token of a schema line; a caret line sits under the SQL line above it
    and is followed by the position inside the statement."""
    text = run_plugin(descriptors, [f"bad/{name}.proto"], cwd=CORPUS).transcript()
    heads = list(HEAD.finditer(text))
    assert heads, text
    for head in heads:
        lines = (CORPUS / head["path"]).read_text(encoding="utf-8").split("\n")
        line, col = int(head["line"]), int(head["col"])
        assert 1 <= line <= len(lines) and 1 <= col <= len(lines[line - 1]) + 1, head.group(0)
        at = lines[line - 1][col - 1 :]
        if head["path"].endswith(".proto") and "schema file" not in head["msg"]:
            # A problem of a message's field (shared by RPCs) is reported once, at the field.
            field = re.match(r"[\w.]+\.(\w+): ", head["msg"])
            at_field = field is not None and re.match(rf"(optional |repeated )?[\w.]+ {field[1]} = \d+", at)
            assert at.startswith("option (pydb.v1.sql)") or at_field, head.group(0)
        elif head["path"].endswith(".sql"):
            assert at.strip(), f"{head.group(0)} points at nothing"
    rows = text.split("\n")
    for i, row in enumerate(rows):
        if row.strip() and set(row.strip()) == {"^"}:
            sql_line = rows[i - 1]
            assert len(row.rstrip()) <= len(sql_line), (sql_line, row)
            assert re.fullmatch(r"    \(SQL line \d+, column \d+\)", rows[i + 1]), rows[i + 1]


@pytest.mark.parametrize("name", VALID)
def test_valid_tricky_statements_generate(descriptors: descriptor_pb2.FileDescriptorSet, name: str) -> None:
    outcome = run_plugin(descriptors, [f"valid/{name}.proto"], cwd=CORPUS)
    assert outcome.error == ""
    assert outcome.warnings == ""
    handlers = outcome.files[f"valid/{name}_pydb.py"]
    compile(handlers, f"valid/{name}_pydb.py", "exec")  # the generated module is valid Python
    proto = descriptors.file[[f.name for f in descriptors.file].index(f"valid/{name}.proto")]
    for method in proto.service[0].method:
        assert f"async def {_snake(method.name)}(" in handlers, method.name
    statements = "".join(re.findall(r'_SQL = """(.*?)"""', handlers, re.S))
    assert statements
    assert not re.search(r"@[A-Za-z_]", statements), "a parameter was left unbound"


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def test_all_errors_of_all_files_are_reported_in_one_run(descriptors: descriptor_pb2.FileDescriptorSet) -> None:
    targets = ["bad/unknown_table.proto", "bad/enum_label_comparison.proto", "valid/tricky.proto"]
    outcome = run_plugin(descriptors, targets, cwd=CORPUS)
    paths = [m["path"] for m in HEAD.finditer(outcome.error)]
    assert outcome.error.startswith("2 errors in SQL annotations:\n")
    assert paths == ["bad/enum_label_comparison.proto", "bad/unknown_table.proto"]
    assert outcome.files == {}


def test_warnings_go_to_stderr_and_do_not_stop_generation(tmp_path: Path) -> None:
    proto = tmp_path / "warn" / "unused.proto"
    proto.parent.mkdir()
    proto.write_text(
        'syntax = "proto3";\npackage warn;\nimport "common.proto";\nimport "pydb/v1/options.proto";\n'
        'option (pydb.v1.schema) = "../schema.sql";\n'
        "message Req {\n  int64 id = 1;\n  string note = 2;\n}\n"
        "service S {\n  rpc Get(Req) returns (corpus.v1.TaskReply) {\n    option (pydb.v1.sql) = {\n"
        '      query: "SELECT * FROM app.tasks WHERE id = @id"\n      cardinality: CARDINALITY_ONE\n'
        '      result_field: "task"\n    };\n  }\n}\n',
        encoding="utf-8",
    )
    (tmp_path / "common.proto").write_text((CORPUS / "common.proto").read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "schema.sql").write_text((CORPUS / "schema.sql").read_text(encoding="utf-8"), encoding="utf-8")
    descriptors = compile_protos(tmp_path, ["warn/unused.proto"])
    outcome = run_plugin(descriptors, ["warn/unused.proto"], cwd=tmp_path)
    assert outcome.error == ""
    assert "warn/unused_pydb.py" in outcome.files
    assert outcome.warnings == (
        "warn/unused.proto:12:5: warning: Get: request field warn.Req.note is not used by the statement\n"
    )


# -- protoc end to end -------------------------------------------------------------------------


def _protoc(out: Path, proto: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    cmd = [sys.executable, "-m", "grpc_tools.protoc", f"-I{CORPUS}", f"-I{include_dir()}"]
    cmd += [f"--pydb_out={out}", f"--pydb_opt=proto_path={CORPUS}", proto]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, timeout=60)


def test_protoc_fails_and_writes_nothing_on_error(tmp_path: Path) -> None:
    result = _protoc(tmp_path, "bad/unknown_table.proto")
    assert result.returncode != 0
    assert list(tmp_path.iterdir()) == []
    assert "bad/unknown_table.proto:13:5: error: Run: table app.taks does not exist; did you mean app.tasks?" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr


def test_protoc_generates_the_valid_corpus(tmp_path: Path) -> None:
    result = _protoc(tmp_path, "valid/tricky.proto")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "valid" / "tricky_pydb.py").is_file()
    assert result.stderr == ""


# -- the same statements on a real PostgreSQL --------------------------------------------------
#
# The analyzer claims to know what Postgres accepts. Each valid statement must PREPARE on a
# database made from the corpus schema; each bad statement must fail to, except the cases
# below, whose SQL Postgres takes but whose annotation is wrong (a proto-level mistake) or
# which would fail only when run (a constraint), and which the plugin reports earlier.
POSTGRES_ACCEPTS = {
    # The SQL is fine; the binding to the proto messages is not.
    "param_not_a_field",
    "param_type_mismatch",
    "param_repeated_for_scalar",
    "param_scalar_for_array",
    "result_array_into_scalar",
    "result_column_no_field",
    "result_duplicate_column",
    "result_left_join_nullable",
    "result_nullable_without_presence",
    "result_type_mismatch",
    "result_untyped_null",
    "enum_missing_value",
    "enum_zero_not_unspecified",
    "cardinality_exec_returns_rows",
    "cardinality_many_singular_field",
    "cardinality_one_repeated_field",
    "cardinality_one_without_rows",
    "cardinality_unspecified",
    "many_without_result_field",
    "result_field_not_message",
    "result_field_unknown",
    "exec_with_result_field",
    "streaming_rpc",
    # Constraint violations: Postgres finds them when the statement runs, not when it is prepared.
    "insert_missing_not_null",
    "insert_null_into_not_null",
    "null_into_not_null",
}


def _statements(descriptors: descriptor_pb2.FileDescriptorSet, proto: str) -> list[str]:
    from pydb.v1 import options_pb2

    file = next(f for f in descriptors.file if f.name == proto)
    return [m.options.Extensions[options_pb2.sql].query for s in file.service for m in s.method]


def _prepare(conn: psycopg.Connection[tuple[object, ...]], sql: str) -> None:
    """PREPARE and plan `sql` with each `@name` as a numbered parameter, rolled back."""
    from pydb.plugin.sql.grammar import parameter_spans

    spans = parameter_spans(sql)
    number = {name: i + 1 for i, name in enumerate(spans)}
    for start, end, name in sorted(((s.start, s.end, n) for n, ss in spans.items() for s in ss), reverse=True):
        sql = f"{sql[:start]}${number[name]}{sql[end + 1 :]}"
    conn.execute("DEALLOCATE ALL")  # prepared statements outlive transactions
    nulls = ", ".join("NULL" for _ in number)
    with conn.transaction(force_rollback=True):
        # prepare=True: the extended protocol, which takes one statement only, as the generated
        # code does. EXPLAIN EXECUTE plans without running, which finds what only the planner
        # checks (the ON CONFLICT arbiter).
        conn.execute(f"PREPARE corpus_check AS {sql}", prepare=True)
        conn.execute(f"EXPLAIN EXECUTE corpus_check{f'({nulls})' if nulls else ''}")


@pytest.fixture(scope="module")
def corpus_db(pg_server: tuple[str, object]) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with scratch_database(pg_server[0], schema=CORPUS / "schema.sql") as url, psycopg.connect(url) as conn:
        yield conn


@pytest.mark.parametrize("name", VALID)
def test_valid_statements_prepare_on_postgres(
    descriptors: descriptor_pb2.FileDescriptorSet, corpus_db: psycopg.Connection[tuple[object, ...]], name: str
) -> None:
    for sql in _statements(descriptors, f"valid/{name}.proto"):
        _prepare(corpus_db, sql)


@pytest.mark.parametrize("name", [n for n in BAD if not n.startswith("schema_")])
def test_postgres_agrees_with_the_bad_cases(
    descriptors: descriptor_pb2.FileDescriptorSet, corpus_db: psycopg.Connection[tuple[object, ...]], name: str
) -> None:
    (sql,) = _statements(descriptors, f"bad/{name}.proto")
    if name in POSTGRES_ACCEPTS:
        _prepare(corpus_db, sql)
    else:
        with pytest.raises(psycopg.Error):
            _prepare(corpus_db, sql)


# -- docs/diagnostics.md shows every case, as reported -----------------------------------------

DOC = ROOT / "docs" / "diagnostics.md"
# (title, introduction, which cases) in the order the page shows them; the last takes the rest.
DOC_GROUPS: list[tuple[str, str, set[str] | None]] = [
    ("Schema files", "The schema is read statement by statement; every problem names its line in schema.sql.", None),
    (
        "Statement syntax and shape",
        "",
        {"syntax_error", "two_statements", "unsupported_statement", "empty_query", "select_star_without_from"}
        | {"subquery_two_columns", "union_column_count", "where_not_boolean"},
    ),
    (
        "Names: tables, columns, functions, types",
        "Each comes with a did-you-mean from the catalog when one is close. An unknown table is reported once: "
        "the columns it would have provided are not reported again.",
        {"unknown_table", "unknown_schema", "unknown_column", "unknown_qualified_column", "missing_from_entry"}
        | {"ambiguous_column", "duplicate_table_name", "cte_unknown_column", "cte_named_with_schema"}
        | {"using_not_on_both_sides", "update_unknown_column", "insert_unknown_column", "unknown_function"}
        | {"unknown_cast_type"},
    ),
    (
        "Types, literals and operators",
        "A literal is checked against the type its context needs, the way Postgres would read it.",
        {"enum_label_comparison", "enum_label_assignment", "operator_type_mismatch", "arithmetic_type_mismatch"}
        | {"json_operator_on_integer", "unnest_non_array", "unnest_too_many_names", "make_interval_bad_argument"}
        | {"sum_of_text"},
    ),
    (
        "Aggregates and window functions",
        "",
        {"aggregate_in_where", "nested_aggregate", "ungrouped_column", "window_function_without_over"},
    ),
    ("INSERT, UPDATE and ON CONFLICT", "", {"null_into_not_null"}),
    ("Parameters", "Every `@name` binds the request field `name`; its type comes from where it is used.", set()),
    (
        "Result columns",
        "Every result column lands in the response field of its name (or in `result_field`'s message).",
        {"enum_missing_value", "enum_zero_not_unspecified"},
    ),
    ("Cardinality and options", "", None),
]
_PREFIXES: dict[str, tuple[str, ...]] = {
    "Schema files": ("schema_",),
    "Types, literals and operators": ("literal_",),
    "INSERT, UPDATE and ON CONFLICT": ("insert_", "on_conflict_"),
    "Parameters": ("param_",),
    "Result columns": ("result_",),
}


def render_catalogue() -> str:
    """The diagnostics section of docs/diagnostics.md: every bad case with its statement and
    its exact report."""
    import json

    out: list[str] = []
    done: set[str] = set()
    for title, intro, names in DOC_GROUPS:
        prefix = _PREFIXES.get(title)
        members = [
            n
            for n in BAD
            if n not in done
            and (
                (names is not None and n in names)
                or (
                    prefix is not None
                    and n.startswith(prefix)
                    and n not in {"result_field_unknown", "result_field_not_message"}
                )
                or (names is None and prefix is None)
            )
        ]
        done.update(members)
        out.append(f"### {title}\n")
        if intro:
            out.append(intro + "\n")
        for n in members:
            proto = (CORPUS / "bad" / f"{n}.proto").read_text(encoding="utf-8")
            expected = (CORPUS / "bad" / f"{n}.expected").read_text(encoding="utf-8").rstrip("\n")
            out.append(f"#### {proto.splitlines()[0].lstrip('/ ').strip()}\n")
            link = f"[`bad/{n}.proto`](../tests/diagnostics_corpus/bad/{n}.proto)"
            m = re.search(r"query:(.*?)\n\s*(?:cardinality|result_field|\};)", proto, re.S)
            if m and not n.startswith("schema_"):
                sql = "".join(json.loads(q) for q in re.findall(r'"(?:[^"\\]|\\.)*"', m.group(1)))
                out.append(f"{link}, statement:\n")
                out.append("```sql\n" + (sql.strip() or "(empty)") + "\n```\n")
                out.append("reports:\n")
            else:
                out.append(f"{link} reports:\n")
            out.append("```text\n" + expected + "\n```\n")
    return "\n".join(out)


def test_the_docs_show_every_case_as_reported() -> None:
    text = DOC.read_text(encoding="utf-8")
    m = re.search(r"<!-- BEGIN catalogue -->\n(.*?)\n<!-- END catalogue -->", text, re.S)
    assert m is not None, "docs/diagnostics.md has no catalogue section"
    if UPDATE:
        text = text[: m.start(1)] + render_catalogue() + text[m.end(1) :]
        DOC.write_text(text, encoding="utf-8")
        m = re.search(r"<!-- BEGIN catalogue -->\n(.*?)\n<!-- END catalogue -->", text, re.S)
        assert m is not None
    assert m.group(1) == render_catalogue()
    for name in BAD:
        assert f"bad/{name}.proto" in m.group(1), name
