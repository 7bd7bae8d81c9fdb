"""The scheduling features' cost on the claim path, side by side in one run.

1. Batched claim+complete, seed vs now, on the same table: one tool with `depth` queued rows and
   as many scheduled a day ahead (delayed tasks: outside the claim index). In alternating rounds
   the seed's ClaimTasks statement (before delayed runs, pause and run-time limits: SEED_CLAIM_TASKS
   below, its text as generated then) and today's (task_pydb.CLAIM_TASKS_SQL: the due-scheduled
   branch, the pause check, attempted_at) each claim `batch` tasks and complete them with
   CompleteTasks, on one connection, prepared. Tasks per second of each, and their ratio.
2. Claim latency against a deep scheduled backlog: ClaimNextTask + CompleteTask cycles (the
   generated handlers) on a tool with 1,000 queued rows and on one with 1,000,000 queued plus
   1,000,000 scheduled in the future, in alternating rounds; claimed rows are replaced after each
   round so both depths stay constant. p50 of each and their ratio.

Commits do not wait for the WAL flush (synchronous_commit=off, as bench_backlog.py): the statement's
execution is measured, not the shared machine's fsync queue.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
from bench_backlog import connect, make_tool
from common import Json
from generation.task.v1 import task_pb2, task_pydb
from psycopg import AsyncConnection

#: The seed's ClaimTasks, as the plugin generated it before this wave (commit 0b3b7d3).
SEED_CLAIM_TASKS = """\
WITH picked AS MATERIALIZED (
  SELECT id, status, priority, created_at,
         512 + octet_length(input::text) + COALESCE(octet_length(output::text), 0)
             + COALESCE(octet_length(error), 0) + COALESCE(octet_length(reported_usage::text), 0)
             + COALESCE(octet_length(billing_idempotency_key), 0) + COALESCE(octet_length(w3c_traceparent), 0)
           AS answer_bytes
  FROM generation.tasks
  WHERE tool_id = %(tool_id)s
    AND retry_count < max_retries
    AND (status = 'queued' OR (status = 'processing' AND claim_expires_at < now()))
  ORDER BY status DESC, priority DESC, created_at ASC
  LIMIT %(limit)s
  FOR UPDATE SKIP LOCKED
), fitting AS (
  SELECT id, sum(answer_bytes) OVER (ORDER BY status DESC, priority DESC, created_at ASC, id) AS running_bytes
  FROM picked
  WHERE answer_bytes <= COALESCE(NULLIF(%(max_bytes)s, 0), 4000000)
)
UPDATE generation.tasks AS t
SET status = 'processing',
    started_at = COALESCE(t.started_at, now()),
    claim_expires_at = now() + COALESCE(t.lease_seconds, tl.lease_seconds) * INTERVAL '1 second',
    lease_token = gen_random_uuid(),
    retry_count = CASE WHEN t.status = 'processing' THEN t.retry_count + 1 ELSE t.retry_count END
FROM fitting, generation.tools AS tl
WHERE t.id = fitting.id AND tl.id = t.tool_id
  AND fitting.running_bytes <= COALESCE(NULLIF(%(max_bytes)s, 0), 4000000)
RETURNING t.id, t.tool_id, t.status, t.priority, t.retry_count, t.max_retries, t.input, t.output, t.error,
  t.reported_usage, t.reserved_token_amount, t.billing_idempotency_key, t.w3c_traceparent, t.lease_token,
  t.claim_expires_at, t.created_at, t.started_at, t.completed_at,
  COALESCE(t.lease_seconds, tl.lease_seconds) AS lease_seconds
"""


async def add(conn: AsyncConnection[Any], tool_id: str, n: int, *, scheduled: bool = False) -> None:
    step = 250_000  # bounded statements: no one huge transaction
    while n > 0:
        k = min(step, n)
        if scheduled:
            await conn.execute(
                "INSERT INTO generation.tasks (tool_id, input, status, run_at) "
                "SELECT %s, '{}', 'scheduled', now() + interval '1 day' + i * interval '1 ms' FROM generate_series(1, %s) i",
                (tool_id, k),
            )
        else:
            await conn.execute(
                "INSERT INTO generation.tasks (tool_id, input) SELECT %s, '{}' FROM generate_series(1, %s)",
                (tool_id, k),
            )
        n -= k


async def batch_round(conn: AsyncConnection[Any], sql: str, tool_id: str, batch: int) -> float:
    """One claim of `batch` with `sql` and its CompleteTasks; seconds taken."""
    t0 = time.perf_counter()
    cur = await conn.execute(sql, {"tool_id": tool_id, "limit": batch, "max_bytes": 0, "request_id": ""}, prepare=True)
    rows = await cur.fetchall()
    ids = [r[0] for r in rows]
    tokens = [r[13] for r in rows]  # lease_token: the 14th column of both statements' RETURNING
    await conn.execute(
        task_pydb.COMPLETE_TASKS_SQL,
        {"task_ids": ids, "lease_tokens": tokens, "outputs": [], "reported_usages": []},
        prepare=True,
    )
    assert len(ids) == batch, "the backlog ran dry"
    return time.perf_counter() - t0


async def batched(url: str, depth: int, batch: int, rounds: int) -> Json:
    conn = await connect(url)
    tool = await make_tool(conn, "schedule-batched")
    await add(conn, tool, depth)
    await add(conn, tool, depth, scheduled=True)
    await conn.execute("VACUUM ANALYZE generation.tasks")
    took: dict[str, list[float]] = {"seed": [], "now": []}
    for _name, sql in (("seed", SEED_CLAIM_TASKS), ("now", task_pydb.CLAIM_TASKS_SQL)):  # warm up, prepare
        for _ in range(10):
            await batch_round(conn, sql, tool, batch)
    for i in range(rounds):
        order = (("seed", SEED_CLAIM_TASKS), ("now", task_pydb.CLAIM_TASKS_SQL))
        for name, sql in order if i % 2 == 0 else order[::-1]:
            took[name].append(await batch_round(conn, sql, tool, batch))
    await conn.close()
    rate = {k: batch * len(v) / sum(v) for k, v in took.items()}
    return {
        "depth": depth,
        "scheduled": depth,
        "batch": batch,
        "rounds": rounds,
        "tasks_per_s": rate,
        "batch_ms": {k: common.latency_summary(v) for k, v in took.items()},
        "ratio": rate["now"] / rate["seed"],
        "target": 0.9,
    }


async def deep(url: str, small: int, big: int, per_round: int, rounds: int) -> Json:
    conn = await connect(url)
    shallow, deep_tool = await make_tool(conn, "schedule-1k"), await make_tool(conn, "schedule-deep")
    await add(conn, shallow, small)
    await add(conn, deep_tool, big)
    await add(conn, deep_tool, big, scheduled=True)
    await conn.execute("VACUUM ANALYZE generation.tasks")
    lat: dict[str, list[float]] = {"small": [], "deep": []}
    tools = {"small": shallow, "deep": deep_tool}
    for i in range(rounds + 1):
        for name in ("small", "deep") if i % 2 == 0 else ("deep", "small"):
            claim = task_pb2.ClaimNextTaskRequest(tool_id=tools[name])
            for _ in range(per_round):
                t0 = time.perf_counter()
                resp = await task_pydb.claim_next_task(conn, claim)
                took = time.perf_counter() - t0
                assert resp.HasField("task")
                await task_pydb.complete_task(
                    conn, task_pb2.CompleteTaskRequest(task_id=resp.task.id, lease_token=resp.task.lease_token)
                )
                if i > 0:  # round 0 warms up
                    lat[name].append(took)
            await add(conn, tools[name], per_round)  # keep the depth constant
    await conn.close()
    summary = {k: common.latency_summary(v) for k, v in lat.items()}
    return {
        "small_queued": small,
        "deep_queued": big,
        "deep_scheduled": big,
        "samples": {k: len(v) for k, v in lat.items()},
        "claim_ms": summary,
        "p50_ratio": summary["deep"]["p50_ms"] / summary["small"]["p50_ms"],
        "target": 1.5,
    }


def run(server: str, quick: bool = False) -> Json:
    result: Json = {}
    with common.queue_database(server) as url:
        result["batched"] = asyncio.run(batched(url, 5_000 if quick else 50_000, 100, 10 if quick else 150))
    with common.queue_database(server) as url:
        result["deep"] = asyncio.run(deep(url, 1_000, 20_000 if quick else 1_000_000, 50, 4 if quick else 20))
    return result


def headline(r: Json) -> list[tuple[str, str, str, str]]:
    """report.py's headline rows: (what, measured, target, verdict)."""
    b, d = r["batched"], r["deep"]
    ok = (
        "**met**" if b["ratio"] >= b["target"] else "**not met**",
        "**met**" if d["p50_ratio"] <= d["target"] else "**not met**",
    )
    return [
        (f"Batched claim+complete with delays, pause, run-time limits vs the seed's claim, same table ({b['depth']:,} queued + {b['scheduled']:,} scheduled)",
         f"{b['tasks_per_s']['now']:,.0f} vs {b['tasks_per_s']['seed']:,.0f} tasks/s = {b['ratio']:.2f}x", "≥ 0.9x", ok[0]),
        (f"Claim p50, {d['deep_queued']:,} queued + {d['deep_scheduled']:,} scheduled vs {d['small_queued']:,} queued",
         f"{d['claim_ms']['deep']['p50_ms']:.2f} vs {d['claim_ms']['small']['p50_ms']:.2f} ms = {d['p50_ratio']:.2f}x", "≤ 1.5x", ok[1]),
    ]  # fmt: skip


def section(r: Json) -> list[str]:
    """report.py's section for RESULTS.md."""
    b, d = r["schedule"]["batched"], r["schedule"]["deep"]
    rows = [
        f"| {name} | {b['tasks_per_s'][name]:,.0f} | {b['batch_ms'][name]['p50_ms']:.2f} | {b['batch_ms'][name]['p90_ms']:.2f} |"
        for name in ("seed", "now")
    ]
    deep_rows = [f"| {label} | {d['claim_ms'][k]['p50_ms']:.3f} | {d['claim_ms'][k]['p90_ms']:.3f} | {d['claim_ms'][k]['n']} |"
                 for k, label in (("small", f"{d['small_queued']:,} queued"), ("deep", f"{d['deep_queued']:,} queued + {d['deep_scheduled']:,} scheduled"))]  # fmt: skip
    return [
        "## 11. Scheduling features on the claim path",
        "",
        (__doc__ or "").split("\n\n", 1)[1].strip(),
        "",
        f"Batched claim+complete, ClaimTasks of {b['batch']} then CompleteTasks, {b['rounds']} interleaved rounds each:",
        "",
        "| claim statement | tasks/s | batch p50 ms | batch p90 ms |",
        "|---|---|---|---|",
        *rows,
        "",
        f"Ratio now / seed: **{b['ratio']:.3f}x** (target ≥ {b['target']}x).",
        "",
        "| backlog of the claimed tool | claim p50 ms | claim p90 ms | samples |",
        "|---|---|---|---|",
        *deep_rows,
        "",
        f"p50 ratio: **{d['p50_ratio']:.3f}x** (target ≤ {d['target']}x).",
        "",
    ]


def main() -> int:
    args = common.arg_parser(__doc__ or "").parse_args()
    with common.server_url() as (server, _):
        common.write_json(run(server, quick=args.quick), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
