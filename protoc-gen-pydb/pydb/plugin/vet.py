"""`protoc-gen-pydb vet`: rules a project opts into, beyond what PostgreSQL itself refuses.

Each rule is named with `--rule NAME` (or `--all`); the findings are diagnostics at the
statement's token in the .proto, as text (the compiler's format) or SARIF 2.1.0 (`--format
sarif`, for code-scanning UIs). Exit status 1 when a rule finds something.

| rule | finds |
|---|---|
| `update-without-where` | an UPDATE with no WHERE: every row changes |
| `delete-without-where` | a DELETE with no WHERE: every row goes |
| `star-in-writer` | `*` in a statement that writes (INSERT ... SELECT *, RETURNING *): a column added later changes what it writes or returns |
| `limit-without-order-by` | a claim-style LIMIT (in a statement that writes, or a SELECT ... FOR UPDATE) without ORDER BY: which rows it takes is up to the plan |
| `seq-scan` | on `DATABASE_URL`, the statement's generic plan scans sequentially a table of more than `--seq-scan-rows` rows (10,000) |
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from pglast import ast, parse_sql
from pglast.visitors import Visitor

from .bind.compiler import dedupe
from .check import Checker, Statement, each_statement, report, virtual_name
from .diagnostics import Diagnostic, SqlSpan

RULES: dict[str, str] = {
    "update-without-where": "UPDATE without WHERE",
    "delete-without-where": "DELETE without WHERE",
    "star-in-writer": "* in a statement that writes",
    "limit-without-order-by": "claim-style LIMIT without ORDER BY",
    "seq-scan": "sequential scan of a large table (EXPLAIN on DATABASE_URL)",
}


class _Nodes(Visitor):
    def __init__(self) -> None:
        self.nodes: list[ast.Node] = []

    def visit(self, ancestors: object, node: ast.Node) -> None:
        self.nodes.append(node)


def _nodes(sql: str) -> list[Any]:
    """PostgreSQL's parse tree of the statement, every node (`@name` parses as an operator)."""
    try:
        tree = parse_sql(sql)
    except Exception:  # the compiler reports syntax errors; vet has nothing to add
        return []
    visitor = _Nodes()
    visitor(tree)
    return visitor.nodes


def _keyword(sql: str, word: str, before: int | None = None) -> SqlSpan | None:
    """The span of keyword `word` (the last before offset `before`, else the first)."""
    found = [m for m in re.finditer(rf"\b{word}\b", sql, re.IGNORECASE) if before is None or m.start() < before]
    if not found:
        return None
    m = found[-1] if before is not None else found[0]
    return SqlSpan(m.start(), m.end() - 1)


def structural(statement: Statement, rules: set[str]) -> Iterator[tuple[str, str, SqlSpan | None]]:
    nodes = _nodes(statement.sql)
    analysis = statement.analysis
    writes = analysis is not None and not analysis.read_only
    for node in nodes:
        if isinstance(node, ast.UpdateStmt) and node.whereClause is None and "update-without-where" in rules:
            yield "update-without-where", "UPDATE without WHERE changes every row", _keyword(statement.sql, "update")
        if isinstance(node, ast.DeleteStmt) and node.whereClause is None and "delete-without-where" in rules:
            yield "delete-without-where", "DELETE without WHERE deletes every row", _keyword(statement.sql, "delete")
        if (
            isinstance(node, ast.SelectStmt)
            and node.limitCount is not None
            and not node.sortClause
            and (writes or node.lockingClause)
            and "limit-without-order-by" in rules
        ):
            location = getattr(node.limitCount, "location", None)
            yield (
                "limit-without-order-by",
                "LIMIT without ORDER BY in a claim: which rows it takes depends on the plan; add ORDER BY",
                _keyword(statement.sql, "limit", location if isinstance(location, int) and location >= 0 else None),
            )
    if "star-in-writer" in rules and writes and analysis is not None and analysis.expansions:
        span = analysis.expansions[0].span
        yield "star-in-writer", "* in a statement that writes: name the columns", span


def seq_scans(statement: Statement, conn: Any, min_rows: int) -> Iterator[tuple[str, str, SqlSpan | None]]:
    """The generic plan's sequential scans of tables with more than `min_rows` rows."""
    from .bind.compiler import statement as pieces_of

    analysis = statement.analysis
    if analysis is None:
        return
    text, numbers = pieces_of(statement.sql, analysis).numbered()
    args = f"({', '.join('NULL' for _ in numbers)})" if numbers else ""
    with conn.transaction(force_rollback=True):
        conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE pydb_vet AS {text}")
        try:
            [(plan,)] = conn.execute(f"EXPLAIN (FORMAT JSON) EXECUTE pydb_vet{args}").fetchall()
        finally:
            conn.execute("DEALLOCATE pydb_vet")
    stack = [p["Plan"] for p in (plan if isinstance(plan, list) else json.loads(plan))]
    while stack:
        node = stack.pop()
        stack += node.get("Plans", [])
        if node.get("Node Type") != "Seq Scan":
            continue
        table = f"{node.get('Schema', 'public')}.{node['Relation Name']}"
        [(rows,)] = conn.execute("SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass", (table,)).fetchall()
        if rows > min_rows:
            yield (
                "seq-scan",
                f"the plan scans {table} sequentially ({rows:,} rows, more than {min_rows:,}); an index would help",
                _keyword(statement.sql, re.escape(node["Relation Name"])),
            )


def vet(checker: Checker, targets: Sequence[str], rules: set[str], url: str | None, min_rows: int) -> list[Diagnostic]:
    files, problems = checker.parse(targets)
    if files is None:
        return problems
    conn = None
    if "seq-scan" in rules:
        import psycopg

        conn = psycopg.connect(url or "", autocommit=True)
    out: list[Diagnostic] = []
    try:
        for item in each_statement(checker, files, targets):
            if not isinstance(item, Statement):
                out += item.diagnostics
                continue
            if item.analysis is None or any(p.severity == "error" for p in item.problems):
                continue  # `check` reports it
            found = list(structural(item, rules))
            if conn is not None:
                found += seq_scans(item, conn, min_rows)
            for rule, message, span in found:
                item.report(f"{message} [{rule}]", span, "warning")
    finally:
        if conn is not None:
            conn.close()
    return dedupe(out)  # each variant of a statement with optional blocks reports its findings once


def sarif(diagnostics: Sequence[Diagnostic]) -> dict[str, object]:
    """SARIF 2.1.0: one run, a rule per vet rule, a result per diagnostic."""
    results = []
    for d in diagnostics:
        m = re.search(r" \[([a-z-]+)\]$", d.message)
        region = {"startLine": d.line, "startColumn": d.col}
        if d.end_line is not None and d.end_col is not None:
            region |= {"endLine": d.end_line, "endColumn": d.end_col}
        results.append(
            {
                "ruleId": m[1] if m else "pydb",
                "level": "warning" if d.severity == "warning" else "error",
                "message": {"text": d.message},
                "locations": [{"physicalLocation": {"artifactLocation": {"uri": d.path}, "region": region}}],
            }
        )
    rules = [{"id": k, "shortDescription": {"text": v}} for k, v in RULES.items()]
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "protoc-gen-pydb vet", "rules": rules}}, "results": results}],
    }


def main(argv: Sequence[str], out: Callable[[str], object] = print) -> int:
    parser = argparse.ArgumentParser(
        prog="protoc-gen-pydb vet", description="Opt-in rules for (pydb.v1.sql) statements."
    )
    parser.add_argument("protos", nargs="+")
    parser.add_argument("-I", "--proto_path", action="append", default=[], dest="includes")
    parser.add_argument("--schema")
    parser.add_argument(
        "--rule", action="append", default=[], choices=sorted(RULES), help="a rule to apply (repeatable)"
    )
    parser.add_argument("--all", action="store_true", help="every rule (seq-scan only with a database URL)")
    parser.add_argument("--format", choices=("text", "sarif"), default="text")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--seq-scan-rows", type=int, default=10_000)
    args = parser.parse_args(argv)
    rules = set(args.rule) | (set(RULES) if args.all else set())
    if args.all and not args.database_url:
        rules.discard("seq-scan")
    if not rules:
        parser.error(f"name the rules to apply with --rule (or --all): {', '.join(RULES)}")
    if "seq-scan" in rules and not args.database_url:
        parser.error("the seq-scan rule needs DATABASE_URL or --database-url")
    includes = tuple(args.includes) or (".",)
    diagnostics = vet(Checker(includes, args.schema), [virtual_name(p, includes) for p in args.protos], rules,
                      args.database_url, args.seq_scan_rows)  # fmt: skip
    out(json.dumps(sarif(diagnostics), indent=2) if args.format == "sarif" else report(diagnostics))
    return 1 if diagnostics else 0
