"""Recovery with a short, per-tool lease: a SIGKILLed worker's task is reclaimed within the lease
plus one poll, and a live worker's heartbeat (at half the lease its claim took: the task's own,
else its tool's) keeps its task."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from support.worker_support import WorkerProcess, read_events, sql, wait_until
from taskworker import TaskContext, WorkerFleet

if TYPE_CHECKING:
    Stub = task_pb2_grpc.GenerationDataServiceAsyncStub

LEASE = 5
POLL = 0.5


async def test_killed_worker_is_recovered_within_lease_plus_one_poll(
    stub: Stub, tool: pb.Tool, service: Any, database_url: str, tmp_path: Path
) -> None:
    await stub.SetToolLease(pb.SetToolLeaseRequest(tool_id=tool.id, lease_seconds=LEASE))
    task = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id))).task
    events = tmp_path / "events"
    victim = WorkerProcess(service.address, tool.id, events, work_seconds=60)
    try:
        await wait_until(lambda: len(read_events(events)) == 1, timeout=20, what="victim started the task")
        victim.signal(signal.SIGKILL)
        assert await victim.wait(10) == -signal.SIGKILL
    finally:
        victim.kill()
    [(expires,)] = await sql(
        database_url, "SELECT extract(epoch FROM claim_expires_at)::float8 FROM generation.tasks WHERE id = %s", task.id
    )
    rescued: dict[str, float] = {}

    async def process(t: pb.Task, ctx: TaskContext) -> Any:
        rescued[t.id] = time.time()
        return None

    fleet = WorkerFleet(stub, poll_interval=POLL)  # no wake: the lapse is found by polling
    fleet.add_tool(tool.id, process, lease_seconds=LEASE)
    run = asyncio.create_task(fleet.run())
    try:
        await wait_until(lambda: fleet.stats.completed == 1, timeout=LEASE + 10, what="the task rescued")
    finally:
        fleet.drain()
        await asyncio.wait_for(run, 30)
    late = rescued[task.id] - expires
    assert 0 <= late <= POLL * 1.1 + 0.5, f"rescued {late:.2f}s after the {LEASE}s lease lapsed"
    final = (await stub.GetTask(pb.GetTaskRequest(task_id=task.id))).task
    assert final.status == pb.TASK_STATUS_COMPLETED and final.retry_count == 1


@pytest.mark.parametrize("whose", ["tool", "task"])
async def test_heartbeat_follows_the_claimed_lease(stub: Stub, tool: pb.Tool, whose: str) -> None:
    """A 1 s lease, the tool's or the task's own (the tool keeping 120 s): the fleet, told nothing
    about it, beats at half the lease its claim's answer carries, so a rival never steals the task."""
    if whose == "tool":
        await stub.SetToolLease(pb.SetToolLeaseRequest(tool_id=tool.id, lease_seconds=1))
        task = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id))).task
    else:
        task = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id, lease_seconds=1))).task
    started = asyncio.Event()

    async def process(t: pb.Task, ctx: TaskContext) -> Any:
        started.set()
        await asyncio.sleep(3.0)  # the work: three lease lengths long
        return None

    fleet = WorkerFleet(stub, poll_interval=30.0)  # heartbeat_interval stays 60 s: the lease rules
    fleet.add_tool(tool.id, process)
    run = asyncio.create_task(fleet.run())
    await asyncio.wait_for(started.wait(), 10)
    stolen = 0
    try:
        for _ in range(400):  # a rival claims all along (bounded: 20 s); the live lease must hold
            if fleet.stats.completed or run.done():
                break
            stolen += len((await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=1))).tasks)
            await asyncio.sleep(0.05)  # the rival's pace, not synchronisation
    finally:
        fleet.drain()
        await asyncio.wait_for(run, 30)
    final = (await stub.GetTask(pb.GetTaskRequest(task_id=task.id))).task
    assert final.status == pb.TASK_STATUS_COMPLETED and final.retry_count == 0 and stolen == 0
