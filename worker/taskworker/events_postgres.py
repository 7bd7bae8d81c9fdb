"""Task events in PostgreSQL, through the data plane (events.py tells the design):
`PostgresEventTransport` appends with `AppendTaskEvents`, `EventPurger` runs the retention
(`PurgeTaskEvents`), `PostgresEventSource` reads with `ListTaskEvents` and waits on
`WatchTaskEvents` (LISTEN task_events) as the doorbell."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import grpc
from generation.task.v1 import task_pb2 as pb

from . import retry
from .events_base import (
    DEFAULT_IDLE_TTL,
    DEFAULT_MAX_EVENT_BYTES,
    DEFAULT_PAGE_BYTES,
    DEFAULT_RETENTION,
    PendingEvent,
    ReadProgress,
    TaskEvent,
)

if TYPE_CHECKING:
    from generation.task.v1 import task_pb2_grpc

    Stub = task_pb2_grpc.GenerationDataServiceAsyncStub

log = logging.getLogger("taskworker.events")


class PostgresEventTransport:
    """Batched `AppendTaskEvents` calls: one INSERT per batch into generation.task_events.

    For deployments without Redis. Workers still hold no database credentials; the data plane's
    trigger NOTIFYs `task_events` with the task id, which `WatchTaskEvents` relays to readers.
    """

    def __init__(self, stub: Stub, *, timeout: float = 2.0) -> None:
        self.stub = stub
        self.timeout = timeout

    async def append(self, batch: list[PendingEvent]) -> dict[str, int] | None:
        req = pb.AppendTaskEventsRequest(
            task_ids=[ev.task_id for ev in batch],
            kinds=[ev.kind for ev in batch],
            data=[ev.data_with_dropped() for ev in batch],
            emitted_at_unix=[ev.emitted_at for ev in batch],
        )
        await self.stub.AppendTaskEvents(req, timeout=self.timeout)
        return None

    async def aclose(self) -> None:
        return None


class EventPurger:
    """PostgreSQL retention (Redis expires keys by itself): `PurgeTaskEvents` every `interval`
    seconds (jittered ±10 %), deleting a task's events `retention` seconds after its terminal
    event, or `idle` seconds after its newest event when it has none (a crashed worker).
    `run_reconciler` runs it when EVENTS=postgres; one replica is enough, several are harmless."""

    def __init__(
        self,
        stub: Stub,
        *,
        retention: float = DEFAULT_RETENTION,
        idle: float = DEFAULT_IDLE_TTL,
        interval: float = 60.0,
        rpc_timeout: float = 60.0,
    ) -> None:
        self.stub = stub
        self.retention = max(1, round(retention))
        self.idle = max(1, round(idle))
        self.interval = interval
        self.rpc_timeout = rpc_timeout
        self.purges = 0

    async def purge(self) -> None:
        await self.stub.PurgeTaskEvents(
            pb.PurgeTaskEventsRequest(retention_seconds=self.retention, idle_seconds=self.idle),
            timeout=self.rpc_timeout,
        )
        self.purges += 1

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.purge()
            except grpc.aio.AioRpcError as err:
                retry.record("events purge", err)  # tried again next interval either way: counted
                log.warning("event purge failed: %s %s", err.code().name, err.details())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval * random.uniform(0.9, 1.1)):
                    await stop.wait()


class PostgresEventSource:
    """`WatchTaskEvents` (LISTEN task_events, filtered to the task) as the doorbell and
    `ListTaskEvents(after_seq)` as the read: the stream is opened *before* the first read, so an
    event committed in between rings the bell and is read; a missed NOTIFY (reconnect) costs
    nothing because every read starts from the last seq seen."""

    def __init__(
        self,
        stub: Stub,
        *,
        page: int = 1000,
        page_bytes: int = DEFAULT_PAGE_BYTES,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        rpc_timeout: float = 10.0,
        reconnect_max: float = 2.0,
    ) -> None:
        self.stub = stub
        self.page = page
        # ListTaskEvents' max_bytes: a page of at most this many bytes (the server caps it at its
        # send limit); a page that may have been cut by it is followed by another read.
        self.page_bytes = page_bytes
        self.max_event_bytes = max_event_bytes
        self.rpc_timeout = rpc_timeout
        self.reconnect_max = reconnect_max

    async def watch(self, task_id: str, from_seq: int, idle_timeout: float | None) -> AsyncIterator[TaskEvent]:
        at = ReadProgress(task_id, from_seq, idle_timeout, self.reconnect_max)
        while True:
            call = self.stub.WatchTaskEvents(pb.WatchTaskEventsRequest(task_ids=[task_id]), wait_for_ready=True)
            bell = call.__aiter__()
            try:
                # Sent once the data plane LISTENs; waited for (wait_for_ready) no longer than the
                # idle timeout allows.
                try:
                    async with asyncio.timeout(at.remaining()):
                        await call.initial_metadata()
                except TimeoutError:
                    raise at.timed_out() from None
                while True:
                    while True:  # read everything after `at.after`, page by page
                        rows = (
                            await self.stub.ListTaskEvents(
                                pb.ListTaskEventsRequest(
                                    task_id=task_id, after_seq=at.after, limit=self.page, max_bytes=self.page_bytes
                                ),
                                timeout=at.bounded(self.rpc_timeout),
                            )
                        ).events
                        size = 0
                        for row in rows:
                            size += 64 + len(row.kind) + len(row.data.encode())
                            event = at.seen(_pg_event(row))
                            yield event
                            if event.terminal:
                                return
                        at.connected()
                        # Short by count, and short enough by bytes that one more event would
                        # have fitted: that was everything.
                        if len(rows) < self.page and size + self.max_event_bytes <= self.page_bytes:
                            break
                        if not rows:
                            break
                    remaining = at.remaining()
                    if remaining == 0:
                        raise at.timed_out()
                    try:
                        async with asyncio.timeout(remaining):
                            await anext(bell)
                    except StopAsyncIteration:
                        break  # stream ended (server shutting down): reconnect
                    except TimeoutError:
                        raise at.timed_out() from None
            except grpc.aio.AioRpcError as err:
                if at.remaining() == 0:  # an RPC cut short by the idle deadline
                    raise at.timed_out() from None
                if not retry.transient(err):
                    retry.record("events read", err)
                    raise  # the same read would fail alike (a page over the limit, a bad id)
                log.warning("event reader for task %s: %s; resuming after seq %d", task_id, err.code().name, at.after)
                why: grpc.aio.AioRpcError | str = err
            else:
                why = "stream ended"
            finally:
                call.cancel()
            await at.back_off(why)


def _pg_event(row: pb.TaskEvent) -> TaskEvent:
    return TaskEvent(
        task_id=row.task_id,
        seq=row.seq,
        kind=row.kind,
        data=json.loads(row.data),
        emitted_at=row.emitted_at.ToMicroseconds() / 1e6,
    )
