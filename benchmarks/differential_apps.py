"""Per-application figures of benchmarks/sql_differential.py's JSON (a corpus built by
benchmarks/sqlc_corpus.py: one top-level directory per application), as a Markdown table: the
statements PostgreSQL prepares (schema applied, expressible as an RPC) and the plugin's verdicts
by class — accepted, schema (the plugin refuses a schema PostgreSQL applies), analysis (a
statement refused), inference (types, names or nullability differ from PostgreSQL's), mapping (a
pg type without a proto mapping), crash. Given two JSONs (before, after), both side by side.

    .venv/bin/python benchmarks/differential_apps.py after.json [--before before.json]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path

CLASSES = ("accepted", "schema", "analysis", "inference", "mapping", "crash")
_BY_CAUSE = {
    "schema refused": "schema",
    "internal error": "crash",
    "type or name mismatch vs PostgreSQL": "inference",
    "nullability": "inference",
    "a pg type with no proto mapping (bind/typemap.py)": "mapping",
    "a nullable array column: a repeated field cannot tell NULL from empty": "mapping",
}


def app_of(case: str) -> str:
    return case.split("/", 1)[0].split("#", 1)[0]


def tally(path: Path) -> tuple[dict[str, Counter[str]], dict[str, str]]:
    """Per application: statements by class; and the applications whose schema PostgreSQL refuses."""
    data = json.loads(path.read_text(encoding="utf-8"))
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    refused: dict[str, str] = {}
    for record in data["cases"]:
        app = app_of(record["case"])
        counts.setdefault(app, Counter())
        if record.get("harness_error"):
            counts[app]["crash"] += 1
            continue
        if record.get("schema_postgres") is not None:
            refused.setdefault(app, record["schema_postgres"])
            continue
        for s in record.get("statements", []):
            if s.get("postgres") is not None or s["status"] == "not_expressible":
                continue
            counts[app]["valid"] += 1
            if s["status"] == "accepted":
                counts[app]["inference" if s.get("mismatches") else "accepted"] += 1
            elif s["status"] == "rejected":
                counts[app][_BY_CAUSE.get(s["cause"], "analysis")] += 1
    return counts, refused


def render(after: Path, before: Path | None) -> str:
    now, refused = tally(after)
    then = tally(before)[0] if before else None
    head = "| application | valid | " + " | ".join(CLASSES) + " |"
    lines = [head, "|" + "---|" * (len(CLASSES) + 2)]
    total: Counter[str] = Counter()
    total_then: Counter[str] = Counter()
    for app in sorted(now, key=str.lower):
        if app in refused and not now[app]["valid"]:
            continue
        total.update(now[app])
        if then is not None:
            total_then.update(then.get(app, Counter()))
        lines.append(_row(app, now[app], then.get(app) if then is not None else None))
    lines.append(_row("**all**", total, total_then if then is not None else None))
    out = "\n".join(lines) + "\n"
    if refused:
        out += "\nSchemas PostgreSQL 15 itself refuses (left out): " + "; ".join(
            f"{app} ({why})" for app, why in sorted(refused.items())
        )
        out += "\n"
    return out


def _row(app: str, now: Counter[str], then: Counter[str] | None) -> str:
    def cell(key: str) -> str:
        return f"{then[key]} → {now[key]}" if then is not None and then[key] != now[key] else str(now[key])

    return f"| {app} | {now['valid']} | " + " | ".join(cell(c) for c in CLASSES) + " |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("after", type=Path)
    parser.add_argument("--before", type=Path)
    args = parser.parse_args(argv)
    print(render(args.after, args.before), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
