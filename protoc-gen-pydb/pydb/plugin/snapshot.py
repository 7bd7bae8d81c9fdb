"""`protoc-gen-pydb snapshot`: the schema as PostgreSQL itself applies it, for the plugin to read.

    protoc-gen-pydb snapshot db/migrations -o db/schema.snapshot.sql     # write it
    protoc-gen-pydb snapshot db/migrations -o db/schema.snapshot.sql --check   # CI: is it current?

The schema (a file or a migrations directory, read in the order and with the Up sections the
plugin reads: docs/workflow.md) is applied statement by statement, as psql applies it, to a
throwaway database created on the server at `--database-url` (default: DATABASE_URL) and
dropped afterwards; then that database's `pg_dump --schema-only --no-owner --no-privileges` is
written out. The escape hatch for DDL the plugin cannot apply offline (procedural code: a loop,
EXECUTE in a DO block or function): point the plugin's `schema=` at the snapshot instead.

The dump is made stable so it can be committed and compared: the lines naming the server's and
pg_dump's versions and psql's `\\restrict` / `\\unrestrict` lines (a random key per run) are left
out. `--check` compares the file with a fresh snapshot and exits 1 with a unified diff when they
differ. Exit status 2 when PostgreSQL refuses the schema (each error as path:line:col: error:
message) or the server or pg_dump cannot be reached.
"""

from __future__ import annotations

import argparse
import difflib
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from .sql import SchemaFile, psql_statements, read_files

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
#: Lines of a dump that change from run to run or from one minor version to the next.
_UNSTABLE = ("-- Dumped from database version", "-- Dumped by pg_dump version", "\\restrict", "\\unrestrict")


class SnapshotError(Exception):
    """The schema or the server refused; the message is for the user."""


def _position(file: SchemaFile, offset: int) -> str:
    line = file.text.count("\n", 0, offset) + 1
    col = offset - (file.text.rfind("\n", 0, offset) + 1) + 1
    return f"{file.path}:{line}:{col}"


def apply(url: str, files: Sequence[SchemaFile]) -> None:
    """Every file's statements in order, autocommit; the first error stops (psql's ON_ERROR_STOP)."""
    with psycopg.connect(url, autocommit=True) as conn:
        for file in files:
            for offset, statement in psql_statements(file.sql):
                if not statement.strip():
                    continue
                try:
                    conn.execute(statement.encode())
                except psycopg.Error as err:
                    where = offset + max(int(err.diag.statement_position or 1) - 1, 0)
                    leading = len(statement) - len(statement.lstrip())
                    message = str(err).split("\n")[0]
                    raise SnapshotError(f"{_position(file, where + leading)}: error: {message}") from None


def normalize(dump: str) -> str:
    lines = [line for line in dump.splitlines() if not line.startswith(_UNSTABLE)]
    out: list[str] = []
    for line in lines:  # the blank lines the dropped ones leave: at most two in a row, as pg_dump writes
        if line == "" and len(out) >= 2 and out[-1] == "" and out[-2] == "":
            continue
        out.append(line)
    return "\n".join(out).strip("\n") + "\n"


def with_dbname(url: str, name: str) -> str:
    parts = {k: str(v) for k, v in conninfo_to_dict(url).items() if v is not None}
    parts["dbname"] = name
    return make_conninfo("", **parts)


def snapshot(schema: Path, url: str, pg_dump: str = "pg_dump") -> str:
    """The normalized `pg_dump --schema-only` of `schema` applied to a throwaway database."""
    files = read_files(schema)
    if not files:
        raise SnapshotError(f"{schema}: no .sql file to apply (see docs/workflow.md)")
    name = f"pydb_snapshot_{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    except psycopg.Error as err:
        raise SnapshotError(f"cannot create a throwaway database on the server: {str(err).strip()}") from None
    scratch = with_dbname(url, name)
    try:
        apply(scratch, files)
        done = subprocess.run(
            [pg_dump, "--schema-only", "--no-owner", "--no-privileges", "--dbname", scratch],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SnapshotError(f"pg_dump failed: {done.stderr.strip()}")
        return normalize(done.stdout)
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="protoc-gen-pydb snapshot",
        description="Apply a schema file or migrations directory to a throwaway database and write its "
        "pg_dump --schema-only, stable, for the plugin to read (docs/workflow.md).",
    )
    parser.add_argument("schema", type=Path, help="a .sql file or a migrations directory")
    parser.add_argument("-o", "--output", type=Path, help="the snapshot file (default: standard output)")
    parser.add_argument("--check", action="store_true", help="exit 1 when --output differs from a fresh snapshot")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL", DEFAULT_URL))
    parser.add_argument("--pg-dump", default=shutil.which("pg_dump") or "pg_dump", help="the pg_dump to run")
    args = parser.parse_args(argv)
    if args.check and args.output is None:
        parser.error("--check needs --output (the committed snapshot)")
    if not args.schema.exists():
        print(f"protoc-gen-pydb snapshot: {args.schema} does not exist", file=sys.stderr)
        return 2
    try:
        text = snapshot(args.schema, args.database_url, args.pg_dump)
    except (SnapshotError, OSError, psycopg.Error) as err:
        print(str(err).strip(), file=sys.stderr)
        return 2
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current == text:
            return 0
        sys.stdout.writelines(
            difflib.unified_diff(
                current.splitlines(keepends=True), text.splitlines(keepends=True), str(args.output), "snapshot"
            )
        )
        print(
            f"{args.output} is not the schema PostgreSQL applies: run protoc-gen-pydb snapshot {args.schema} "
            f"-o {args.output}",
            file=sys.stderr,
        )
        return 1
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text, encoding="utf-8")
    return 0
