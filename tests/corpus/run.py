"""The test corpus runner: every case of tests/corpus/<case>/ through protoc-gen-pydb, in-process.

protoc (grpc_tools) parses every case's `query.proto` once; each case is then one
CodeGeneratorRequest handed to `pydb.plugin.main.generate` (tests/support/plugin_harness.py). What a case
is expected to give lives in its `expected/` directory:

- `stderr.txt`: the exact text protoc shows (the error block, then any warnings), when there is any;
- `analysis.txt`: per RPC, the parameters and result columns (PostgreSQL types, nullability) the
  SQL front end infers, when the case generates.

    python tests/corpus/run.py --update      # rewrite every expected/ file and the docs catalogue
    python tests/corpus/run.py CASE...       # print what the cases give now

Review the diff of an update before committing it. The tests are tests/sql/test_corpus.py.
"""

from __future__ import annotations

import posixpath
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import psycopg
from google.protobuf import descriptor_pb2

CORPUS = Path(__file__).resolve().parent
#: The -I root: a case's proto is `corpus/<case>/query.proto` in it, a name no other test's protos
#: use (generated modules of two same-named .proto files would clash in one process).
ROOT = CORPUS.parent
REPO = ROOT.parent
if str(ROOT) not in sys.path:  # run as a script: tests/ holds the support package
    sys.path.insert(0, str(ROOT))

from pydb.plugin.bind.copyfrom import insert_for  # noqa: E402
from pydb.plugin.bind.variants import find_blocks, variants  # noqa: E402
from pydb.plugin.protos import ProtoIndex  # noqa: E402
from pydb.plugin.sql.analyzer.analyzer import analyze  # noqa: E402
from pydb.plugin.sql.analyzer.result import Analysis, ResultColumn  # noqa: E402
from pydb.plugin.sql.catalog.model import Catalog  # noqa: E402
from pydb.plugin.sql.frontend import build_catalog  # noqa: E402
from pydb.plugin.sql.syntax.grammar import check_statement  # noqa: E402
from pydb.v1 import options_pb2  # noqa: E402
from support.plugin_harness import Outcome, compile_protos, run_plugin  # noqa: E402

STDERR = "stderr.txt"
ANALYSIS = "analysis.txt"


def case_names() -> list[str]:
    """Every case: a directory of tests/corpus holding a `query.proto`."""
    return sorted(p.parent.name for p in CORPUS.glob("*/query.proto"))


def proto_name(case: str) -> str:
    """The name protoc knows a case by, e.g. `corpus/unknown_table/query.proto`."""
    return f"{CORPUS.name}/{case}/query.proto"


def expected_dir(case: str) -> Path:
    return CORPUS / case / "expected"


def read_expected(case: str) -> dict[str, str]:
    """The case's expected files by name."""
    folder = expected_dir(case)
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.txt"))} if folder.is_dir() else {}


def generating_cases() -> list[str]:
    """The cases that generate, read from their committed expected/ (an analysis.txt is written only
    for a case without errors), so that parametrizing a test by them runs no plugin at collection;
    tests/sql/test_corpus.py checks every expected/ against a real run."""
    return [case for case in case_names() if (expected_dir(case) / ANALYSIS).is_file()]


@dataclass(frozen=True)
class Rpc:
    name: str
    query: str
    #: Request fields that can be NULL (proto3 optional, wrappers): the analyzer's nullable params.
    nullable_params: frozenset[str]
    #: The annotation as written, where it is not `query` (a COPY, checked as an INSERT).
    written: str = ""

    @property
    def annotation(self) -> str:
        return self.written or self.query


class Corpus:
    """Every case parsed once; outcomes, statements and analyses per case on demand."""

    def __init__(self, cases: list[str] | None = None) -> None:
        self.cases = case_names() if cases is None else cases
        self.descriptors = compile_protos(ROOT, [proto_name(case) for case in self.cases])
        self.index = ProtoIndex(list(self.descriptors.file))
        self._catalogs: dict[Path, tuple[Catalog, bool]] = {}
        self._outcomes: dict[str, Outcome] = {}

    def run(self, *cases: str) -> Outcome:
        """What protoc would show and write for generating `cases` in one run."""
        return run_plugin(self.descriptors, [proto_name(case) for case in cases], cwd=ROOT)

    def file(self, case: str) -> descriptor_pb2.FileDescriptorProto:
        return next(f for f in self.descriptors.file if f.name == proto_name(case))

    def queries(self, case: str) -> dict[str, str]:
        """Every annotated RPC's statement as written, by RPC name."""
        return {
            method.name: method.options.Extensions[options_pb2.sql].query
            for service in self.file(case).service
            for method in service.method
            if method.options.HasExtension(options_pb2.sql)
        }

    def rpcs(self, case: str) -> list[Rpc]:
        """Every annotated RPC of the case, in file order."""
        out: list[Rpc] = []
        for service in self.file(case).service:
            for method in service.method:
                if not method.options.HasExtension(options_pb2.sql):
                    continue
                request = self.index.messages.get(method.input_type.lstrip("."))
                nullable = frozenset(f.name for f in request.fields if f.has_presence) if request else frozenset()
                written = method.options.Extensions[options_pb2.sql].query
                # A COPY is checked (and prepared by the oracle) as the INSERT it stands for.
                query = (insert_for(written) if method.client_streaming else None) or written
                blocks = find_blocks(query, request, self.index)[0] if request else ()
                listed = variants(query, blocks, self.index, request) if blocks and request else None
                if isinstance(listed, list):  # optional blocks: each variant is a statement of its own
                    out += [Rpc(f"{method.name} [{v.describe()}]", v.text, nullable) for v in listed]
                else:
                    out.append(Rpc(method.name, query, nullable, written if query != written else ""))
        return out

    def schema_path(self, case: str) -> Path:
        """The schema file the case's proto names (relative to the proto, as the plugin reads it)."""
        options = self.file(case).options
        rel = options.Extensions[options_pb2.schema] if options.HasExtension(options_pb2.schema) else "schema.sql"
        return ROOT / posixpath.normpath(posixpath.join(posixpath.dirname(proto_name(case)), rel))

    def catalog(self, case: str) -> Catalog | None:
        """The case's schema as the plugin reads it; None when it is missing or has errors."""
        path = self.schema_path(case)
        if not path.is_file():
            return None
        if path not in self._catalogs:
            catalog, problems = build_catalog(path.read_text(encoding="utf-8"))
            self._catalogs[path] = (catalog, not any(p.severity == "error" for p in problems))
        catalog, usable = self._catalogs[path]
        return catalog if usable else None

    def analyses(self, case: str) -> Iterator[tuple[Rpc, Analysis | None, list[str]]]:
        """Per RPC what the SQL front end makes of its statement: the analysis and its error messages."""
        catalog = self.catalog(case)
        for rpc in self.rpcs(case):
            if catalog is None or not rpc.query.strip():
                yield rpc, None, ["no usable schema" if catalog is None else "empty statement"]
                continue
            analysis, problems = analyze(rpc.query, catalog, rpc.nullable_params)
            yield rpc, analysis, [p.message for p in problems if p.severity == "error"]

    def outcome(self, case: str) -> Outcome:
        """What generating `case` alone shows and writes, run once per case."""
        if case not in self._outcomes:
            self._outcomes[case] = self.run(case)
        return self._outcomes[case]

    @cached_property
    def outcomes(self) -> dict[str, Outcome]:
        return {case: self.outcome(case) for case in self.cases}

    def expected(self, case: str) -> dict[str, str]:
        """What the case's expected/ directory should hold now."""
        outcome = self.outcomes[case]
        out: dict[str, str] = {}
        if outcome.error or outcome.warnings:
            out[STDERR] = outcome.transcript()
        if not outcome.error:
            out[ANALYSIS] = self.analysis_text(case)
        return out

    def analysis_text(self, case: str) -> str:
        """Per RPC its parameters and result columns, with PostgreSQL types and nullability."""
        lines: list[str] = []
        for rpc, analysis, errors in self.analyses(case):
            lines.append(f"{rpc.name}:")
            if analysis is None or errors:
                lines.extend(f"  error: {message}" for message in errors)
                continue
            lines.extend(f"  @{p.name} {p.type}" for p in analysis.params)
            if analysis.columns is None:
                lines.append("  -> no rows")
            else:
                lines.extend(_column_lines(analysis.columns, "  -> "))
        return "\n".join(lines) + "\n"


def _column_lines(columns: tuple[ResultColumn, ...], indent: str) -> list[str]:
    out: list[str] = []
    for column in columns:
        nullability = "NULL" if column.nullable else "NOT NULL"
        if column.embedded is not None:
            out.append(f"{indent}{column.name} (row) {nullability}")
            out.extend(_column_lines(column.embedded, " " * len(indent) + "  . "))
        else:
            out.append(f"{indent}{column.name} {column.type} {nullability}")
    return out


def update(corpus: Corpus) -> list[str]:
    """Rewrite every case's expected/ directory (stale files removed) and the docs catalogue;
    returns the cases whose expectations changed."""
    changed: list[str] = []
    for case in corpus.cases:
        want = corpus.expected(case)
        if want == read_expected(case):
            continue
        changed.append(case)
        folder = expected_dir(case)
        folder.mkdir(exist_ok=True)
        for stale in folder.glob("*.txt"):
            if stale.name not in want:
                stale.unlink()
        for name, text in want.items():
            (folder / name).write_text(text, encoding="utf-8")
    write_catalogue(corpus)
    return changed


# -- the same statements on a real PostgreSQL ----------------------------------------------------


def positional(sql: str) -> tuple[str, list[str]]:
    """`@name` -> `$n` (the same n for every use of a name), as PREPARE takes it (the text the
    grammar check gave PostgreSQL's parser); and the names in parameter order."""
    check = check_statement(sql)
    by_number = {param.number: param.name for param in check.parameters}
    return check.positional, [by_number[n] for n in sorted(by_number)]


def postgres_error(conn: psycopg.Connection, sql: str) -> str | None:
    """The first line of PostgreSQL's error for `sql`, or None when it takes it. PREPARE runs
    parse analysis; EXPLAIN EXECUTE (every parameter NULL) also plans it, which finds what only
    the planner checks (the ON CONFLICT arbiter). Rolled back; the connection is left usable."""
    text, names = positional(sql)
    pgconn = conn.pgconn
    pgconn.exec_(b"BEGIN")
    try:
        result = pgconn.prepare(b"corpus_check", text.encode())
        if result.status == psycopg.pq.ExecStatus.COMMAND_OK:
            nulls = f"({', '.join('NULL' for _ in names)})" if names else ""
            result = pgconn.exec_(f"EXPLAIN EXECUTE corpus_check{nulls}".encode())
        if result.status in (psycopg.pq.ExecStatus.COMMAND_OK, psycopg.pq.ExecStatus.TUPLES_OK):
            return None
        return (result.error_message or b"").decode().strip().split("\n")[0]
    finally:
        pgconn.exec_(b"ROLLBACK")
        pgconn.exec_(b"DEALLOCATE corpus_check")  # outlives the transaction; an error if absent, ignored


def pg_type_names(conn: psycopg.Connection) -> dict[int, str]:
    """OID -> the analyzer's spelling: `int4`, `text[]`, `app.job_state` (enums qualified)."""
    rows = conn.execute(
        "SELECT t.oid, t.typname, t.typelem, n.nspname, t.typtype FROM pg_type t "
        "JOIN pg_namespace n ON n.oid = t.typnamespace"
    ).fetchall()
    raw = {oid: (name, elem, schema, kind) for oid, name, elem, schema, kind in rows}

    def spell(oid: int) -> str:
        name, elem, schema, kind = raw[oid]
        if name.startswith("_") and elem:
            return spell(elem) + "[]"
        # enums, row types, domains and the schema's range types qualified, as the analyzer spells them
        qualified = kind in ("e", "c", "d") or (kind in ("r", "m") and schema != "pg_catalog")
        return f"{schema}.{name}" if qualified else name

    return {oid: spell(oid) for oid in raw}


def postgres_signature(conn: psycopg.Connection, sql: str) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """What PostgreSQL infers for `sql`: parameter types by name, and (name, type) per column."""
    text, order = positional(sql)
    conn.pgconn.prepare(b"", text.encode())
    described = conn.pgconn.describe_prepared(b"")
    names = pg_type_names(conn)
    params = {name: names[described.param_type(i)] for i, name in enumerate(order)}
    columns = [((described.fname(i) or b"").decode(), names[described.ftype(i)]) for i in range(described.nfields)]
    return params, columns


def analyzer_signature(analysis: Analysis) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """The same, as the analyzer infers it offline."""
    # A parameter PostgreSQL types as a domain is described as the domain; a column as its base
    # type, but an array over a domain as that array type.
    params = {p.name: p.type.pg_name if p.type is not None else str(p.type) for p in analysis.params}
    columns = [(c.name, c.type.described_name if c.type is not None else str(c.type)) for c in analysis.columns or []]
    return params, columns


# -- docs/diagnostics.md shows every failing case, as reported ------------------------------------

DOC = REPO / "docs" / "diagnostics.md"
CATALOGUE = re.compile(r"<!-- BEGIN catalogue -->\n(.*?)\n<!-- END catalogue -->", re.S)
# (title, introduction, which cases) in the order the page shows them; the last takes the rest.
#: Cases where the plugin still disagrees with PostgreSQL (issues 10 and 11), with the reason. Each is
#: a strict xfail in tests/sql/test_corpus.py (so whoever closes the gap unlists it) and no starting point
#: of tests/sql/test_corpus_fuzz.py's differential.
KNOWN_GAPS: dict[str, str] = {}


DOC_GROUPS: list[tuple[str, str, set[str] | None]] = [
    ("Schema files", "The schema is read statement by statement; every problem names its line in schema.sql.", None),
    (
        "Statement syntax and shape",
        "",
        {"syntax_error", "stray_comma", "two_statements", "unsupported_statement", "empty_query"}
        | {"select_star_without_from", "subquery_two_columns", "union_column_count", "where_not_boolean"}
        | {"values_length_mismatch", "order_by_constant", "distinct_on_order_mismatch"}
        | {"issue10_syntax_error_token", "issue10_limit_comma", "issue11_inet_contained_operator"}
        | {"pg18_returning_old_new"},
    ),
    (
        "Names: tables, columns, functions, types",
        "Each comes with a did-you-mean from the catalog when one is close. An unknown table is reported once: "
        "the columns it would have provided are not reported again.",
        {"unknown_table", "unknown_schema", "unknown_column", "unknown_qualified_column", "missing_from_entry"}
        | {"ambiguous_column", "duplicate_table_name", "cte_unknown_column", "cte_named_with_schema"}
        | {"using_not_on_both_sides", "update_unknown_column", "insert_unknown_column", "unknown_function"}
        | {"insert_unknown_column_no_suggestion", "unknown_cast_type", "unknown_cast_type_misspelt"}
        | {"many_errors_one_run", "issue10_random_with_argument", "issue10_cast_to_unknown_type_string"}
        | {"issue10_schema_qualified_function", "issue10_ifnull"},
    ),
    (
        "Types, literals and operators",
        "A literal is checked against the type its context needs, the way Postgres would read it.",
        {"enum_label_comparison", "enum_label_assignment", "operator_type_mismatch", "arithmetic_type_mismatch"}
        | {"json_operator_on_integer", "unnest_non_array", "unnest_too_many_names", "make_interval_bad_argument"}
        | {"sum_of_text", "max_of_uuid", "cast_not_possible", "json_equality", "jsonb_key_type"}
        | {"number_divided_by_interval", "text_minus_literal", "union_type_mismatch", "issue10_double_equals"}
        | {"issue10_recursive_cte_untyped_null", "issue11_extension_trgm_operator", "issue11_extension_citext_insert"},
    ),
    (
        "Aggregates and window functions",
        "",
        {"aggregate_in_where", "aggregate_in_update_where", "nested_aggregate", "ungrouped_column"}
        | {"window_function_without_over", "window_in_where"},
    ),
    (
        "INSERT, UPDATE and ON CONFLICT",
        "",
        {"null_into_not_null", "update_same_column_twice", "issue10_on_conflict_update_without_target"}
        | {"issue11_on_conflict_partial_index", "issue15_partition_on_conflict_without_key"},
    ),
    ("Parameters", "Every `@name` binds the request field `name`; its type comes from where it is used.", set()),
    (
        "Result columns",
        "Every result column lands in the response field of its name (or in `result_field`'s message).",
        {"enum_missing_value", "enum_zero_not_unspecified", "enum_value_missing_in_pg"},
    ),
    ("Cardinality and options", "", None),
]
_PREFIXES: dict[str, tuple[str, ...]] = {
    "Schema files": (
        "schema_",
        "issue11_unknown_type_string",
        "issue11_inherits_",
        "issue11_duplicate_function",
        "issue11_do_block_ddl",
        "issue15_partition_",
    ),
    "Types, literals and operators": ("literal_",),
    "INSERT, UPDATE and ON CONFLICT": ("insert_", "on_conflict_"),
    "Parameters": (
        "param_",
        "enum_zero_not_unspecified_param",
        "issue10_param_",
        "issue11_composite_field_",
        "issue11_extension_citext_param",
    ),
    "Result columns": ("result_", "nested_rows_"),
}
_NOT_RESULT_COLUMNS = {"result_field_unknown", "result_field_not_message"}


def render_catalogue(corpus: Corpus) -> str:
    """The diagnostics section of docs/diagnostics.md: every failing case with its statement and
    its exact report (its expected/stderr.txt)."""
    failing = [case for case in corpus.cases if STDERR in read_expected(case) and corpus.outcomes[case].error]
    out: list[str] = []
    done: set[str] = set()
    # A case a group lists by name goes there, even when an earlier group's prefix matches it.
    listed = set().union(*(names for _, _, names in DOC_GROUPS if names))
    for title, intro, names in DOC_GROUPS:
        prefixes = _PREFIXES.get(title)
        members = [
            case
            for case in failing
            if case not in done
            and (
                (names is not None and case in names)
                or (
                    prefixes is not None
                    and case.startswith(prefixes)
                    and case not in _NOT_RESULT_COLUMNS
                    and (case not in listed or (names is not None and case in names))
                )
                or (names is None and prefixes is None)
            )
        ]
        done.update(members)
        out.append(f"### {title}\n")
        if intro:
            out.append(intro + "\n")
        for case in members:
            proto = (CORPUS / case / "query.proto").read_text(encoding="utf-8")
            report = read_expected(case)[STDERR].rstrip("\n")
            out.append(f"#### {proto.splitlines()[0].lstrip('/ ').strip()}\n")
            link = f"[`{case}`](../tests/corpus/{case}/query.proto)"
            statements = [rpc.query for rpc in corpus.rpcs(case)]
            if statements and not case.startswith("schema_"):
                out.append(f"{link}, statement{'s' if len(statements) > 1 else ''}:\n")
                out.append("```sql\n" + "\n".join(q.strip() or "(empty)" for q in statements) + "\n```\n")
                out.append("reports:\n")
            else:
                out.append(f"{link} reports:\n")
            out.append("```text\n" + report + "\n```\n")
    return "\n".join(out)


def write_catalogue(corpus: Corpus) -> None:
    text = DOC.read_text(encoding="utf-8")
    found = CATALOGUE.search(text)
    if found is None:
        raise SystemExit(f"{DOC} has no <!-- BEGIN catalogue --> section")
    DOC.write_text(text[: found.start(1)] + render_catalogue(corpus) + text[found.end(1) :], encoding="utf-8")


def main(argv: list[str]) -> int:
    if argv == ["--update"]:
        corpus = Corpus()
        changed = update(corpus)
        print(f"{len(corpus.cases)} cases, {len(changed)} updated: {' '.join(changed) or '-'}")
        return 0
    if not argv or argv[0].startswith("-"):
        print(__doc__)
        return 2
    corpus = Corpus(argv)
    for case in argv:
        for name, text in corpus.expected(case).items():
            print(f"--- {case}/expected/{name}\n{text}", end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
