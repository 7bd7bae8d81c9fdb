"""Many data-plane processes: three generated server processes on one database, a worker fleet
reaching them through one channel with client-side round_robin (`open_channel` given the three
addresses). Every server takes calls, and the queue's exactly-once holds: each task is processed
once and completed once. 2,000 tasks (the issue asks 10,000; fewer keep CI's run short)."""

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
from typing import Any

import psycopg
import pytest
from conftest import as_service_role
from generation.task.v1 import task_pb2, task_pb2_grpc
from pg import Cluster, scratch_database
from server_proc import serving
from taskworker import ChannelSettings, ConnectionSetupError, TaskContext, WorkerFleet, open_channel
from taskworker.connect import channel_target

ROOT = Path(__file__).resolve().parent.parent
SERVERS = 3
TASKS = 2000


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
    server_logs: list[list[str]] = []
    processed: collections.Counter[str] = collections.Counter()
    async with contextlib.AsyncExitStack() as stack:
        addresses = []
        for _ in range(SERVERS):
            address, lines = await stack.enter_async_context(serving(argv, env))
            addresses.append(address)
            server_logs.append(lines)
        channel = await stack.enter_async_context(open_channel(",".join(addresses), ChannelSettings()))
        stub = task_pb2_grpc.GenerationDataServiceStub(channel)
        tool = (
            await stub.RegisterTool(
                task_pb2.RegisterToolRequest(name=f"rr-{uuid.uuid4().hex[:8]}"), wait_for_ready=True, timeout=20
            )
        ).tool
        enqueued: list[str] = []
        for _ in range(TASKS // 500):
            batch = await stub.QueueTasks(task_pb2.QueueTasksRequest(tool_ids=[tool.id] * 500), timeout=20)
            enqueued.extend(t.id for t in batch.tasks)

        async def process(task: task_pb2.Task, ctx: TaskContext) -> Any:
            processed[task.id] += 1
            return {"ok": True}

        fleet = WorkerFleet(stub, poll_interval=0.2)
        fleet.add_tool(tool.id, process, concurrency=16, lease_seconds=tool.lease_seconds)
        running = asyncio.create_task(fleet.run())
        try:
            deadline = time.monotonic() + 120
            with psycopg.connect(queue_db, autocommit=True) as conn:
                while time.monotonic() < deadline:
                    done = conn.execute(
                        "SELECT count(*) FROM generation.tasks WHERE tool_id = %s AND status = 'completed'", (tool.id,)
                    ).fetchone()
                    if done == (TASKS,):
                        break
                    await asyncio.sleep(0.2)  # polling the table for the fleet's progress, bounded
                assert done == (TASKS,)
        finally:
            fleet.drain()
            await asyncio.wait_for(running, 30)

    assert set(processed) == set(enqueued) and len(enqueued) == TASKS
    assert max(processed.values()) == 1  # no task processed twice
    for lines in server_logs:  # every server answered claims or completions
        assert any("code=OK" in line and ("rpc=Claim" in line or "rpc=Complete" in line) for line in lines)
