"""The headline of the benchmarks: one (what, measured, target, verdict) row per bar an issue set,
for RESULTS.md and the table between the markers of benchmarks/README.md; the number formats the
report's sections share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import bench_bounds
import bench_claims
import bench_schedule
import bench_shapes
import report_peers
from common import Json

TARGETS = {
    "codegen_queue_s": 0.5,
    "codegen_1000_s": 3.0,
    "codegen_queue_speedup_vs_sqlc": 5.0,
    "overhead_ratio": 1.05,
    "single_ratio": 0.35,
    "batched_tasks_per_s": 12_000,
    "backlog_ratio": 1.5,
    "fleet_ratio": 0.5,
    "bulk_enqueue_tasks_per_s": 20_000,
}


def met(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}g}" if abs(x) < 1000 else f"{x:,.0f}"
    return str(x)


def ms(s: Json) -> str:
    return f"{s['median'] * 1000:.0f} ({s['min'] * 1000:.0f}-{s['max'] * 1000:.0f})"


def headline(r: Json) -> list[tuple[str, str, str, str]]:
    """(what, measured, target, verdict) rows, for RESULTS.md and benchmarks/README.md."""
    rows: list[tuple[str, str, str, str]] = []
    cg = r.get("codegen")
    if cg and not r.get("quick"):
        q = next(c for name, c in cg["cases"].items() if name.startswith("queue"))
        big = cg["cases"]["synthetic 1000 RPCs, 100 tables"]
        rows.append(("Codegen, queue proto (`protoc --pydb_out`)", f"{q['pydb_s']['median']:.2f} s", "≤ 0.5 s",
                     met(q["pydb_s"]["median"] <= TARGETS["codegen_queue_s"])))  # fmt: skip
        if "sqlc_s" in q:
            speedup = 1 / q["pydb_over_sqlc"]
            system = q.get("pydb_system_protoc_over_sqlc")
            best = max(speedup, 1 / system) if system else speedup
            rows.append(("Codegen, queue proto vs sqlc on the same statements, same run",
                         f"{speedup:.1f}x faster ({q['pydb_s']['median'] * 1000:.0f} vs {q['sqlc_s']['median'] * 1000:.0f} ms)"
                         + (f"; system `protoc`: {1 / system:.1f}x" if system else ""),
                         "≥ 5x faster", met(best >= TARGETS["codegen_queue_speedup_vs_sqlc"])))  # fmt: skip
        sq = f" (sqlc: {big['sqlc_s']['median']:.2f} s)" if "sqlc_s" in big else ""
        rows.append(("Codegen, 1,000 RPCs / 100 tables", f"{big['pydb_s']['median']:.2f} s{sq}", "≤ 3 s, linear",
                     met(big["pydb_s"]["median"] <= TARGETS["codegen_1000_s"])))  # fmt: skip
    ov = r.get("overhead")
    if ov:
        ratio, pooled = ov["ratio_per_round"]["median"], ov["ratio_of_medians"]
        oks = [x <= TARGETS["overhead_ratio"] for x in (ratio, pooled)]
        verdict = met(all(oks)) if all(oks) or not any(oks) else "**borderline** (within the noise)"
        rows.append(("Handler overhead: generated ClaimNextTask / hand-written psycopg",
                     f"{pooled:.3f}x by pooled medians (+{ov['added_us_median']:.0f} µs); {ratio:.3f}x by per-round median "
                     f"(p25-p75 {ov['ratio_per_round']['p25']:.2f}-{ov['ratio_per_round']['p75']:.2f})",
                     "≤ 1.05x", verdict))  # fmt: skip
    tp = r.get("throughput")
    if tp:
        s = tp["single_best"]
        rows.append(("Single path through gRPC vs pgbench, same SQL",
                     f"{s['tool']['tasks_per_s']:,.0f} vs {s['pgbench']['tasks_per_s']:,.0f} cycles/s = {s['ratio']:.2f}x (N={s['clients']})",
                     "≥ 0.35x", met((s["ratio"] or 0) >= TARGETS["single_ratio"])))  # fmt: skip
        b = tp["batched_best"]
        rows.append(("Batched (ClaimTasks 100 + CompleteTasks) through gRPC",
                     f"{b['tool']['tasks_per_s']:,.0f} tasks/s (pgbench {b['pgbench']['tasks_per_s']:,.0f}, N={b['clients']})",
                     "≥ 12,000 tasks/s", met(b["tool"]["tasks_per_s"] >= TARGETS["batched_tasks_per_s"])))  # fmt: skip
    fl = r.get("fleet")
    if fl:
        f, b = fl["fleet_batched"], fl["batched_path"]
        rows.append((f"Fleet end to end (no-op, {fl['tasks']:,} queued, concurrency {fl['concurrency']}, 1 process) vs batched path, same run",
                     f"{f['tasks_per_s']:,.0f} vs {b['tasks_per_s']:,.0f} tasks/s = {fl['ratio_fleet_to_batched_path']:.2f}x "
                     f"(one report per task: {fl['fleet_one_report_per_task']['tasks_per_s']:,.0f})",
                     "≥ 0.5x", met(fl["ratio_fleet_to_batched_path"] >= TARGETS["fleet_ratio"])))  # fmt: skip
        e = fl["enqueue_bulk_500"]
        rows.append(("Bulk enqueue through gRPC (QueueTasks, batches of 500)",
                     f"{e['tasks_per_s']:,.0f} tasks/s (QueueTask one by one: {fl['enqueue_single']['tasks_per_s']:,.0f})",
                     "≥ 20,000 tasks/s", met(e["tasks_per_s"] >= TARGETS["bulk_enqueue_tasks_per_s"])))  # fmt: skip
    dl = r.get("devloop")
    if dl and not r.get("quick"):
        inc = dl["incremental"]
        rows.append((f"Re-check of one edited RPC in a {inc['rpcs']:,}-RPC proto (`check --watch`, LSP)",
                     f"{inc['incremental_typo_ms']['median']:.1f} ms (p90 {inc['incremental_typo_ms']['p90']:.1f}; "
                     f"full check {inc['full_check_warm_s']['median'] * 1000:.0f} ms)",
                     "≤ 50 ms", met(inc["incremental_typo_ms"]["p90"] <= 50)))  # fmt: skip
        if "lsp" in dl:
            ls = dl["lsp"]
            rows.append((f"Language server: didChange to publishDiagnostics, {ls['rpcs']}-RPC proto",
                         f"{ls['diagnostic_ms']['median']:.0f} ms (p90 {ls['diagnostic_ms']['p90']:.0f})", "≤ 300 ms",
                         met(ls["diagnostic_ms"]["p90"] <= 300)))  # fmt: skip
    bl = r.get("backlog")
    if bl:
        sw = bl["sweep"]
        first, last = min(sw, key=int), max(sw, key=int)
        rows.append((f"Claim p50 at {int(last):,} vs {int(first):,} queued rows",
                     f"{sw[last]['p50_ms']:.2f} vs {sw[first]['p50_ms']:.2f} ms = {bl['p50_ratio_deepest_vs_1k']:.2f}x",
                     "≤ 1.5x", met(bl["p50_ratio_deepest_vs_1k"] <= TARGETS["backlog_ratio"])))  # fmt: skip
        for name, ratio in bl["p50_ratio_after_churn_vs_1k"].items():
            after = bl["settings"][name]["after"]["p50_ms"]
            rows.append((f"Claim p50 after {bl['churn_seconds']:.0f} s churn at {bl['churn_depth']:,} rows, {name}",
                         f"{after:.2f} ms = {ratio:.2f}x of {int(first):,}", "≤ 1.5x", met(ratio <= TARGETS["backlog_ratio"])))  # fmt: skip
    if r.get("schedule") and not r.get("quick"):
        rows += bench_schedule.headline(r["schedule"])
    if r.get("peers") and not r.get("quick"):
        rows += report_peers.headline(r["peers"])
    if r.get("shapes") and not r.get("quick"):
        rows += bench_shapes.headline(r["shapes"])
    if r.get("claims") and not r.get("quick"):
        rows += bench_claims.headline(r["claims"])
    if r.get("bounds") and not r.get("quick"):
        rows += bench_bounds.headline(r["bounds"])
    return rows


def headline_table(r: Json) -> str:
    lines = ["| Measure | Result | Target | |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in headline(r)]
    return "\n".join(lines)


START, END = "<!-- headline:start -->", "<!-- headline:end -->"


def update_readme(r: Json, readme: Path) -> None:
    """Replace the headline block of benchmarks/README.md (between the markers) with this run's."""
    if not readme.exists():
        return
    text = readme.read_text()
    if START not in text or END not in text:
        return
    when = r.get("machine", {}).get("when_utc", "?")
    block = f"{START}\n{headline_table(r)}\n\nMeasured {when} by `make bench`; details in RESULTS.md.\n{END}"
    head, rest = text.split(START, 1)
    readme.write_text(head + block + rest.split(END, 1)[1])
