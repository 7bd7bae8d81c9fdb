"""protoc-gen-pydb against PostgreSQL on SQL nobody on this project wrote: an external differential.

Takes a directory of sqlc-style cases (any directory holding a sqlc.json / sqlc.yaml / sqlc.yml;
each `postgresql` package of it names a schema, a file or a directory of migrations, and query
files with `-- name: GetX :one|:many|:exec|...` markers). Per distinct case:

1. a scratch database on a real PostgreSQL; the schema applied (PostgreSQL's verdict recorded);
2. each named statement translated to pydb's parameters (`sqlc.arg(x)`, `sqlc.narg(x)`, `@x`,
   `$1` -> `@x`, `@p1`); what no proto can express is set aside with the reason (`sqlc.embed`,
   `sqlc.slice`, `:copyfrom`, `:batch*`, result names that cannot be proto fields);
3. PREPAREd and described: PostgreSQL's verdict, parameter types and result columns;
4. an annotated proto built from that (request and response fields from PostgreSQL's types via
   the pg -> proto table in pydb/plugin/bind/typemap.py, cardinality from `:one/:many/:exec`),
   run through the plugin in process with the same schema;
5. for statements the plugin accepts, its inferred types and names compared with PostgreSQL's.

Printed: statements PostgreSQL prepares, accepted / rejected by cause (schema refused, statement
error by message class, type or name mismatch vs PostgreSQL, internal error); cases sqlc expects to
fail (a stderr.txt or stderr/ next to the config, or exec.json's meta.invalid_schema) that
PostgreSQL also rejects: caught / missed; internal errors. A crash in one case is recorded as that
case's internal error; it never stops the run.

    .venv/bin/python benchmarks/sql_differential.py CASES_DIR [--json out.json] [--text out.txt]
    make differential CASES=dir

sqlc's own cases, outside the repository (never commit third-party SQL):
    git --git-dir=/work/.mirror/sqlc-dev+sqlc/repo archive HEAD internal/endtoend/testdata | tar -x -C /tmp/sqlc
"""

from __future__ import annotations

import argparse
import concurrent.futures
import concurrent.futures.process
import contextlib
import hashlib
import itertools
import json
import os
import re
import sys
import tempfile
import time
import traceback
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from corpus.run import analyzer_signature, pg_type_names  # noqa: E402
from differential_report import render_markdown, render_text, summarize, write_docs  # noqa: E402
from pydb.plugin.bind.typemap import DURATION_MSG, TIMESTAMP_MSG, TYPES  # noqa: E402
from pydb.plugin.sql.analyzer.analyzer import analyze  # noqa: E402
from pydb.plugin.sql.catalog.model import Catalog  # noqa: E402
from pydb.plugin.sql.frontend import build_catalog  # noqa: E402
from sqlc_cases import (  # noqa: E402
    COMMANDS,
    UNEXPRESSIBLE_COMMANDS,
    Case,
    Named,
    Translated,
    discover,
    read_all,
    schema_text,
    sql_files,
    statements,
    translate,
)
from support.plugin_harness import compile_protos, run_plugin  # noqa: E402

#: The plugin's own type table: per pg type, the proto types a column reads into and a parameter binds from.
READS = {pg: frozenset(m.proto for m in pairs if m.reads) for pg, pairs in TYPES.items()}
BINDS = {pg: frozenset(m.proto for m in pairs if m.binds) for pg, pairs in TYPES.items()}
#: Preferred proto type per pg type, most natural first (the typemap allows the others too).
PREFERENCE = ["int32", "int64", "double", "float", "bool", "string", "bytes", TIMESTAMP_MSG, DURATION_MSG]
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a proto field name (not SQL)


# -- PostgreSQL -----------------------------------------------------------------------------------


@dataclass
class Described:
    error: str | None
    params: list[str] = field(default_factory=list)  # types, in $n order
    columns: list[tuple[str, str]] = field(default_factory=list)  # (name, type)
    enum_types: set[str] = field(default_factory=set)


def describe(conn: psycopg.Connection[Any], sql: str, types: dict[int, str], enums: set[int]) -> Described:
    pgconn = conn.pgconn
    result = pgconn.prepare(b"", sql.encode())
    if result.status != psycopg.pq.ExecStatus.COMMAND_OK:
        return Described((result.error_message or b"").decode(errors="replace").strip().split("\n")[0])
    described = pgconn.describe_prepared(b"")
    # The first EXECUTE also plans: EXPLAIN EXECUTE (every parameter NULL) finds what only the
    # planner checks (the ON CONFLICT arbiter), as tests/corpus/run.py does.
    pgconn.prepare(b"differential_plan", sql.encode())
    nulls = f"({', '.join('NULL' for _ in range(described.nparams))})" if described.nparams else ""
    planned = pgconn.exec_(f"EXPLAIN EXECUTE differential_plan{nulls}".encode())
    pgconn.exec_(b"DEALLOCATE differential_plan")
    if planned.status not in (psycopg.pq.ExecStatus.COMMAND_OK, psycopg.pq.ExecStatus.TUPLES_OK):
        return Described((planned.error_message or b"").decode(errors="replace").strip().split("\n")[0])
    oids = [described.param_type(i) for i in range(described.nparams)] + [
        described.ftype(i) for i in range(described.nfields)
    ]
    return Described(
        None,
        [types.get(described.param_type(i), f"oid {described.param_type(i)}") for i in range(described.nparams)],
        [
            ((described.fname(i) or b"").decode(errors="replace"), types.get(described.ftype(i), "?"))
            for i in range(described.nfields)
        ],
        {types[oid] for oid in oids if oid in enums and oid in types},
    )


def proto_type(pg: str, enums: set[str], table: dict[str, frozenset[str]]) -> tuple[str, bool]:
    """(proto type, repeated) for a pg type, by the plugin's own table; string when it has none
    (the plugin then says what it thinks)."""
    element, repeated = (pg[:-2], True) if pg.endswith("[]") else (pg, False)
    if element in enums:
        return "string", repeated
    allowed = table.get(element, frozenset())
    return next((t for t in PREFERENCE if t in allowed), "string"), repeated


# -- the annotated proto --------------------------------------------------------------------------


def proto_string(text: str) -> str:
    """A protobuf text-format string literal: printable ASCII as is, everything else octal escaped."""
    out = []
    for byte in text.encode("utf-8"):
        char = chr(byte)
        out.append(char if 32 <= byte < 127 and char not in '"\\' else f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


@dataclass
class Rpc:
    name: str
    command: str
    translated: Translated
    described: Described

    def cardinality(self) -> str:
        """sqlc's :one / :many; an :exec* statement that returns rows is read as :many (pydb's
        EXEC returns none)."""
        if self.command == ":one":
            return "CARDINALITY_ONE"
        if self.command == ":many" or self.described.columns:
            return "CARDINALITY_MANY"
        return "CARDINALITY_EXEC"


def field_line(name: str, number: int, proto: str, repeated: bool, optional: bool) -> str:
    label = "repeated " if repeated else "optional " if optional and "." not in proto else ""
    return f"  {label}{proto} {name} = {number};"


def build_proto(package: str, rpcs: list[Rpc]) -> str:
    lines = ['syntax = "proto3";', f"package {package};", 'import "pydb/v1/options.proto";']
    lines += ['option (pydb.v1.schema) = "schema.sql";', "message Empty {}"]
    services = []
    for rpc in rpcs:
        d = rpc.described
        request = [
            field_line(name, n, *proto_type(t, d.enum_types, BINDS), optional=name in rpc.translated.nullable)
            # A statement PostgreSQL rejects has no parameter types: text, the plugin decides.
            for n, (name, t) in enumerate(
                itertools.zip_longest(rpc.translated.params, d.params[: len(rpc.translated.params)], fillvalue="text"),
                1,
            )
        ]
        lines += [f"message {rpc.name}_Request {{", *request, "}"]
        response = f"{rpc.name}_Row"
        # Every result field has presence: PostgreSQL does not say which columns may be NULL.
        row = [
            field_line(name, n, *proto_type(t, d.enum_types, READS), optional=True)
            for n, (name, t) in enumerate(d.columns, 1)
            if t != "void"  # a void column fills no field (docs/diagnostics.md)
        ]
        lines += [f"message {rpc.name}_Row {{", *row, "}"]
        option = [f"    query: {proto_string(rpc.translated.pydb_sql)}", f"    cardinality: {rpc.cardinality()}"]
        if rpc.cardinality() == "CARDINALITY_MANY":
            lines += [f"message {rpc.name}_Rows {{", f"  repeated {rpc.name}_Row rows = 1;", "}"]
            response = f"{rpc.name}_Rows"
            option.append('    result_field: "rows"')
        elif rpc.cardinality() == "CARDINALITY_EXEC":
            response = "Empty"
        services.append(
            f"  rpc {rpc.name}({rpc.name}_Request) returns ({response}) {{\n"
            "    option (pydb.v1.sql) = {\n" + "\n".join(option) + "\n    };\n  }"
        )
    text = "\n".join(lines) + "\nservice Queries {\n" + "\n".join(services) + "\n}\n"
    for message, file in ((TIMESTAMP_MSG, "timestamp"), (DURATION_MSG, "duration")):
        if f" {message} " in text:  # protoc warns about unused imports
            text = text.replace("package ", f'import "google/protobuf/{file}.proto";\npackage ', 1)
    return text


# -- one case -------------------------------------------------------------------------------------

DIAGNOSTIC = re.compile(r"^(?P<path>\S+):\d+:\d+: (?P<severity>error|warning): (?P<message>.*)$", re.M)
#: Messages of the binding step: the proto built from PostgreSQL's types does not fit what the
#: plugin inferred, i.e. a type or a name differs from PostgreSQL's.
MISMATCH_MARKERS = (
    "has no field in",
    "does not fit",
    "cannot be bound where",
    "is not a field of",
    "must be repeated",
    "is repeated, but",
    "but the statement expects",
    "needs rows",
    "must not return rows",
)


#: Words of the plugin's messages that stay even when the statement uses them too.
MESSAGE_WORDS = frozenset(
    [
        "not",
        "does",
        "exist",
        "is",
        "in",
        "of",
        "the",
        "a",
        "and",
        "or",
        "on",
        "as",
        "by",
        "to",
        "for",
        "from",
        "group",
        "order",
        "set",
        "null",
        "no",
        "all",
        "any",
        "exists",
        "select",
        "insert",
        "update",
        "delete",
        "where",
        "union",
        "values",
        "into",
        "with",
        "type",
        "table",
        "column",
        "function",
        "schema",
        "operator",
    ]
)


#: Errors the plugin reports on purpose where PostgreSQL would fail only when the statement runs.
DELIBERATE = ("NOT NULL and has no default", "is NOT NULL, but NULL is inserted", "is NOT NULL, but is set to NULL")


def message_class(message: str, source: str) -> str:
    """A diagnostic with the names from the statement (or schema) masked: `column X does not exist`."""
    head = re.split(r"[;:]| \(|, which", message, maxsplit=1)[0] if not message.startswith("syntax") else message
    words = {w.lower() for w in re.findall(r"\w+", source)} - MESSAGE_WORDS

    def mask(m: re.Match[str]) -> str:
        word = m.group(0)
        return "X" if word.lower() in words or not word.isalpha() else word

    masked = re.sub(r"'[^']*'|\"[^\"]*\"|@\w+|[\w.$]+", mask, head)
    # The name after `column` is the statement's even when the statement does not spell it (`*`).
    masked = re.sub(r"\b(column) (?!X\b)[\w.]+", r"\1 X", masked)
    return re.sub(r"(X[ ,.]*)+X", "X", masked)


def run_case(case: Case, server_url: str) -> dict[str, Any]:
    """Everything for one case; never raises (a crash is the case's internal error)."""
    record: dict[str, Any] = {"case": case.id, "duplicates": case.duplicates, "expects_failure": case.expects_failure}
    try:
        _run_case(case, server_url, record)
    except Exception:
        record["harness_error"] = traceback.format_exc()
    return record


def _run_case(case: Case, server_url: str, record: dict[str, Any]) -> None:
    ddl = [
        n.sql
        for path in case.schema
        for text in read_all(path)
        for n in statements(schema_text(text), str(path))
        if n.name is None
    ]
    schema = "\n".join(sql + "\n;" for sql in ddl)  # a statement may end in a -- comment
    queries: list[Named] = []
    for path in case.queries:
        for file in sql_files(path):
            text = file.read_text(encoding="utf-8", errors="replace")
            queries += [n for n in statements(text, str(file.relative_to(case.directory))) if n.name is not None]
    record["statements"] = results = []
    database = f"pydb_diff_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{database}"')
        try:
            url = psycopg.conninfo.make_conninfo(server_url, dbname=database)
            # A bound on every statement: a schema or statement must never hang the run.
            with psycopg.connect(url, autocommit=True, options="-c statement_timeout=20s") as conn:
                record["schema_postgres"] = apply_schema(conn, ddl)
                types = pg_type_names(conn)
                enums = {row[0] for row in conn.execute("SELECT oid FROM pg_type WHERE typtype = 'e'")}
                rpcs, set_aside = _describe_all(conn, queries, types, enums, results)
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
    _run_plugin(case, schema, rpcs, record)
    catalog, _ = build_catalog(schema)
    for rpc, result in set_aside:
        result["mismatches"] = _compare(catalog, rpc)


def apply_schema(conn: psycopg.Connection[Any], ddl: list[str]) -> str | None:
    """The schema's statements one at a time in autocommit, as psql applies a file (CREATE INDEX
    CONCURRENTLY, VACUUM and a new enum value's first use each need a statement of their own);
    PostgreSQL's first error, or None. A `SET` of a parameter this server does not know (pg_dump
    of a newer server writes `SET transaction_timeout = 0`) is passed over, as psql goes on after it."""
    for sql in ddl:
        try:
            conn.execute(sql.encode())  # simple protocol: the statement as written
        except psycopg.Error as err:
            message = str(err).strip().split("\n")[0]
            if not (sql.lstrip()[:4].upper() == "SET " and "unrecognized configuration parameter" in message):
                return message
    return None


def _describe_all(
    conn: psycopg.Connection[Any], queries: list[Named], types: dict[int, str], enums: set[int], results: list[Any]
) -> tuple[list[tuple[Rpc, dict[str, Any]]], list[tuple[Rpc, dict[str, Any]]]]:
    """PostgreSQL's verdict and types per named query; the RPCs to build, and the statements set
    aside for their names."""
    rpcs: list[tuple[Rpc, dict[str, Any]]] = []
    set_aside: list[tuple[Rpc, dict[str, Any]]] = []
    names: Counter[str] = Counter()
    for query in queries:
        translated = translate(query.sql.rstrip().removesuffix(";"))
        result: dict[str, Any] = {"name": query.name, "command": query.command, "file": query.file}
        result |= {"line": query.line, "sql": query.sql}
        results.append(result)
        described = describe(conn, translated.pg_sql, types, enums)
        result["postgres"] = described.error
        result["postgres_params"] = described.params
        result["postgres_columns"] = described.columns
        names[query.name or ""] += 1
        base = query.name if query.name and IDENTIFIER.fullmatch(query.name) else "Query"
        rpc_name = base[0].upper() + base[1:] + (str(names[query.name or ""]) if names[query.name or ""] > 1 else "")
        rpc = Rpc(rpc_name, query.command or "", translated, described)
        reason = translated.unexpressible or UNEXPRESSIBLE_COMMANDS.get(query.command or "")
        if reason is None and query.command not in COMMANDS:
            reason = f"not a sqlc command: {query.command!r}"
        if reason is not None:
            result["status"], result["reason"] = "not_expressible", reason
            continue
        if described.error is None and (named := _unexpressible_names(translated, described)) is not None:
            # Set aside, but the analyzer's types and names are still compared with PostgreSQL's.
            result["status"], result["reason"], result["reason_detail"] = "not_expressible", *named
            set_aside.append((rpc, result))
            continue
        result["rpc"] = rpc_name
        rpcs.append((rpc, result))
    return rpcs, set_aside


def _unexpressible_names(translated: Translated, described: Described) -> tuple[str, str] | None:
    """(reason, detail) when a parameter or result column has a name no proto field can have."""
    columns = [name for name, _ in described.columns]
    if "?column?" in columns:
        return "a result column PostgreSQL names ?column? (a field needs an alias)", "?column?"
    bad = [n for n in [*translated.params, *columns] if not IDENTIFIER.fullmatch(n)]
    if bad:
        return "a name no proto field can have", bad[0]
    if len(set(columns)) != len(columns):
        duplicate = next(n for n in columns if columns.count(n) > 1)
        return "two result columns of one name (a message has one field per name)", duplicate
    return None


def _run_plugin(case: Case, schema: str, rpcs: list[tuple[Rpc, dict[str, Any]]], record: dict[str, Any]) -> None:
    for rpc, result in rpcs:
        result["status"] = "postgres_rejects" if rpc.described.error else "pending"
    pending = [(rpc, result) for rpc, result in rpcs if result["status"] == "pending"]
    # Statements PostgreSQL rejects go through the plugin too, one proto each (no types to build
    # fields from): caught or missed. Valid ones share one proto.
    batches: list[list[tuple[Rpc, dict[str, Any]]]] = [pending] if pending else []
    batches += [[(rpc, result)] for rpc, result in rpcs if result["status"] == "postgres_rejects"]
    schema_problems: list[str] | None = None
    for batch in batches:
        with tempfile.TemporaryDirectory() as tmp:
            package = "diff.c" + hashlib.sha1(case.id.encode()).hexdigest()[:10]
            (Path(tmp) / "schema.sql").write_text(schema, encoding="utf-8")
            (Path(tmp) / "query.proto").write_text(build_proto(package, [rpc for rpc, _ in batch]), encoding="utf-8")
            try:
                descriptors = compile_protos(Path(tmp), ["query.proto"])
            except RuntimeError as err:  # the proto this script built: its bug, recorded
                for _, result in batch:
                    result["plugin"] = {"internal_error": f"harness: {err}"}
                continue
            outcome = run_plugin(descriptors, ["query.proto"], parameter=f"proto_path={tmp}")
        text = outcome.error + "\n" + outcome.warnings
        if "internal error" in text or "Traceback" in text:
            for _, result in batch:
                result["plugin"] = {"internal_error": text[-2000:]}
            continue
        diagnostics = [(m["path"], m["message"]) for m in DIAGNOSTIC.finditer(outcome.error)]
        schema_problems = [message for path, message in diagnostics if path.endswith(".sql")]
        for rpc, result in batch:
            prefix = f"{rpc.name}: "
            errors = [m.removeprefix(prefix) for path, m in diagnostics if m.startswith(prefix)]
            result["plugin"] = {"errors": errors, "schema_errors": schema_problems}
    catalog, catalog_problems = build_catalog(schema)
    # When every statement was set aside nothing went through the plugin: its catalog still
    # says whether it takes the schema (a case whose only flaw is the schema).
    if schema_problems is None:
        schema_problems = [p.message for p in catalog_problems if p.severity == "error"]
    record["schema_plugin"] = schema_problems
    for rpc, result in rpcs:
        plugin = result.get("plugin", {})
        rejected = bool(plugin.get("errors") or plugin.get("schema_errors") or plugin.get("internal_error"))
        if result["status"] == "postgres_rejects":
            # Its proto was built without PostgreSQL's types: only a statement or schema error counts.
            statement_errors = [e for e in plugin.get("errors", []) if not _is_binding(e)]
            caught = bool(statement_errors or plugin.get("schema_errors"))
            result["status"] = "caught" if caught else "missed"
        elif rejected:
            result["status"] = "rejected"
            result["cause"], result["class"] = _cause(plugin, rpc.translated.pydb_sql, schema)
        else:
            result["status"] = "accepted"
            result["mismatches"] = _compare(catalog, rpc)


def _is_binding(message: str) -> bool:
    """A message about the proto binding (types, names, nullability), not about the SQL."""
    return any(marker in message for marker in MISMATCH_MARKERS) or "may be NULL" in message


def _unmapped_type(message: str) -> str | None:
    """The pg type of `result column x is T, which does not fit` or `... where Postgres expects T`
    when the type table has no entry for it (nor for its element type)."""
    for before, after in ((" is ", ", which does not fit"), ("where Postgres expects ", " (see")):
        if before in message and after in message:
            pg = message.split(after, 1)[0].rsplit(before, 1)[-1].removesuffix("[]")
            return pg if pg not in TYPES else None
    return None


def _cause(plugin: dict[str, Any], sql: str, schema: str) -> tuple[str, str]:
    if plugin.get("internal_error"):
        return "internal error", "internal error"
    if plugin.get("schema_errors"):
        return "schema refused", message_class(plugin["schema_errors"][0], schema)
    first = plugin["errors"][0]
    if "may be NULL" in first and "(repeated " in first:
        return "a nullable array column: a repeated field cannot tell NULL from empty", message_class(first, sql)
    if "may be NULL" in first:
        return "nullability", message_class(first, sql)
    if any(marker in first for marker in DELIBERATE):
        return "stricter than PostgreSQL on purpose (it fails only at run time)", message_class(first, sql)
    if first.startswith("unsupported statement"):
        return "a statement kind pydb does not run", first.split(":")[0]
    unmapped = _unmapped_type(first)
    if unmapped is not None:
        return "a pg type with no proto mapping (bind/typemap.py)", unmapped
    if _is_binding(first):
        return "type or name mismatch vs PostgreSQL", message_class(first, sql)
    return "statement error", message_class(first, sql)


def _compare(catalog: Catalog, rpc: Rpc) -> list[str]:
    """Where the analyzer's inferred parameter types, column names and types differ from PostgreSQL's."""
    analysis, problems = analyze(rpc.translated.pydb_sql, catalog, frozenset(rpc.translated.nullable))
    # Two columns of one name is a proto limit the analyzer rightly reports; the types still compare.
    errors = [p.message for p in problems if p.severity == "error" and "appears more than once" not in p.message]
    if analysis is None or errors:
        return [f"analyzer error: {errors[0] if errors else 'no analysis'}"]
    ours_params, ours_columns = analyzer_signature(analysis)
    pg_params = dict(zip(rpc.translated.params, rpc.described.params, strict=True))
    out = [f"@{n}: pydb {ours_params.get(n)}, PostgreSQL {t}" for n, t in pg_params.items() if ours_params.get(n) != t]
    padded = ours_columns + [("", "")] * len(rpc.described.columns)
    for (name, pg), ours in zip(rpc.described.columns, padded, strict=False):
        if ours != (name, pg):
            out.append(f"column {ours[0]} {ours[1]}: PostgreSQL {name} {pg}")
    return out


def run(root: Path, server_url: str, jobs: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    started = time.monotonic()
    cases, skipped = discover(root)
    if jobs <= 1:
        records = [run_case(case, server_url) for case in cases]
    else:
        records = run_parallel(cases, server_url, jobs)
    return summarize(records, skipped, time.monotonic() - started), records


def run_parallel(cases: list[Case], server_url: str, jobs: int) -> list[dict[str, Any]]:
    """Cases in worker processes (the plugin is CPU-bound Python; the harness redirects stderr). A
    worker that dies (a crash in native code) breaks the pool: the cases it left unfinished are
    then run one process each, so the one that crashes is recorded and the others still run."""
    done: dict[str, dict[str, Any]] = {}
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(run_case, case, server_url): case for case in cases}
        for future in concurrent.futures.as_completed(futures):
            with contextlib.suppress(concurrent.futures.process.BrokenProcessPool):
                done[futures[future].id] = future.result()
    for case in cases:
        if case.id not in done:
            with concurrent.futures.ProcessPoolExecutor(max_workers=1) as alone:
                try:
                    done[case.id] = alone.submit(run_case, case, server_url).result()
                except concurrent.futures.process.BrokenProcessPool:
                    done[case.id] = {"case": case.id, "duplicates": case.duplicates, "harness_error": "worker died"}
                    done[case.id]["expects_failure"] = case.expects_failure
    return [done[case.id] for case in cases]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cases", type=Path, help="a directory of sqlc-style cases")
    parser.add_argument(
        "--database-url", default=os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    )
    parser.add_argument("--json", type=Path, help="write the summary and every statement's result here")
    parser.add_argument("--text", type=Path, help="write the printed summary here too")
    parser.add_argument("--docs", action="store_true", help="rewrite the figures in docs/diagnostics.md")
    parser.add_argument("--jobs", type=int, default=3, help="cases in flight at once (default 3)")
    args = parser.parse_args(argv)
    summary, records = run(args.cases, args.database_url, args.jobs)
    text = render_text(summary, records)
    print(text, end="")
    if args.text:
        args.text.write_text(text, encoding="utf-8")
    if args.docs:
        write_docs(render_markdown(summary, records))
    if args.json:
        args.json.write_text(
            json.dumps({"summary": summary, "cases": records}, indent=1, default=list), encoding="utf-8"
        )
    return 1 if summary["internal_errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
