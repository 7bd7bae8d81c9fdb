"""The catalog differential (tests/catalog_oracle.py) on real applications' migration chains: each
sqlc case's schema (a file or a migrations directory, read as the plugin reads it) applied file
by file to a scratch database and to the catalog, compared after every file.

Printed per application: files, files where both agree (same verdict; when PostgreSQL applies
the file, the same objects), and the differences by object kind, with the first of each.

What a file is, and where a chain stops (the counting rules, benchmarks/differential_results.md):
- sqlc reads a `schema:` entry's DDL and ignores its queries, and some applications list their
  query files (or files mixing tables and queries) as schema. A statement under an sqlc query
  marker (`-- name: X :one`) is a query, not a migration: it is left out on both sides, and a
  file left with no statement is not part of the chain (no migration tool would apply it).
- A migration tool stops at the first migration the server refuses; the files after it are never
  applied. The chain is compared up to the first file PostgreSQL or the catalog refuses: that
  file counts as agreeing when both refuse it and, after it, both hold the same objects (the
  chain goes on); when both refuse it but the objects differ (PostgreSQL leaves out the object
  a refused statement would make, the catalog may keep it), it counts as agreeing and the chain
  stops; when only one side refuses it, it is a disagreement and the chain stops. The files not
  reached are counted apart ("not reached"), neither agreeing nor disagreeing.

    .venv/bin/python benchmarks/catalog_differential.py CASES_DIR
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import uuid
from collections import Counter, defaultdict
from pathlib import Path

import psycopg

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks"))

from differential_apps import app_of  # noqa: E402
from pydb.plugin.sql.schema.source import read_files  # noqa: E402
from sqlc_cases import discover  # noqa: E402
from support.catalog_oracle import pg_statements, run_chain  # noqa: E402
from support.pg import with_dbname  # noqa: E402

#: sqlc's query marker: `-- name: GetUser :one`.
QUERY_MARKER = re.compile(r"^\s*--\s*name:\s*\w+\s*:\w+", re.MULTILINE)


def migration_text(sql: str) -> str:
    """The file without the statements under an sqlc query marker (they are queries)."""
    if not QUERY_MARKER.search(sql):
        return sql
    kept, pos = [], 0
    for statement in pg_statements(sql):
        start = sql.find(statement, pos)
        start = pos if start < 0 else start
        if not QUERY_MARKER.search(sql[pos : start + len(statement)]):
            kept.append(statement if statement.rstrip().endswith(";") else statement + ";")
        pos = start + len(statement)
    return "\n".join(kept)


def chain_of(paths: list[Path]) -> list[tuple[str, str]]:
    files = [(f.path, migration_text(f.sql)) for path in paths for f in (read_files(path) if path.exists() else [])]
    return [(path, sql) for path, sql in files if sql.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cases", type=Path)
    parser.add_argument(
        "--database-url", default=os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    )
    args = parser.parse_args(argv)
    cases, _ = discover(args.cases)
    files: Counter[str] = Counter()
    agree: Counter[str] = Counter()
    unreached: Counter[str] = Counter()
    kinds: dict[str, Counter[str]] = defaultdict(Counter)
    first: dict[str, str] = {}
    seen: set[tuple[str, ...]] = set()
    for case in cases:
        chain = chain_of(case.schema)
        signature = tuple(path for path, _ in chain)
        if not chain or signature in seen:  # several packages of one config share a schema
            continue
        seen.add(signature)
        app = app_of(case.id)
        name = f"pydb_catdiff_{uuid.uuid4().hex[:12]}"
        try:
            with psycopg.connect(args.database_url, autocommit=True) as admin:
                admin.execute(f'CREATE DATABASE "{name}"')
                try:
                    steps = run_chain(with_dbname(args.database_url, name), chain)
                finally:
                    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        except psycopg.OperationalError as err:  # the server (shared) refused a connection
            kinds[app]["not run (server)"] += 1
            first.setdefault(f"{app} not run (server)", str(err).split("\n")[0])
            continue
        for n, step in enumerate(steps):
            files[app] += 1
            same_verdict = bool(step.pg_errors) == bool(step.catalog_errors)
            refused = bool(step.pg_errors or step.catalog_errors)
            if same_verdict and (step.pg_errors or not step.differences):
                agree[app] += 1
                if refused and step.differences:  # both refused; the objects differ after it
                    unreached[app] += len(steps) - n - 1
                    files[app] += len(steps) - n - 1
                    break
                continue
            if not same_verdict:
                kinds[app]["verdict"] += 1
                first.setdefault(
                    f"{app} verdict", f"{step.path}: PostgreSQL {step.pg_errors[:1]}, catalog {step.catalog_errors[:1]}"
                )
            for difference in step.differences:
                kind = difference.split(" ", 1)[0]
                kinds[app][kind] += 1
                first.setdefault(f"{app} {kind}", f"{step.path}: {difference}")
            if refused:  # the migration tool stops here
                unreached[app] += len(steps) - n - 1
                files[app] += len(steps) - n - 1
                break
    print("| application | migration files | agree | not reached | differences by kind |")
    print("|---|---|---|---|---|")
    for app in sorted(files, key=str.lower):
        detail = ", ".join(f"{k} {n}" for k, n in sorted(kinds[app].items())) or "-"
        print(f"| {app} | {files[app]} | {agree[app]} | {unreached[app]} | {detail} |")
    total, reached = sum(files.values()), sum(files.values()) - sum(unreached.values())
    print(f"| **all** | {total} | {sum(agree.values())} of {reached} reached | {sum(unreached.values())} | |")
    for key, text in sorted(first.items()):
        print(f"  {key}: {text[:300]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
