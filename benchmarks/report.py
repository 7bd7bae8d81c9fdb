"""results.json -> benchmarks/RESULTS.md and PNG plots (matplotlib)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import bench_bounds
import bench_claims
import bench_schedule
import bench_shapes
import report_deploy
import report_peers
import report_plots
from common import Json, spread
from report_headline import TARGETS, fmt, headline_table, ms, update_readme


def _machine(r: Json) -> list[str]:
    m = r.get("machine", {})
    pk = m.get("packages", {})
    out = [
        "| | |",
        "|---|---|",
        f"| When | {m.get('when_utc', '?')} |",
        f"| CPU | {m.get('cpu', '?')}, {m.get('cpus', '?')} cores, **shared** with other jobs (load average at start "
        f"{_load(m.get('loadavg'))}, at end {_load(m.get('loadavg_end'))}) |",
        f"| OS | {m.get('platform', '?')} |",
        f"| Python | {m.get('python', '?')} |",
        f"| PostgreSQL | {m.get('postgres', '?')} — {m.get('postgres_source', '?')}; "
        + ", ".join(f"{k}={v}" for k, v in m.get("postgres_settings", {}).items())
        + " |",
        "| Packages | " + ", ".join(f"{k} {v}" for k, v in pk.items()) + " |",
        f"| Run time | {r.get('timings_s', {}).get('total', 0):.0f} s ("
        + ", ".join(f"{k} {v:.0f} s" for k, v in r.get("timings_s", {}).items() if k != "total")
        + ") |",
    ]
    return out


def _load(x: Any) -> str:
    return "/".join(f"{v:.1f}" for v in x) if isinstance(x, list) else "?"


def _codegen(r: Json) -> list[str]:
    cg = r["codegen"]
    out = [
        "## 1. Codegen speed",
        "",
        f"Wall time of a full `python -m grpc_tools.protoc --pydb_out` run (protoc + plugin process), median "
        f"(min-max) of {cg['repeats']} runs after a warm-up run (bytecode caching on, as for an installed plugin), "
        f"interleaved with sqlc ({cg.get('sqlc') or 'not installed'}) generating Go for "
        "the same statements against the same schema. `protoc alone` is the same protoc run writing only a "
        "descriptor set (no plugin)."
        + (
            f" `system protoc` is the same `--pydb_out` run by the `protoc` binary ({cg['system_protoc']}), "
            "as `protoc --pydb_out` runs it: the plugin process is the same, protoc's own start is not "
            "an interpreter's."
            if cg.get("system_protoc")
            else ""
        ),
        "",
        "| Input | protoc-gen-pydb (ms) | sqlc (ms) | pydb / sqlc | system protoc (ms) | its / sqlc | protoc alone (ms) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, c in cg["cases"].items():
        sq = ms(c["sqlc_s"]) if "sqlc_s" in c else ("failed: " + c["sqlc_error"][:80] if "sqlc_error" in c else "-")
        ratio = f"{c['pydb_over_sqlc']:.2f}x" if "pydb_over_sqlc" in c else "-"
        sq_queue = cg.get("sqlc_queue", {})
        if name.startswith("queue") and sq_queue.get("rejected") and "sqlc_s" in c:
            sq += f" ({sq_queue['accepted']} of {sq_queue['statements']} statements¹)"
        system = ms(c["pydb_system_protoc_s"]) if "pydb_system_protoc_s" in c else "-"
        system_ratio = f"{c['pydb_system_protoc_over_sqlc']:.2f}x" if "pydb_system_protoc_over_sqlc" in c else "-"
        out.append(
            f"| {name} | {ms(c['pydb_s'])} | {sq} | {ratio} | {system} | {system_ratio} | {ms(c['protoc_alone_s'])} |"
        )
    if cg.get("sqlc_queue", {}).get("rejected"):
        out += ["", "¹ sqlc rejects some of the queue's statements, so its queue time is for the rest: "
                + "; ".join(f"`{r}`" for r in cg["sqlc_queue"]["rejected"]) + "."]  # fmt: skip
    if "per_rpc_ms_100_to_1000" in cg:
        out += [
            "",
            f"Growth: {cg['per_rpc_ms_10_to_100']:.2f} ms per added RPC from 10 to 100 RPCs, "
            f"{cg['per_rpc_ms_100_to_1000']:.2f} ms per added RPC from 100 to 1,000: linear.",
        ]
    im = cg["imports"]
    ph = cg["phases"]
    out += [
        "",
        f"Where the time goes ({cg['phases_case']}, in-process, one run): "
        + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in ph["phases_s"].items())
        + f"; total {ph['total_s'] * 1000:.0f} ms. Process start: bare interpreter "
        f"{im['python_start_s']['median'] * 1000:.0f} ms, interpreter + plugin imports "
        f"{im['python_start_plus_plugin_import_s']['median'] * 1000:.0f} ms (-X importtime, cumulative: "
        + ", ".join(f"{k} {v / 1000:.0f} ms" for k, v in im["importtime_us"].items())
        + ").",
        *_codegen_floor(cg),
        "",
        "![codegen](codegen.png)",
        "",
    ]
    return out


def _codegen_floor(cg: Json) -> list[str]:
    """The least any run of this design takes (the interpreter with the plugin's dependencies
    imported, and protoc's own run) against the queue bar's budget: sqlc's time over 5."""
    queue = next((c for name, c in cg["cases"].items() if name.startswith("queue")), None)
    deps = cg["imports"].get("python_start_plus_dependencies_s")
    if queue is None or deps is None or "sqlc_s" not in queue or "system_protoc_alone_s" not in queue:
        return []
    protoc, budget = queue["system_protoc_alone_s"]["median"], queue["sqlc_s"]["median"] / 5
    floor = deps["median"] + protoc
    return [
        "",
        f"The floor of this design on the queue: the interpreter with the plugin's dependencies imported "
        f"(protobuf's plugin protocol, pglast, sqlglot, jinja2) {deps['median'] * 1000:.0f} ms plus the `protoc` "
        f"binary's own run {protoc * 1000:.0f} ms = {floor * 1000:.0f} ms before a line of the plugin runs, "
        f"against a budget of {budget * 1000:.0f} ms for the ≥ 5x bar (sqlc's {queue['sqlc_s']['median'] * 1000:.0f} ms / 5): "
        f"{'inside' if floor < budget else 'over'} it by {abs(budget - floor) * 1000:.0f} ms, for the plugin's own "
        f"imports, {cg['sqlc_queue'].get('statements', '?')} statements' analysis and the rendering.",
    ]


def _overhead(r: Json) -> list[str]:
    ov = r["overhead"]
    g, h = ov["generated"], ov["hand_written"]
    ps = ov["python_side"]
    return [
        "## 2. Handler overhead",
        "",
        f"`claim_next_task(conn, request)` (generated) vs `await conn.execute(CLAIM_NEXT_TASK_SQL, {{'tool_id': ...}})` + "
        f"`fetchone()` (hand-written) on the same autocommit connection and queue ({ov['queue_depth']:,} rows), "
        f"{ov['rounds']} alternating rounds of {ov['block']} claims each (claimed rows completed between blocks, untimed).",
        "",
        "| | p50 (ms) | p90 (ms) | p99 (ms) |",
        "|---|---|---|---|",
        f"| generated handler | {g['p50_ms']:.3f} | {g['p90_ms']:.3f} | {g['p99_ms']:.3f} |",
        f"| hand-written psycopg | {h['p50_ms']:.3f} | {h['p90_ms']:.3f} | {h['p99_ms']:.3f} |",
        "",
        f"Ratio generated / hand-written, per round: median **{ov['ratio_per_round']['median']:.3f}x** "
        f"(p25-p75 {ov['ratio_per_round']['p25']:.3f}-{ov['ratio_per_round']['p75']:.3f}, min-max "
        f"{ov['ratio_per_round']['min']:.3f}-{ov['ratio_per_round']['max']:.3f}); ratio of the overall medians "
        f"{ov['ratio_of_medians']:.3f}x, i.e. {ov['added_us_median']:+.0f} µs per call. The handler's own Python work, "
        f"database aside: {ps['parse_uuid_us']:.1f} µs to validate the tool_id, {ps['row_to_proto_us']:.1f} µs to build "
        "the response from the row.",
        "",
    ]


def _throughput(r: Json) -> list[str]:
    tp = r["throughput"]
    out = [
        "## 3. Queue throughput, end to end",
        "",
        f"The generated server (`python -m generation.task.v1.task_pydb_server`, pool = max N) and the clients "
        f"(grpc blocking stubs, N threads over up to 2 processes) are separate processes; pgbench runs the same SQL "
        f"(taken from the generated module, `-M prepared`, N clients) against the same database. "
        f"{tp['seconds_per_run']:.0f} s per single-path run, {tp.get('seconds_per_batched_run', tp['seconds_per_run']):.0f} s "
        "per batched run; the queue is truncated and refilled before every run; pgbench and the tool alternate at each N; "
        "tasks are counted as completed rows in the table.",
        "",
        "| Path | N | pgbench (tasks/s) | through gRPC (tasks/s) | ratio | gRPC cycle p50 / p99 (ms) | load avg |",
        "|---|---|---|---|---|---|---|",
    ]
    for mode in ("single", "batched"):
        for n, row in sorted(tp[mode].items(), key=lambda kv: int(kv[0])):
            lat = row["tool"]["cycle_latency"]
            out.append(
                f"| {mode} | {n} | {row['pgbench']['tasks_per_s']:,.0f} | {row['tool']['tasks_per_s']:,.0f} | "
                f"{row['ratio']:.2f}x | {lat['p50_ms']:.2f} / {lat['p99_ms']:.2f} | {row['loadavg']:.1f} |"
            )
    fl = tp.get("grpc_floor")
    if fl:
        best = tp["single"][str(fl["clients"])]["tool"]
        out += [
            "",
            f"CPU per single-path cycle (2 RPCs) at N={fl['clients']}: server {fmt(best['server_cpu_us_per_task'])} µs, "
            f"clients {fmt(best['client_cpu_us_per_task'])} µs. gRPC's own floor on the same server and clients, two "
            f"empty RPCs (health Check) per cycle: {fl['tasks_per_s']:,.0f} cycles/s, server "
            f"{fmt(fl['server_cpu_us_per_task'])} µs and clients {fmt(fl['client_cpu_us_per_task'])} µs of CPU per cycle. "
            "Batched, per task: server "
            + ", ".join(
                f"{fmt(r['tool']['server_cpu_us_per_task'])} µs (N={n})"
                for n, r in sorted(tp["batched"].items(), key=lambda kv: int(kv[0]))
            )
            + ".",
        ]
    out += _single_path_note(tp)
    out += ["", "![throughput](throughput.png)", ""]
    return out


def _single_path_note(tp: Json) -> list[str]:
    """When the single path misses its target: what blocks it, from this run's own numbers."""
    best, fl = tp["single_best"], tp.get("grpc_floor")
    if (best["ratio"] or 0) >= TARGETS["single_ratio"] or not fl:
        return []
    pg = tp["single"][str(fl["clients"])]["pgbench"]["tasks_per_s"]
    tool = best["tool"]
    return [
        "",
        f"**Single path, target not met ({best['ratio']:.2f}x < 0.35x): what blocks it.** The machine's 2 cores run the "
        "server, the clients and PostgreSQL together, and the single path is CPU-bound in Python gRPC: two *empty* "
        f"RPCs per cycle on the same server and clients reach only {fl['tasks_per_s']:,.0f} cycles/s "
        f"({fl['tasks_per_s'] / pg:.2f}x of pgbench at N={fl['clients']}), costing {fmt(fl['server_cpu_us_per_task'])} µs "
        f"of server and {fmt(fl['client_cpu_us_per_task'])} µs of client CPU per cycle, while a real claim+complete cycle "
        f"costs {fmt(tool['server_cpu_us_per_task'])} µs + {fmt(tool['client_cpu_us_per_task'])} µs and pgbench's C client "
        "costs next to nothing. Measured in-process (docs/performance.md), the server's share above gRPC is psycopg's "
        "async I/O (~270 µs per cycle, the same as hand-written psycopg) and the runtime's `Database.run` (~120 µs per "
        "cycle: one task per call, for deadline cancellation); the generated handler code is ~10 µs. Tried: blocking "
        "client stubs instead of grpc.aio (about half the client CPU), 1-32 concurrent clients over 2 processes, a pool "
        "as large as N, and handler-side cuts (Timestamp building, UUID pass-through). What would move it: a cheaper "
        "`Database.run` (no task per call), more cores (server processes sharing the port), or the batched path, which "
        "meets its target.",
    ]


def _backlog(r: Json) -> list[str]:
    bl = r["backlog"]
    out = [
        "## 4. Backlog depth",
        "",
        f"Claim latency (generated `claim_next_task`, one connection, each claim followed by `complete_task`) with a "
        f"tool's backlog at each depth; {bl['rounds']} rounds of {bl['cycles_per_round']} claims, the depths interleaved. "
        "All tools share one table, so every depth is measured in a table of the full size. The measuring connections "
        "use synchronous_commit=off, so the latency is the claim's own work, not the disk's fsync queue (durable "
        "commits are in the throughput comparison).",
        "",
        "| Queued rows | p50 (ms) | p90 (ms) | p99 (ms) |",
        "|---|---|---|---|",
    ]
    for d, s in sorted(bl["sweep"].items(), key=lambda kv: int(kv[0])):
        out.append(f"| {int(d):,} | {s['p50_ms']:.3f} | {s['p90_ms']:.3f} | {s['p99_ms']:.3f} |")
    out += [
        "",
        f"Churn: a fresh backlog of {bl['churn_depth']:,} rows, then {bl['churn_batch_workers']} connections claim and "
        f"complete batches of 100 for {bl['churn_seconds']:.0f} s while one more runs single claims (the latency "
        f"sampled during churn), autovacuum_naptime {bl['autovacuum_naptime']}; then the single-worker measurement "
        "again.",
        "",
        "| Storage settings | before p50 / p99 (ms) | during churn: median window p50 (ms), tasks/s | after p50 / p99 (ms) | "
        "dead tuples at end | autovacuums during churn | heap MB before → after |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, s in bl["settings"].items():
        st = s["stats_after"]
        out.append(
            f"| {name} | {s['before']['p50_ms']:.3f} / {s['before']['p99_ms']:.3f} | "
            f"{fmt(bl['median_churn_p50_ms'][name])}, {s['churn']['tasks_per_s']:,.0f} | "
            f"{s['after']['p50_ms']:.3f} / {s['after']['p99_ms']:.3f} | {st['dead']:,} | {s.get('autovacuums_during', '-')} | "
            f"{s.get('heap_bytes_before', 0) / 2**20:.0f} → {st['heap_bytes'] / 2**20:.0f} |"
        )
    out += ["", "Settings: " + "; ".join(f"*{k}*: `{v['options']}`" for k, v in bl["settings"].items()), ""]
    out += ["![backlog](backlog.png)", ""]
    return out


def _events(r: Json) -> list[str]:
    ev = r["events"]
    out = [
        "## 5. Live task events",
        "",
        "Emit (`EventEmitter`, the fleet's buffer and flusher) → read (`watch_task_events`, one reader per task), in "
        "one process. Latency: events at a steady 200/s in total, receive time minus `emitted_at`. Events/s: every "
        "task emits at once, timed until the last reader has its terminal event. Redis: a private redis-server; "
        "PostgreSQL: `AppendTaskEvents` into `generation.task_events`, read with `WatchTaskEvents` + "
        "`ListTaskEvents` through the generated server.",
        "",
        "| Transport | Case | Events | p50 (ms) | p99 (ms) | Events/s |",
        "|---|---|---|---|---|---|",
    ]
    cases = (
        ("one_task_latency", "1 task, 200 events/s"),
        ("many_tasks_latency", "tasks sharing 200 events/s"),
        ("one_task_throughput", "1 task, burst"),
        ("many_tasks_throughput", "tasks, burst"),
    )
    for transport in ("redis", "postgres"):
        for key, label in cases:
            c = ev[transport][key]
            rate = f"{c['events_per_s']:,.0f}" if "events_per_s" in c else "-"
            name = label if c["tasks"] == 1 else f"{c['tasks']} {label}"
            out.append(f"| {transport} | {name} | {c['events']:,} | {c['p50_ms']:.1f} | {c['p99_ms']:.1f} | {rate} |")
    return [*out, ""]


def _fleet(r: Json) -> list[str]:
    fl = r["fleet"]
    rows = (
        ("fleet, batched reports (CompleteTasks / FailTasks)", fl["fleet_batched"]),
        ("fleet, one report per task (report_batch=1)", fl["fleet_one_report_per_task"]),
    )
    out = [
        "## 6. The worker fleet end to end, and bulk enqueue",
        "",
        f"One worker process (`WorkerFleet`, no-op tool, concurrency {fl['concurrency']}, LISTEN wake) drains "
        f"{fl['tasks']:,} tasks queued beforehand; tasks/s from its first claim to its last report. Beside it, in the "
        f"same run, the batched path (ClaimTasks {fl['batched_path']['batch']} + CompleteTasks, "
        f"{fl['batched_path']['clients']} loops in two processes). Server, worker, clients and PostgreSQL share the machine.",
        "",
        "| Path | Tasks/s | Report statements |",
        "|---|---|---|",
    ]
    out += [f"| {name} | {x['tasks_per_s']:,.0f} | {x['report_batches']:,} |" for name, x in rows]
    out.append(f"| batched path (ClaimTasks + CompleteTasks loops) | {fl['batched_path']['tasks_per_s']:,.0f} | - |")
    out += [
        "",
        f"Fleet / batched path: **{fl['ratio_fleet_to_batched_path']:.2f}x**.",
        "",
        "| Enqueue through gRPC | Tasks | Tasks/s |",
        "|---|---|---|",
        f"| QueueTasks, batches of 500, 4 in flight | {fl['enqueue_bulk_500']['queued']:,} | {fl['enqueue_bulk_500']['tasks_per_s']:,.0f} |",
        f"| QueueTask one by one, 32 in flight | {fl['enqueue_single']['queued']:,} | {fl['enqueue_single']['tasks_per_s']:,.0f} |",
        "",
    ]
    return out


def _observe(r: Json) -> list[str]:
    ob = r["observe"]
    ov, da = ob["overhead"], ob["dashboard"]
    out = [
        "## 12. Observability: metrics, tracing, the dashboard",
        "",
        f"Batched path (ClaimTasks 100 + CompleteTasks, 8 clients in 2 processes), servers with metrics and tracing "
        f"off, then on (`--metrics-addr`, `--tracing`, the OpenTelemetry SDK with a BatchSpanProcessor dropping the "
        f"spans), alternated, {ov['rounds']} round(s) of {ov['seconds_per_run']:.0f} s each.",
        "",
        "| Server | tasks/s (median) | server CPU per task (µs) |",
        "|---|---|---|",
        f"| off | {ov['tasks_per_s_off']:,.0f} | {ov['server_cpu_us_per_task_off']:.1f} |",
        f"| metrics + tracing | {ov['tasks_per_s_on']:,.0f} | {ov['server_cpu_us_per_task_on']:.1f} |",
        "",
        f"On / off: **{ov['ratio_on_to_off']:.3f}x** (target {ov['target']}).",
        "",
        f"Dashboard (`python -m taskdash` and the generated server as processes, {da['tasks']:,} tasks in the table), "
        f"{da['requests_per_page']} requests per page one after another:",
        "",
        "| Page | p50 (ms) | p95 (ms) |",
        "|---|---|---|",
    ]
    out += [f"| {name} | {p['p50_ms']:.1f} | {p['p95_ms']:.1f} |" for name, p in da["pages"].items()]
    out += ["", f"Worst p95: **{da['worst_p95_ms']:.1f} ms** (target {da['target_p95_ms']} ms).", ""]
    return out


def _replication(r: Json) -> list[str]:
    rp = r["replication"]
    fo, sv = rp["failover"], rp["servers"]
    return [
        "## 7. Failover and several server processes",
        "",
        "Failover: a synchronous primary and hot standby, the generated server on a two-host URL "
        "(`target_session_attrs=read-write`), 8 enqueue loops; the primary is killed (`pg_ctl stop -m immediate`) and "
        "the standby promoted at once (an HA manager's detection delay comes on top). "
        f"{len(fo['rounds'])} round(s).",
        "",
        "| Recovery | median (s) | min-max (s) |",
        "|---|---|---|",
        f"| promote → first enqueue sent after it answered OK | {fo['promote_to_first_ok_s']['median']:.2f} | "
        f"{fo['promote_to_first_ok_s']['min']:.2f}-{fo['promote_to_first_ok_s']['max']:.2f} |",
        f"| kill → that answer | {fo['kill_to_first_ok_s']['median']:.2f} | "
        f"{fo['kill_to_first_ok_s']['min']:.2f}-{fo['kill_to_first_ok_s']['max']:.2f} |",
        "",
        f"Several servers: the single path (ClaimNextTask + CompleteTask, {sv['clients']} blocking clients in 2 "
        "processes) and, in full runs, the batched path (ClaimTasks 100 + CompleteTasks), each against 1 server "
        f"process and against 3 behind client-side round_robin, alternated, {sv['seconds']:.0f} s per single-path "
        "run; the servers' CPU is read from /proc. Servers, clients and PostgreSQL share the machine's cores.",
        "",
        "| Path | Server processes | tasks/s: median (min-max) | server CPU per task (µs) | server cores kept busy |",
        "|---|---|---|---|---|",
        *_servers_rows(sv),
        "",
        f"Single path 3 / 1: **{sv['ratio_three_to_one']:.2f}x**"
        + (f"; batched path 3 / 1: **{sv['batched_ratio_three_to_one']:.2f}x**" if sv.get("batched") else "")
        + ". What more processes buy is cores: one server process runs the single path at about "
        f"{sv['single_path_tasks_per_s_per_server_core']:,.0f} tasks/s per core of its own (1 s / its CPU per task). "
        "On a machine whose cores the servers, clients and PostgreSQL already share, extra processes only add "
        "contention; read the CPU per task, not the tasks/s ratio.",
        "",
    ]


def _servers_rows(sv: Json) -> list[str]:
    """One row per path and server count: throughput with the CPU the servers spent on it."""
    rows = []
    for path in ("single", "batched"):
        runs = sv.get(path)
        if not runs:
            continue
        for count in ("1", "3"):
            run = runs[count]
            rows.append(
                f"| {path} | {count} | {spread(run['tasks_per_s'])} | "
                f"{run['server_cpu_us_per_task']['median']:,.0f} | {run['server_cores']['median']:.2f} |"
            )
    return rows


def _partition(r: Json) -> list[str]:
    pt = r["partition"]
    out = [
        "## 8. Partitioning the queue table",
        "",
        "generation.tasks plain (schema.sql) vs partitioned (tests/support/queue_layouts.py): `by_tool` = HASH (tool_id), "
        f"{pt['partitions_by_tool']} partitions; `by_status` = LIST (status), live and terminal partitions. Each layout "
        f"in its own database, {pt['tools']} tools, the generated module's SQL run by raw psycopg with prepared "
        "statements (as the handlers run it), synchronous_commit=off. Latency: one connection per layout, claim + "
        "complete + GetTask cycles over the tools, the layouts alternating; throughput: N connections per layout "
        "looping claim + complete (single) or ClaimTasks 100 + CompleteTasks (batched), medians of alternated runs; "
        "a claim PostgreSQL aborts with 40001 is counted and retried. Claimed rows are replaced after each round. "
        "PruneTasks (1,000 rows per call) is rolled back after each call, so every call deletes "
        "from the same table. `plain_tuned` is the plain table with autovacuum by row count (docs/performance.md). Dead tuples and "
        f"autovacuum runs are read at the end of the run; autovacuum_naptime {pt.get('autovacuum_naptime', '?')}.",
        "",
    ]
    for name, sc in pt["scenarios"].items():
        lay = {n: sc["layouts"][n] for n in ("plain", "plain_tuned", "by_tool", "by_status") if n in sc["layouts"]}
        out += [
            f"**{name}**: {sc['terminal_rows']:,} completed rows + {sc['queued_per_tool']:,} queued per tool; "
            f"{sc['rounds']} rounds of {sc['cycles_per_round']} cycles; throughput {sc['throughput_rounds']} x "
            f"{sc['throughput_seconds']:g} s per layout with {sc['clients']} connections.",
            "",
            "| Layout | claim p50 / p99 (ms) | complete p50 (ms) | GetTask p50 (ms) | single tasks/s | batched tasks/s "
            "| claims aborted/s (single, batched) | PruneTasks 1,000 p50 (ms) | claim planning (ms) "
            "| heap + indexes (MB) | B-tree levels (pkey, claim) | dead tuples, autovacuums |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for name_l, x in lay.items():
            idx = x["indexes"]
            levels = f"{idx.get('tasks_pkey', {}).get('btree_level', '-')}, {idx.get('idx_gen_tasks_queue', {}).get('btree_level', '-')}"
            prune = f"{x['prune']['p50_ms']:.1f}" if x.get("prune") else "-"
            out.append(
                f"| {name_l} | {x['claim']['p50_ms']:.3f} / {x['claim']['p99_ms']:.3f} | {x['complete']['p50_ms']:.3f} | "
                f"{x['get']['p50_ms']:.3f} | {x['single_tasks_per_s']['median']:,.0f} | "
                f"{x['batched_tasks_per_s']['median']:,.0f} | {x['single_aborted_per_s']['median']:.1f}, "
                f"{x['batched_aborted_per_s']['median']:.1f} | {prune} | {x['claim_planning_ms']['median']:.3f} | "
                f"{x['heap_bytes'] / 2**20:.0f} + {x['index_bytes'] / 2**20:.0f} | {levels} | "
                f"{x.get('dead_tuples', 0):,}, {x.get('autovacuums', '-')} |"
            )
        out += [
            "",
            "Against plain, same run: "
            + "; ".join(
                f"{n}: claim p50 {v['vs_plain']['claim_p50']:.2f}x, p99 {v['vs_plain']['claim_p99']:.2f}x, "
                f"GetTask p50 {v['vs_plain']['get_p50']:.2f}x, single {v['vs_plain']['single']:.2f}x, "
                f"batched {v['vs_plain']['batched']:.2f}x"
                for n, v in lay.items()
                if n != "plain"
            )
            + ".",
            "",
        ]
    return out


def markdown(r: Json) -> str:
    out = [
        "# Benchmark results",
        "",
        "Written by `make bench` (benchmarks/run.py) from results.json; do not edit by hand.",
    ]
    if r.get("quick"):
        out += ["", "**Quick (smoke) run: tiny sizes, the numbers mean nothing.**"]
    out += [
        "",
        "This machine is shared with other jobs and timings are noisy: every comparison below is measured side by "
        "side in the same run (interleaved), and medians with spreads are reported rather than single runs.",
        "",
        "## Headline",
        "",
        headline_table(r),
        "",
        "## Machine",
        "",
        *_machine(r),
        "",
    ]
    for name, error in r.get("failed", {}).items():
        out += [f"## {name}: failed", "", "```", error.strip(), "```", ""]
    for name, section in (
        ("codegen", _codegen),
        ("overhead", _overhead),
        ("throughput", _throughput),
        ("backlog", _backlog),
        ("events", _events),
        ("fleet", _fleet),
        ("replication", _replication),
        ("partition", _partition),
        ("autofailover", report_deploy.autofailover),
        ("longtx", report_deploy.longtx),
        ("schedule", bench_schedule.section),
        ("observe", _observe),
        ("peers", report_peers.section),
        ("shapes", bench_shapes.section),
        ("claims", bench_claims.section),
        ("bounds", bench_bounds.section),
    ):
        if name in r:
            out += section(r)
    # Measured by hand, not by `make bench`, kept in files of their own and carried along: the
    # real-application differential (third-party SQL stays outside the repository) and ListTasks'
    # plans and pages against its previous form (that form is gone from the proto).
    for carried in ("differential_results.md", "shapes_results.md"):
        path = Path(__file__).with_name(carried)
        if path.is_file():
            out += [path.read_text(encoding="utf-8").rstrip(), ""]
    return "\n".join(out) + "\n"


def write(r: Json, out: Path) -> None:
    (out / "RESULTS.md").write_text(markdown(r))
    try:
        report_plots.plots(r, out)
    except ModuleNotFoundError as err:  # `make bench` installs it; a bare run.py may lack it
        print(f"bench: no plots ({err.name} missing: pip install -r benchmarks/requirements.txt)", file=sys.stderr)
    if not r.get("quick"):
        update_readme(r, out / "README.md")
        report_peers.update_readme(r, out.parent / "README.md")
