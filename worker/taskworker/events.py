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
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import grpc
import redis.asyncio as aioredis
from generation.task.v1 import task_pb2 as pb
from redis.exceptions import RedisError

from . import config
from .redisconn import LazyRedis, close_quietly

if TYPE_CHECKING:
    from generation.task.v1 import task_pb2_grpc

    Stub = task_pb2_grpc.GenerationDataServiceAsyncStub

log = logging.getLogger("taskworker.events")

PROGRESS = "progress"
URL = "url"
OUTPUT = "output"
TERMINAL = "terminal"

DEFAULT_MAXLEN = 10_000  # Redis: entries kept per task stream (approximate trim)
DEFAULT_RETENTION = 3600.0  # seconds a task's events are kept after its terminal event
DEFAULT_IDLE_TTL = 86_400.0  # seconds a stream without a terminal event lives past its last event


def events_key(task_id: str, environment_name: str | None = None) -> str:
    """`{env}:common:task:{id}:events`, namespaced by the deploy environment."""
    env = environment_name if environment_name is not None else config.environment()
    return f"{env}:common:task:{task_id}:events"


@dataclass(frozen=True)
class TaskEvent:
    """One stored event. `data` is the decoded JSON; `emitted_at` is the worker's clock (unix s)."""

    task_id: str
    seq: int
    kind: str
    data: Any
    emitted_at: float

    @property
    def terminal(self) -> bool:
        return self.kind == TERMINAL


@dataclass
class PendingEvent:
    """An event in the emit buffer; it has no sequence number until stored."""

    task_id: str
    kind: str
    data: str  # JSON text
    emitted_at: float


class EventTransport(Protocol):
    async def append(self, batch: list[PendingEvent]) -> None:
        """Store the batch, per task in order; raise on failure (the batch is then dropped)."""

    async def aclose(self) -> None: ...


@dataclass
class EmitterStats:
    emitted: int = 0  # accepted into the buffer
    written: int = 0  # stored by the transport
    dropped_full: int = 0  # refused: the buffer was full
    dropped_invalid: int = 0  # refused: the data is not JSON-serialisable
    dropped_failed: int = 0  # lost with a batch the transport could not store
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
            text = json.dumps(data)
        except (TypeError, ValueError) as err:
            self.stats.dropped_invalid += 1
            self._drop(task_id, f"event data is not JSON ({err})")
            return False
        if kind != TERMINAL and len(self._buffer) >= self.buffer_size:
            self.stats.dropped_full += 1
            self._drop(task_id, f"emit buffer full ({self.buffer_size})")
            return False
        if kind == TERMINAL:
            # The reader learns how much of this task's stream the worker itself lost.
            lost = self._dropped_by_task.pop(task_id, 0)
            if lost and isinstance(data, dict):
                text = json.dumps({**data, "dropped": lost})
        self._buffer.append(PendingEvent(task_id, kind, text, time.time()))
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

    async def _flush_forever(self) -> None:
        delay = self.retry_min
        while True:
            if not self._buffer:
                self._idle.set()
                self._ready.clear()
                if self._closed:
                    return
                await self._ready.wait()
                continue
            batch = [self._buffer.popleft() for _ in range(min(self.batch_size, len(self._buffer)))]
            try:
                await self.transport.append(batch)
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
                await asyncio.sleep(delay * random.uniform(0.5, 1.0))
                delay = min(delay * 2, self.retry_max)
                continue
            self.stats.written += len(batch)
            delay = self.retry_min

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


# -- Redis Streams ---------------------------------------------------------------------------

# KEYS[1] the stream; ARGV: maxlen, idle ttl (s), retention (s), then (kind, data, ts) triples.
# The next sequence number follows the newest entry's ID (`0-<seq>`); MAXLEN trimming never
# removes the newest entry, so the numbering continues across batches, fleets and retries.
_APPEND_LUA = """
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local seq = 0
if #last > 0 then
  seq = tonumber(string.match(last[1][1], '%-(%d+)$'))
end
local terminal = false
for i = 4, #ARGV, 3 do
  seq = seq + 1
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '0-' .. seq,
             'kind', ARGV[i], 'data', ARGV[i + 1], 'ts', ARGV[i + 2])
  if ARGV[i] == 'terminal' then terminal = true end
end
if terminal then
  redis.call('EXPIRE', KEYS[1], ARGV[3])
else
  redis.call('EXPIRE', KEYS[1], ARGV[2])
end
return seq
"""


class RedisEventTransport:
    """XADD to `{env}:common:task:{id}:events` (MAXLEN ~ maxlen), one Lua call per task per batch."""

    def __init__(
        self,
        url: str | None = None,
        *,
        environment: str | None = None,
        maxlen: int = DEFAULT_MAXLEN,
        retention: float = DEFAULT_RETENTION,
        idle_ttl: float = DEFAULT_IDLE_TTL,
        timeout: float = 0.5,
    ) -> None:
        self.url = url or config.redis_url()
        self.environment = environment if environment is not None else config.environment()
        self.maxlen = maxlen
        self.retention = max(1, round(retention))
        self.idle_ttl = max(1, round(idle_ttl))
        self.timeout = timeout
        self._redis = LazyRedis(self.url, timeout)
        self._script: Any = None

    async def append(self, batch: list[PendingEvent]) -> None:
        client = self._redis.get()
        if self._script is None or self._script.registered_client is not client:
            self._script = client.register_script(_APPEND_LUA)
        per_task: dict[str, list[str]] = {}
        for ev in batch:
            per_task.setdefault(ev.task_id, []).extend((ev.kind, ev.data, repr(ev.emitted_at)))
        try:
            async with asyncio.timeout(self.timeout * 2):
                async with client.pipeline(transaction=False) as pipe:
                    for task_id, triples in per_task.items():
                        await self._script(
                            keys=[events_key(task_id, self.environment)],
                            args=[self.maxlen, self.idle_ttl, self.retention, *triples],
                            client=pipe,
                        )
                    await pipe.execute()
        except (RedisError, OSError, TimeoutError):
            await self._redis.drop()
            raise

    async def aclose(self) -> None:
        await self._redis.drop()


# -- PostgreSQL, through the data plane --------------------------------------------------------


class PostgresEventTransport:
    """Batched `AppendTaskEvents` calls: one INSERT per batch into generation.task_events.

    For deployments without Redis. Workers still hold no database credentials; the data plane's
    trigger NOTIFYs `task_events` with the task id, which `WatchTaskEvents` relays to readers.
    """

    def __init__(self, stub: Stub, *, timeout: float = 2.0) -> None:
        self.stub = stub
        self.timeout = timeout

    async def append(self, batch: list[PendingEvent]) -> None:
        req = pb.AppendTaskEventsRequest(
            task_ids=[ev.task_id for ev in batch],
            kinds=[ev.kind for ev in batch],
            data=[ev.data for ev in batch],
            emitted_at_unix=[ev.emitted_at for ev in batch],
        )
        await self.stub.AppendTaskEvents(req, timeout=self.timeout)

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
                log.warning("event purge failed: %s %s", err.code().name, err.details())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval * random.uniform(0.9, 1.1)):
                    await stop.wait()


# -- Reader side -----------------------------------------------------------------------------


class EventSource(Protocol):
    def watch(self, task_id: str, from_seq: int, idle_timeout: float | None) -> AsyncIterator[TaskEvent]: ...


class RedisEventSource:
    """XREAD BLOCK on the task's stream; reconnects after Redis errors and resumes by seq."""

    def __init__(
        self,
        url: str | None = None,
        *,
        environment: str | None = None,
        block: float = 1.0,
        count: int = 1000,
        reconnect_max: float = 2.0,
        connect_timeout: float = 5.0,
    ) -> None:
        self.url = url or config.redis_url()
        self.environment = environment if environment is not None else config.environment()
        self.connect_timeout = connect_timeout
        self.block_ms = max(1, round(block * 1000))
        self.count = count
        self.reconnect_max = reconnect_max

    async def watch(self, task_id: str, from_seq: int, idle_timeout: float | None) -> AsyncIterator[TaskEvent]:
        key = events_key(task_id, self.environment)
        at = _Progress(task_id, from_seq, idle_timeout, self.reconnect_max)
        while True:
            client = aioredis.Redis.from_url(self.url, socket_connect_timeout=self.connect_timeout)
            try:
                while True:
                    if at.remaining() == 0:
                        raise at.timed_out()
                    reply = await client.xread({key: f"0-{at.after}"}, count=self.count, block=self.block_ms)
                    at.connected()
                    for entry_id, fields in _stream_entries(reply):
                        event = at.seen(_redis_event(task_id, entry_id, fields))
                        yield event
                        if event.terminal:
                            return
            except (RedisError, OSError) as err:
                log.warning("event reader for task %s lost Redis (%s); resuming after seq %d", task_id, err, at.after)
            finally:
                await close_quietly(client)
            await at.back_off()


class _Progress:
    """Where a reader of one task's events is: the last seq it yielded (a reconnect resumes after
    it), the idle deadline (reset by every event), the reconnect delay (doubling to a maximum,
    reset once a read succeeds)."""

    def __init__(self, task_id: str, from_seq: int, idle_timeout: float | None, reconnect_max: float) -> None:
        self.task_id = task_id
        self.after = max(from_seq, 1) - 1
        self.idle_timeout = idle_timeout
        self.reconnect_max = reconnect_max
        self.deadline = None if idle_timeout is None else time.monotonic() + idle_timeout
        self.delay = 0.05

    def seen(self, event: TaskEvent) -> TaskEvent:
        self.after = event.seq
        if self.idle_timeout is not None:
            self.deadline = time.monotonic() + self.idle_timeout
        return event

    def remaining(self) -> float | None:
        """Seconds left before the idle timeout (0 once passed), None without one."""
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def timed_out(self) -> TimeoutError:
        return TimeoutError(f"no event for task {self.task_id} after seq {self.after} in {self.idle_timeout}s")

    def connected(self) -> None:
        self.delay = 0.05

    async def back_off(self) -> None:
        await asyncio.sleep(self.delay * random.uniform(0.5, 1.0))
        self.delay = min(self.delay * 2, self.reconnect_max)


def _stream_entries(reply: Any) -> list[tuple[bytes, dict[bytes, bytes]]]:
    """The (entry id, fields) pairs of an XREAD reply on one stream, in whichever shape this
    redis-py and protocol give it: `[[stream, entries]]` (RESP2, and RESP3 in redis-py's legacy
    form) or `{stream: entries}`, where RESP3 may wrap the entries in one more list."""
    if not reply:
        return []
    groups = reply.values() if isinstance(reply, dict) else [entries for _stream, entries in reply]
    out: list[tuple[bytes, dict[bytes, bytes]]] = []
    for entries in groups:
        for entry in entries:
            if entry and isinstance(entry[0], (list, tuple)):
                out.extend(entry)
            else:
                out.append(entry)
    return out


def _redis_event(task_id: str, entry_id: bytes, fields: dict[bytes, bytes]) -> TaskEvent:
    return TaskEvent(
        task_id=task_id,
        seq=int(entry_id.split(b"-", 1)[1]),
        kind=fields[b"kind"].decode(),
        data=json.loads(fields[b"data"]),
        emitted_at=float(fields[b"ts"]),
    )


class PostgresEventSource:
    """`WatchTaskEvents` (LISTEN task_events, filtered to the task) as the doorbell and
    `ListTaskEvents(after_seq)` as the read: the stream is opened *before* the first read, so an
    event committed in between rings the bell and is read; a missed NOTIFY (reconnect) costs
    nothing because every read starts from the last seq seen."""

    def __init__(self, stub: Stub, *, page: int = 1000, rpc_timeout: float = 10.0, reconnect_max: float = 2.0) -> None:
        self.stub = stub
        self.page = page
        self.rpc_timeout = rpc_timeout
        self.reconnect_max = reconnect_max

    async def watch(self, task_id: str, from_seq: int, idle_timeout: float | None) -> AsyncIterator[TaskEvent]:
        at = _Progress(task_id, from_seq, idle_timeout, self.reconnect_max)
        while True:
            call = self.stub.WatchTaskEvents(pb.WatchTaskEventsRequest(task_ids=[task_id]), wait_for_ready=True)
            bell = call.__aiter__()
            try:
                await call.initial_metadata()  # sent once the data plane LISTENs
                while True:
                    while True:  # read everything after `at.after`, page by page
                        rows = (
                            await self.stub.ListTaskEvents(
                                pb.ListTaskEventsRequest(task_id=task_id, after_seq=at.after, limit=self.page),
                                timeout=self.rpc_timeout,
                            )
                        ).events
                        for row in rows:
                            event = at.seen(_pg_event(row))
                            yield event
                            if event.terminal:
                                return
                        at.connected()
                        if len(rows) < self.page:
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
                log.warning("event reader for task %s: %s; resuming after seq %d", task_id, err.code().name, at.after)
            finally:
                call.cancel()
            await at.back_off()


def _pg_event(row: pb.TaskEvent) -> TaskEvent:
    return TaskEvent(
        task_id=row.task_id,
        seq=row.seq,
        kind=row.kind,
        data=json.loads(row.data),
        emitted_at=row.emitted_at.ToMicroseconds() / 1e6,
    )


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
