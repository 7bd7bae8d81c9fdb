"""LISTEN/NOTIFY relayed over a server-streaming RPC (`(pydb.v1.listen)`).

Each stream LISTENs on a connection of its own, opened with the pool's connection settings
but never taken from the pool: a listening session is held for the stream's whole life, and a
pooled connection handed back still LISTENing would deliver notifications to nobody.
Notifications are transactional in PostgreSQL: a NOTIFY reaches listeners only when the
transaction that sent it commits.

Once LISTEN is in place the handler sends the initial metadata `pydb-listening: <channel>`: a
client that waits for it (`await call.initial_metadata()`) knows every notification committed
from then on will reach it. A lost database connection ends the stream with UNAVAILABLE; the
client reconnects.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc
import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from .errors import status_for_db_error

log = logging.getLogger("pydb")

LISTENING_METADATA = "pydb-listening"
_STOP_CHECK_SECONDS = 0.25

# Open streams per pool, so a shutting-down server can end them (they never end by themselves,
# and would otherwise hold the shutdown for its whole grace period).
_streams: dict[int, set[asyncio.Event]] = {}


def close_streams(pool: AsyncConnectionPool[Any]) -> int:
    """End every listen stream served from `pool` (the server is shutting down); how many.

    Each ends with UNAVAILABLE so clients reconnect, to another replica or to this one restarted.
    """
    events = _streams.pop(id(pool), set())
    for event in events:
        event.set()
    return len(events)


async def listen(
    pool: AsyncConnectionPool[Any], context: grpc.aio.ServicerContext[Any, Any], rpc: str, channel: str
) -> AsyncIterator[str]:
    """Yield the payload of every notification on `channel` until the caller goes away."""
    code, message = grpc.StatusCode.OK, ""
    try:
        conninfo: str = await _resolve(pool.conninfo)
        kwargs: dict[str, Any] = {**(await _resolve(pool.kwargs) or {}), "autocommit": True}
        conn = await psycopg.AsyncConnection.connect(conninfo, **kwargs)
    except psycopg.Error as err:
        log.error("%s: cannot open a listening connection: %s", rpc, err)
        await context.abort(grpc.StatusCode.UNAVAILABLE, "database unavailable")
    try:
        await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        await context.send_initial_metadata(((LISTENING_METADATA, channel),))
        closing = asyncio.Event()
        _streams.setdefault(id(pool), set()).add(closing)
        try:
            while not closing.is_set():
                # The timeout only bounds how long a server shutdown waits for this stream;
                # a notification is yielded the moment it arrives.
                async for notify in conn.notifies(timeout=_STOP_CHECK_SECONDS):
                    yield notify.payload
                    if closing.is_set():
                        break
        finally:
            _streams.get(id(pool), set()).discard(closing)
    except psycopg.Error as err:
        code, message = status_for_db_error(err)
        log.warning("%s: listening connection lost: %s", rpc, err)
    finally:
        await conn.close()
    if code == grpc.StatusCode.OK:
        code, message = grpc.StatusCode.UNAVAILABLE, "server shutting down"
    await context.abort(code, message)


async def _resolve(value: Any) -> Any:
    """A pool setting as a value: psycopg_pool also takes (async) callables for conninfo/kwargs."""
    if callable(value):
        value = value()
        if inspect.isawaitable(value):
            value = await value
    return value
