"""Known-bad SQL: real applications' statements and schemas broken the way people break them, and
how many of those PostgreSQL refuses the plugin catches (issue 21: "known-bad statements still
caught >= 95%").

On a corpus of benchmarks/sqlc_corpus.py (one directory per application), for every case whose
schema both PostgreSQL and the plugin apply:

- statements: each named query PostgreSQL prepares and the plugin accepts is mutated once per
  kind where the kind applies (the token chosen by a seeded random, so runs repeat): a column
  name misspelt, a table name misspelt, a column swapped for one of a table the statement does
  not read, a function name misspelt, an enum label misspelt. A mutant PostgreSQL refuses
  (PREPARE, then EXPLAIN EXECUTE as the planner checks more) is known-bad: caught when the
  statement analyzer reports an error. A mutant PostgreSQL prepares is not known-bad; the plugin
  refusing it is counted too (a false refusal).
- schemas: up to two mutants per kind: a column type misspelt, a referenced table misspelt, a
  key or index column misspelt. Known-bad when PostgreSQL refuses the mutated statement after the
  ones before it; caught when the plugin reports a schema error.

    .venv/bin/python benchmarks/mutation_differential.py CASES_DIR [--json out.json]

Third-party SQL stays outside the repository: only the figures go into benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import sys
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from pglast.parser import ParseError, scan

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks"))

from differential_apps import app_of  # noqa: E402
from pydb.plugin.sql.analyzer.analyzer import analyze  # noqa: E402
from pydb.plugin.sql.catalog.model import Catalog  # noqa: E402
from pydb.plugin.sql.frontend import build_catalog  # noqa: E402
from sql_differential import (  # noqa: E402
    COMMANDS,
    UNEXPRESSIBLE_COMMANDS,
    Case,
    Named,
    _read_all,
    apply_schema,
    describe,
    discover,
    schema_text,
    sql_files,
    statements,
    translate,
)

STATEMENT_KINDS = ("column_typo", "table_typo", "column_swap", "function_typo", "enum_label_typo")
SCHEMA_KINDS = ("type_typo", "reference_typo", "key_column_typo")
TYPE_WORDS = {
    "text", "uuid", "timestamptz", "jsonb", "json", "int4", "int8", "int2", "bytea", "citext", "inet",
    "integer", "bigint", "smallint", "boolean", "varchar", "timestamp", "numeric", "date", "bool",
}  # fmt: skip
Token = Any


def misspell(word: str) -> str:
    return word[:-1] if len(word) > 4 else word + "x"


def _tokens(sql: str) -> list[Token]:
    try:
        return list(scan(sql))
    except ParseError:
        return []


def _replace(sql: str, token: Token, new: str) -> str:
    return sql[: token.start] + new + sql[token.end + 1 :]


def _word(sql: str, token: Token) -> str:
    return sql[token.start : token.end + 1]


class Schema:
    """What the mutations draw on: the relations, their columns, the enum labels."""

    def __init__(self, catalog: Catalog) -> None:
        self.tables = {t.name: {c.name for c in t.columns} for t in catalog.tables.values()}
        self.columns = {c for cols in self.tables.values() for c in cols}
        self.labels = {label for labels in catalog.enums.values() for label in labels}


def statement_mutants(sql: str, schema: Schema, rng: random.Random) -> dict[str, str]:
    tokens = _tokens(sql)
    idents = [t for t in tokens if t.name == "IDENT"]
    out: dict[str, str] = {}

    def pick(kind: str, candidates: list[Token], new: Callable[[Token], str | None]) -> None:
        rng.shuffle(candidates)
        for token in candidates:
            replacement = new(token)
            if replacement is not None:
                out[kind] = _replace(sql, token, replacement)
                return

    named = {_word(sql, t).strip('"') for t in idents}
    read = [t for t in schema.tables if t in named]
    in_scope = {c for t in read for c in schema.tables[t]}
    followed_by_paren = {id(t) for t, nxt in itertools.pairwise(tokens) if t.name == "IDENT" and nxt.name == "ASCII_40"}
    columns = [t for t in idents if _word(sql, t) in schema.columns and id(t) not in followed_by_paren]
    pick("column_typo", list(columns), lambda t: misspell(_word(sql, t)))
    tables = [t for t in idents if _word(sql, t) in schema.tables and _word(sql, t) not in schema.columns]
    pick("table_typo", tables, lambda t: misspell(_word(sql, t)))
    elsewhere = sorted(schema.columns - in_scope - named)
    if elsewhere:
        pick("column_swap", list(columns), lambda t: rng.choice(elsewhere))
    functions = [t for t in idents if id(t) in followed_by_paren and _word(sql, t) not in schema.tables]
    pick("function_typo", functions, lambda t: misspell(_word(sql, t)))
    labels = [t for t in tokens if t.name == "SCONST" and _word(sql, t)[1:-1] in schema.labels]
    pick("enum_label_typo", labels, lambda t: "'" + misspell(_word(sql, t)[1:-1]) + "'")
    return out


def schema_mutants(ddl: list[str], schema: Schema, rng: random.Random) -> list[tuple[str, int, str]]:
    """(kind, statement index, mutated statement), up to two per kind."""
    found: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for i, sql in enumerate(ddl):
        tokens = _tokens(sql)
        words = [_word(sql, t).lower() for t in tokens]
        head = " ".join(words[:3])
        if head.startswith("create table"):
            for j, t in enumerate(tokens[3:], 3):
                if words[j] in TYPE_WORDS and tokens[j - 1].name == "IDENT":
                    found["type_typo"].append((i, _replace(sql, t, words[j] + "x")))
        for j, t in enumerate(tokens[1:], 1):
            if words[j - 1] == "references" and t.name == "IDENT":
                found["reference_typo"].append((i, _replace(sql, t, misspell(_word(sql, t)))))
        keyed = head.startswith(("create index", "create unique index")) or any(w in ("key", "unique") for w in words)
        if keyed:
            depth = 0
            for j, t in enumerate(tokens):
                depth += t.name == "ASCII_40"
                depth -= t.name == "ASCII_41"
                after_key = j >= 2 and words[j - 1] == "(" and words[j - 2] in ("key", "unique", "index")
                on_index = head.startswith(("create index", "create unique index")) and depth == 1
                if t.name == "IDENT" and _word(sql, t) in schema.columns and (after_key or on_index):
                    found["key_column_typo"].append((i, _replace(sql, t, misspell(_word(sql, t)))))
    out = []
    for kind in SCHEMA_KINDS:
        choices = found.get(kind, [])
        rng.shuffle(choices)
        out += [(kind, i, sql) for i, sql in choices[:2]]
    return out


def _errors(sql: str, catalog: Catalog) -> list[str] | None:
    """The analyzer's errors for a statement, None when it crashed."""
    try:
        _, problems = analyze(sql, catalog)
    except Exception:
        return None
    return [p.message for p in problems if p.severity == "error"]


def _queries(case: Case) -> list[Named]:
    out: list[Named] = []
    for path in case.queries:
        for file in sql_files(path):
            text = file.read_text(encoding="utf-8", errors="replace")
            out += [n for n in statements(text, str(file)) if n.name is not None]
    return [q for q in out if q.command in COMMANDS and q.command not in UNEXPRESSIBLE_COMMANDS]


def run_case(case: Case, url: str, tally: dict[str, Counter[str]], missed: list[dict[str, str]]) -> None:
    ddl = [
        n.sql
        for path in case.schema
        for text in _read_all(path)
        for n in statements(schema_text(text), str(path))
        if n.name is None  # a named query in a schema directory is a query, as sql_differential.py reads it
    ]
    ddl = [sql for sql in ddl if sql.strip()]
    source = "\n".join(sql + "\n;" for sql in ddl)
    catalog, problems = build_catalog(source)
    if any(p.severity == "error" for p in problems):
        tally["cases"]["plugin refuses the schema"] += 1
        return
    schema = Schema(catalog)
    rng = random.Random(case.id)
    name = f"pydb_mut_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            scratch = psycopg.conninfo.make_conninfo(url, dbname=name)
            with psycopg.connect(scratch, autocommit=True, options="-c statement_timeout=20s") as conn:
                if apply_schema(conn, ddl) is not None:
                    tally["cases"]["PostgreSQL refuses the schema"] += 1
                    return
                tally["cases"]["run"] += 1
                types = {oid: str(n) for oid, n in conn.execute("SELECT oid, typname FROM pg_type")}
                for query in _queries(case):
                    translated = translate(query.sql.rstrip().removesuffix(";"))
                    if translated.unexpressible or describe(conn, translated.pg_sql, types, set()).error:
                        continue
                    if _errors(translated.pydb_sql, catalog) != []:
                        continue  # the plugin refuses the valid statement: not a base to mutate
                    tally["statements"]["valid bases"] += 1
                    for kind, mutant in statement_mutants(query.sql, schema, rng).items():
                        t = translate(mutant.rstrip().removesuffix(";"))
                        if t.unexpressible:
                            continue
                        pg_error = describe(conn, t.pg_sql, types, set()).error
                        ours = _errors(t.pydb_sql, catalog)
                        if pg_error is None:
                            tally[kind]["PostgreSQL accepts"] += 1
                            tally[kind]["plugin refuses what PostgreSQL accepts"] += bool(ours)
                            continue
                        tally[kind]["known-bad"] += 1
                        tally[kind]["caught"] += bool(ours)
                        tally[kind]["crash"] += ours is None
                        if not ours:
                            missed.append({"case": case.id, "kind": kind, "postgres": pg_error, "sql": t.pydb_sql})
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    for kind, index, mutated in schema_mutants(ddl, schema, rng):
        verdict = _schema_verdict(url, ddl[:index], mutated)
        if verdict is None:
            tally[kind]["PostgreSQL accepts"] += 1
            continue
        mutated_source = "\n".join(sql + "\n;" for sql in [*ddl[:index], mutated, *ddl[index + 1 :]])
        _, problems = build_catalog(mutated_source)
        caught = any(p.severity == "error" for p in problems)
        tally[kind]["known-bad"] += 1
        tally[kind]["caught"] += caught
        if not caught:
            missed.append({"case": case.id, "kind": kind, "postgres": verdict, "sql": mutated[:300]})


def _schema_verdict(url: str, before: list[str], mutated: str) -> str | None:
    name = f"pydb_mut_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            scratch = psycopg.conninfo.make_conninfo(url, dbname=name)
            with psycopg.connect(scratch, autocommit=True, options="-c statement_timeout=20s") as conn:
                if apply_schema(conn, before) is not None:
                    return None
                verdict: str | None = apply_schema(conn, [mutated])
                return verdict
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cases", type=Path)
    parser.add_argument(
        "--database-url", default=os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    cases, _ = discover(args.cases)
    tally: dict[str, Counter[str]] = defaultdict(Counter)
    missed: list[dict[str, str]] = []
    seen: set[tuple[str, ...]] = set()
    apps: set[str] = set()
    for case in cases:
        key = (*map(str, case.schema), *map(str, case.queries))
        if key in seen:
            continue
        seen.add(key)
        try:
            run_case(case, args.database_url, tally, missed)
            apps.add(app_of(case.id))
        except psycopg.OperationalError as err:  # the shared server refused a connection
            tally["cases"]["not run (server)"] += 1
            print(f"{case.id}: not run: {str(err).splitlines()[0]}", file=sys.stderr)
    print(f"cases: {dict(tally['cases'])}; applications: {len(apps)}; {dict(tally['statements'])}")
    print(
        "| mutation | known-bad (PostgreSQL refuses) | caught | missed | PostgreSQL accepts | of those, plugin refuses |"
    )
    print("|---|---|---|---|---|---|")
    totals: Counter[str] = Counter()
    for group, kinds in (("statement", STATEMENT_KINDS), ("schema", SCHEMA_KINDS)):
        sub: Counter[str] = Counter()
        for kind in kinds:
            c = tally[kind]
            sub.update(c)
            print(
                f"| {group}: {kind} | {c['known-bad']} | {c['caught']} | {c['known-bad'] - c['caught']} "
                f"| {c['PostgreSQL accepts']} | {c['plugin refuses what PostgreSQL accepts']} |"
            )
        totals.update(sub)
        rate = 100 * sub["caught"] / sub["known-bad"] if sub["known-bad"] else 0.0
        print(
            f"| **{group}s** | {sub['known-bad']} | {sub['caught']} ({rate:.1f}%) | {sub['known-bad'] - sub['caught']} | {sub['PostgreSQL accepts']} | {sub['plugin refuses what PostgreSQL accepts']} |"
        )
    rate = 100 * totals["caught"] / totals["known-bad"] if totals["known-bad"] else 0.0
    print(
        f"| **all** | {totals['known-bad']} | {totals['caught']} ({rate:.1f}%) | {totals['known-bad'] - totals['caught']} | | |"
    )
    for m in missed[:40]:
        print(
            f"  missed {m['kind']} in {m['case']}: PostgreSQL: {m['postgres']}\n      {' '.join(m['sql'].split())[:240]}"
        )
    if args.json:
        args.json.write_text(json.dumps({"tally": tally, "missed": missed}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
