"""The catalog differential (tests/catalog_oracle.py) on real applications' migration chains: each
sqlc case's schema (a file or a migrations directory, read as the plugin reads it) applied file
by file to a scratch database and to the catalog, compared after every file.

Printed per application: files, files where both agree (same verdict; when PostgreSQL applies
the file, the same objects), and the differences by object kind, with the first of each.

    .venv/bin/python benchmarks/catalog_differential.py CASES_DIR
"""

from __future__ import annotations

import argparse
import os
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
from sql_differential import discover  # noqa: E402
from support.catalog_oracle import run_chain  # noqa: E402
from support.pg import with_dbname  # noqa: E402


def chain_of(paths: list[Path]) -> list[tuple[str, str]]:
    return [(f.path, f.sql) for path in paths for f in (read_files(path) if path.exists() else [])]


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
        for step in steps:
            files[app] += 1
            same_verdict = bool(step.pg_errors) == bool(step.catalog_errors)
            if same_verdict and (step.pg_errors or not step.differences):
                agree[app] += 1
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
    print("| application | migration files | agree | differences by kind |")
    print("|---|---|---|---|")
    for app in sorted(files, key=str.lower):
        detail = ", ".join(f"{k} {n}" for k, n in sorted(kinds[app].items())) or "-"
        print(f"| {app} | {files[app]} | {agree[app]} | {detail} |")
    print(f"| **all** | {sum(files.values())} | {sum(agree.values())} | |")
    for key, text in sorted(first.items()):
        print(f"  {key}: {text[:300]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
