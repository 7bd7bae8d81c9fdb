"""Live task events: progress, streaming URLs, partial output and a terminal event per task.

Not the queue and not the wake: a best-effort side channel from the worker running a task to
whoever relays its progress to a user. See docs/worker.md, "Live task events".

- Worker side: `EventEmitter` buffers events in memory (bounded) and a background flusher
  writes them in batches through a transport. `emit` never blocks and never raises: when the
  buffer is full the event is dropped and counted (the terminal event is always admitted).
  `TaskContext.emit_progress/emit_url/emit_output` call it; the fleet writes the terminal event.
- Transports: `RedisEventTransport` (default) appends to the Redis Stream
  `{env}:common:task:{id}:events`; `PostgresEventTransport` appends to the data plane's
  `generation.task_events` table through the generated `AppendTaskEvents` RPC.
- Reader side: `watch_task_events(task_id, from_seq=...)` yields the task's events in
  sequence order from `from_seq` on, resumes where it left off after a reconnect, and ends
  after the terminal event (or raises TimeoutError after `idle_timeout` without one).

Sequence numbers are assigned where the events are stored (a Lua script on Redis, the INSERT
on PostgreSQL), so they run 1, 2, 3... per task without gaps across retries and fleets; the
Redis entry ID is `0-<seq>`, which makes "resume after seq n" a plain XREAD from `0-<n>`.

Bounded by bytes (limits.py): an event's data over `max_event_bytes` (1 MiB) is refused at
emit (dropped, counted); the writer's batches stay under the server's receive limit, and the
PostgreSQL reader's pages under its send limit (ListTaskEvents' `max_bytes`), so events of any
allowed size flow both ways. The terminal event's `dropped` is counted when it is written, not
emitted: it covers every event of the task lost before it (buffer full, a batch not stored, and
on Redis the events a restart wiped, which the writer sees when the stream's newest entry is
older than the last one it stored; numbering then goes on from there, so a reader never skips).

Modules: this one holds the emitter and `watch_task_events` and re-exports the rest (import
from here); `events_base.py` what every transport shares (kinds, limits, the event types, the
protocols, a reader's progress), `events_redis.py` the Redis Streams writer and reader,
`events_postgres.py` the PostgreSQL writer, purger and reader (through the data plane).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

import grpc

from . import retry
from .events_base import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_IDLE_TTL,
    DEFAULT_MAX_EVENT_BYTES,
    DEFAULT_MAXLEN,
    DEFAULT_PAGE_BYTES,
    DEFAULT_RETENTION,
    OUTPUT,
    PROGRESS,
    TERMINAL,
    URL,
    EventSource,
    EventTransport,
    PendingEvent,
    TaskEvent,
    events_key,
)
from .events_postgres import EventPurger, PostgresEventSource, PostgresEventTransport
from .events_redis import RedisEventSource, RedisEventTransport

__all__ = [
    "DEFAULT_BATCH_BYTES",
    "DEFAULT_IDLE_TTL",
    "DEFAULT_MAXLEN",
    "DEFAULT_MAX_EVENT_BYTES",
    "DEFAULT_PAGE_BYTES",
    "DEFAULT_RETENTION",
    "OUTPUT",
    "PROGRESS",
    "TERMINAL",
    "URL",
    "EmitterStats",
    "EventEmitter",
    "EventPurger",
    "EventSource",
    "EventTransport",
    "PendingEvent",
    "PostgresEventSource",
    "PostgresEventTransport",
    "RedisEventSource",
    "RedisEventTransport",
    "TaskEvent",
    "events_key",
    "watch_task_events",
]

log = logging.getLogger("taskworker.events")


@dataclass
class EmitterStats:
    emitted: int = 0  # accepted into the buffer
    written: int = 0  # stored by the transport
    dropped_full: int = 0  # refused: the buffer was full
    dropped_invalid: int = 0  # refused: the data is not JSON-serialisable
    dropped_failed: int = 0  # lost with a batch the transport could not store
    dropped_too_large: int = 0  # refused: the data is over max_event_bytes
    lost_by_store: int = 0  # stored, then lost by the store (a Redis restart without persistence)
    batches_failed: int = 0


@dataclass
class EventEmitter:
    """The worker side: a bounded buffer and one background flusher per fleet.

    Per task, events are stored in emit order (one flusher, batches in order). Nothing here
    waits on the transport: `emit` is a deque append, and a transport outage only fills the
    buffer, whose overflow is dropped and counted (logged at most every `log_every` seconds).
    """

    transport: EventTransport
    buffer_size: int = 10_000
    batch_size: int = 500
    batch_bytes: int = DEFAULT_BATCH_BYTES
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    retry_min: float = 0.05
    retry_max: float = 2.0
    log_every: float = 10.0
    stats: EmitterStats = field(default_factory=EmitterStats)
    _buffer: collections.deque[PendingEvent] = field(default_factory=collections.deque)
    _dropped_by_task: dict[str, int] = field(default_factory=dict)
    _ready: asyncio.Event = field(default_factory=asyncio.Event)
    _idle: asyncio.Event = field(default_factory=asyncio.Event)
    _flusher: asyncio.Task[None] | None = None
    _closed: bool = False
    _last_drop_log: float = 0.0

    def emit(self, task_id: str, kind: str, data: Any = None) -> bool:
        """Queue an event; False if it was dropped. Never blocks, never raises."""
        if self._closed:
            return False
        try:
            text = json.dumps(data, allow_nan=False)  # NaN is not JSON: the store would refuse the batch
        except (TypeError, ValueError) as err:
            self.stats.dropped_invalid += 1
            self._drop(task_id, f"event data is not JSON ({err})")
            return False
        if len(text) > self.max_event_bytes and len(text.encode()) > self.max_event_bytes:
            self.stats.dropped_too_large += 1
            self._drop(task_id, f"event data of {len(text.encode())} bytes is over {self.max_event_bytes}")
            if kind != TERMINAL:
                return False
            data, text = {"outcome": "unknown"}, '{"outcome": "unknown"}'  # the end is still told
        if kind != TERMINAL and len(self._buffer) >= self.buffer_size:
            self.stats.dropped_full += 1
            self._drop(task_id, f"emit buffer full ({self.buffer_size})")
            return False
        # A terminal event learns, when written, how much of its task's stream was lost before it.
        dropped = 0 if kind == TERMINAL and isinstance(data, dict) else -1
        self._buffer.append(PendingEvent(task_id, kind, text, time.time(), dropped))
        self.stats.emitted += 1
        self._idle.clear()
        self._ready.set()
        self._ensure_flusher()
        return True

    def _drop(self, task_id: str, why: str) -> None:
        self._dropped_by_task[task_id] = self._dropped_by_task.get(task_id, 0) + 1
        now = time.monotonic()
        if now - self._last_drop_log >= self.log_every:
            self._last_drop_log = now
            log.warning("task event dropped (%s); %s", why, self.stats)

    def _ensure_flusher(self) -> None:
        if self._flusher is None or self._flusher.done():
            with contextlib.suppress(RuntimeError):  # no running loop: flushed by the next emit in one
                self._flusher = asyncio.get_running_loop().create_task(self._flush_forever(), name="task events")

    def _take(self) -> list[PendingEvent]:
        """The next batch: at most `batch_size` events and `batch_bytes` (at least one); each
        terminal event's `dropped` is read now, after every earlier batch was stored or lost."""
        batch: list[PendingEvent] = []
        size = 0
        while self._buffer and len(batch) < self.batch_size:
            size += self._buffer[0].size
            if batch and size > self.batch_bytes:
                break
            ev = self._buffer.popleft()
            if ev.kind == TERMINAL:
                lost = self._dropped_by_task.pop(ev.task_id, 0)
                if ev.dropped >= 0:
                    ev.dropped = lost
            batch.append(ev)
        return batch

    async def _flush_forever(self) -> None:
        backoff = retry.Backoff("events write", base=self.retry_min, cap=max(self.retry_max, self.retry_min))
        while True:
            if not self._buffer:
                self._idle.set()
                self._ready.clear()
                if self._closed:
                    return
                await self._ready.wait()
                continue
            batch = self._take()
            try:
                lost = await self.transport.append(batch)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # any transport failure: best effort, never the task's problem
                self.stats.batches_failed += 1
                self.stats.dropped_failed += len(batch)
                for ev in batch:
                    if ev.kind != TERMINAL:
                        self._dropped_by_task[ev.task_id] = self._dropped_by_task.get(ev.task_id, 0) + 1
                    else:
                        self._dropped_by_task.pop(ev.task_id, None)
                now = time.monotonic()
                if now - self._last_drop_log >= self.log_every:
                    self._last_drop_log = now
                    log.warning("task events not stored (%s: %s); %s", type(err).__name__, err, self.stats)
                if isinstance(err, grpc.aio.AioRpcError) and retry.record("events write", err) == "permanent":
                    continue  # this batch itself was refused: the next one need not wait
                await backoff.wait(type(err).__name__ if not isinstance(err, grpc.aio.AioRpcError) else None)
                continue
            self.stats.written += len(batch)
            ended = {ev.task_id for ev in batch if ev.kind == TERMINAL}
            for task_id, n in (lost or {}).items():
                self.stats.lost_by_store += n
                if task_id not in ended:  # told by the task's terminal event, when it is written
                    self._dropped_by_task[task_id] = self._dropped_by_task.get(task_id, 0) + n
            backoff.reset()

    async def flush(self, timeout: float = 5.0) -> bool:
        """Wait until the buffer is empty (stored or dropped); False if `timeout` passed first."""
        if not self._buffer and (self._flusher is None or self._idle.is_set()):
            return True
        self._ensure_flusher()
        try:
            async with asyncio.timeout(timeout):
                await self._idle.wait()
            return True
        except TimeoutError:
            return False

    async def aclose(self, timeout: float = 5.0) -> None:
        """Flush for up to `timeout`, then drop the rest and close the transport."""
        if not self._closed:
            await self.flush(timeout)
        self._closed = True
        self._ready.set()
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(BaseException):
                await self._flusher
        if self._buffer:
            log.warning("closing with %d task event(s) unwritten", len(self._buffer))
            self.stats.dropped_failed += len(self._buffer)
            self._buffer.clear()
        await self.transport.aclose()


async def watch_task_events(
    task_id: str,
    from_seq: int = 1,
    *,
    source: EventSource | None = None,
    idle_timeout: float | None = None,
) -> AsyncGenerator[TaskEvent, None]:
    """The task's events with seq >= `from_seq`, in order, ending after the terminal event.

    To resume after a disconnect, call again with `from_seq=last.seq + 1`. A finished task
    replays what is retained. `source` defaults to Redis (REDIS_ADDR/REDIS_URL, ENVIRONMENT);
    pass `PostgresEventSource(stub)` for the PostgreSQL transport. With `idle_timeout`, raises
    TimeoutError when no event arrives for that long (say, an expired or never-written stream).
    """
    async for event in (source or RedisEventSource()).watch(task_id, from_seq, idle_timeout):
        yield event
