"""LISTEN/NOTIFY relayed over a server-streaming RPC (`(pydb.v1.listen)`).

One database connection per channel per server, whatever the number of streams: the first
stream on a channel opens a connection of its own (with the pool's connection settings, or to
DATABASE_LISTEN_URL when set, e.g. past a transaction-mode PgBouncer; never taken from the pool:
a pooled connection handed back still LISTENing would deliver notifications to nobody) and
LISTENs; every later stream on that channel subscribes to it in process, and each notification is fanned out to every subscriber. The connection closes when
its last stream ends. So streams cost no database connections (issue 14: one connection per
stream let 220 streams exhaust `max_connections`), and their number is capped per server
(`--max-listen-streams`): past the cap a new stream is refused with RESOURCE_EXHAUSTED.

Notifications are transactional in PostgreSQL: a NOTIFY reaches listeners only when the
transaction that sent it commits. Once the stream is subscribed to a connection whose LISTEN is
in place, the handler sends the initial metadata `pydb-listening: <channel>`: a client that
waits for it (`await call.initial_metadata()`) knows every notification committed from then on
will reach it. A lost database connection ends every stream on it with UNAVAILABLE, and a
stream that falls more than `QUEUE_LIMIT` notifications behind ends with RESOURCE_EXHAUSTED;
clients reconnect.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from .errors import describe_for_log, status_for_db_error

log = logging.getLogger("pydb")

LISTENING_METADATA = "pydb-listening"
#: Streams per server (all channels) when `configure_streams` was not called.
DEFAULT_MAX_STREAMS = 1000
#: Notifications a stream may have waiting before it is ended as too slow.
QUEUE_LIMIT = 1000
_STOP_CHECK_SECONDS = 0.25


@dataclass(frozen=True)
class _End:
    """What a subscriber's queue receives instead of a payload when its stream must end."""

    code: grpc.StatusCode
    message: str


_SHUTTING_DOWN = _End(grpc.StatusCode.UNAVAILABLE, "server shutting down")
_FELL_BEHIND = _End(grpc.StatusCode.RESOURCE_EXHAUSTED, "the stream fell too far behind; reconnect")


@dataclass(eq=False)
class _Channel:
    """One LISTENing connection and the queues of the streams it feeds."""

    conn: psycopg.AsyncConnection[Any]
    subscribers: set[asyncio.Queue[str | _End]] = field(default_factory=set)
    reader: asyncio.Task[None] | None = None
    closing: bool = False

    def publish(self, item: str | _End) -> None:
        for queue in list(self.subscribers):
            if isinstance(item, _End):
                queue.put_nowait(item)
            elif queue.qsize() >= QUEUE_LIMIT:
                self.subscribers.discard(queue)
                queue.put_nowait(_FELL_BEHIND)
            else:
                queue.put_nowait(item)


@dataclass(eq=False)
class _PoolStreams:
    """The listening state of one pool (one server)."""

    max_streams: int = DEFAULT_MAX_STREAMS
    open_streams: int = 0
    channels: dict[str, _Channel] = field(default_factory=dict)
    opening: dict[str, asyncio.Lock] = field(default_factory=dict)
    #: The connection string LISTEN connections use; "" means the pool's own.
    conninfo: str = ""


_by_pool: dict[int, _PoolStreams] = {}


def configure_streams(pool: AsyncConnectionPool[Any], max_streams: int, conninfo: str = "") -> None:
    """Cap the concurrent listen streams served from `pool`; `conninfo`, when given, is where
    their LISTEN connections go instead of the pool's own connection string (DATABASE_LISTEN_URL:
    a LISTEN needs a session of its own, which a transaction-mode pooler does not give)."""
    state = _state(pool)
    state.max_streams = max_streams
    state.conninfo = conninfo


def _state(pool: AsyncConnectionPool[Any]) -> _PoolStreams:
    return _by_pool.setdefault(id(pool), _PoolStreams())


def listening_connections(pool: AsyncConnectionPool[Any]) -> int:
    """Database connections held for LISTEN on behalf of `pool`'s streams."""
    state = _by_pool.get(id(pool))
    return 0 if state is None else len(state.channels)


def close_streams(pool: AsyncConnectionPool[Any]) -> int:
    """End every listen stream served from `pool` (the server is shutting down); how many.

    Each ends with UNAVAILABLE so clients reconnect, to another replica or to this one restarted.
    """
    state = _by_pool.pop(id(pool), None)
    if state is None:
        return 0
    ended = state.open_streams
    for channel in state.channels.values():
        channel.closing = True
        channel.publish(_SHUTTING_DOWN)
    return ended


async def listen(
    pool: AsyncConnectionPool[Any], context: grpc.aio.ServicerContext[Any, Any], rpc: str, channel: str
) -> AsyncIterator[str]:
    """Yield the payload of every notification on `channel` until the caller goes away."""
    state = _state(pool)
    if state.open_streams >= state.max_streams:
        log.error("rpc=%s code=RESOURCE_EXHAUSTED event=stream_cap max_listen_streams=%d", rpc, state.max_streams)
        await context.abort(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            f"too many listen streams on this server (at most {state.max_streams}); retry later",
        )
    state.open_streams += 1
    queue: asyncio.Queue[str | _End] = asyncio.Queue()
    try:
        try:
            shared = await _subscribe(pool, state, channel, queue)
        except psycopg.Error as err:
            log.error("rpc=%s code=UNAVAILABLE event=listen_connect_failed %s", rpc, describe_for_log(err))
            await context.abort(grpc.StatusCode.UNAVAILABLE, "database unavailable")
        try:
            await context.send_initial_metadata(((LISTENING_METADATA, channel),))
            while True:
                item = await queue.get()
                if isinstance(item, _End):
                    end = item
                    break
                yield item
        finally:
            _unsubscribe(state, channel, shared, queue)
    finally:
        state.open_streams -= 1
    await context.abort(end.code, end.message)


async def _subscribe(
    pool: AsyncConnectionPool[Any], state: _PoolStreams, name: str, queue: asyncio.Queue[str | _End]
) -> _Channel:
    """Add `queue` to the channel's subscribers, opening its LISTEN connection if it has none."""
    async with state.opening.setdefault(name, asyncio.Lock()):
        channel = state.channels.get(name)
        if channel is None or channel.closing:
            conninfo: str = state.conninfo or await _resolve(pool.conninfo)
            kwargs: dict[str, Any] = {**(await _resolve(pool.kwargs) or {}), "autocommit": True}
            conn = await psycopg.AsyncConnection.connect(conninfo, **kwargs)
            try:
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(name)))
            except BaseException:
                await conn.close()
                raise
            channel = _Channel(conn)
            state.channels[name] = channel
            channel.reader = asyncio.create_task(_relay(state, name, channel), name=f"pydb-listen-{name}")
        channel.subscribers.add(queue)
        return channel


def _unsubscribe(state: _PoolStreams, name: str, channel: _Channel, queue: asyncio.Queue[str | _End]) -> None:
    channel.subscribers.discard(queue)
    if not channel.subscribers and not channel.closing:
        channel.closing = True  # the relay sees it within _STOP_CHECK_SECONDS and closes the connection
        if state.channels.get(name) is channel:
            del state.channels[name]


async def _relay(state: _PoolStreams, name: str, channel: _Channel) -> None:
    """Read notifications from the channel's connection and fan them out, until no stream is
    left or the server shuts down; then close the connection."""
    try:
        while not channel.closing:
            # The timeout only bounds how long an idle channel or a shutdown waits for this task;
            # a notification is relayed the moment it arrives.
            async for notify in channel.conn.notifies(timeout=_STOP_CHECK_SECONDS):
                channel.publish(notify.payload)
                if channel.closing:
                    break
    except psycopg.Error as err:
        code, message = status_for_db_error(err)
        log.warning("event=listen_connection_lost channel=%s %s", name, describe_for_log(err))
        channel.closing = True
        channel.publish(_End(code, message))
    finally:
        if state.channels.get(name) is channel:
            del state.channels[name]
        await channel.conn.close()


async def _resolve(value: Any) -> Any:
    """A pool setting as a value: psycopg_pool also takes (async) callables for conninfo/kwargs."""
    if callable(value):
        value = value()
        if inspect.isawaitable(value):
            value = await value
    return value
