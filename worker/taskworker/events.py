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

from . import config, retry
from .limits import DEFAULT_MESSAGE_BYTES, FRAMING_MARGIN
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
DEFAULT_MAX_EVENT_BYTES = 1024 * 1024  # an event's JSON data at most
#: A batch of events written at once, at most (under the server's receive limit).
DEFAULT_BATCH_BYTES = DEFAULT_MESSAGE_BYTES - FRAMING_MARGIN
#: A page of events read at once, at most (under the server's send limit).
DEFAULT_PAGE_BYTES = 4_000_000


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
    # A terminal event whose data is an object: how many of its task's events were lost before
    # it, filled in as its batch is written (the transport adds what the store itself lost, and
    # sets `"dropped"` in the data when the total is not 0). -1: not such an event.
    dropped: int = -1

    @property
    def size(self) -> int:
        """Its share of a batch written or a page read."""
        return 64 + len(self.task_id) + len(self.kind) + len(self.data.encode())

    def data_with_dropped(self, lost: int = 0) -> str:
        """`data`, with `"dropped"` set to this event's count plus `lost` when that is not 0."""
        total = self.dropped + lost
        if self.dropped < 0 or total <= 0:
            return self.data
        return json.dumps({**json.loads(self.data), "dropped": total})


class EventTransport(Protocol):
    async def append(self, batch: list[PendingEvent]) -> dict[str, int] | None:
        """Store the batch, per task in order; raise on failure (the batch is then dropped).
        Returns, per task, how many of its events stored earlier the store was found to have
        lost (already added to a terminal event of this batch); None or {}: none."""

    async def aclose(self) -> None: ...


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


# -- Redis Streams ---------------------------------------------------------------------------

# KEYS[1] the stream; ARGV: maxlen, idle ttl (s), retention (s), the last seq this writer stored
# on the stream (0: none), then (kind, data, ts, dropped) quadruples.
# The next sequence number follows the newest entry's ID (`0-<seq>`); MAXLEN trimming never
# removes the newest entry, so the numbering continues across batches, fleets and retries. A
# newest entry older than the writer's last (a restart without persistence wiped the stream, or
# kept only its start) means the events between were lost: counted (`lost`), added to a
# terminal event's `dropped` (dropped >= 0: its data is an object), and numbering goes on after
# the writer's last, so a reader resuming after it skips nothing.
_APPEND_LUA = """
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local seq = 0
if #last > 0 then
  seq = tonumber(string.match(last[1][1], '%-(%d+)$'))
end
local lost = 0
local mine = tonumber(ARGV[4])
if mine > seq then
  lost = mine - seq
  seq = mine
end
local terminal = false
for i = 5, #ARGV, 4 do
  seq = seq + 1
  local data = ARGV[i + 1]
  local dropped = tonumber(ARGV[i + 3])
  if dropped >= 0 and dropped + lost > 0 then
    local sep = ', '
    if data == '{}' then sep = '' end
    data = string.sub(data, 1, -2) .. sep .. '"dropped": ' .. (dropped + lost) .. '}'
  end
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '0-' .. seq,
             'kind', ARGV[i], 'data', data, 'ts', ARGV[i + 2])
  if ARGV[i] == 'terminal' then terminal = true end
end
if terminal then
  redis.call('EXPIRE', KEYS[1], ARGV[3])
else
  redis.call('EXPIRE', KEYS[1], ARGV[2])
end
return {seq, lost}
"""

#: Tasks whose last stored seq a Redis writer remembers (the oldest are forgotten first).
_REMEMBERED_TASKS = 100_000


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
        # task id -> the last seq this writer stored for it (dropped once its terminal is stored).
        self._last_seq: collections.OrderedDict[str, int] = collections.OrderedDict()

    async def append(self, batch: list[PendingEvent]) -> dict[str, int]:
        client = self._redis.get()
        if self._script is None or self._script.registered_client is not client:
            self._script = client.register_script(_APPEND_LUA)
        per_task: dict[str, list[str | int]] = {}
        ended: set[str] = set()
        for ev in batch:
            per_task.setdefault(ev.task_id, []).extend((ev.kind, ev.data, repr(ev.emitted_at), ev.dropped))
            if ev.kind == TERMINAL:
                ended.add(ev.task_id)
        try:
            async with asyncio.timeout(self.timeout * 2):
                async with client.pipeline(transaction=False) as pipe:
                    for task_id, quads in per_task.items():
                        await self._script(
                            keys=[events_key(task_id, self.environment)],
                            args=[self.maxlen, self.idle_ttl, self.retention, self._last_seq.get(task_id, 0), *quads],
                            client=pipe,
                        )
                    replies = await pipe.execute()
        except (RedisError, OSError, TimeoutError):
            await self._redis.drop()
            raise
        lost: dict[str, int] = {}
        for task_id, (seq, task_lost) in zip(per_task, replies, strict=True):
            if int(task_lost):
                lost[task_id] = int(task_lost)
            if task_id in ended:
                self._last_seq.pop(task_id, None)
            else:
                self._last_seq[task_id] = int(seq)
                self._last_seq.move_to_end(task_id)
        while len(self._last_seq) > _REMEMBERED_TASKS:
            self._last_seq.popitem(last=False)
        if lost:
            log.warning("Redis lost %d stored task event(s) (a restart without persistence?)", sum(lost.values()))
        return lost

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
        page_bytes: int = DEFAULT_PAGE_BYTES,
        reconnect_max: float = 2.0,
        connect_timeout: float = 5.0,
    ) -> None:
        self.url = url or config.redis_url()
        self.environment = environment if environment is not None else config.environment()
        self.connect_timeout = connect_timeout
        self.block_ms = max(1, round(block * 1000))
        self.count = count
        self.page_bytes = page_bytes
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
                    # Pages of about page_bytes: as many entries as the largest seen would fill.
                    count = max(1, min(self.count, self.page_bytes // at.largest))
                    reply = await client.xread({key: f"0-{at.after}"}, count=count, block=self.block_ms)
                    at.connected()
                    for entry_id, fields in _stream_entries(reply):
                        at.largest = max(at.largest, 64 + sum(len(v) for v in fields.values()))
                        event = at.seen(_redis_event(task_id, entry_id, fields))
                        yield event
                        if event.terminal:
                            return
            except (RedisError, OSError) as err:
                log.warning("event reader for task %s lost Redis (%s); resuming after seq %d", task_id, err, at.after)
            finally:
                await close_quietly(client)
            await at.back_off("redis")


class _Progress:
    """Where a reader of one task's events is: the last seq it yielded (a reconnect resumes after
    it), the idle deadline (reset by every event, and kept while reconnecting: a reader of a
    store that is away times out as one of a silent stream does), the reconnect back-off
    (retry.py: doubling to a maximum, jittered, reset once a read succeeds)."""

    def __init__(self, task_id: str, from_seq: int, idle_timeout: float | None, reconnect_max: float) -> None:
        self.task_id = task_id
        self.after = max(from_seq, 1) - 1
        self.idle_timeout = idle_timeout
        self.reconnect_max = reconnect_max
        self.deadline = None if idle_timeout is None else time.monotonic() + idle_timeout
        self.backoff = retry.Backoff("events read", cap=max(reconnect_max, 0.05))
        self.largest = 1  # bytes of the largest event seen (Redis pages)

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
        self.backoff.reset()

    def bounded(self, seconds: float) -> float:
        """`seconds`, or less if the idle deadline comes first; TimeoutError once it passed."""
        remaining = self.remaining()
        if remaining is None:
            return seconds
        if remaining == 0:
            raise self.timed_out()
        return min(seconds, remaining)

    async def back_off(self, why: grpc.aio.AioRpcError | str) -> None:
        """Wait before reconnecting (never past the idle deadline: then TimeoutError)."""
        delay = self.bounded(self.backoff.next_delay())
        retry.COUNTS[(self.backoff.what, why if isinstance(why, str) else why.code().name, "transient")] += 1
        await asyncio.sleep(delay)
        self.bounded(0.0)


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
        at = _Progress(task_id, from_seq, idle_timeout, self.reconnect_max)
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
