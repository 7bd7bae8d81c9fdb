"""Live task events: emit -> read latency and events/s, on Redis Streams and on PostgreSQL.

Worker side and reader side run in this one process (asyncio), as `EventEmitter` (the fleet's
buffer and flusher) and `watch_task_events` readers, one per task:

- latency: events emitted at a steady rate (one task, then 100 concurrent tasks sharing that
  rate); each event's latency is the reader's receive time minus its `emitted_at` (same clock).
- events/s: every task emits its events as fast as it can; the time from the first emit to the
  last reader's terminal event.

Redis: a private redis-server on a free port (never the shared one), or REDIS_ADDR when no
redis-server binary is installed. PostgreSQL: the generated server (`task_pydb_server`) over a
scratch queue database, AppendTaskEvents / WatchTaskEvents + ListTaskEvents.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
from common import Json

sys.path.insert(0, str(common.ROOT / "worker"))

import bench_throughput
import grpc
import redis.asyncio as aioredis
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from taskworker import (
    EventEmitter,
    PostgresEventSource,
    PostgresEventTransport,
    RedisEventSource,
    RedisEventTransport,
    config,
    watch_task_events,
)
from taskworker.events import EventSource, EventTransport

# (transport, source) for a run, and how to make task ids its store accepts.
Backend = tuple[Callable[[], EventTransport], EventSource]


async def read_all(task_id: str, source: EventSource, received: list[float]) -> int:
    """Read one task's stream to its terminal event; append each event's latency."""
    n = 0
    async for event in watch_task_events(task_id, source=source, idle_timeout=60):
        received.append(time.time() - event.emitted_at)
        n += 1
    return n


async def paced(backend: Backend, task_ids: list[str], per_task: int, rate: float) -> Json:
    """`per_task` events per task, `rate` events/s in total, round-robin over the tasks."""
    make_transport, source = backend
    emitter = EventEmitter(make_transport())
    latencies: list[float] = []
    readers = [asyncio.create_task(read_all(t, source, latencies)) for t in task_ids]
    await asyncio.sleep(0.5)  # every reader is listening before the first event
    interval = 1.0 / rate
    start = time.perf_counter()
    k = 0
    for i in range(per_task):
        for t in task_ids:
            emitter.emit(t, "progress", {"fraction": i / per_task, "message": "x"})
            k += 1
            delay = start + k * interval - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
    for t in task_ids:
        emitter.emit(t, "terminal", {"outcome": "completed", "retrying": False})
    await asyncio.wait_for(asyncio.gather(*readers), 120)
    await emitter.aclose()
    assert emitter.stats.dropped_full == emitter.stats.dropped_failed == 0, emitter.stats
    return {"tasks": len(task_ids), "events": len(latencies), "rate_per_s": rate, **common.latency_summary(latencies)}


async def burst(backend: Backend, task_ids: list[str], per_task: int) -> Json:
    """Every task emits `per_task` events at once; events/s until the last terminal is read."""
    make_transport, source = backend
    emitter = EventEmitter(make_transport(), buffer_size=len(task_ids) * (per_task + 1))
    latencies: list[float] = []
    readers = [asyncio.create_task(read_all(t, source, latencies)) for t in task_ids]
    await asyncio.sleep(0.5)
    start = time.perf_counter()
    for i in range(per_task):
        for t in task_ids:
            emitter.emit(t, "output", {"chunk": i})
    for t in task_ids:
        emitter.emit(t, "terminal", {"outcome": "completed", "retrying": False})
    counts = await asyncio.wait_for(asyncio.gather(*readers), 300)
    took = time.perf_counter() - start
    await emitter.aclose()
    assert sum(counts) == len(task_ids) * (per_task + 1), (sum(counts), emitter.stats)
    return {
        "tasks": len(task_ids),
        "events": sum(counts),
        "seconds": took,
        "events_per_s": sum(counts) / took,
        **common.latency_summary(latencies),
    }


async def measure(backend: Backend, new_task_ids: Callable[[int], Awaitable[list[str]]], quick: bool) -> Json:
    many = 10 if quick else 100
    n_paced = 50 if quick else 500
    # Fresh tasks for every measurement: a reader from seq 1 must not meet an earlier run's terminal.
    return {
        "one_task_latency": await paced(backend, await new_task_ids(1), n_paced, rate=200),
        "many_tasks_latency": await paced(backend, await new_task_ids(many), max(2, n_paced // many), rate=200),
        "one_task_throughput": await burst(backend, await new_task_ids(1), 500 if quick else 10_000),
        "many_tasks_throughput": await burst(backend, await new_task_ids(many), 20 if quick else 200),
    }


@contextlib.contextmanager
def redis_url() -> Iterator[str]:
    if shutil.which("redis-server") is None:
        yield config.redis_url()
        return
    from support.worker_support import RedisServer  # tests/: a throwaway redis-server on a free port

    server = RedisServer()
    try:
        yield server.url
    finally:
        server.destroy()


async def measure_redis(quick: bool) -> Json:
    with redis_url() as url:
        env = f"bench{uuid.uuid4().hex[:8]}"
        backend: Backend = (
            lambda: RedisEventTransport(url, environment=env),
            RedisEventSource(url, environment=env),
        )

        async def ids(n: int) -> list[str]:
            return [str(uuid.uuid4()) for _ in range(n)]

        try:
            return await measure(backend, ids, quick)
        finally:
            client = aioredis.Redis.from_url(url)
            keys = [k async for k in client.scan_iter(match=f"{env}:*")]
            if keys:
                await client.delete(*keys)
            await client.aclose()


async def measure_postgres(address: str, quick: bool) -> Json:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = task_pb2_grpc.GenerationDataServiceStub(channel)
        tool = (await stub.RegisterTool(pb.RegisterToolRequest(name=f"events-{uuid.uuid4().hex[:8]}"))).tool
        backend: Backend = (lambda: PostgresEventTransport(stub), PostgresEventSource(stub))

        async def ids(n: int) -> list[str]:
            return [(await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id))).task.id for _ in range(n)]

        return await measure(backend, ids, quick)


@contextlib.asynccontextmanager
async def data_plane(server: str) -> AsyncIterator[str]:
    with common.queue_database(server) as url:
        proc, address = bench_throughput.start_server(url, pool=8)
        try:
            yield address
        finally:
            bench_throughput.stop_server(proc)


async def measure_all(server: str, quick: bool) -> Json:
    result: Json = {"redis": await measure_redis(quick)}
    async with data_plane(server) as address:
        result["postgres"] = await measure_postgres(address, quick)
    return result


def run(server: str, quick: bool = False) -> Json:
    return asyncio.run(measure_all(server, quick))


def main() -> int:
    p: argparse.ArgumentParser = common.arg_parser(__doc__ or "")
    args = p.parse_args()
    with common.server_url() as (server, _):
        common.write_json(run(server, quick=args.quick), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
