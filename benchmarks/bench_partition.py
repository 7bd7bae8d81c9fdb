"""Partitioning the queue: the plain table vs generation.tasks partitioned, at depth.

Layouts (tests/support/queue_layouts.py): `plain` (schema.sql as shipped), `plain_tuned` (the same table
with autovacuum triggered by row counts, as docs/performance.md recommends), `by_tool` (HASH
(tool_id), 8 partitions, the claim index in each) and `by_status` (LIST (status): live and
terminal rows in two partitions). Each layout lives in its own scratch database, filled the same
way, for two scenarios:

- `terminal`: 1,000,000 completed rows plus 25,000 queued rows for each of 8 tools (a queue that
  keeps its history);
- `deep`: 125,000 queued rows for each of 8 tools (1,000,000 queued), no history.

The statements are the generated module's own constants (CLAIM_NEXT_TASK_SQL, ...), run with
raw psycopg on connections that prepare them as the generated handlers do (`prepare=True`), so
PostgreSQL's plan cache picks generic or custom plans as it would for the server. Measured per
scenario, the layouts alternating (order reversed every round) so they share the machine's load:

- latency: one connection per layout runs claim (ClaimNextTask) + complete (CompleteTask) +
  GetTask cycles over the tools; p50/p99 of each statement;
- throughput: `clients` connections per layout run claim+complete cycles for `seconds`, then the
  batched path (ClaimTasks 100 + CompleteTasks); tasks/s, median over the rounds;
- PruneTasks (1,000 terminal rows per call) latency, `terminal` scenario; each call rolled back
  (untimed), so every call sees the same table;
- planning: the claim's planning time (EXPLAIN ANALYZE, custom plan) and which plans the
  prepared claim got (pg_prepared_statements' generic_plans / custom_plans);
- sizes: heap and each index summed over the partitions, and the deepest B-tree level
  (pageinspect's bt_metap); dead tuples left and autovacuum runs, summed over the partitions.

Claimed rows are replaced after every round (untimed), so every round sees the same depth. The
connections use synchronous_commit=off, as in bench_backlog: the statements' own work, not the
disk's fsync queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_backlog
import common
from common import Json
from generation.task.v1 import task_pydb
from psycopg import AsyncClientCursor, AsyncConnection, errors
from support import queue_layouts
from support.pg import schema_statements, scratch_database

TOOLS = 8
PARTITIONS = 8
CLAIM = task_pydb.CLAIM_NEXT_TASK_SQL
COMPLETE = task_pydb.COMPLETE_TASK_SQL
GET = task_pydb.GET_TASK_SQL
CLAIM_MANY = task_pydb.CLAIM_TASKS_SQL
COMPLETE_MANY = task_pydb.COMPLETE_TASKS_SQL
PRUNE = task_pydb.PRUNE_TASKS_SQL


async def connect(url: str) -> AsyncConnection[Any]:
    return await AsyncConnection.connect(url, autocommit=True, options="-c synchronous_commit=off")


#: The layouts measured: (schema layout, storage options of generation.tasks). `plain_tuned` is the
#: plain table with autovacuum triggered by row counts (docs/performance.md), to tell what
#: partitioning buys from what a smaller table's earlier autovacuum buys.
LAYOUTS: dict[str, tuple[str, str | None]] = {
    "plain": ("plain", None),
    "plain_tuned": ("plain", bench_backlog.SETTINGS["vacuum by row count"]),
    "by_tool": ("by_tool", None),
    "by_status": ("by_status", None),
}


async def create(url: str, layout: str) -> list[str]:
    """Apply the layout's schema; register the tools. Returns their ids."""
    schema, options = LAYOUTS[layout]
    async with await connect(url) as conn:
        for statement in schema_statements(queue_layouts.schema_sql(schema, PARTITIONS)):
            await conn.execute(statement)
        if options:
            await conn.execute(f"ALTER TABLE generation.tasks SET ({options})")
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
        ids = []
        for i in range(TOOLS):
            cur = await conn.execute("INSERT INTO generation.tools (name) VALUES (%s) RETURNING id", (f"tool-{i}",))
            row = await cur.fetchone()
            assert row is not None
            ids.append(str(row[0]))
    return ids


async def add_queued(conn: AsyncConnection[Any], tool_id: str, n: int) -> None:
    step = 250_000  # bounded statements: no one huge transaction
    while n > 0:
        k = min(step, n)
        await conn.execute(
            "INSERT INTO generation.tasks (tool_id, input) SELECT %s, '{}' FROM generate_series(1, %s)", (tool_id, k)
        )
        n -= k


async def add_terminal(conn: AsyncConnection[Any], tool_id: str, n: int) -> None:
    """`n` completed rows finished an hour ago or more, one millisecond apart (PruneTasks' order)."""
    step = 250_000
    done = 0
    while done < n:
        k = min(step, n - done)
        await conn.execute(
            "INSERT INTO generation.tasks (tool_id, input, status, output, created_at, started_at, completed_at) "
            "SELECT %s, '{}', 'completed', '{}', t - interval '1 minute', t - interval '1 minute', t "
            "FROM (SELECT now() - interval '1 hour' - (g + %s) * interval '1 ms' AS t "
            "      FROM generate_series(1, %s) AS g) AS s",
            (tool_id, done, k),
        )
        done += k


async def fill(url: str, tools: list[str], terminal: int, queued: int) -> float:
    t0 = time.perf_counter()
    async with await connect(url) as conn:
        for tool_id in tools:
            await add_terminal(conn, tool_id, terminal // len(tools))
            await add_queued(conn, tool_id, queued)
        await conn.execute("VACUUM ANALYZE generation.tasks")
        await conn.execute("CHECKPOINT")  # write the fill out now, not during the measurement
    return time.perf_counter() - t0


async def claim_complete(conn: AsyncConnection[Any], tool_id: str, timings: dict[str, list[float]] | None) -> bool:
    """One ClaimNextTask + CompleteTask (+ GetTask of it when timed); whether a task was claimed.
    A claim PostgreSQL aborts with 40001 (the row it meant to lock was moved to another partition
    by a concurrent update, which the server answers ABORTED) raises Aborted."""
    t0 = time.perf_counter()
    try:
        cur = await conn.execute(CLAIM, {"tool_id": tool_id, "max_bytes": 0, "request_id": ""}, prepare=True)
        row = await cur.fetchone()
    except errors.SerializationFailure as e:
        raise Aborted from e
    t1 = time.perf_counter()
    if row is None:
        return False
    await conn.execute(
        COMPLETE, {"task_id": row[0], "lease_token": row[13], "output": None, "reported_usage": None}, prepare=True
    )
    t2 = time.perf_counter()
    if timings is not None:
        await (await conn.execute(GET, {"task_id": row[0]}, prepare=True)).fetchone()
        t3 = time.perf_counter()
        timings["claim"].append(t1 - t0)
        timings["complete"].append(t2 - t1)
        timings["get"].append(t3 - t2)
    return True


class Aborted(Exception):
    """A claim PostgreSQL refused with SQLSTATE 40001."""


async def claim_complete_batch(conn: AsyncConnection[Any], tool_id: str) -> int:
    try:
        cur = await conn.execute(
            CLAIM_MANY, {"tool_id": tool_id, "limit": 100, "max_bytes": 0, "request_id": ""}, prepare=True
        )
        rows = await cur.fetchall()
    except errors.SerializationFailure as e:
        raise Aborted from e
    params = {
        "task_ids": [r[0] for r in rows],
        "lease_tokens": [r[13] for r in rows],
        "outputs": [],
        "reported_usages": [],
    }
    cur = await conn.execute(COMPLETE_MANY, params, prepare=True)
    return len(await cur.fetchall())


async def throughput(
    url: str, tools: list[str], clients: int, seconds: float, batched: bool, used: Counter[str]
) -> tuple[float, float]:
    """(tasks/s, aborted claims/s) of `clients` connections looping for `seconds`; an aborted
    claim is retried, as a worker retries ABORTED. `used` counts the tasks per tool."""
    conns = [await connect(url) for _ in range(clients)]
    done = aborted = 0

    async def loop(k: int, conn: AsyncConnection[Any]) -> None:
        nonlocal done, aborted
        i = k
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            tool_id = tools[i % len(tools)]
            try:
                n = (
                    await claim_complete_batch(conn, tool_id)
                    if batched
                    else int(await claim_complete(conn, tool_id, None))
                )
            except Aborted:
                aborted += 1
                continue
            done += n
            used[tool_id] += n
            i += 1

    try:
        # Every connection has prepared its statements before the clock starts.
        for k, conn in enumerate(conns):
            with contextlib.suppress(Aborted):
                await (claim_complete_batch(conn, tools[k]) if batched else claim_complete(conn, tools[k], None))
        t0 = time.perf_counter()
        await asyncio.gather(*(loop(k, c) for k, c in enumerate(conns)))
        elapsed = time.perf_counter() - t0
        return done / elapsed, aborted / elapsed
    finally:
        for c in conns:
            await c.close()


async def plans(conn: AsyncConnection[Any], tool_id: str, repeats: int) -> Json:
    """The claim's planning time (custom plan: the tool id known to the planner, which prunes the
    partitions) by EXPLAIN ANALYZE in a rolled-back transaction, and the plan cache's choice for
    the statements the measuring connection prepared."""
    # Read first: psycopg deallocates its prepared statements when it sees the ROLLBACK below.
    cur2 = await conn.execute("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
    names = {
        _server_text(CLAIM).strip(): "claim",
        _server_text(COMPLETE).strip(): "complete",
        _server_text(GET).strip(): "get",
    }
    cache = {names[s.strip()]: {"generic": g, "custom": c} for s, g, c in await cur2.fetchall() if s.strip() in names}
    times = []
    async with AsyncClientCursor(conn) as cur:
        for _ in range(repeats):
            await conn.execute("BEGIN")
            await cur.execute(
                "EXPLAIN (ANALYZE, SUMMARY, FORMAT JSON) " + CLAIM,
                {"tool_id": tool_id, "max_bytes": 0, "request_id": ""},
            )
            row = await cur.fetchone()
            await conn.execute("ROLLBACK")
            assert row is not None
            times.append(float(row[0][0]["Planning Time"]))
    return {"claim_planning_ms": common.summary(times), "plan_cache": cache}


def _server_text(sql: str) -> str:
    """The statement as psycopg sends it to the server (%(name)s -> $n, in order of appearance)."""
    import re

    names: list[str] = []

    def sub(m: re.Match[str]) -> str:
        if m.group(1) not in names:
            names.append(m.group(1))
        return f"${names.index(m.group(1)) + 1}"

    return re.sub(r"%\((\w+)\)s", sub, sql)


async def sizes(conn: AsyncConnection[Any]) -> Json:
    """Heap and index bytes summed over the partition tree; each index's deepest B-tree level."""
    # pg_partition_tree has no rows for a relation that is not partitioned: then the relation itself.
    leaves = (
        "(SELECT t.relid FROM pg_partition_tree({0}) AS t WHERE t.isleaf "
        "UNION ALL SELECT {0}::regclass WHERE NOT EXISTS (SELECT FROM pg_partition_tree({0}))) AS leaf"
    )
    cur = await conn.execute(
        "SELECT coalesce(sum(pg_relation_size(leaf.relid)), 0) FROM " + leaves.format("'generation.tasks'::regclass")
    )
    row = await cur.fetchone()
    heap = int(row[0]) if row else 0
    cur = await conn.execute(
        "SELECT c.relname, sum(pg_relation_size(leaf.relid)), max((bt_metap(leaf.relid::regclass::text)).level) "
        "FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid, LATERAL "
        + leaves.format("i.indexrelid::regclass")
        + " WHERE i.indrelid = 'generation.tasks'::regclass GROUP BY c.relname ORDER BY c.relname"
    )
    indexes = {name: {"bytes": int(b), "btree_level": int(lvl)} for name, b, lvl in await cur.fetchall()}
    # Summed over the partitions: what autovacuum left and how often it ran during the run.
    cur = await conn.execute(
        "SELECT coalesce(sum(n_dead_tup), 0), coalesce(sum(autovacuum_count), 0) FROM pg_stat_user_tables "
        "WHERE relid IN (SELECT leaf.relid FROM " + leaves.format("'generation.tasks'::regclass") + ")"
    )
    row = await cur.fetchone()
    dead, autovacuums = (int(row[0]), int(row[1])) if row else (0, 0)
    return {
        "heap_bytes": heap,
        "index_bytes": sum(i["bytes"] for i in indexes.values()),
        "indexes": indexes,
        "dead_tuples": dead,
        "autovacuums": autovacuums,
    }


async def scenario(server: str, terminal: int, queued: int, quick: bool) -> Json:
    rounds, per_round = (2, 16) if quick else (6, 400)
    tp_rounds, tp_seconds, clients = (1, 0.5, 2) if quick else (3, 6.0, 4)
    prune_calls = 2 if quick else 5
    layouts = list(LAYOUTS)
    with contextlib.ExitStack() as stack:
        urls = {lay: stack.enter_context(scratch_database(server, None)) for lay in layouts}
        tools = {lay: await create(urls[lay], lay) for lay in layouts}
        fill_s = {lay: await fill(urls[lay], tools[lay], terminal, queued) for lay in layouts}
        conns = {lay: await connect(urls[lay]) for lay in layouts}
        timings: dict[str, dict[str, list[float]]] = {
            lay: {"claim": [], "complete": [], "get": [], "prune": []} for lay in layouts
        }
        used: dict[str, Counter[str]] = {lay: Counter() for lay in layouts}
        tp: dict[str, dict[str, list[float]]] = {
            lay: {"single": [], "batched": [], "single_aborted": [], "batched_aborted": []} for lay in layouts
        }

        async def top_up() -> None:
            for lay in layouts:
                for tool_id, n in used[lay].items():
                    await add_queued(conns[lay], tool_id, n)
                used[lay].clear()

        try:
            for lay in layouts:  # warm: prepared statements (past the plan cache's 5 custom plans), caches
                for i in range(2 * TOOLS):
                    used[lay][tools[lay][i % TOOLS]] += await claim_complete(conns[lay], tools[lay][i % TOOLS], None)
            for r in range(rounds):
                order = list(layouts) if r % 2 == 0 else list(reversed(layouts))
                for lay in order:
                    for i in range(per_round):
                        tool_id = tools[lay][i % TOOLS]
                        used[lay][tool_id] += await claim_complete(conns[lay], tool_id, timings[lay])
                    if terminal:
                        for _ in range(prune_calls):
                            # Rolled back (untimed), so every call deletes from the same table: the
                            # statement's cost at this depth, not at a depth that shrinks per call.
                            async with conns[lay].transaction(force_rollback=True):
                                t0 = time.perf_counter()
                                await conns[lay].execute(PRUNE, {"older_than_seconds": 60, "limit": 1000}, prepare=True)
                                timings[lay]["prune"].append(time.perf_counter() - t0)
                await top_up()
            planning = {lay: await plans(conns[lay], tools[lay][0], 5 if quick else 30) for lay in layouts}
            for r in range(tp_rounds):
                for batched in (False, True):
                    order = list(layouts) if r % 2 == 0 else list(reversed(layouts))
                    for lay in order:
                        rate, aborts = await throughput(urls[lay], tools[lay], clients, tp_seconds, batched, used[lay])
                        mode = "batched" if batched else "single"
                        tp[lay][mode].append(rate)
                        tp[lay][f"{mode}_aborted"].append(aborts)
                    await top_up()
            size = {lay: await sizes(conns[lay]) for lay in layouts}
        finally:
            for c in conns.values():
                await c.close()
    out: Json = {}
    for lay in layouts:
        t = timings[lay]
        out[lay] = {
            "fill_seconds": fill_s[lay],
            "claim": common.latency_summary(t["claim"]),
            "complete": common.latency_summary(t["complete"]),
            "get": common.latency_summary(t["get"]),
            "prune": common.latency_summary(t["prune"]) if t["prune"] else None,
            "single_tasks_per_s": common.summary(tp[lay]["single"]),
            "batched_tasks_per_s": common.summary(tp[lay]["batched"]),
            # Claims PostgreSQL aborted with 40001 (moved to another partition), per second.
            "single_aborted_per_s": common.summary(tp[lay]["single_aborted"]),
            "batched_aborted_per_s": common.summary(tp[lay]["batched_aborted"]),
            **planning[lay],
            **size[lay],
        }
    plain = out["plain"]
    for lay in layouts:
        out[lay]["vs_plain"] = {
            "claim_p50": out[lay]["claim"]["p50_ms"] / plain["claim"]["p50_ms"],
            "claim_p99": out[lay]["claim"]["p99_ms"] / plain["claim"]["p99_ms"],
            "get_p50": out[lay]["get"]["p50_ms"] / plain["get"]["p50_ms"],
            "single": out[lay]["single_tasks_per_s"]["median"] / plain["single_tasks_per_s"]["median"],
            "batched": out[lay]["batched_tasks_per_s"]["median"] / plain["batched_tasks_per_s"]["median"],
        }
    return {
        "terminal_rows": terminal,
        "queued_per_tool": queued,
        "rounds": rounds,
        "cycles_per_round": per_round,
        "throughput_rounds": tp_rounds,
        "throughput_seconds": tp_seconds,
        "clients": clients,
        "layouts": out,
    }


def run(server: str, quick: bool = False, own_cluster: bool = False) -> Json:
    scenarios = (
        {"terminal": (2_000, 200), "deep": (0, 400)}
        if quick
        else {"terminal": (1_000_000, 25_000), "deep": (0, 125_000)}
    )
    if own_cluster:  # as bench_backlog: autovacuum wakes every 10 s on the benchmark's own cluster
        asyncio.run(bench_backlog.set_naptime(server, 10))
    result: Json = {
        "tools": TOOLS,
        "partitions_by_tool": PARTITIONS,
        "scenarios": {},
        "autovacuum_naptime": "10s (the benchmark's own cluster)" if own_cluster else "server default",
    }
    for name, (terminal, queued) in scenarios.items():
        print(f"bench_partition: {name} ...", file=sys.stderr, flush=True)
        result["scenarios"][name] = asyncio.run(scenario(server, terminal, queued, quick))
    result["claim_p50_vs_plain"] = {
        name: {lay: s["layouts"][lay]["vs_plain"]["claim_p50"] for lay in s["layouts"]}
        for name, s in result["scenarios"].items()
    }
    return result


def main() -> int:
    args = common.arg_parser(__doc__ or "").parse_args()
    with common.server_url() as (server, cluster):
        common.write_json(run(server, quick=args.quick, own_cluster=cluster is not None), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
