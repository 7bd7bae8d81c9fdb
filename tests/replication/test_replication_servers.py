"""Many data-plane processes: three generated server processes on one database, a worker fleet
reaching them through one channel with client-side round_robin (the target and options
`open_channel` makes of the three addresses). Every server takes calls, and the queue's exactly-once holds: each task is processed
once, completed once and never reclaimed, and the servers' logs account for every claim and
completion the client saw answered. 10,000 tasks, enqueued in QueueTasks batches of 500 while
the fleet (64 lanes, batched claims and reports) already drains them; the servers start together."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import grpc
import psycopg
import pytest
from conftest import as_service_role
from generation.task.v1 import task_pb2, task_pb2_grpc
from support.pg import Cluster, scratch_database
from support.server_proc import CallLedger, serving
from taskworker import ConnectionSetupError, TaskContext, WorkerFleet
from taskworker.connect import channel_target

ROOT = Path(__file__).resolve().parents[2]
SERVERS = 3
TASKS = 10_000
BULK = 500  # tasks per QueueTasks
FLEETS = 3
CONCURRENCY = 32  # each fleet's lanes: claims of up to 32 tasks, reports of as many


def test_several_addresses_become_one_round_robin_target() -> None:
    target, options = channel_target("127.0.0.1:5001, 127.0.0.1:5002")
    assert target == "ipv4:127.0.0.1:5001,127.0.0.1:5002"
    assert ("grpc.lb_policy_name", "round_robin") in options
    assert channel_target("[::1]:5001,[::1]:5002")[0] == "ipv6:[::1]:5001,[::1]:5002"
    assert channel_target("queue.internal:50051")[0] == "queue.internal:50051"  # one address: as given
    with pytest.raises(ConnectionSetupError, match="dns:///name:port"):
        channel_target("a.internal:50051,b.internal:50051")


@pytest.fixture
def queue_db(pg_server: tuple[str, Cluster | None]) -> Iterator[str]:
    with scratch_database(pg_server[0]) as url:
        yield url


async def test_three_servers_behind_round_robin_keep_exactly_once(queue_db: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "generated")}
    argv = [
        sys.executable,
        "-m",
        "generation.task.v1.task_pydb_server",
        "--database-url",
        as_service_role(queue_db),
        "--pool-max",
        "4",
        "--log-level",
        "debug",  # one line per call: which server answered what
        "--no-reflection",
    ]
    processed: collections.Counter[str] = collections.Counter()
    ledger = CallLedger()
    async with contextlib.AsyncExitStack() as stack:
        # Started together (each imports for about a second). Every one that started is on the
        # stack, and stopped by it, before a failure to start is raised.
        started = await asyncio.gather(
            *(stack.enter_async_context(serving(argv, env)) for _ in range(SERVERS)), return_exceptions=True
        )
        failures = [outcome for outcome in started if isinstance(outcome, BaseException)]
        if failures:
            raise failures[0]
        addresses = [outcome[0] for outcome in started if not isinstance(outcome, BaseException)]
        server_logs = [outcome[1] for outcome in started if not isinstance(outcome, BaseException)]
        # open_channel's target and options (one channel, round_robin over the three addresses),
        # with the ledger that counts what each call answered.
        target, options = channel_target(",".join(addresses))
        channel = await stack.enter_async_context(
            grpc.aio.insecure_channel(target, options=options, interceptors=[cast(Any, ledger)])
        )
        stub = task_pb2_grpc.GenerationDataServiceStub(channel)
        tool = (
            await stub.RegisterTool(
                task_pb2.RegisterToolRequest(name=f"rr-{uuid.uuid4().hex[:8]}"), wait_for_ready=True, timeout=20
            )
        ).tool

        async def process(task: task_pb2.Task, ctx: TaskContext) -> Any:
            processed[task.id] += 1
            return {"ok": True}

        async def enqueue(batches: int) -> None:
            for _ in range(batches):
                await stub.QueueTasks(task_pb2.QueueTasksRequest(tool_ids=[tool.id] * BULK), timeout=20)

        # Several fleets: their claims race each other on different servers (one fleet's lane
        # claims one batch at a time).
        fleets = [WorkerFleet(stub, poll_interval=0.2) for _ in range(FLEETS)]
        for fleet in fleets:
            fleet.add_tool(tool.id, process, concurrency=CONCURRENCY, lease_seconds=tool.lease_seconds)
        running = [asyncio.create_task(fleet.run()) for fleet in fleets]
        try:
            # The fleets claim while the bulk enqueues (4 loops of QueueTasks) are still landing.
            await asyncio.gather(*(enqueue(TASKS // BULK // 4) for _ in range(4)))
            deadline = time.monotonic() + 120
            while len(ledger.completed) < TASKS and time.monotonic() < deadline:
                await asyncio.sleep(0.05)  # watching the fleets' progress, bounded
        finally:
            for fleet in fleets:
                fleet.drain()
            await asyncio.wait_for(asyncio.gather(*running), 30)
        with psycopg.connect(queue_db, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT status::text, retry_count, count(*) FROM generation.tasks WHERE tool_id = %s GROUP BY 1, 2",
                (tool.id,),
            ).fetchall()

    enqueued = set(ledger.enqueued)
    assert len(enqueued) == TASKS == sum(ledger.enqueued.values())
    # Exactly once: each task claimed once, processed once, completed once (answers counted as
    # the client got them, a batch's answer listing each task it took), and never reclaimed.
    for books in (ledger.claimed, processed, ledger.completed):
        assert set(books) == enqueued and set(books.values()) == {1}
    assert rows == [("completed", 0, TASKS)]
    # Every server answered claims and completions, and the servers' own logs account for every
    # claim and completion the client saw answered, each by exactly one of them.
    served = [
        {rpc: sum(f"rpc={rpc} code=OK " in line for line in lines) for rpc in ("ClaimTasks", "CompleteTasks")}
        for lines in server_logs
    ]
    assert all(counts["ClaimTasks"] > 0 and counts["CompleteTasks"] > 0 for counts in served), served
    for rpc in ("ClaimTasks", "CompleteTasks"):
        assert sum(counts[rpc] for counts in served) == sum(a.method == rpc for a in ledger.answers), rpc
    print(f"\n{TASKS} tasks through {SERVERS} servers: OK claims/completions per server {served}")
