"""RESULTS.md sections of the deployment benchmarks: automatic failover by pg_auto_failover
(bench_autofailover) and a long transaction holding the xmin horizon (bench_longtx)."""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]


def _s(x: Json) -> str:
    return f"{x['median']:.2f} ({x['min']:.2f}-{x['max']:.2f})"


def autofailover(r: Json) -> list[str]:
    af = r["autofailover"]
    rounds = af["rounds"]
    first = rounds[0]
    settings = ", ".join(f"`{k.split('.')[-1]}` {v}" for k, v in first["monitor_settings_ms"].items())
    failed: dict[str, int] = {}
    for rd in rounds:
        for key, n in rd["failed_by_rpc"].items():
            failed[key] = failed.get(key, 0) + n
    return [
        "## 9. Automatic failover by pg_auto_failover",
        "",
        "A pg_auto_failover 2.0 formation (Debian packages): a monitor and two data nodes, local clusters on free "
        f"ports (`synchronous_standby_names` as the formation set it: `{first['synchronous_standby_names']}`); the "
        "generated server on the nodes' multi-host URL (`target_session_attrs=read-write`); 8 enqueuers (QueueTask + "
        "QueueTasks of 24, idempotency keys, retried on UNAVAILABLE) and a WorkerFleet (32 lanes, 2 s leases) running "
        f"{first['tasks']:,} tasks. Mid-run the primary's keeper and PostgreSQL are killed together (SIGKILL to its "
        "process group); nobody promotes by hand. The monitor's timeouts (ms) were lowered from their defaults: "
        f"{settings}. {len(rounds)} round(s); the formation took {first['formation_s']:.0f} s to build.",
        "",
        "| From the crash to | median (min-max), s |",
        "|---|---|",
        f"| the monitor assigning the survivor primary | {_s(af['crash_to_promotion_assigned_s'])} |",
        f"| the server's health SERVING again | {_s(af['crash_to_serving_s'])} |",
        f"| the first enqueue answered OK | {_s(af['crash_to_first_ok_enqueue_s'])} |",
        f"| the first completion answered OK | {_s(af['crash_to_first_ok_completion_s'])} |",
        "",
        f"Acknowledged writes lost: **{af['lost_enqueues']} enqueues, {af['lost_completions']} completions** (of "
        + ", ".join(f"{rd['acknowledged_enqueues']:,} / {rd['acknowledged_completions']:,}" for rd in rounds)
        + " acknowledged); tasks finished by the fleet: "
        + ", ".join(f"{rd['finished']:,} of {rd['tasks']:,}" for rd in rounds)
        + f". Calls that failed: {', '.join(f'{k} x{n}' for k, n in sorted(failed.items())) or 'none'}.",
        "",
    ]


def _window_row(name: str, w: Json) -> str:
    age = "-" if w["holder_xact_age_s"] is None else f"{w['holder_xact_age_s']:.0f} s"
    return (
        f"| {name} | {w['t_s']:.0f} | {w['claim']['p50_ms']:.1f} | {w['claim']['p99_ms']:.1f} | "
        f"{w['completed_per_s']:,.0f} | {w['heap_mb']:.1f} | {w['indexes_mb']:.1f} | {w['claim_index_mb']:.2f} | "
        f"{w['dead_tuples']:,} | {w['oldest_xmin_age'] or 0:,} | "
        f"{age} |"
    )


def longtx(r: Json) -> list[str]:
    lt = r["longtx"]
    sc = lt["scenarios"]
    rows = []
    for name in ("baseline", "held", "mitigated"):
        windows = sc[name]["windows"]
        picks = sorted({0, len(windows) // 2, len(windows) - 1})
        rows += [_window_row(name, windows[i]) for i in picks]
    last = {name: sc[name]["windows"][-1] for name in sc}
    base = last["baseline"]

    def ratio(name: str, key: str) -> str:
        b = base[key] if not isinstance(base[key], dict) else base[key]["p50_ms"]
        v = last[name][key] if not isinstance(last[name][key], dict) else last[name][key]["p50_ms"]
        return f"{v / b:.1f}x" if b else "-"

    held = sc["held"]
    return [
        "## 10. A long transaction holding the xmin horizon",
        "",
        f"The same load three times, each {held['seconds']:.0f} s in a fresh database on the benchmark's own cluster "
        f"(autovacuum_naptime 5 s): {lt['rate']} tasks/s enqueued (QueueTasks every 100 ms), a WorkerFleet (64 lanes, "
        "batched claims and reports) completing them, PruneTasks every second for rows finished over 1 s ago. "
        f"**held**: from {held['hold_at_s']:.0f} s on, a session of another role sits idle in a REPEATABLE READ "
        f"transaction with its snapshot taken (held {held['held_for_s']:.0f} s, to the end). **mitigated**: the same, "
        f"with `ALTER ROLE ... SET idle_in_transaction_session_timeout = '{lt['timeout_s']}s'` on that role: "
        f"PostgreSQL ended the session after {sc['mitigated']['held_for_s'] or 0:.0f} s. Claim latency is the "
        f"fleet's ClaimTasks calls (client side), per {lt['window_s']:.0f} s window.",
        "",
        "| Run | t (s) | claim p50 (ms) | claim p99 (ms) | completed/s | heap (MB) | indexes (MB) | claim index (MB) "
        "| dead tuples | oldest xmin age | holder's xact age |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"At the end, against baseline: held heap {ratio('held', 'heap_mb')}, indexes {ratio('held', 'indexes_mb')}, "
        f"claim p50 {ratio('held', 'claim')}; mitigated heap {ratio('mitigated', 'heap_mb')}, indexes "
        f"{ratio('mitigated', 'indexes_mb')}, claim p50 {ratio('mitigated', 'claim')}. Throughput: "
        + ", ".join(f"{name} {sc[name]['tasks_per_s']:,.0f} tasks/s" for name in ("baseline", "held", "mitigated"))
        + " (the offered load: the fleet keeps up in each).",
        "",
    ]
