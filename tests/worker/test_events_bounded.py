"""Live task events bounded by bytes and honest about losses (issue 27, rows 4 and 8), on a real
PostgreSQL and real redis-servers: events of 5 KB and 10 KB flow both ways in numbers whose
count-bounded batches and pages are over the 4 MiB limits; a reader's idle timeout fires while
it cannot reach the data plane; a terminal event's `dropped` counts the events a Redis restart
lost; a non-finite event time is refused, so it can never keep a task's events from the purge."""

from __future__ import annotations

import asyncio
import math
import time
from typing import TYPE_CHECKING

import grpc
import pytest
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from support.worker_support import RedisServer, free_port, requires_redis
from taskworker import (
    EventEmitter,
    PostgresEventSource,
    PostgresEventTransport,
    RedisEventSource,
    RedisEventTransport,
    watch_task_events,
)
from taskworker.events import TERMINAL
from test_events_transports import Backend, backend, collect, queue, redis_server

if TYPE_CHECKING:
    Stub = task_pb2_grpc.GenerationDataServiceAsyncStub

__all__ = ["backend", "redis_server"]  # the fixtures, re-exported for pytest


@pytest.mark.parametrize(("size", "count"), [(5_000, 1000), (10_000, 600)], ids=["1000x5KB", "600x10KB"])
async def test_large_events_flow_both_ways(stub: Stub, tool: pb.Tool, backend: Backend, size: int, count: int) -> None:
    """Emitted at once, so the writer's batches of 500 (and the reader's pages of 1000) would
    each be over 4 MiB: every event is stored, and read back in order."""
    t = await queue(stub, tool)
    for i in range(count):
        assert backend.emitter.emit(t.id, "output", {"i": i, "chunk": "x" * size})
    assert backend.emitter.emit(t.id, TERMINAL, {"outcome": "completed"})
    assert await backend.emitter.flush(60)
    stats = backend.emitter.stats
    assert (stats.written, stats.dropped_failed, stats.batches_failed) == (count + 1, 0, 0), stats
    events = await collect(t.id, backend.source, timeout=60)
    assert [e.seq for e in events] == list(range(1, count + 2))
    assert [e.data["i"] for e in events[:-1]] == list(range(count))
    assert events[-1].terminal and "dropped" not in events[-1].data


async def test_an_event_over_the_limit_is_refused_at_emit(stub: Stub, tool: pb.Tool) -> None:
    t = await queue(stub, tool)
    emitter = EventEmitter(PostgresEventTransport(stub), max_event_bytes=100_000)
    assert not emitter.emit(t.id, "output", "x" * 100_001)
    assert not emitter.emit(t.id, "progress", {"fraction": math.nan})  # NaN is not JSON
    assert emitter.emit(t.id, TERMINAL, {"outcome": "completed"})
    assert await emitter.flush(30)
    assert (emitter.stats.dropped_too_large, emitter.stats.dropped_invalid) == (1, 1)
    [terminal] = await collect(t.id, PostgresEventSource(stub))
    assert terminal.data == {"outcome": "completed", "dropped": 2}
    await emitter.aclose()


async def test_the_idle_timeout_fires_while_the_reader_cannot_connect() -> None:
    """No data plane at all: WatchTaskEvents waits for it (wait_for_ready), the idle timeout not."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{free_port()}") as channel:
        source = PostgresEventSource(task_pb2_grpc.GenerationDataServiceStub(channel))
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(_drain(watch_task_events("00000000-0000-0000-0000-000000000001",
                                                            source=source, idle_timeout=0.5)), 20)  # fmt: skip
        assert time.monotonic() - started < 15  # the idle timeout, not the test's guard


async def _drain(events: object) -> None:
    async for _ in events:  # type: ignore[attr-defined]
        pass


@pytest.mark.parametrize("when", [math.inf, -math.inf, math.nan], ids=["inf", "-inf", "nan"])
async def test_a_non_finite_event_time_is_refused(stub: Stub, tool: pb.Tool, when: float) -> None:
    t = await queue(stub, tool)
    req = pb.AppendTaskEventsRequest(task_ids=[t.id], kinds=["progress"], data=["{}"], emitted_at_unix=[when])
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.AppendTaskEvents(req)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    listed = await stub.ListTaskEvents(pb.ListTaskEventsRequest(task_id=t.id, limit=10))
    assert list(listed.events) == []


@requires_redis
async def test_dropped_counts_what_a_redis_restart_lost(stub: Stub, tool: pb.Tool) -> None:
    """A redis-server of this test's own (no persistence), stopped and started again while a
    task emits: the events stored before it are gone, those emitted while it is down are not
    stored; the terminal event's `dropped` counts both, and numbering goes on after the last
    seq the writer stored (a reader that had read that far skips nothing)."""
    redis = RedisServer()
    try:
        env = f"restart{time.monotonic_ns()}"
        emitter = EventEmitter(RedisEventTransport(redis.url, environment=env), retry_max=0.1)
        source = RedisEventSource(redis.url, environment=env, block=0.2)
        t = await queue(stub, tool)
        for i in range(100):
            emitter.emit(t.id, "progress", {"i": i})
        assert await emitter.flush(10) and emitter.stats.written == 100
        before = await collect(t.id, source, limit=100)
        assert [e.seq for e in before] == list(range(1, 101))
        redis.stop()
        for i in range(100, 150):
            emitter.emit(t.id, "progress", {"i": i})
        assert await emitter.flush(10) and emitter.stats.dropped_failed == 50
        redis.start()  # empty: the 100 stored events are gone
        for i in range(150, 180):
            emitter.emit(t.id, "progress", {"i": i})
        emitter.emit(t.id, TERMINAL, {"outcome": "completed"})
        assert await emitter.flush(10)
        after = await collect(t.id, source, from_seq=101)
        assert [e.data.get("i") for e in after[:-1]] == list(range(150, 180))
        assert [e.seq for e in after] == list(range(101, 132))
        assert after[-1].terminal and after[-1].data["dropped"] == 150
        assert emitter.stats.lost_by_store == 100
        await emitter.aclose()
    finally:
        redis.destroy()
