"""The PostgreSQL transport of live task events: numbering under concurrent appends, purging by
retention and idle time, and a data plane outage that never fails the task."""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any

import grpc
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from support.worker_support import free_port, sql, wait_until
from taskworker import (
    EventEmitter,
    EventPurger,
    PostgresEventSource,
    PostgresEventTransport,
    TaskContext,
    WorkerFleet,
)
from test_events_transports import collect, queue, status

if TYPE_CHECKING:
    Stub = task_pb2_grpc.GenerationDataServiceAsyncStub


async def stored_seqs(database_url: str, task_id: str) -> list[int]:
    rows = await sql(database_url, "SELECT seq FROM generation.task_events WHERE task_id = %s ORDER BY seq", task_id)
    return [r[0] for r in rows]


async def test_concurrent_appends_to_one_task_never_duplicate_or_skip_a_number(
    stub: Stub, tool: pb.Tool, database_url: str
) -> None:
    t = await queue(stub, tool)
    # Two emitters for one task (say, a fleet that lost the lease and the one that took over).
    emitters = [EventEmitter(PostgresEventTransport(stub), batch_size=10) for _ in range(2)]

    async def emit_all(n: int, emitter: EventEmitter) -> None:
        for i in range(200):
            emitter.emit(t.id, "output", {"from": n, "i": i})
            if i % 10 == 9:
                await asyncio.sleep(0)  # let the flushers interleave

    await asyncio.gather(*(emit_all(n, e) for n, e in enumerate(emitters)))
    assert all([await e.flush(30) for e in emitters])
    written = sum(e.stats.written for e in emitters)
    lost = sum(e.stats.dropped_failed for e in emitters)
    assert written + lost == 400 and written > 0
    assert await stored_seqs(database_url, t.id) == list(range(1, written + 1))
    # Each emitter's own events are stored in its emit order.
    rows = await sql(database_url, "SELECT data FROM generation.task_events WHERE task_id = %s ORDER BY seq", t.id)
    for n in (0, 1):
        mine = [r[0]["i"] for r in rows if r[0]["from"] == n]
        assert mine == sorted(mine)
    for e in emitters:
        await e.aclose()


async def append(stub: Stub, task_id: str, *kinds: str) -> None:
    await stub.AppendTaskEvents(
        pb.AppendTaskEventsRequest(
            task_ids=[task_id] * len(kinds),
            kinds=list(kinds),
            data=[json.dumps({"kind": k}) for k in kinds],
            emitted_at_unix=[time.time()] * len(kinds),
        )
    )


async def test_purge_deletes_finished_tasks_after_retention_and_abandoned_ones_after_idle(
    stub: Stub, tool: pb.Tool, database_url: str
) -> None:
    finished, running = await queue(stub, tool), await queue(stub, tool)
    await append(stub, finished.id, "progress", "terminal")
    await append(stub, running.id, "progress")
    # A long retention keeps both; the idle clock of the running task has not run out either.
    await stub.PurgeTaskEvents(pb.PurgeTaskEventsRequest(retention_seconds=3600, idle_seconds=3600))
    assert await stored_seqs(database_url, finished.id) == [1, 2]

    async def purged(task_id: str, retention: int, idle: int) -> bool:
        await stub.PurgeTaskEvents(pb.PurgeTaskEventsRequest(retention_seconds=retention, idle_seconds=idle))
        return await stored_seqs(database_url, task_id) == []

    await wait_until(lambda: purged(finished.id, 1, 3600), timeout=10, what="finished task's events purged")
    assert await stored_seqs(database_url, running.id) == [1]  # no terminal event: the idle rule applies
    await wait_until(lambda: purged(running.id, 3600, 1), timeout=10, what="abandoned task's events purged")
    # A purged task starts numbering again from 1 if it ever emits again.
    await append(stub, running.id, "progress")
    assert await stored_seqs(database_url, running.id) == [1]


async def test_unreachable_data_plane_for_events_never_fails_the_task(stub: Stub, tool: pb.Tool) -> None:
    # Events go to a data plane that is not there; the queue's own RPCs still work.
    async with grpc.aio.insecure_channel(f"127.0.0.1:{free_port()}") as dead:
        emitter = EventEmitter(
            PostgresEventTransport(task_pb2_grpc.GenerationDataServiceStub(dead), timeout=0.2), buffer_size=100
        )
        timings: list[float] = []

        async def process(task: pb.Task, ctx: TaskContext) -> Any:
            t0 = time.perf_counter()
            for i in range(1000):
                ctx.emit_progress(i / 1000)
            timings.append(time.perf_counter() - t0)
            return {"ok": True}

        t = await queue(stub, tool)
        fleet = WorkerFleet(stub, events=emitter, poll_interval=0.2, events_flush_timeout=0.5)
        fleet.add_tool(tool.id, process)
        running = asyncio.create_task(fleet.run())
        try:
            await wait_until(lambda: _completed(stub, t.id), timeout=15, what="task completed")
        finally:
            fleet.drain()
            await asyncio.wait_for(running, 30)
        assert timings[0] < 1.0
        assert emitter.stats.dropped_full == 900 and emitter.stats.written == 0
        await emitter.aclose()
    assert emitter.stats.dropped_failed + emitter.stats.dropped_full == 1001  # the terminal event too


async def _completed(stub: Stub, task_id: str) -> bool:
    return await status(stub, task_id) == pb.TASK_STATUS_COMPLETED


async def test_reader_replays_a_finished_task_page_by_page(stub: Stub, tool: pb.Tool) -> None:
    t = await queue(stub, tool)
    await append(stub, t.id, *(["output"] * 25), "terminal")
    events = await collect(t.id, PostgresEventSource(stub, page=10))
    assert [e.seq for e in events] == list(range(1, 27)) and events[-1].terminal
    # Resuming mid-way replays from that seq on.
    assert [e.seq for e in await collect(t.id, PostgresEventSource(stub, page=10), from_seq=20)] == list(range(20, 27))


async def test_event_purger_applies_the_retention_window_until_stopped(
    stub: Stub, tool: pb.Tool, database_url: str
) -> None:
    finished, running = await queue(stub, tool), await queue(stub, tool)
    await append(stub, finished.id, "output", "terminal")
    await append(stub, running.id, "output")
    purger = EventPurger(stub, retention=1, idle=3600, interval=0.1)
    stop = asyncio.Event()
    job = asyncio.create_task(purger.run(stop))
    try:

        async def purged() -> bool:
            return await stored_seqs(database_url, finished.id) == []

        await wait_until(purged, timeout=10, what="retention applied")
        assert await stored_seqs(database_url, running.id) == [1]
    finally:
        stop.set()
        await asyncio.wait_for(job, 5)
    assert purger.purges >= 1


async def test_watch_task_events_rejects_malformed_task_ids(stub: Stub) -> None:
    call = stub.WatchTaskEvents(pb.WatchTaskEventsRequest(task_ids=["not-a-uuid"]), timeout=5)
    try:
        async for _ in call:
            pass
        code = grpc.StatusCode.OK
    except grpc.aio.AioRpcError as err:
        code = err.code()
    assert code == grpc.StatusCode.INVALID_ARGUMENT, f"got {code.name}"


async def test_purge_with_a_window_of_zero_or_less_means_the_default(
    stub: Stub, tool: pb.Tool, database_url: str
) -> None:
    t = await queue(stub, tool)
    await append(stub, t.id, "progress", "terminal")
    # Taken literally, a negative window would purge everything; it means 3600 s / 86400 s.
    for retention, idle in ((-5, -5), (0, 0)):
        await stub.PurgeTaskEvents(pb.PurgeTaskEventsRequest(retention_seconds=retention, idle_seconds=idle))
        assert await stored_seqs(database_url, t.id) == [1, 2]
    # Backdated past the default retention, the same request purges it.
    await sql(
        database_url,
        "UPDATE generation.task_events SET emitted_at = now() - interval '2 hours' WHERE task_id = %s",
        t.id,
    )
    await stub.PurgeTaskEvents(pb.PurgeTaskEventsRequest())
    assert await stored_seqs(database_url, t.id) == []
