"""The Redis transport of live task events against private redis-servers: an outage (killed or
hung Redis) never fails or slows a task, keys expire after the retention window, MAXLEN trims,
and the REDIS_ADDR/REDIS_URL/ENVIRONMENT contract."""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import pytest
import redis.asyncio as aioredis
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from support.worker_support import RedisServer, redis_server, requires_redis, wait_until
from taskworker import EventEmitter, RedisEventSource, RedisEventTransport, TaskContext, WorkerFleet, config
from taskworker.events import events_key
from taskworker.events_redis import _stream_entries
from test_events_transports import collect, delete_env_keys, queue, status

if TYPE_CHECKING:
    Stub = task_pb2_grpc.GenerationDataServiceAsyncStub

__all__ = ["redis_server"]  # the fixture, re-exported for pytest

pytestmark = requires_redis


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A redis-server of this test's own, to kill or freeze (never the shared one on 6379)."""
    server = RedisServer()
    yield server
    if server.proc is not None:
        server.proc.send_signal(signal.SIGCONT)
    server.destroy()


@pytest.fixture
async def env_name(redis_server: RedisServer) -> AsyncIterator[str]:
    env = f"evtest{time.monotonic_ns()}"
    yield env
    await delete_env_keys(redis_server.url, env)


class Fleet:
    def __init__(self, stub: Stub, tool: pb.Tool, process: Any, emitter: EventEmitter) -> None:
        self.fleet = WorkerFleet(stub, events=emitter, poll_interval=0.2, events_flush_timeout=0.5)
        self.fleet.add_tool(tool.id, process)
        self.task = asyncio.create_task(self.fleet.run())

    async def stop(self) -> None:
        self.fleet.drain()
        await asyncio.wait_for(self.task, 30)


async def completed(stub: Stub, task_id: str) -> bool:
    return await status(stub, task_id) == pb.TASK_STATUS_COMPLETED


async def test_killed_redis_never_fails_or_slows_the_task_and_losses_are_counted(
    stub: Stub, tool: pb.Tool, own_redis: RedisServer
) -> None:
    env = f"evtest{time.monotonic_ns()}"
    emitter = EventEmitter(RedisEventTransport(own_redis.url, environment=env, timeout=0.2), buffer_size=200)
    emitted = asyncio.Event()
    redis_back = asyncio.Event()
    emit_seconds: list[float] = []

    async def process(task: pb.Task, ctx: TaskContext) -> Any:
        for i in range(5000):
            t0 = time.perf_counter()
            ctx.emit_progress(i / 5000)
            emit_seconds.append(time.perf_counter() - t0)
        emitted.set()
        await redis_back.wait()
        return None

    own_redis.stop()  # Redis is down before the task starts
    t = await queue(stub, tool)
    fleet = Fleet(stub, tool, process, emitter)
    try:
        await asyncio.wait_for(emitted.wait(), 30)
        # All 5,000 emits returned at once: a full buffer drops, it never waits.
        assert sum(emit_seconds) < 1.0 and max(emit_seconds) < 0.1, (sum(emit_seconds), max(emit_seconds))
        assert await emitter.flush(10)  # the buffered 200 fail to store and are dropped
        assert emitter.stats.dropped_full == 4800
        assert emitter.stats.dropped_failed == 200 and emitter.stats.batches_failed >= 1
        assert emitter.stats.written == 0
        own_redis.start()
        redis_back.set()
        # The task completes; its terminal event, written after the outage, says what was lost.
        await wait_until(lambda: completed(stub, t.id), timeout=15, what="task completed")
        events = await collect(t.id, RedisEventSource(own_redis.url, environment=env, block=0.2), timeout=15)
    finally:
        redis_back.set()
        await fleet.stop()
        await emitter.aclose()
    assert [(e.seq, e.kind) for e in events] == [(1, "terminal")]
    assert events[0].data == {"outcome": "completed", "retrying": False, "dropped": 5000}


async def test_hung_redis_never_slows_the_task(stub: Stub, tool: pb.Tool, own_redis: RedisServer) -> None:
    env = f"evtest{time.monotonic_ns()}"
    emitter = EventEmitter(RedisEventTransport(own_redis.url, environment=env, timeout=0.3), buffer_size=1000)
    timings: dict[str, float] = {}

    async def process(task: pb.Task, ctx: TaskContext) -> Any:
        t0 = time.perf_counter()
        for i in range(2000):
            ctx.emit_output(i)
        timings["emit"] = time.perf_counter() - t0
        return None

    # One event through a healthy Redis first, so the transport holds an open connection that
    # the freeze then leaves hanging (no connection refused: the worst case, a timeout).
    assert emitter.emit(str(uuid.uuid4()), "progress", {"fraction": 0})
    assert await emitter.flush(5) and emitter.stats.written == 1
    assert own_redis.proc is not None
    own_redis.proc.send_signal(signal.SIGSTOP)
    try:
        t = await queue(stub, tool)
        started = time.perf_counter()
        fleet = Fleet(stub, tool, process, emitter)
        try:
            await wait_until(lambda: completed(stub, t.id), timeout=15, what="task completed")
            took = time.perf_counter() - started
        finally:
            await fleet.stop()
        assert timings["emit"] < 1.0, timings
        assert took < 5.0, took  # claim + 2,000 emits + CompleteTask, nothing waited on Redis
        assert emitter.stats.dropped_full == 1000  # beyond the buffer: dropped, never waited for
    finally:
        own_redis.proc.send_signal(signal.SIGCONT)
    await emitter.aclose()


async def test_keys_expire_after_the_retention_window(
    stub: Stub, tool: pb.Tool, redis_server: RedisServer, env_name: str
) -> None:
    emitter = EventEmitter(RedisEventTransport(redis_server.url, environment=env_name, retention=1, idle_ttl=60))
    release = asyncio.Event()

    async def process(task: pb.Task, ctx: TaskContext) -> Any:
        ctx.emit_progress(0.1, "working")
        await release.wait()
        return None

    client = aioredis.Redis.from_url(redis_server.url)
    t = await queue(stub, tool)
    key = events_key(t.id, env_name)
    fleet = Fleet(stub, tool, process, emitter)
    try:
        await wait_until(lambda: _present(client, key), what="stream created")
        assert 1 < await client.ttl(key) <= 60  # running: the idle TTL guards a crashed worker
        release.set()
        events = await collect(t.id, RedisEventSource(redis_server.url, environment=env_name, block=0.2))
        assert [e.kind for e in events] == ["progress", "terminal"]
        assert 0 <= await client.ttl(key) <= 1  # after the terminal event: the retention window
        await wait_until(lambda: _gone(client, key), timeout=10, what="key expired")
        # Nothing is retained any more: a late reader waits, then times out.
        with pytest.raises(TimeoutError):
            await collect(t.id, RedisEventSource(redis_server.url, environment=env_name, block=0.2), timeout=0.5)
    finally:
        release.set()
        await fleet.stop()
        await emitter.aclose()
        await client.aclose()


async def _gone(client: aioredis.Redis, key: str) -> bool:
    return await client.exists(key) == 0


async def _present(client: aioredis.Redis, key: str) -> bool:
    return await client.exists(key) == 1


async def test_maxlen_trims_old_entries_and_numbering_continues(redis_server: RedisServer, env_name: str) -> None:
    emitter = EventEmitter(RedisEventTransport(redis_server.url, environment=env_name, maxlen=100), batch_size=50)
    task_id = str(uuid.uuid4())
    for i in range(3000):
        assert emitter.emit(task_id, "output", {"chunk": i})
    assert emitter.emit(task_id, "terminal", {"outcome": "completed", "retrying": False})
    assert await emitter.flush(10)
    await emitter.aclose()
    client = aioredis.Redis.from_url(redis_server.url)
    try:
        length = await client.xlen(events_key(task_id, env_name))
    finally:
        await client.aclose()
    assert 100 <= length < 300  # `MAXLEN ~`: trimmed in whole nodes, never below 100
    events = await collect(task_id, RedisEventSource(redis_server.url, environment=env_name))
    # Replays what is retained: the newest entries, contiguous, ending with the terminal event.
    assert len(events) == length and events[-1].seq == 3001 and events[-1].terminal
    assert [e.seq for e in events] == list(range(3002 - length, 3002))
    assert [e.data["chunk"] for e in events[:-1]] == list(range(3001 - length, 3000))


async def test_redis_url_alias_db_index_and_environment(
    redis_server: RedisServer, env_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REDIS_ADDR", raising=False)
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{redis_server.port}/3")
    monkeypatch.setenv("ENVIRONMENT", env_name)
    assert config.redis_url() == f"redis://127.0.0.1:{redis_server.port}/3"
    emitter = EventEmitter(RedisEventTransport())  # everything from the environment
    task_id = str(uuid.uuid4())
    emitter.emit(task_id, "url", {"url": "https://example.test/s"})
    emitter.emit(task_id, "terminal", {"outcome": "completed", "retrying": False})
    assert await emitter.flush(5) and emitter.stats.written == 2
    await emitter.aclose()
    key = f"{env_name}:common:task:{task_id}:events"
    db3 = aioredis.Redis.from_url(f"redis://127.0.0.1:{redis_server.port}/3")
    db0 = aioredis.Redis.from_url(redis_server.url)
    try:
        assert await db3.exists(key) == 1 and await db0.exists(key) == 0
        assert [e.kind for e in await collect(task_id, RedisEventSource())] == ["url", "terminal"]
        await db3.delete(key)
    finally:
        await db3.aclose()
        await db0.aclose()


@pytest.mark.parametrize("protocol", [2, 3])
async def test_xread_replies_of_either_protocol_are_read_alike(
    redis_server: RedisServer, env_name: str, protocol: int
) -> None:
    key = events_key(str(uuid.uuid4()), env_name)
    client = aioredis.Redis.from_url(redis_server.url, protocol=protocol)
    try:
        await client.xadd(key, {"kind": "progress", "data": "1", "ts": "1.5"}, id="0-1")
        await client.xadd(key, {"kind": "terminal", "data": "{}", "ts": "2.5"}, id="0-2")
        entries = _stream_entries(await client.xread({key: "0-0"}, count=10))
    finally:
        await client.aclose()
    assert entries == [
        (b"0-1", {b"kind": b"progress", b"data": b"1", b"ts": b"1.5"}),
        (b"0-2", {b"kind": b"terminal", b"data": b"{}", b"ts": b"2.5"}),
    ]


async def test_data_that_is_not_json_is_dropped_counted_and_reported(redis_server: RedisServer, env_name: str) -> None:
    emitter = EventEmitter(RedisEventTransport(redis_server.url, environment=env_name))
    task_id = str(uuid.uuid4())
    assert emitter.emit(task_id, "output", {"chunk": "ok"})
    assert not emitter.emit(task_id, "output", {"chunk": object()})  # never raises into the task
    assert emitter.emit(task_id, "terminal", {"outcome": "completed", "retrying": False})
    assert await emitter.flush(5)
    await emitter.aclose()
    assert emitter.stats.dropped_invalid == 1 and emitter.stats.written == 2
    events = await collect(task_id, RedisEventSource(redis_server.url, environment=env_name))
    assert [e.seq for e in events] == [1, 2]
    assert events[-1].data == {"outcome": "completed", "retrying": False, "dropped": 1}
