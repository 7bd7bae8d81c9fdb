"""Task events on Redis Streams (events.py tells the design): `RedisEventTransport` appends a
batch with one Lua call per task to `{env}:common:task:{id}:events`, numbering as it stores;
`RedisEventSource` reads a stream with XREAD BLOCK and resumes by seq after a reconnect."""

from __future__ import annotations

import asyncio
import collections
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from . import config
from .events_base import (
    DEFAULT_IDLE_TTL,
    DEFAULT_MAXLEN,
    DEFAULT_PAGE_BYTES,
    DEFAULT_RETENTION,
    TERMINAL,
    PendingEvent,
    ReadProgress,
    TaskEvent,
    events_key,
)
from .redisconn import LazyRedis, close_quietly

log = logging.getLogger("taskworker.events")

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
        at = ReadProgress(task_id, from_seq, idle_timeout, self.reconnect_max)
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
