"""The report of benchmarks/sql_differential.py: figures from the per-statement records, as text
(the printed summary) and as Markdown (the section of docs/diagnostics.md)."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def _grouped(items: list[tuple[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """{class: {count, example: [case, statement]}}, the largest class first."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for key, example in items:
        groups[key].append(example)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return {key: {"count": len(v), "example": [v[0]["case"], v[0]["name"]]} for key, v in ordered}


def summarize(records: list[dict[str, Any]], skipped: Counter[str], seconds: float) -> dict[str, Any]:
    every = [{**s, "case": r["case"]} for r in records for s in r.get("statements", [])]
    schema_ok = {r["case"] for r in records if r.get("schema_postgres", "") is None}
    failing_cases = {r["case"] for r in records if r.get("expects_failure")}
    prepared = [s for s in every if s["case"] in schema_ok and s.get("postgres") is None]
    # The statements of cases sqlc expects to fail are counted apart: sqlc may reject what
    # PostgreSQL prepares (`:one` on a DELETE without RETURNING), and the plugin may rightly agree.
    valid = [s for s in prepared if s["case"] not in failing_cases]
    in_failing = [s for s in prepared if s["case"] in failing_cases and s["status"] != "not_expressible"]
    set_aside = [s for s in valid if s["status"] == "not_expressible"]
    expressible = [s for s in valid if s["status"] != "not_expressible"]
    accepted = [s for s in expressible if s["status"] == "accepted"]
    rejected = [s for s in expressible if s["status"] == "rejected"]
    causes: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for s in rejected:
        causes[s["cause"]].append((s["class"], s))
    bad_cases = []
    for r in records:
        if not r.get("expects_failure") or "statements" not in r:
            continue
        schema_refused = r["schema_postgres"] is not None
        pg_rejects = [s for s in r["statements"] if s.get("postgres") is not None]
        if not schema_refused and not pg_rejects:
            continue  # a failure only sqlc sees (its own syntax, Go names, config)
        caught = bool(r.get("schema_plugin")) if schema_refused else any(s["status"] == "caught" for s in pg_rejects)
        what = r["schema_postgres"] if schema_refused else pg_rejects[0]["postgres"]
        bad_cases.append({"case": r["case"], "caught": caught, "postgres": what})
    internal = [
        f"{r['case']}: {r['harness_error'].strip().splitlines()[-1]}" for r in records if r.get("harness_error")
    ]
    internal += [f"{s['case']} {s['name']}" for s in every if s.get("plugin", {}).get("internal_error")]
    return {
        "cases": len(records),
        "duplicates_folded": sum(len(r["duplicates"]) for r in records),
        "skipped_packages": dict(skipped),
        "schemas_applied": len(schema_ok),
        "schemas_refused_by_postgres": [
            {"case": r["case"], "postgres": r.get("schema_postgres") or r.get("harness_error", "")[-200:]}
            for r in records
            if r["case"] not in schema_ok
        ],
        "statements": len(every),
        "postgres_prepares": len(prepared),
        "postgres_prepares_in_cases_sqlc_expects_to_fail": {
            "expressible": len(in_failing),
            "accepted": sum(1 for s in in_failing if s["status"] == "accepted"),
        },
        "not_expressible": _grouped([(s["reason"], s) for s in set_aside]),
        "not_expressible_analyzer_differs": [
            {"case": s["case"], "name": s["name"], "mismatches": s["mismatches"]}
            for s in set_aside
            if s.get("mismatches")
        ],
        "expressible": len(expressible),
        "accepted": len(accepted),
        "accepted_same_as_postgres": sum(1 for s in accepted if not s.get("mismatches")),
        "rejected": len(rejected),
        "rejected_by_cause": {cause: _grouped(items) for cause, items in sorted(causes.items())},
        "false_positives": sorted(
            (
                {"cause": s["cause"], "case": s["case"], "name": s["name"], "message": _first_message(s)}
                for s in rejected
            ),
            key=lambda f: (f["cause"], f["case"], f["name"]),
        ),
        "accepted_with_mismatches": [
            {"case": s["case"], "name": s["name"], "mismatches": s["mismatches"]}
            for s in accepted
            if s.get("mismatches")
        ],
        "expected_failures_postgres_rejects": len(bad_cases),
        "caught": sum(1 for b in bad_cases if b["caught"]),
        "missed": [b for b in bad_cases if not b["caught"]],
        "internal_errors": internal,
        "seconds": round(seconds, 1),
    }


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _example_lines(example: dict[str, Any], indent: str) -> list[str]:
    plugin = example.get("plugin", {})
    first = (plugin.get("schema_errors") or plugin.get("errors") or [plugin.get("internal_error", "")])[0]
    out = [f"{indent}e.g. {example['case']} {example['name']}: {' '.join(example['sql'].split())[:160]}"]
    if first:
        out.append(f"{indent}-> {str(first)[:200]}")
    return out


def render_text(summary: dict[str, Any], records: list[dict[str, Any]]) -> str:
    s = summary
    examples = {(r["case"], st["name"]): {**st, "case": r["case"]} for r in records for st in r.get("statements", [])}
    set_aside = sum(g["count"] for g in s["not_expressible"].values())
    out = [
        f"{s['cases']} distinct postgresql cases ({s['duplicates_folded']} duplicates folded; skipped: "
        + ", ".join(f"{k} {v}" for k, v in sorted(s["skipped_packages"].items()))
        + f"); {s['seconds']} s",
        f"schemas: PostgreSQL applies {s['schemas_applied']}, refuses {len(s['schemas_refused_by_postgres'])}: "
        + "; ".join(f"{r['case']} ({r['postgres']})" for r in s["schemas_refused_by_postgres"]),
        f"statements: {s['statements']}; PostgreSQL prepares {s['postgres_prepares']} (its schema applied); "
        f"{s['postgres_prepares_in_cases_sqlc_expects_to_fail']['expressible']} of them are in cases sqlc expects "
        f"to fail, counted apart (the plugin accepts "
        f"{s['postgres_prepares_in_cases_sqlc_expects_to_fail']['accepted']})",
        f"set aside, no proto can express them: {set_aside} "
        f"(the analyzer differs from PostgreSQL on {len(s['not_expressible_analyzer_differs'])} of them, below)",
    ]
    for reason, group in s["not_expressible"].items():
        out.append(f"    {group['count']:4d}  {reason}")
        out += _example_lines(examples[tuple(group["example"])], " " * 10)[:1]
    out.append(
        f"accepted {s['accepted']} / {s['expressible']} ({percent(s['accepted'], s['expressible'])}); "
        f"of them with PostgreSQL's types and names {s['accepted_same_as_postgres']} "
        f"({percent(s['accepted_same_as_postgres'], s['expressible'])}); rejected {s['rejected']}:"
    )
    for cause, classes in s["rejected_by_cause"].items():
        out.append(f"  {sum(c['count'] for c in classes.values()):4d}  {cause}")
        for cls, group in classes.items():
            out.append(f"        {group['count']:4d}  {cls}")
            out += _example_lines(examples[tuple(group["example"])], " " * 14)
    out.append(f"set aside, and the analyzer differs from PostgreSQL: {len(s['not_expressible_analyzer_differs'])}")
    out += [
        f"    {m['case']} {m['name']}: {'; '.join(m['mismatches'])[:200]}"
        for m in s["not_expressible_analyzer_differs"]
    ]
    out.append(f"accepted, but types or names differ from PostgreSQL: {len(s['accepted_with_mismatches'])}")
    out += [f"    {m['case']} {m['name']}: {'; '.join(m['mismatches'])[:200]}" for m in s["accepted_with_mismatches"]]
    bad = s["expected_failures_postgres_rejects"]
    out.append(
        f"cases sqlc expects to fail that PostgreSQL also rejects: {bad}; "
        f"caught {s['caught']} ({percent(s['caught'], bad)}), missed {len(s['missed'])}"
    )
    out += [f"    missed {m['case']}: PostgreSQL: {m['postgres']}" for m in s["missed"]]
    out.append(f"internal errors: {len(s['internal_errors'])}")
    out += [f"    {e}" for e in s["internal_errors"]]
    return "\n".join(out) + "\n"


DOCS = REPO / "docs" / "diagnostics.md"
DOCS_SECTION = re.compile(r"(<!-- BEGIN differential -->\n)(.*?)(<!-- END differential -->)", re.S)


def render_markdown(summary: dict[str, Any], records: list[dict[str, Any]]) -> str:
    """The figures and every false positive by cause, for docs/diagnostics.md. Names cases and
    the plugin's messages, never the cases' SQL (third-party text stays out of the repository)."""
    s = summary
    examples = {(r["case"], st["name"]): st for r in records for st in r.get("statements", [])}
    bad = s["expected_failures_postgres_rejects"]
    set_aside = sum(g["count"] for g in s["not_expressible"].values())
    out = [
        f"- {s['cases']} distinct PostgreSQL cases ({s['duplicates_folded']} copies of the same SQL folded); "
        f"PostgreSQL applies {s['schemas_applied']} of their schemas and prepares {s['postgres_prepares']} "
        "of their statements.",
        f"- Set aside, because no proto can express them: {set_aside} (by reason below). Statements of cases "
        "sqlc itself expects to fail are counted apart: "
        f"{s['postgres_prepares_in_cases_sqlc_expects_to_fail']['accepted']} of their "
        f"{s['postgres_prepares_in_cases_sqlc_expects_to_fail']['expressible']} are accepted.",
        f"- **Accepted: {s['accepted']} of {s['expressible']} ({percent(s['accepted'], s['expressible'])})**; "
        f"with exactly PostgreSQL's parameter types, column names and types: {s['accepted_same_as_postgres']} "
        f"({percent(s['accepted_same_as_postgres'], s['expressible'])}).",
        f"- **Cases sqlc expects to fail that PostgreSQL also rejects: {bad}; caught {s['caught']} "
        f"({percent(s['caught'], bad)})**"
        + (": missed " + "; ".join(f"`{m['case']}` ({m['postgres']})" for m in s["missed"]) if s["missed"] else "")
        + ".",
        f"- Internal errors: {len(s['internal_errors'])}.",
        "",
        "What no proto can express, set aside:",
        "",
        "| statements | reason |",
        "| ---: | --- |",
        *(f"| {g['count']} | {reason} |" for reason, g in s["not_expressible"].items()),
        "",
        "False positives (PostgreSQL prepares the statement, the plugin rejects it), by cause and message, "
        "with one example each:",
        "",
        "| statements | cause | message | example |",
        "| ---: | --- | --- | --- |",
    ]
    for cause, classes in s["rejected_by_cause"].items():
        for cls, group in classes.items():
            example = examples[tuple(group["example"])]
            cell = f"`{group['example'][0]}` {group['example'][1]}: {_first_message(example)}".replace("|", "\\|")
            out.append(f"| {group['count']} | {cause} | {cls.replace('|', chr(92) + '|')} | {cell} |")
    if s["accepted_with_mismatches"]:
        out += ["", "Accepted, but with another type or name than PostgreSQL's:", ""]
        out += [f"- `{m['case']}` {m['name']}: {'; '.join(m['mismatches'])}" for m in s["accepted_with_mismatches"]]
    out += ["", f"<details><summary>Every false positive ({len(s['false_positives'])})</summary>", ""]
    out += [f"- {f['cause']}: `{f['case']}` {f['name']}: {f['message']}" for f in s["false_positives"]]
    out += ["", "</details>"]
    return "\n".join(out) + "\n"


def _first_message(statement: dict[str, Any]) -> str:
    plugin = statement.get("plugin", {})
    first = str((plugin.get("schema_errors") or plugin.get("errors") or [""])[0])
    return re.sub(r"diff\.c[0-9a-f]+\.", "", first.split(" (protoc-gen-pydb knows")[0])


def write_docs(markdown: str) -> None:
    text = DOCS.read_text(encoding="utf-8")
    if DOCS_SECTION.search(text) is None:
        raise SystemExit(f"{DOCS} has no <!-- BEGIN differential --> section")
    DOCS.write_text(DOCS_SECTION.sub(lambda m: m.group(1) + markdown + m.group(3), text), encoding="utf-8")
