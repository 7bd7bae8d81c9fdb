"""Backlog depth: claim latency with 1k, 10k, 100k and 1M queued rows, and after sustained churn.

Depth sweep: one tool per depth, each with that many queued rows, all in the one table (the
claim index leads with tool_id, so each tool's backlog is its own index range). One worker runs
claim+complete cycles through the generated handlers (`claim_next_task`, `complete_task`) on one
connection, in rounds that visit every depth in turn (so all depths see the same machine load);
after each round the claimed rows are replaced, keeping every depth constant. The claim's
latency is recorded.

Churn: on a fresh 1M backlog, three connections claim and complete batches of 100 as fast as they
can for `churn_seconds` (dead row versions pile up at the head of the claim index) while a fourth
runs single claims whose latency is sampled, with pg_stat_user_tables, every few seconds; then
the same single-worker measurement as before the churn. Run once per storage setting (table
defaults, then the autovacuum settings docs/performance.md discusses).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
from common import Json
from generation.task.v1 import task_pb2, task_pydb
from psycopg import AsyncConnection

# Storage settings compared under churn. "tuned" is what docs/performance.md recommends.
SETTINGS: dict[str, str | None] = {
    "table defaults": None,
    "vacuum by row count": (
        "autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 50000, "
        "autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 100000, "
        "autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 100000"
    ),
    "vacuum by row count, no cost delay": (
        "autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 50000, "
        "autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 100000, "
        "autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 100000, "
        "autovacuum_vacuum_cost_delay = 0"
    ),
}
CHURN_BATCH_WORKERS = 3
RESET = (
    "autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, autovacuum_vacuum_insert_scale_factor, "
    "autovacuum_vacuum_insert_threshold, autovacuum_analyze_scale_factor, autovacuum_analyze_threshold, "
    "autovacuum_vacuum_cost_delay, fillfactor"
)


async def connect(url: str) -> AsyncConnection[Any]:
    """A connection whose commits do not wait for the WAL flush (synchronous_commit=off), so a
    claim's latency is its execution (index and heap work) rather than the disk's fsync queue,
    which on a shared machine swamps everything else. Durable commits are measured by the
    throughput benchmark, against pgbench."""
    return await AsyncConnection.connect(url, autocommit=True, options="-c synchronous_commit=off")


async def make_tool(conn: AsyncConnection[Any], name: str) -> str:
    cur = await conn.execute(
        "INSERT INTO generation.tools (name) VALUES (%s) ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING id",
        (name,),
    )
    row = await cur.fetchone()
    assert row is not None
    return str(row[0])


async def queued(conn: AsyncConnection[Any], tool_id: str) -> int:
    cur = await conn.execute(
        "SELECT count(*) FROM generation.tasks WHERE tool_id = %s AND status = 'queued'", (tool_id,)
    )
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def add(conn: AsyncConnection[Any], tool_id: str, n: int) -> None:
    step = 250_000  # bounded statements: no one huge transaction
    while n > 0:
        k = min(step, n)
        await conn.execute(
            "INSERT INTO generation.tasks (tool_id, input) SELECT %s, '{}' FROM generate_series(1, %s)", (tool_id, k)
        )
        n -= k


async def cycles(conn: AsyncConnection[Any], tool_id: str, n: int) -> list[float]:
    """`n` claim+complete cycles through the generated handlers; the claims' latencies."""
    claim = task_pb2.ClaimNextTaskRequest(tool_id=tool_id)
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        resp = await task_pydb.claim_next_task(conn, claim)
        out.append(time.perf_counter() - t0)
        if resp.HasField("task"):
            await task_pydb.complete_task(
                conn, task_pb2.CompleteTaskRequest(task_id=resp.task.id, lease_token=resp.task.lease_token)
            )
    return out


async def table_stats(conn: AsyncConnection[Any]) -> Json:
    cur = await conn.execute(
        "SELECT n_live_tup, n_dead_tup, n_tup_upd, n_tup_hot_upd, autovacuum_count, autoanalyze_count, "
        "pg_relation_size('generation.tasks'), pg_relation_size('generation.idx_gen_tasks_queue') "
        "FROM pg_stat_user_tables WHERE relid = 'generation.tasks'::regclass"
    )
    row = await cur.fetchone()
    assert row is not None
    keys = ("live", "dead", "updates", "hot_updates", "autovacuums", "autoanalyzes", "heap_bytes", "queue_index_bytes")
    return dict(zip(keys, (int(x) for x in row), strict=True))


async def churn(url: str, tool_id: str, batch_workers: int, seconds: float, window: float) -> Json:
    """Sustained churn for `seconds`: `batch_workers` connections claim and complete batches of 100
    (ClaimTasks + CompleteTasks, as fast as they can: each task leaves two dead row versions)
    while one more connection runs single claim+complete cycles whose claim latency is sampled.
    Latency and table stats are reported per `window` seconds."""
    conns = [await connect(url) for _ in range(batch_workers + 1)]
    monitor = await connect(url)
    samples: list[tuple[float, float]] = []
    start = time.monotonic()
    end = start + seconds
    done = 0

    async def batches(conn: AsyncConnection[Any]) -> None:
        nonlocal done
        claim = task_pb2.ClaimTasksRequest(tool_id=tool_id, limit=100)
        while time.monotonic() < end:
            got = await task_pydb.claim_tasks(conn, claim)
            ids = [t.id for t in got.tasks]
            tokens = [t.lease_token for t in got.tasks]
            completed = await task_pydb.complete_tasks(
                conn, task_pb2.CompleteTasksRequest(task_ids=ids, lease_tokens=tokens)
            )
            done += len(completed.tasks)

    async def sampler(conn: AsyncConnection[Any]) -> None:
        nonlocal done
        claim = task_pb2.ClaimNextTaskRequest(tool_id=tool_id)
        while time.monotonic() < end:
            t0 = time.perf_counter()
            resp = await task_pydb.claim_next_task(conn, claim)
            samples.append((time.monotonic() - start, time.perf_counter() - t0))
            if resp.HasField("task"):
                await task_pydb.complete_task(
                    conn, task_pb2.CompleteTaskRequest(task_id=resp.task.id, lease_token=resp.task.lease_token)
                )
                done += 1

    async def watch() -> list[Json]:
        out = []
        while time.monotonic() < end:
            await asyncio.sleep(window)
            out.append({"t": round(time.monotonic() - start, 1), **await table_stats(monitor)})
        return out

    try:
        watcher = asyncio.ensure_future(watch())
        await asyncio.gather(sampler(conns[0]), *(batches(c) for c in conns[1:]))
        stats = await watcher
    finally:
        for c in (*conns, monitor):
            await c.close()
    windows = []
    for i, s in enumerate(stats):
        lo = stats[i - 1]["t"] if i else 0.0
        lat = [x for t, x in samples if lo <= t < s["t"]]
        windows.append({**s, **common.latency_summary(lat)})
    return {"tasks_per_s": done / seconds, "windows": windows}


async def measure(url: str, quick: bool) -> Json:
    depths = (1_000, 10_000) if quick else (1_000, 10_000, 100_000, 1_000_000)
    rounds, per_round = (2, 25) if quick else (10, 100)
    churn_s, window = (2.0, 1.0) if quick else (30.0, 3.0)
    conn = await connect(url)
    try:
        # One tool per depth, all in the one table; rounds interleave the tools so every depth
        # is measured under the same machine load. Each round's claims are topped up after it.
        tools = {d: await make_tool(conn, f"backlog-{d}") for d in depths}
        start = time.perf_counter()
        for d, tool_id in tools.items():
            await add(conn, tool_id, d)
        await conn.execute("VACUUM ANALYZE generation.tasks")
        await conn.execute("CHECKPOINT")  # write the fill out now, not during the measurement
        fill = time.perf_counter() - start
        lat: dict[int, list[float]] = {d: [] for d in depths}
        for tool_id in tools.values():
            await cycles(conn, tool_id, min(50, per_round))  # warm: prepared statements, caches
            await add(conn, tool_id, min(50, per_round))
        for r in range(rounds):
            order = list(depths) if r % 2 == 0 else list(reversed(depths))
            for d in order:
                lat[d].extend(await cycles(conn, tools[d], per_round))
            for d in depths:
                await add(conn, tools[d], per_round)
        sweep: Json = {str(d): common.latency_summary(lat[d]) for d in depths}
        big = depths[-1]
        runs: Json = {}
        for name, options in SETTINGS.items():
            # A fresh backlog of `big` rows for the deepest tool alone, under these settings.
            await conn.execute("TRUNCATE generation.tasks")
            await conn.execute(f"ALTER TABLE generation.tasks RESET ({RESET})")
            if options:
                await conn.execute(f"ALTER TABLE generation.tasks SET ({options})")
            t0 = time.perf_counter()
            await add(conn, tools[big], big)
            await conn.execute("VACUUM ANALYZE generation.tasks")
            await conn.execute("CHECKPOINT")
            refill = time.perf_counter() - t0
            n = rounds * per_round // 2
            await cycles(conn, tools[big], min(50, n))
            before = common.latency_summary(await cycles(conn, tools[big], n))
            stats0 = await table_stats(conn)
            during = await churn(url, tools[big], CHURN_BATCH_WORKERS, churn_s, window)
            after = common.latency_summary(await cycles(conn, tools[big], n))
            runs[name] = {
                "options": options or "(none)",
                "fill_seconds": refill,
                "before": before,
                "churn": during,
                "after": after,
                "stats_after": await table_stats(conn),
                "autovacuums_during": (await table_stats(conn))["autovacuums"] - stats0["autovacuums"],
                "heap_bytes_before": stats0["heap_bytes"],
            }
        await conn.execute(f"ALTER TABLE generation.tasks RESET ({RESET})")
    finally:
        await conn.close()
    p50 = {d: sweep[d]["p50_ms"] for d in sweep}
    first, last = str(depths[0]), str(depths[-1])
    return {
        "rounds": rounds,
        "cycles_per_round": per_round,
        "fill_seconds": fill,
        "sweep": sweep,
        "p50_ratio_deepest_vs_1k": p50[last] / p50[first],
        "churn_depth": big,
        "churn_seconds": churn_s,
        "churn_batch_workers": CHURN_BATCH_WORKERS,
        "settings": runs,
        "p50_ratio_after_churn_vs_1k": {k: v["after"]["p50_ms"] / p50[first] for k, v in runs.items()},
        "median_churn_p50_ms": {
            k: statistics.median(w["p50_ms"] for w in v["churn"]["windows"]) if v["churn"]["windows"] else None
            for k, v in runs.items()
        },
    }


async def set_naptime(server: str, seconds: int) -> None:
    """Only on the benchmark's own throwaway cluster: wake autovacuum every `seconds`."""
    async with await AsyncConnection.connect(server, autocommit=True) as conn:
        await conn.execute(f"ALTER SYSTEM SET autovacuum_naptime = '{int(seconds)}s'")
        await conn.execute("SELECT pg_reload_conf()")


def run(server: str, quick: bool = False, own_cluster: bool = False) -> Json:
    if own_cluster:
        asyncio.run(set_naptime(server, 10))
    with common.queue_database(server) as url:
        result = asyncio.run(measure(url, quick))
        result["server"] = common.machine_info(url).get("postgres_settings", {})
    result["autovacuum_naptime"] = "10s (set on the benchmark's own cluster)" if own_cluster else "server default"
    return result


def main() -> int:
    args = common.arg_parser(__doc__ or "").parse_args()
    with common.server_url() as (server, cluster):
        common.write_json(run(server, quick=args.quick, own_cluster=cluster is not None), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
