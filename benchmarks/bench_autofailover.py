"""Automatic failover by a real HA manager: pg_auto_failover (tests/support/pg_autofailover.py: a monitor
and two data nodes, local clusters on free ports, the monitor's timeouts lowered to seconds).

The generated server runs on the two nodes' multi-host URL (`target_session_attrs=read-write`).
Load as in tests/replication/test_replication_failover.py: 8 enqueuers (a QueueTask then a QueueTasks of 24
rows per round, every row with its own idempotency key, retried on UNAVAILABLE with the same
keys) and a WorkerFleet (32 lanes, 2 s leases) completing the tasks as they come; a client
interceptor (`CallLedger`) keeps the books of every call. Mid-run (the enqueuers holding their
second half until then) the primary's keeper and PostgreSQL are killed together (SIGKILL to its process group: a lost machine). Nobody promotes
by hand: the monitor notices, waits out its timeouts and promotes the secondary. Measured:
crash → the monitor's goal state for the survivor is primary, crash → health SERVING again,
crash → first enqueue and first completion answered OK; and, on the new primary, that every task
an enqueue or a completion answered OK is there (completed), none twice.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import math
import sys
import time
import uuid
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
from common import Json

TASKS = 5000
ENQUEUERS = 8
BATCH = 24
ENQUEUES = ("QueueTask", "QueueTasks")
COMPLETIONS = ("CompleteTask", "CompleteTasks")


async def _round(tasks: int) -> Json:
    import grpc
    import psycopg
    from conftest import server_config, start_server
    from generation.task.v1 import task_pb2, task_pb2_grpc
    from grpc_health.v1 import health_pb2
    from support.pg import scratch_database
    from support.pg_autofailover import FAST_MONITOR, formation
    from support.server_proc import CallLedger

    sys.path.insert(0, str(common.ROOT / "tests" / "replication"))
    from test_replication_failover import _all_completed, _retrying, health_status, noop

    sys.path.insert(0, str(common.ROOT / "worker"))
    from taskworker import WorkerFleet

    rounds = tasks // ENQUEUERS // (1 + BATCH)
    total = rounds * ENQUEUERS * (1 + BATCH)
    started_formation = time.monotonic()
    with formation() as paf:
        formed_s = time.monotonic() - started_formation
        with psycopg.connect(paf.multi_host_url) as conn:
            row = conn.execute("SHOW synchronous_standby_names").fetchone()
        sync_names = row[0] if row else ""
        with scratch_database(paf.multi_host_url) as url:
            cfg = dataclasses.replace(server_config(url), pool_timeout=1.0, health_interval=0.1, pool_max=12)
            running = await start_server(cfg)
            ledger = CallLedger()
            try:
                async with grpc.aio.insecure_channel(running.address, interceptors=[cast(Any, ledger)]) as channel:
                    stub = task_pb2_grpc.GenerationDataServiceStub(channel)
                    tool = (
                        await stub.RegisterTool(task_pb2.RegisterToolRequest(name=f"paf-{uuid.uuid4().hex[:8]}"))
                    ).tool
                    await stub.SetToolLease(task_pb2.SetToolLeaseRequest(tool_id=tool.id, lease_seconds=2))

                    # The second half of every enqueuer's rounds waits for the kill, so enqueues
                    # meet the outage whatever the machine's speed (a fast run had sent its last
                    # enqueue before the kill, leaving no enqueue to recover).
                    half, killed = rounds // 2, asyncio.Event()

                    async def enqueue() -> None:
                        for n in range(rounds):
                            if n == half:
                                await killed.wait()
                            single = task_pb2.QueueTaskRequest(
                                tool_id=tool.id, billing_idempotency_key=uuid.uuid4().hex
                            )
                            await _retrying(functools.partial(stub.QueueTask, single, timeout=5))
                            keys = [uuid.uuid4().hex for _ in range(BATCH)]
                            batch = task_pb2.QueueTasksRequest(
                                tool_ids=[tool.id] * BATCH, billing_idempotency_keys=keys
                            )
                            await _retrying(functools.partial(stub.QueueTasks, batch, timeout=5))

                    load = [asyncio.create_task(enqueue()) for _ in range(ENQUEUERS)]
                    fleet = WorkerFleet(stub, poll_interval=0.2, heartbeat_interval=0.5)
                    fleet.add_tool(tool.id, noop, concurrency=32, lease_seconds=2)
                    fleet_run = asyncio.create_task(fleet.run())
                    while not (len(ledger.enqueued) >= ENQUEUERS * half * (1 + BATCH) and ledger.completed):
                        await asyncio.sleep(0.01)  # watching the run's progress
                    at_kill = {"enqueued": len(ledger.enqueued), "completed": len(ledger.completed)}
                    crash_at = time.monotonic()
                    crashed = await asyncio.to_thread(paf.crash_primary)
                    killed.set()
                    survivor = next(n for n in paf.ports if n != crashed)
                    promoted_at = None
                    while promoted_at is None:
                        states = await asyncio.to_thread(paf.states)
                        if states.get(survivor, ("", ""))[1] in ("wait_primary", "primary"):
                            promoted_at = time.monotonic()
                        else:
                            assert time.monotonic() - crash_at < 120, states
                            await asyncio.sleep(0.1)  # polling the monitor
                    serving_at = None
                    while serving_at is None:
                        if await health_status(running.address) == health_pb2.HealthCheckResponse.SERVING:
                            serving_at = time.monotonic()
                        else:
                            await asyncio.sleep(0.05)
                    await asyncio.wait_for(asyncio.gather(*load), 180)
                    try:
                        finished = await _all_completed(url, tool.id, total, timeout=120)
                    finally:
                        fleet.drain()
                        await asyncio.wait_for(fleet_run, 30)
                    final_states = await asyncio.to_thread(paf.states)
            finally:
                await running.close()
            with psycopg.connect(url) as conn:
                where = conn.execute("SELECT inet_server_port()").fetchone()
                found = conn.execute(
                    "SELECT id::text, status::text FROM generation.tasks WHERE tool_id = %s", (tool.id,)
                ).fetchall()
        rows = dict(found)
        lost_enqueues = len(set(ledger.enqueued) - set(rows))
        lost_completions = sum(1 for t in ledger.completed if rows.get(t) != "completed")
        return {
            "tasks": total,
            "formation_s": formed_s,
            "synchronous_standby_names": sync_names,
            "monitor_settings_ms": FAST_MONITOR,
            **at_kill,
            "crash_to_promotion_assigned_s": promoted_at - crash_at,
            "crash_to_serving_s": serving_at - crash_at,
            "crash_to_first_ok_enqueue_s": _first_ok_after(ledger, ENQUEUES, crash_at),
            "crash_to_first_ok_completion_s": _first_ok_after(ledger, COMPLETIONS, crash_at),
            "new_primary_port": where[0] if where else None,
            "survivor_port": paf.ports[survivor],
            "final_states": {n: list(s) for n, s in final_states.items()},
            "failed_by_rpc": {f"{m} {code}": n for (m, code), n in sorted(ledger.failed.items())},
            "finished": finished,
            "acknowledged_enqueues": len(ledger.enqueued),
            "acknowledged_completions": len(ledger.completed),
            "lost_enqueues": lost_enqueues,
            "lost_completions": lost_completions,
            "rows_not_acknowledged": len(set(rows) - set(ledger.enqueued)),
        }


def _first_ok_after(ledger: Any, methods: tuple[str, ...], at: float) -> float:
    """Seconds from `at` to the first call of `methods` sent after it answered OK; NaN when none
    was (a small run can have finished its completions within the outage's settling)."""
    if not any(a.method in methods and a.started >= at for a in ledger.answers):
        return math.nan
    return float(ledger.first_ok(methods, at) - at)


def run(server: str = "", quick: bool = False) -> Json:
    """`server` is unused: the formation is three clusters of its own."""
    rounds = [asyncio.run(_round(1000 if quick else TASKS)) for _ in range(1 if quick else 2)]
    return {
        "rounds": rounds,
        **{
            key: common.summary([r[key] for r in rounds])
            for key in (
                "crash_to_promotion_assigned_s",
                "crash_to_serving_s",
                "crash_to_first_ok_enqueue_s",
                "crash_to_first_ok_completion_s",
            )
        },
        "lost_enqueues": sum(r["lost_enqueues"] for r in rounds),
        "lost_completions": sum(r["lost_completions"] for r in rounds),
    }


def main() -> int:
    args = common.arg_parser(__doc__ or "").parse_args()
    common.write_json(run(quick=args.quick), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
