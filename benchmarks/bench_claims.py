"""Fair and bounded claims (global and per-key limits, round-robin across keys, rate limits): what
they cost the claim, side by side in one run. Every statement is the generated handler's, on
psycopg connections (no gRPC in the way).

1. Noisy neighbour: tenant A enqueues `noisy` tasks (QueueTasks, batches of 1,000), then 100 other
   tenants enqueue 10 each; then `workers` connections drain the tool (ClaimTasks of 50 + CompleteTasks).
   Plain FIFO (no concurrency_key) and fair (each task keyed by its tenant) on two tools of the
   same database, one after the other. The other tenants' median wait (claimed at minus the
   workers' start) under each, their ratio (target ≤ 1/20), and the drain throughput of each (target ≥ 0.8x).
2. Global limit: 64 connections each in a ClaimNextTask + CompleteTask loop, on a tool without a
   limit and on one with SetToolConcurrency(64), in alternating rounds of a few seconds on the same
   table. Tasks per second of each and their ratio (target ≥ 0.8x).
3. Claim latency with keys: ClaimNextTask + CompleteTask cycles on a tool with 1,000 queued rows
   and on one with 1,000,000 queued rows over 10,000 concurrency keys (filled with
   generate_series, each key's tasks in round-robin places), in alternating rounds; claimed rows
   are replaced after each round. p50 of each and their ratio (target ≤ 2x).
4. Plans: EXPLAIN (ANALYZE, BUFFERS) of ClaimTasks (limit 50) at both sizes, and at the deep size
   under a global limit of 64 and a per-key limit of 2, each rolled back: the claim index serves
   every one (no sequential scan of the tasks, no sort of the backlog).

Commits do not wait for the WAL flush (synchronous_commit=off, as bench_backlog.py): the statement's
execution is measured, not the shared machine's fsync queue.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
import psycopg
from bench_backlog import connect, make_tool
from common import Json
from generation.task.v1 import task_pb2, task_pydb
from psycopg import AsyncConnection

INDEX = "idx_gen_tasks_queue"


async def enqueue(conn: AsyncConnection[Any], tool_id: str, keys: list[str]) -> list[str]:
    """QueueTasks in batches of 1,000 (a key per task, "" for none): the tasks' ids."""
    ids: list[str] = []
    for i in range(0, len(keys), 1000):
        part = keys[i : i + 1000]
        resp = await task_pydb.queue_tasks(
            conn, task_pb2.QueueTasksRequest(tool_ids=[tool_id] * len(part), concurrency_keys=part)
        )
        ids.extend(t.id for t in resp.tasks)
    return ids


async def drain(url: str, tool_id: str, workers: int, batch: int) -> tuple[float, Any]:
    """Seconds for `workers` connections to claim and complete every task of the tool, and the
    database's clock when they started."""
    conns = [await connect(url) for _ in range(workers)]
    cur = await conns[0].execute("SELECT clock_timestamp()")
    started = (await cur.fetchone() or [None])[0]

    async def worker(conn: AsyncConnection[Any]) -> None:
        req = task_pb2.ClaimTasksRequest(tool_id=tool_id, limit=batch)
        while True:
            tasks = list((await task_pydb.claim_tasks(conn, req)).tasks)
            if not tasks:
                return
            await task_pydb.complete_tasks(
                conn,
                task_pb2.CompleteTasksRequest(
                    task_ids=[t.id for t in tasks], lease_tokens=[t.lease_token for t in tasks]
                ),
            )

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in conns))
    took = time.perf_counter() - t0
    for c in conns:
        await c.close()
    return took, started


async def noisy_neighbour(url: str, noisy: int, tenants: int, each: int, workers: int) -> Json:
    conn = await connect(url)
    out: Json = {"noisy": noisy, "tenants": tenants, "each": each, "workers": workers, "batch": 50}
    for mode in ("fifo", "fair"):
        tool = await make_tool(conn, f"noisy-{mode}")
        key = (lambda k: k) if mode == "fair" else (lambda k: "")
        await enqueue(conn, tool, [key("tenant-a")] * noisy)
        others = await enqueue(conn, tool, [key(f"tenant-{t}") for t in range(tenants) for _ in range(each)])
        await conn.execute("ANALYZE generation.tasks")
        took, started = await drain(url, tool, workers, 50)
        # Every task was queued before the workers started: a task's wait is from their start.
        cur = await conn.execute(
            "SELECT extract(epoch FROM attempted_at - %s::timestamptz)::float8 FROM generation.tasks"
            " WHERE id = ANY (%s::uuid[])",
            (started, others),
        )
        waits = [r[0] for r in await cur.fetchall()]
        assert len(waits) == tenants * each, (mode, len(waits))
        out[mode] = {
            "drain_s": took,
            "tasks_per_s": (noisy + tenants * each) / took,
            "others_wait_p50_s": statistics.median(waits),
            "others_wait_max_s": max(waits),
        }
    await conn.close()
    out["wait_ratio"] = out["fair"]["others_wait_p50_s"] / out["fifo"]["others_wait_p50_s"]
    out["throughput_ratio"] = out["fair"]["tasks_per_s"] / out["fifo"]["tasks_per_s"]
    out["targets"] = {"wait_ratio": 1 / 20, "throughput_ratio": 0.8}
    return out


async def fill(conn: AsyncConnection[Any], tool_id: str, n: int, keys: int) -> None:
    """`n` queued rows over `keys` keys, each key's tasks in the places QueueTask gives them (the
    j-th task of a key: fair_seq j)."""
    step = 250_000
    done = 0
    while done < n:
        k = min(step, n - done)
        await conn.execute(
            "INSERT INTO generation.tasks (tool_id, input, concurrency_key, fair_seq)"
            " SELECT %s, '{}', 'key-' || (i %% %s::int), i / %s::int + 1 FROM generate_series(%s::int, %s::int) i",
            (tool_id, keys, keys, done, done + k - 1),
        )
        done += k


async def loop_claims(conns: list[AsyncConnection[Any]], tool_id: str, seconds: float) -> int:
    """Every connection in a ClaimNextTask + CompleteTask loop for `seconds`: tasks completed."""
    stop = time.perf_counter() + seconds
    req = task_pb2.ClaimNextTaskRequest(tool_id=tool_id)

    async def one(conn: AsyncConnection[Any]) -> int:
        n = 0
        while time.perf_counter() < stop:
            resp = await task_pydb.claim_next_task(conn, req)
            if not resp.HasField("task"):
                continue  # a limit's slot was busy: claim again (the fleet would back off)
            await task_pydb.complete_task(
                conn, task_pb2.CompleteTaskRequest(task_id=resp.task.id, lease_token=resp.task.lease_token)
            )
            n += 1
        return n

    return sum(await asyncio.gather(*(one(c) for c in conns)))


async def global_limit(url: str, clients: int, depth: int, rounds: int, seconds: float) -> Json:
    conn = await connect(url)
    tools = {"unlimited": await make_tool(conn, "limit-none"), "limited": await make_tool(conn, "limit-64")}
    await task_pydb.set_tool_concurrency(
        conn, task_pb2.SetToolConcurrencyRequest(tool_id=tools["limited"], max_running=64)
    )
    for tool in tools.values():
        await fill(conn, tool, depth, 1)
        await conn.execute("UPDATE generation.tasks SET concurrency_key = NULL WHERE tool_id = %s", (tool,))
    await conn.execute("VACUUM ANALYZE generation.tasks")
    conns: list[AsyncConnection[Any]] = []
    try:
        for _ in range(clients):
            conns.append(await connect(url))
    except psycopg.OperationalError:  # a shared server's connection slots: measure with what we got
        pass
    done: dict[str, int] = {"unlimited": 0, "limited": 0}
    took: dict[str, float] = {"unlimited": 0.0, "limited": 0.0}
    await loop_claims(conns, tools["unlimited"], 1.0)  # warm up, prepare
    await loop_claims(conns, tools["limited"], 1.0)
    for i in range(rounds):
        for name in ("unlimited", "limited") if i % 2 == 0 else ("limited", "unlimited"):
            t0 = time.perf_counter()
            done[name] += await loop_claims(conns, tools[name], seconds)
            took[name] += time.perf_counter() - t0
    for c in conns:
        await c.close()
    cur = await conn.execute("SELECT count(*) FROM generation.claim_slots WHERE tool_id = %s", (tools["limited"],))
    slots = (await cur.fetchone() or [0])[0]
    await conn.close()
    rate = {k: done[k] / took[k] for k in done}
    return {
        "clients": len(conns),
        "asked_clients": clients,
        "depth": depth,
        "rounds": rounds,
        "round_s": seconds,
        "slots": slots,
        "tasks_per_s": rate,
        "ratio": rate["limited"] / rate["unlimited"],
        "target": 0.8,
    }


async def claim_latency(url: str, small: int, big: int, keys: int, per_round: int, rounds: int) -> Json:
    conn = await connect(url)
    tools = {"small": await make_tool(conn, "keys-1k"), "deep": await make_tool(conn, "keys-deep")}
    await fill(conn, tools["small"], small, min(keys, max(1, small // 100)))
    await fill(conn, tools["deep"], big, keys)
    await conn.execute("VACUUM ANALYZE generation.tasks")
    lat: dict[str, list[float]] = {"small": [], "deep": []}
    for i in range(rounds + 1):
        for name in ("small", "deep") if i % 2 == 0 else ("deep", "small"):
            claim = task_pb2.ClaimNextTaskRequest(tool_id=tools[name])
            keyed = []
            for _ in range(per_round):
                t0 = time.perf_counter()
                resp = await task_pydb.claim_next_task(conn, claim)
                took = time.perf_counter() - t0
                assert resp.HasField("task")
                keyed.append(resp.task.concurrency_key)
                await task_pydb.complete_task(
                    conn, task_pb2.CompleteTaskRequest(task_id=resp.task.id, lease_token=resp.task.lease_token)
                )
                if i > 0:  # round 0 warms up
                    lat[name].append(took)
            # Keep the depth constant: the keys just served get a task each again (QueueTasks).
            await enqueue(conn, tools[name], keyed)
    plans = {
        "1k": await plan(conn, tools["small"]),
        "deep": await plan(conn, tools["deep"]),
    }
    await task_pydb.set_tool_concurrency(
        conn, task_pb2.SetToolConcurrencyRequest(tool_id=tools["deep"], max_running=64)
    )
    await task_pydb.set_tool_key_concurrency(
        conn, task_pb2.SetToolKeyConcurrencyRequest(tool_id=tools["deep"], key_max_running=2)
    )
    await conn.execute("ANALYZE generation.claim_slots")
    plans["deep_limited"] = await plan(conn, tools["deep"])
    await conn.close()
    summary = {k: common.latency_summary(v) for k, v in lat.items()}
    return {
        "small_queued": small,
        "deep_queued": big,
        "keys": keys,
        "samples": {k: len(v) for k, v in lat.items()},
        "claim_ms": summary,
        "p50_ratio": summary["deep"]["p50_ms"] / summary["small"]["p50_ms"],
        "target": 2.0,
        "plans": plans,
    }


def _nodes(p: Json) -> Iterator[Json]:
    yield p
    for child in p.get("Plans", []):
        yield from _nodes(child)


async def plan(conn: AsyncConnection[Any], tool_id: str) -> Json:
    """ClaimTasks (limit 50) executed under EXPLAIN and rolled back: what served it."""
    params = {"tool_id": tool_id, "limit": 50, "max_bytes": 0, "request_id": ""}
    async with conn.transaction(force_rollback=True):
        cur = await conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + task_pydb.CLAIM_TASKS_SQL, params)
        row = await cur.fetchone()
    assert row is not None
    top = row[0][0]
    nodes = list(_nodes(top["Plan"]))
    scans = [n for n in nodes if n["Node Type"].endswith("Scan") and n["Node Type"] != "CTE Scan"]
    backlog_sorts = [n for n in nodes if n["Node Type"] == "Sort" and any(d in scans for d in list(_nodes(n))[1:])]
    return {
        "execution_ms": top["Execution Time"],
        "buffers": top["Plan"].get("Shared Hit Blocks", 0) + top["Plan"].get("Shared Read Blocks", 0),
        "claimed": top["Plan"].get("Actual Rows", 0),
        "scans": sorted({f"{n['Node Type']} {n.get('Index Name') or n.get('Relation Name')}" for n in scans}),
        "rows_scanned": sum(int(n["Actual Rows"] * n["Actual Loops"]) for n in scans),
        "seq_scan_of_tasks": any(n["Node Type"] == "Seq Scan" and n.get("Relation Name") == "tasks" for n in scans),
        "backlog_sorted": bool(backlog_sorts),
        "index_driven": any(n.get("Index Name") == INDEX for n in scans)
        and not any(n["Node Type"] == "Seq Scan" and n.get("Relation Name") == "tasks" for n in scans)
        and not backlog_sorts,
    }


def run(server: str, quick: bool = False) -> Json:
    result: Json = {}
    with common.queue_database(server) as url:
        result["noisy"] = asyncio.run(
            noisy_neighbour(url, 2_000 if quick else 100_000, 20 if quick else 100, 5 if quick else 10, 8)
        )
    with common.queue_database(server) as url:
        result["global"] = asyncio.run(
            global_limit(url, 8 if quick else 64, 5_000 if quick else 100_000, 2 if quick else 6, 1.0 if quick else 4.0)
        )
    with common.queue_database(server) as url:
        result["latency"] = asyncio.run(
            claim_latency(url, 1_000, 20_000 if quick else 1_000_000, 200 if quick else 10_000, 50, 4 if quick else 20)
        )
    return result  # fmt: skip


def _met(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def headline(r: Json) -> list[tuple[str, str, str, str]]:
    """report.py's headline rows: (what, measured, target, verdict)."""
    n, g, lat = r["noisy"], r["global"], r["latency"]
    fair, fifo = n["fair"], n["fifo"]
    return [
        (f"Noisy neighbour ({n['noisy']:,} tasks of one tenant, then {n['tenants']} x {n['each']}): other tenants' median wait, fair vs FIFO",
         f"{fair['others_wait_p50_s']:.3f} vs {fifo['others_wait_p50_s']:.2f} s = 1/{1 / n['wait_ratio']:,.0f}", "≤ 1/20",
         _met(n["wait_ratio"] <= n["targets"]["wait_ratio"])),
        ("Noisy neighbour: drain throughput, fair vs FIFO",
         f"{fair['tasks_per_s']:,.0f} vs {fifo['tasks_per_s']:,.0f} tasks/s = {n['throughput_ratio']:.2f}x", "≥ 0.8x",
         _met(n["throughput_ratio"] >= n["targets"]["throughput_ratio"])),
        (f"Global limit of 64 vs unlimited, {g['clients']} concurrent claimers",
         f"{g['tasks_per_s']['limited']:,.0f} vs {g['tasks_per_s']['unlimited']:,.0f} tasks/s = {g['ratio']:.2f}x", "≥ 0.8x",
         _met(g["ratio"] >= g["target"])),
        (f"Claim p50, {lat['deep_queued']:,} queued over {lat['keys']:,} keys vs {lat['small_queued']:,} queued",
         f"{lat['claim_ms']['deep']['p50_ms']:.2f} vs {lat['claim_ms']['small']['p50_ms']:.2f} ms = {lat['p50_ratio']:.2f}x", "≤ 2x",
         _met(lat["p50_ratio"] <= lat["target"])),
        ("ClaimTasks plans index-driven at both sizes (and under limits)",
         ", ".join(f"{k}: {'yes' if p['index_driven'] else 'no'}" for k, p in lat["plans"].items()), "all",
         _met(all(p["index_driven"] for p in lat["plans"].values()))),
    ]  # fmt: skip


def section(r: Json) -> list[str]:
    """report.py's section for RESULTS.md."""
    c = r["claims"]
    n, g, lat = c["noisy"], c["global"], c["latency"]
    noisy_rows = [
        f"| {mode} | {n[mode]['others_wait_p50_s']:.3f} | {n[mode]['others_wait_max_s']:.3f} | {n[mode]['drain_s']:.1f} | {n[mode]['tasks_per_s']:,.0f} |"
        for mode in ("fifo", "fair")
    ]  # fmt: skip
    plan_rows = [
        f"| {name} | {'yes' if p['index_driven'] else 'no'} | {p['claimed']} | {p['rows_scanned']} | {p['buffers']} | {p['execution_ms']:.2f} | {'; '.join(p['scans'])} |"
        for name, p in lat["plans"].items()
    ]  # fmt: skip
    return [
        "## 16. Fair and bounded claims",
        "",
        (__doc__ or "").split("\n\n", 1)[1].strip(),
        "",
        f"Noisy neighbour, {n['workers']} connections draining with ClaimTasks of {n['batch']}:",
        "",
        "| order | other tenants' wait p50 s | wait max s | drain s | tasks/s |",
        "|---|---|---|---|---|",
        *noisy_rows,
        "",
        f"Wait ratio fair / FIFO: **{n['wait_ratio']:.5f}** (target ≤ {n['targets']['wait_ratio']}); "
        f"throughput ratio: **{n['throughput_ratio']:.3f}x** (target ≥ {n['targets']['throughput_ratio']}x).",
        "",
        f"Global limit: {g['clients']} connections (asked {g['asked_clients']}), {g['rounds']} alternating rounds of "
        f"{g['round_s']:.0f} s, {g['depth']:,} queued per tool, {g['slots']} slots: "
        f"{g['tasks_per_s']['limited']:,.0f} tasks/s limited vs {g['tasks_per_s']['unlimited']:,.0f} unlimited = "
        f"**{g['ratio']:.3f}x** (target ≥ {g['target']}x).",
        "",
        "| backlog of the claimed tool | claim p50 ms | claim p90 ms | samples |",
        "|---|---|---|---|",
        f"| {lat['small_queued']:,} queued | {lat['claim_ms']['small']['p50_ms']:.3f} | {lat['claim_ms']['small']['p90_ms']:.3f} | {lat['claim_ms']['small']['n']} |",
        f"| {lat['deep_queued']:,} queued over {lat['keys']:,} keys | {lat['claim_ms']['deep']['p50_ms']:.3f} | {lat['claim_ms']['deep']['p90_ms']:.3f} | {lat['claim_ms']['deep']['n']} |",
        "",
        f"p50 ratio: **{lat['p50_ratio']:.3f}x** (target ≤ {lat['target']}x).",
        "",
        "ClaimTasks (limit 50) under EXPLAIN ANALYZE, rolled back (`deep_limited`: global limit 64, per-key limit 2):",
        "",
        "| tool | index-driven | claimed | rows scanned | buffers | ms | scans |",
        "|---|---|---|---|---|---|---|",
        *plan_rows,
        "",
    ]  # fmt: skip


def main() -> int:
    args = common.arg_parser(__doc__ or "").parse_args()
    with common.server_url() as (server, _):
        common.write_json(run(server, quick=args.quick), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
