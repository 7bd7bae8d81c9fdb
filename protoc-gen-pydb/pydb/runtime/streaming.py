"""The two streaming shapes of a `(pydb.v1.sql)` RPC: rows read out through a server-side cursor
(a server-streaming RPC), rows written in through COPY (a client-streaming RPC).

Streamed reads. The generated handler is an async generator: it DECLAREs a cursor for the
statement in a transaction of its own (psycopg's server-side cursor) and yields one response per
`STREAM_BATCH_ROWS` rows FETCHed. `stream` drives it: each step waits for the handler's next
batch within the caller's deadline, then for gRPC to take the response (an awaited write: a slow
reader holds the cursor where it is, so the server keeps at most one batch per stream in memory).
When the deadline passes during a FETCH, the FETCH is cancelled on the server and the stream
ends with DEADLINE_EXCEEDED; when the caller cancels, gRPC cancels the servicer's task, the
handler is closed and its transaction rolled back, which closes the cursor: the query stops.

COPY writes. The generated handler runs `COPY ... FROM STDIN` in a transaction and writes one row
per request (`cursor.copy`, `write_row`); it runs under `Database.run` like any unary handler
(the deadline, cancellation, errors), the request stream being its request. An error at any row
(a value PostgreSQL refuses, a constraint) rolls the whole COPY back: all or nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

import grpc
from psycopg import AsyncConnection, AsyncServerCursor
from psycopg.adapt import AdaptersMap
from psycopg.rows import tuple_row

from .database import Database, outcome

Req = TypeVar("Req")
Resp = TypeVar("Resp")
Item = TypeVar("Item")

#: Rows per FETCH, and so per streamed response.
STREAM_BATCH_ROWS = 1000

StreamHandler = Callable[[AsyncConnection[Any], Req], AsyncIterator[Resp]]


class _LoadingServerCursor(AsyncServerCursor[tuple[Any, ...]]):
    """A named (server-side) tuple-row cursor adapting with a given AdaptersMap (see
    convert.cursor)."""

    __slots__ = ("_loading",)

    def __init__(self, conn: AsyncConnection[Any], name: str, adapters: AdaptersMap | None) -> None:
        self._loading = adapters if adapters is not None else conn.adapters
        super().__init__(conn, name, row_factory=tuple_row)

    @property
    def adapters(self) -> AdaptersMap:
        return self._loading


def server_cursor(
    conn: AsyncConnection[Any], name: str, adapters: AdaptersMap | None = None
) -> AsyncServerCursor[tuple[Any, ...]]:
    """A server-side cursor `name` on `conn` returning tuples, loaded by `adapters` (from
    `loaders`) or psycopg's own."""
    return _LoadingServerCursor(conn, name, adapters)


async def stream(
    db: Database,
    context: grpc.aio.ServicerContext[Any, Any],
    rpc: str,
    handler: StreamHandler[Req, Resp],
    request: Req,
    *,
    replica: bool = False,
) -> AsyncIterator[Resp]:
    """The responses of `handler` on a pooled connection, each within the caller's deadline;
    errors become the stream's status as in `Database.run` (one log line per stream)."""
    started = time.perf_counter()
    code, message, cause, sqlstate = grpc.StatusCode.OK, "", "", None
    unexpected: Exception | None = None
    pool = db.replica if replica and db.replica is not None else db.pool
    remaining = context.time_remaining()
    deadline = None if remaining is None else asyncio.get_running_loop().time() + remaining
    try:
        async with pool.connection() as conn, _closing(handler(conn, request)) as responses:
            while True:
                async with asyncio.timeout_at(deadline):
                    response = await anext(responses, None)
                if response is None:
                    break
                yield response
    except asyncio.CancelledError:
        code = grpc.StatusCode.CANCELLED
        raise
    except GeneratorExit:  # gRPC closed the stream (the caller went away)
        code = grpc.StatusCode.CANCELLED
        raise
    except Exception as err:
        code, message, cause, sqlstate, unexpected = outcome(err, pool)
    finally:
        db.finished(rpc, handler.__name__, started, code, None, sqlstate, cause, unexpected)
    if code is not grpc.StatusCode.OK:
        await context.abort(code, message)


@contextlib.asynccontextmanager
async def _closing(responses: AsyncIterator[Resp]) -> AsyncIterator[AsyncIterator[Resp]]:
    """`responses`, closed on the way out (its transaction ended) however the stream ends."""
    try:
        yield responses
    finally:
        if isinstance(responses, AsyncGenerator):
            await responses.aclose()


def requests(stream: Iterator[Item] | AsyncIterator[Item]) -> AsyncIterator[Item]:
    """A client stream as the async iterator a COPY handler reads (grpc.aio always hands one)."""
    if isinstance(stream, AsyncIterator):
        return stream

    async def each() -> AsyncIterator[Item]:
        for item in stream:
            yield item

    return each()
