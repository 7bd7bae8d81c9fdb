"""Live task events end to end, on both transports: a WorkerFleet on the generated data plane
emits through TaskContext, `watch_task_events` reads. Redis is a private redis-server (so this
runs where nothing listens on 6379); PostgreSQL is the data plane's own database."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest
import redis.asyncio as aioredis
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from support.worker_support import REDIS_SERVER, RedisServer, redis_server, sql, wait_until
from taskworker import (
    EventEmitter,
    PostgresEventSource,
    PostgresEventTransport,
    Process,
    RedisEventSource,
    RedisEventTransport,
    TaskContext,
    TaskEvent,
    WorkerFleet,
    watch_task_events,
)
from taskworker.events import EventSource

if TYPE_CHECKING:
    Stub = task_pb2_grpc.GenerationDataServiceAsyncStub

__all__ = ["redis_server"]  # the fixture, re-exported for pytest


@dataclass
class Backend:
    name: str
    emitter: EventEmitter
    source: EventSource


async def delete_env_keys(url: str, env: str) -> None:
    client = aioredis.Redis.from_url(url)
    try:
        keys = [k async for k in client.scan_iter(match=f"{env}:*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


@pytest.fixture(params=["redis", "postgres"])
async def backend(request: pytest.FixtureRequest, stub: Stub) -> AsyncIterator[Backend]:
    if request.param == "redis":
        if REDIS_SERVER is None:
            pytest.skip("redis-server is not installed")
        server: RedisServer = request.getfixturevalue("redis_server")
        env = f"evtest{time.monotonic_ns()}"
        b = Backend(
            "redis",
            EventEmitter(RedisEventTransport(server.url, environment=env)),
            RedisEventSource(server.url, environment=env, block=0.5),
        )
        yield b
        await b.emitter.aclose()
        await delete_env_keys(server.url, env)
    else:
        b = Backend("postgres", EventEmitter(PostgresEventTransport(stub)), PostgresEventSource(stub))
        yield b
        await b.emitter.aclose()


class RunningFleet:
    def __init__(self, stub: Stub, tool: pb.Tool, process: Process, emitter: EventEmitter, **opts: Any) -> None:
        self.fleet = WorkerFleet(stub, events=emitter, **{"poll_interval": 0.2, **opts})
        self.fleet.add_tool(tool.id, process, concurrency=4)
        self.task = asyncio.create_task(self.fleet.run())

    async def stop(self) -> None:
        self.fleet.drain()
        await asyncio.wait_for(self.task, 30)


async def collect(
    task_id: str, source: EventSource, from_seq: int = 1, limit: int | None = None, timeout: float = 30
) -> list[TaskEvent]:
    """Read until the terminal event (or `limit` events, then disconnect)."""
    out: list[TaskEvent] = []

    async def read() -> None:
        stream = watch_task_events(task_id, from_seq=from_seq, source=source, idle_timeout=timeout)
        async for event in stream:
            out.append(event)
            if limit is not None and len(out) >= limit:
                await stream.aclose()
                return

    await asyncio.wait_for(read(), timeout)
    return out


async def queue(stub: Stub, tool: pb.Tool, **kw: Any) -> pb.Task:
    return (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id, **kw))).task


async def status(stub: Stub, task_id: str) -> pb.TaskStatus.ValueType:
    return (await stub.GetTask(pb.GetTaskRequest(task_id=task_id))).task.status


async def test_thousand_progress_events_arrive_in_order_without_gaps(
    stub: Stub, tool: pb.Tool, backend: Backend
) -> None:
    async def process(task: pb.Task, ctx: TaskContext) -> Any:
        for i in range(1, 1001):
            assert ctx.emit_progress(i / 1000, f"step {i}")
        return {"done": True}

    t = await queue(stub, tool)
    reader = asyncio.create_task(collect(t.id, backend.source))  # watching before anything exists
    fleet = RunningFleet(stub, tool, process, backend.emitter)
    try:
        events = await reader
    finally:
        await fleet.stop()
    assert [e.seq for e in events] == list(range(1, 1002))
    assert all(e.task_id == t.id for e in events)
    assert [e.kind for e in events] == ["progress"] * 1000 + ["terminal"]
    assert [e.data["message"] for e in events[:-1]] == [f"step {i}" for i in range(1, 1001)]
    assert [e.data["fraction"] for e in events[:-1]] == [i / 1000 for i in range(1, 1001)]
    assert events[-1].data == {"outcome": "completed", "retrying": False}
    stamps = [e.emitted_at for e in events]
    assert stamps == sorted(stamps) and abs(stamps[-1] - time.time()) < 60
    assert backend.emitter.stats.dropped_full == backend.emitter.stats.dropped_failed == 0
    assert await status(stub, t.id) == pb.TASK_STATUS_COMPLETED
    # Finished: a late reader replays everything retained, then ends at the terminal event.
    assert [e.seq for e in await collect(t.id, backend.source)] == list(range(1, 1002))


async def test_reader_that_disconnects_mid_stream_resumes_without_loss(
    stub: Stub, tool: pb.Tool, backend: Backend
) -> None:
    first_half = asyncio.Event()
    go_on = asyncio.Event()

    async def process(task: pb.Task, ctx: TaskContext) -> Any:
        ctx.emit_url("https://example.test/stream/" + task.id)
        for i in range(150):
            ctx.emit_output(f"chunk {i}")
        first_half.set()
        await go_on.wait()  # the reader disconnects while the task is still running
        for i in range(150, 300):
            ctx.emit_output(f"chunk {i}")
        return None

    t = await queue(stub, tool)
    fleet = RunningFleet(stub, tool, process, backend.emitter)
    try:
        await asyncio.wait_for(first_half.wait(), 30)
        before = await collect(t.id, backend.source, limit=100)  # then the connection goes away
        go_on.set()
        after = await collect(t.id, backend.source, from_seq=before[-1].seq + 1)
    finally:
        go_on.set()
        await fleet.stop()
    events = before + after
    assert [e.seq for e in events] == list(range(1, 303))
    assert events[0].kind == "url" and events[0].data == {"url": "https://example.test/stream/" + t.id}
    assert [e.data["chunk"] for e in events[1:-1]] == [f"chunk {i}" for i in range(300)]
    assert events[-1].terminal and events[-1].data["outcome"] == "completed"


async def test_terminal_event_for_completed_failed_and_lease_lost(
    stub: Stub, tool: pb.Tool, backend: Backend, database_url: str
) -> None:
    working = asyncio.Event()

    async def process(task: pb.Task, ctx: TaskContext) -> Any:
        ctx.emit_progress(0.5, task.input)
        if "fail" in task.input:
            raise RuntimeError("tool broke")
        if "hang" in task.input:
            working.set()
            await asyncio.Event().wait()  # works until the lease is lost
        return {"ok": True}

    # The re-queued attempt comes back after 10 ms, not the default policy's 2 s.
    await stub.SetToolRetryPolicy(
        pb.SetToolRetryPolicyRequest(tool_id=tool.id, retry_base_seconds=0.01, retry_cap_seconds=0.01)
    )
    done = await queue(stub, tool, input='{"do": "complete"}')
    failed = await queue(stub, tool, input='{"do": "fail"}', max_retries=1)
    retried = await queue(stub, tool, input='{"do": "fail-retry"}', max_retries=2)
    hung = await queue(stub, tool, input='{"do": "hang"}')
    fleet = RunningFleet(stub, tool, process, backend.emitter, heartbeat_interval=0.1)
    try:
        await asyncio.wait_for(working.wait(), 30)
        # Someone else holds the task now: the next heartbeat is rejected, the work cancelled.
        await sql(database_url, "UPDATE generation.tasks SET lease_token = gen_random_uuid() WHERE id = %s", hung.id)
        terminals = {t.id: (await collect(t.id, backend.source))[-1] for t in (done, failed, retried, hung)}
    finally:
        await fleet.stop()
    assert all(e.terminal for e in terminals.values())
    assert terminals[done.id].data == {"outcome": "completed", "retrying": False}
    assert terminals[failed.id].data == {
        "outcome": "failed",
        "error": "RuntimeError: tool broke",
        "retrying": False,
    }
    # A failure that re-queues ends this attempt's watch; the next attempt continues the numbering.
    assert terminals[retried.id].data["outcome"] == "failed" and terminals[retried.id].data["retrying"] is True
    second_attempt = await collect(retried.id, backend.source, from_seq=terminals[retried.id].seq + 1)
    assert [e.seq for e in second_attempt] == [terminals[retried.id].seq + 1, terminals[retried.id].seq + 2]
    assert second_attempt[-1].data == {"outcome": "failed", "error": "RuntimeError: tool broke", "retrying": False}
    assert terminals[hung.id].data == {"outcome": "lease_lost", "retrying": True}
    assert [e.kind for e in await collect(hung.id, backend.source)] == ["progress", "terminal"]
    await wait_until(lambda: fleet.fleet.stats.lease_lost == 1, what="lease loss counted")


async def test_reader_of_a_task_without_events_times_out(stub: Stub, tool: pb.Tool, backend: Backend) -> None:
    t = await queue(stub, tool)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        await collect(t.id, backend.source, timeout=0.6)
    assert time.monotonic() - started < 5


async def test_terminal_event_when_the_report_is_refused_or_the_drain_abandons_the_task(
    stub: Stub, tool: pb.Tool, backend: Backend, database_url: str
) -> None:
    release = asyncio.Event()
    started: dict[str, asyncio.Event] = {}

    async def process(task: pb.Task, ctx: TaskContext) -> Any:
        started[task.input].set()
        if "hang" in task.input:
            await asyncio.Event().wait()  # ignores the drain: cancelled at drain_timeout
        await release.wait()
        return None

    refused = await queue(stub, tool, input='{"do": "refused"}')
    hung = await queue(stub, tool, input='{"do": "hang"}')
    started.update({refused.input: asyncio.Event(), hung.input: asyncio.Event()})
    # Heartbeats far apart: the lost lease is found out only when CompleteTask is refused.
    fleet = RunningFleet(stub, tool, process, backend.emitter, heartbeat_interval=60, drain_timeout=0.2)
    await asyncio.wait_for(asyncio.gather(*(e.wait() for e in started.values())), 30)
    await sql(database_url, "UPDATE generation.tasks SET lease_token = gen_random_uuid() WHERE id = %s", refused.id)
    release.set()
    refused_end = (await collect(refused.id, backend.source))[-1]
    assert refused_end.data == {"outcome": "lease_lost", "retrying": True}
    # Drain: the hung task is cancelled when drain_timeout passes, left for its lease to lapse;
    # run() flushes the emitter before it returns, so the terminal event is already stored.
    await fleet.stop()
    assert fleet.fleet.stats.abandoned == 1
    hung_end = (await collect(hung.id, backend.source, timeout=5))[-1]
    assert hung_end.data == {"outcome": "abandoned", "retrying": True}
    assert backend.emitter.stats.written == backend.emitter.stats.emitted
