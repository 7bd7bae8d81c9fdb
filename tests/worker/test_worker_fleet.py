"""WorkerFleet against the generated data plane on a real PostgreSQL: completion and failure,
lanes, lease loss, poll-only pickup, and real worker processes killed or drained."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import statistics
import time
from collections.abc import AsyncIterator, Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from support.worker_support import WorkerProcess, read_events, sql, wait_until
from taskworker import TaskContext, TaskResult, WorkerFleet

if TYPE_CHECKING:
    Stub = task_pb2_grpc.GenerationDataServiceAsyncStub
Process = Callable[[pb.Task, TaskContext], Any]


async def queue(stub: Stub, tool: pb.Tool, **kw: Any) -> pb.Task:
    return (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id, **kw))).task


async def get(stub: Stub, task_id: str) -> pb.Task:
    return (await stub.GetTask(pb.GetTaskRequest(task_id=task_id))).task


class Running:
    """A fleet running in this event loop for the duration of a test."""

    def __init__(self, fleet: WorkerFleet) -> None:
        self.fleet = fleet
        self.task = asyncio.create_task(fleet.run())

    async def stop(self) -> None:
        self.fleet.drain()
        await asyncio.wait_for(self.task, 30)


@pytest.fixture
async def fleets(stub: Stub) -> AsyncIterator[Callable[..., Running]]:
    started: list[Running] = []

    def start(tool: pb.Tool, process: Process, concurrency: int = 1, **opts: Any) -> Running:
        fleet = WorkerFleet(stub, **{"poll_interval": 0.2, **opts})
        fleet.add_tool(tool.id, process, concurrency=concurrency)
        running = Running(fleet)
        started.append(running)
        return running

    yield start
    for r in started:
        if not r.task.done():
            await r.stop()


async def test_completes_with_output_and_usage(stub: Stub, tool: pb.Tool, fleets: Callable[..., Running]) -> None:
    async def process(task: pb.Task, ctx: TaskContext) -> Any:
        n = json.loads(task.input)["n"]
        ctx.report_usage(tokens=n * 10)
        if n == 3:
            return TaskResult(output='{"raw": true}', reported_usage='{"tokens": 1}')
        return {"double": n * 2}

    tasks = [await queue(stub, tool, input=json.dumps({"n": n})) for n in (1, 2, 3)]
    fleets(tool, process)
    for t in tasks:
        await wait_until(partial(_status, stub, t.id, pb.TASK_STATUS_COMPLETED), what=f"task {t.id} completed")
    done = [await get(stub, t.id) for t in tasks]
    assert [json.loads(d.output) for d in done] == [{"double": 2}, {"double": 4}, {"raw": True}]
    assert [json.loads(d.reported_usage) for d in done] == [{"tokens": 10}, {"tokens": 20}, {"tokens": 1}]
    assert all(not d.HasField("claim_expires_at") and d.retry_count == 0 for d in done)


async def _status(stub: Stub, task_id: str, status: int) -> bool:
    return (await get(stub, task_id)).status == status


async def test_failure_is_retried_then_failed(stub: Stub, tool: pb.Tool, fleets: Callable[..., Running]) -> None:
    attempts: list[int] = []

    async def process(task: pb.Task, ctx: TaskContext) -> Any:
        attempts.append(task.retry_count)
        raise RuntimeError(f"boom on attempt {task.retry_count}")

    t = await queue(stub, tool, max_retries=2)
    running = fleets(tool, process)
    await wait_until(lambda: _status(stub, t.id, pb.TASK_STATUS_FAILED), what="task failed")
    final = await get(stub, t.id)
    assert attempts == [0, 1]  # FailTask(increment_retry=true) re-queued it once
    assert final.retry_count == 2 and final.error == "RuntimeError: boom on attempt 1"
    assert running.fleet.stats.failed == 2 and running.fleet.stats.completed == 0


@pytest.mark.parametrize("claimers", [1, 2])
async def test_concurrency_lanes_and_fast_drain(
    stub: Stub, tool: pb.Tool, fleets: Callable[..., Running], database_url: str, claimers: int
) -> None:
    """Never more tasks held than slots, with one claim loop or two sharing them (two claims in
    flight never ask for the same slot)."""
    release = asyncio.Event()
    active = 0
    peak = 0

    async def process(task: pb.Task, ctx: TaskContext) -> Any:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await release.wait()
        active -= 1
        return None

    ids = [(await queue(stub, tool)).id for _ in range(7)]
    running = fleets(tool, process, concurrency=3, poll_interval=30.0, claimers=claimers)
    await wait_until(lambda: active == 3, what="three lanes busy")
    assert running.fleet.running == 3
    # At capacity the fleet backs off instead of claiming: the other four stay queued.
    rows = await sql(
        database_url, "SELECT count(*) FROM generation.tasks WHERE tool_id = %s AND status = 'queued'", tool.id
    )
    assert rows[0][0] == 4
    release.set()
    # With a 30 s poll interval, finishing all seven in time proves the fleet keeps claiming
    # while it gets work (freed slots end the back-off) instead of waiting for a poll tick.
    for i in ids:
        await wait_until(partial(_status, stub, i, pb.TASK_STATUS_COMPLETED), timeout=10, what="all completed")
    assert peak == 3


async def test_lease_lost_cancels_work_and_never_completes(
    stub: Stub, tool: pb.Tool, fleets: Callable[..., Running], database_url: str
) -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()
    finished: list[str] = []

    async def process(task: pb.Task, ctx: TaskContext) -> Any:
        started.set()
        try:
            await asyncio.Event().wait()  # works until cancelled
        except asyncio.CancelledError:
            cancelled.set()
            raise
        finished.append(task.id)
        return None

    t = await queue(stub, tool)
    running = fleets(tool, process, heartbeat_interval=0.1)
    await started.wait()
    # Someone else takes the task over: the lease lapses (driven through SQL) and another
    # claimant reclaims it, getting a fresh lease token. A heartbeat of the holder landing between
    # the two renews the lease, as it should (it still holds it): then lapse it again, bounded.
    deadline = time.monotonic() + 10
    while True:
        await sql(
            database_url,
            "UPDATE generation.tasks SET claim_expires_at = now() - interval '1 minute' WHERE id = %s",
            t.id,
        )
        thief = (await stub.ClaimNextTask(pb.ClaimNextTaskRequest(tool_id=tool.id))).task
        if thief.id:
            break
        assert time.monotonic() < deadline, "the lapsed task was never reclaimed"
    assert thief.id == t.id and thief.retry_count == 1
    await asyncio.wait_for(cancelled.wait(), 10)
    await wait_until(lambda: running.fleet.running == 0, what="task slot released")
    row = await get(stub, t.id)
    assert row.status == pb.TASK_STATUS_PROCESSING and row.lease_token == thief.lease_token
    assert not row.HasField("output") and finished == []
    assert running.fleet.stats.lease_lost == 1 and running.fleet.stats.completed == 0


async def test_lease_lost_work_that_ignores_cancel_is_not_reported(
    stub: Stub, tool: pb.Tool, fleets: Callable[..., Running], database_url: str
) -> None:
    """Work that swallows the cancellation and returns is still never reported complete."""
    started = asyncio.Event()
    may_return = asyncio.Event()

    async def process(task: pb.Task, ctx: TaskContext) -> Any:
        started.set()
        with contextlib.suppress(asyncio.CancelledError):  # a stubborn tool
            await asyncio.Event().wait()
        await may_return.wait()
        return {"late": True}

    t = await queue(stub, tool)
    running = fleets(tool, process, heartbeat_interval=0.1)
    await started.wait()
    await sql(database_url, "UPDATE generation.tasks SET lease_token = gen_random_uuid() WHERE id = %s", t.id)
    await wait_until(lambda: running.fleet.stats.heartbeats_refused == 1, what="lease loss noticed")
    may_return.set()
    await wait_until(lambda: running.fleet.running == 0, what="task slot released")
    row = await get(stub, t.id)
    assert row.status == pb.TASK_STATUS_PROCESSING and not row.HasField("output")
    assert running.fleet.stats.completed == 0 and running.fleet.stats.lease_lost == 1


async def test_poll_only_pickup_is_bounded_by_poll_interval(
    stub: Stub, tool: pb.Tool, fleets: Callable[..., Running]
) -> None:
    poll = 0.3
    picked: dict[str, float] = {}

    async def process(task: pb.Task, ctx: TaskContext) -> Any:
        picked[task.id] = time.perf_counter()
        return None

    running = fleets(tool, process, poll_interval=poll, poll_jitter=0.1)
    await running.fleet.started.wait()
    latencies = []
    for _ in range(8):
        t0 = time.perf_counter()
        t = await queue(stub, tool)
        await wait_until(partial(picked.__contains__, t.id), timeout=5, what="pickup")
        latencies.append(picked[t.id] - t0)
    # No wake: a task waits for the next tick, never longer than one jittered interval + slack.
    assert max(latencies) < poll * 1.1 + 0.25, latencies
    print(f"\npoll-only pickup (poll {poll}s): p50 {statistics.median(latencies) * 1000:.0f} ms, "
          f"max {max(latencies) * 1000:.0f} ms")  # fmt: skip


@pytest.mark.slow
async def test_sigkill_mid_task_is_reclaimed_and_completed_once(
    stub: Stub, tool: pb.Tool, service: Any, database_url: str, tmp_path: Path
) -> None:
    events = tmp_path / "events"
    ids = [(await queue(stub, tool)).id for _ in range(4)]
    victim = WorkerProcess(service.address, tool.id, events, concurrency=2, work_seconds=60)
    try:
        await wait_until(lambda: len(read_events(events)) == 2, timeout=20, what="victim started two tasks")
        victim.signal(signal.SIGKILL)
        assert await victim.wait(10) == -signal.SIGKILL
    finally:
        victim.kill()
    in_flight = {tid for _, tid, _ in read_events(events)}
    rows = await sql(database_url, "SELECT id::text, status::text FROM generation.tasks WHERE tool_id = %s", tool.id)
    assert {r[0] for r in rows if r[1] == "processing"} == in_flight  # stranded under the dead fleet's leases
    # Lease expiry, driven through SQL instead of waiting two minutes.
    await sql(database_url, "UPDATE generation.tasks SET claim_expires_at = now() - interval '1 second' "
              "WHERE tool_id = %s AND status = 'processing'", tool.id)  # fmt: skip
    rescuer = WorkerProcess(service.address, tool.id, events, concurrency=2, work_seconds=0.05)
    try:
        for i in ids:
            await wait_until(partial(_status, stub, i, pb.TASK_STATUS_COMPLETED), timeout=20, what="all completed")
        rescuer.signal(signal.SIGTERM)
        assert await rescuer.wait(15) == 0
    finally:
        rescuer.kill()
    done = [tid for ev, tid, pid in read_events(events) if ev == "done"]
    assert sorted(done) == sorted(ids)  # every task finished exactly once, none lost
    assert all(pid == rescuer.pid for ev, _, pid in read_events(events) if ev == "done")
    final = {t.id: t for t in [await get(stub, i) for i in ids]}
    assert {i for i, t in final.items() if t.retry_count == 1} == in_flight  # reclaim burned one retry
    assert all(json.loads(t.output) == {"pid": rescuer.pid} for t in final.values())


@pytest.mark.slow
async def test_sigterm_drains_in_flight_work(stub: Stub, tool: pb.Tool, service: Any, tmp_path: Path) -> None:
    events = tmp_path / "events"
    ids = [(await queue(stub, tool)).id for _ in range(4)]
    worker = WorkerProcess(service.address, tool.id, events, concurrency=2, work_seconds=1.0)
    try:
        await wait_until(lambda: len(read_events(events)) == 2, timeout=20, what="two tasks started")
        worker.signal(signal.SIGTERM)
        assert await worker.wait(15) == 0
    finally:
        worker.kill()
    ev = read_events(events)
    started = {tid for e, tid, _ in ev if e == "start"}
    assert len(started) == 2 and {tid for e, tid, _ in ev if e == "done"} == started
    states = {i: (await get(stub, i)).status for i in ids}
    # In-flight work finished and was reported; nothing new was claimed after the signal.
    assert {i for i, s in states.items() if s == pb.TASK_STATUS_COMPLETED} == started
    assert {i for i, s in states.items() if s == pb.TASK_STATUS_QUEUED} == set(ids) - started


@pytest.mark.slow
async def test_drain_timeout_abandons_work_for_the_lease_to_lapse(
    stub: Stub, tool: pb.Tool, service: Any, tmp_path: Path
) -> None:
    events = tmp_path / "events"
    t = await queue(stub, tool)
    worker = WorkerProcess(service.address, tool.id, events, work_seconds=60, drain_timeout=0.3)
    try:
        await wait_until(lambda: len(read_events(events)) == 1, timeout=20, what="task started")
        worker.signal(signal.SIGTERM)
        assert await worker.wait(15) == 0
    finally:
        worker.kill()
    row = await get(stub, t.id)
    # Not failed, not completed: left under its lease so another fleet reclaims it on expiry.
    assert row.status == pb.TASK_STATUS_PROCESSING and row.retry_count == 0
    assert [e for e, _, _ in read_events(events)] == ["start"]


async def test_transient_heartbeat_errors_keep_the_task(stub: Stub, tool: pb.Tool, database_url: str) -> None:
    """A data plane outage during a heartbeat is not a lost lease: the task still completes."""
    from conftest import server_config, start_server

    server = await start_server(server_config(database_url))
    channel = grpc.aio.insecure_channel(server.address)
    own: Stub = task_pb2_grpc.GenerationDataServiceStub(channel)
    gate = asyncio.Event()

    async def process(task: pb.Task, ctx: TaskContext) -> Any:
        await gate.wait()
        return {"ok": True}

    fleet = WorkerFleet(own, poll_interval=0.2, heartbeat_interval=0.1, rpc_timeout=0.5)
    fleet.add_tool(tool.id, process)
    run = asyncio.create_task(fleet.run())
    try:
        t = await queue(stub, tool)
        await wait_until(lambda: fleet.running == 1, what="claimed")
        await server.close()  # heartbeats now fail with UNAVAILABLE
        await wait_until(lambda: fleet.stats.heartbeat_errors >= 2, what="failed heartbeats")
        restarted = await start_server(server_config(database_url, listen_addr=server.address))
        try:
            gate.set()
            # The fleet's own verdict, not just the row: a Complete whose answer was lost in the
            # outage is retried and must still count as completed, never as a lost lease.
            await wait_until(
                lambda: fleet.stats.completed + fleet.stats.lease_lost >= 1, timeout=15, what="outcome reported"
            )
            assert fleet.stats.lease_lost == 0 and fleet.stats.completed == 1
            assert await _status(stub, t.id, pb.TASK_STATUS_COMPLETED)
        finally:
            fleet.drain()
            await asyncio.wait_for(run, 10)
            await restarted.close()
    finally:
        await channel.close(None)
