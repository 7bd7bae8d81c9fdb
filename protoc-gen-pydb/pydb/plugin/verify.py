"""`protoc-gen-pydb verify`: the protos and schema files against a live database (DATABASE_URL).

For CI before a deploy. Two checks, both read-only (every statement is PREPAREd inside a
transaction that is rolled back):
1. the live schema against the schema files: every table and column the files declare, with its
   type and NOT NULL, in the database; and no table or column the database has in the files'
   schemas that the files lack. A readable drift report, table by table.
2. every `(pydb.v1.sql)` statement PREPAREd on the database: PostgreSQL's parameter and result
   types (libpq's describe) compared with what the compiler inferred offline.
Exit status 0 when all agree, 1 on any difference.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import psycopg

from .bind.compiler import FileCompiler, dedupe, statement
from .check import Checker, each_statement, report, virtual_name
from .diagnostics import Diagnostic
from .sql import Analysis, Catalog

_SYSTEM = ("pg_catalog", "information_schema", "pg_toast")


@dataclass(frozen=True)
class LiveColumn:
    type: str
    not_null: bool


def type_names(conn: psycopg.Connection[tuple[object, ...]]) -> dict[int, str]:
    """OID -> the compiler's spelling: `int4`, `text[]`, `app.job_state` (schema types qualified)."""
    rows = conn.execute(
        "SELECT t.oid, t.typname, t.typelem, n.nspname, t.typtype FROM pg_type t "
        "JOIN pg_namespace n ON n.oid = t.typnamespace"
    ).fetchall()
    raw = {int(str(r[0])): (str(r[1]), int(str(r[2])), str(r[3]), str(r[4])) for r in rows}

    def spell(oid: int) -> str:
        name, elem, schema, kind = raw[oid]
        if name.startswith("_") and elem:
            return spell(elem) + "[]"
        return f"{schema}.{name}" if kind in ("e", "c", "d") else name

    return {oid: spell(oid) for oid in raw}


def live_tables(
    conn: psycopg.Connection[tuple[object, ...]], names: dict[int, str]
) -> dict[str, dict[str, LiveColumn]]:
    rows = conn.execute(
        "SELECT n.nspname, c.relname, a.attname, a.atttypid, a.attnotnull FROM pg_attribute a "
        "JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relkind IN ('r', 'p', 'v', 'm') AND a.attnum > 0 AND NOT a.attisdropped "
        "AND n.nspname <> ALL (%s) ORDER BY n.nspname, c.relname, a.attnum",
        (list(_SYSTEM),),
    ).fetchall()
    out: dict[str, dict[str, LiveColumn]] = {}
    for schema, table, column, oid, not_null in rows:
        out.setdefault(f"{schema}.{table}", {})[str(column)] = LiveColumn(names[int(str(oid))], bool(not_null))
    return out


def _spellings(t: object) -> set[str]:
    return {str(t), getattr(t, "pg_name", str(t)), getattr(t, "described_name", str(t))}


def schema_drift(catalog: Catalog, live: dict[str, dict[str, LiveColumn]]) -> list[str]:
    """What differs between the schema files' tables and the database's, one line each."""
    out: list[str] = []
    declared = {name: t for name, t in catalog.tables.items() if t.schema not in _SYSTEM}
    for name in sorted(declared):
        table = declared[name]
        columns = live.get(name)
        if columns is None:
            out.append(f"{name}: in the schema files, not in the database")
            continue
        for col in table.columns:
            found = columns.get(col.name)
            if found is None:
                out.append(f"{name}.{col.name}: in the schema files, not in the database (dropped?)")
                continue
            if found.type not in _spellings(col.type):
                out.append(f"{name}.{col.name}: type {col.type} in the schema files, {found.type} in the database")
            if table.kind == "table" and found.not_null != col.not_null:
                files, db = ("NOT NULL", "nullable") if col.not_null else ("nullable", "NOT NULL")
                out.append(f"{name}.{col.name}: {files} in the schema files, {db} in the database")
        for extra in sorted(set(columns) - {c.name for c in table.columns}):
            out.append(f"{name}.{extra}: in the database, not in the schema files")
    schemas = {t.schema for t in declared.values()}
    for name in sorted(set(live) - set(declared)):
        if name.split(".", 1)[0] in schemas:
            out.append(f"{name}: in the database, not in the schema files")
    return out


def prepared_signature(
    conn: psycopg.Connection[tuple[object, ...]], sql: str, analysis: Analysis, names: dict[int, str]
) -> tuple[list[str], list[tuple[str, str]]] | str:
    """PostgreSQL's parameter types (in @param order) and (name, type) per column, or its error."""
    # As written: the analyzer's columns are the statement's own (a whole-row reference is one).
    text, order = statement(sql, analysis).numbered(expanded=False)
    pgconn = conn.pgconn
    pgconn.exec_(b"BEGIN")
    try:
        result = pgconn.prepare(b"pydb_verify", text.encode())
        if result.status != psycopg.pq.ExecStatus.COMMAND_OK:
            return (result.error_message or b"").decode().strip().split("\n")[0]
        described = pgconn.describe_prepared(b"pydb_verify")
        params = {name: names.get(described.param_type(i), "?") for i, name in enumerate(order)}
        columns = [
            ((described.fname(i) or b"").decode(), names.get(described.ftype(i), "?")) for i in range(described.nfields)
        ]
        return [params[p.name] for p in analysis.params if p.name in params], columns
    finally:
        pgconn.exec_(b"ROLLBACK")
        pgconn.exec_(b"DEALLOCATE pydb_verify")  # outlives the transaction; an error if absent, ignored


def statement_mismatches(live: tuple[list[str], list[tuple[str, str]]] | str, analysis: Analysis) -> list[str]:
    if isinstance(live, str):
        return [f"PostgreSQL refuses it on the live database: {live}"]
    out: list[str] = []
    params, columns = live
    for p, db in zip((p for p in analysis.params if p.spans), params, strict=False):
        if p.type is not None and db not in _spellings(p.type):
            out.append(f"parameter @{p.name}: compiled as {p.type}, the live database infers {db}")
    ours = [(c.name, c.type) for c in analysis.columns or []]
    if len(ours) != len(columns):
        out.append(f"{len(ours)} result columns compiled, {len(columns)} on the live database")
    for (name, t), (db_name, db_type) in zip(ours, columns, strict=False):
        if t is not None and db_type not in _spellings(t):
            out.append(f"result column {name}: compiled as {t}, the live database gives {db_type}")
        elif db_name != name:
            out.append(f"result column {name}: the live database names it {db_name}")
    return out


def verify(checker: Checker, targets: Sequence[str], url: str) -> tuple[list[str], list[Diagnostic]]:
    """(schema drift lines, statement diagnostics) for `targets` against the database at `url`."""
    files, problems = checker.parse(targets)
    if files is None:
        return [], problems
    drift: list[str] = []
    diagnostics: list[Diagnostic] = []
    with psycopg.connect(url, autocommit=True) as conn:
        names = type_names(conn)
        live = live_tables(conn, names)
        seen: set[int] = set()
        for item in each_statement(checker, files, targets):
            if isinstance(item, FileCompiler):
                diagnostics += [d for d in item.diagnostics if d.severity == "error"]
                for catalog, _ in item.catalogs.values():
                    if catalog is not None and id(catalog) not in seen:
                        seen.add(id(catalog))
                        drift += schema_drift(catalog, live)
                continue
            if item.analysis is None or any(p.severity == "error" for p in item.problems):
                item.report("does not compile; run protoc-gen-pydb check")
                continue
            for text in statement_mismatches(prepared_signature(conn, item.sql, item.analysis, names), item.analysis):
                item.report(text)
    return drift, dedupe(diagnostics)  # a statement's variants (optional blocks) report once


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="protoc-gen-pydb verify",
        description="Compare the schema files and every (pydb.v1.sql) statement with a live database.",
    )
    parser.add_argument("protos", nargs="+")
    parser.add_argument("-I", "--proto_path", action="append", default=[], dest="includes")
    parser.add_argument("--schema", help="the default schema, as for check")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"), help="default: $DATABASE_URL")
    args = parser.parse_args(argv)
    if not args.database_url:
        print("protoc-gen-pydb verify: set DATABASE_URL or pass --database-url", file=sys.stderr)
        return 2
    includes = tuple(args.includes) or (".",)
    checker = Checker(includes, args.schema)
    try:
        drift, diagnostics = verify(checker, [virtual_name(p, includes) for p in args.protos], args.database_url)
    except psycopg.OperationalError as err:
        print(f"protoc-gen-pydb verify: cannot connect: {str(err).strip()}", file=sys.stderr)
        return 2
    if drift:
        print("schema drift (schema files vs the live database):")
        print("\n".join(f"  {line}" for line in drift))
    if diagnostics:
        print(report(diagnostics))
    if not drift and not diagnostics:
        print("the live database matches the schema files and every statement")
        return 0
    return 1
