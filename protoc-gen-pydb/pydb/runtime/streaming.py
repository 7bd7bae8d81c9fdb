"""The two streaming shapes of a `(pydb.v1.sql)` RPC: rows read out through a server-side cursor
(a server-streaming RPC), rows written in through COPY (a client-streaming RPC).

Streamed reads. The generated handler is an async generator: it DECLAREs a cursor for the
statement in a transaction of its own (psycopg's server-side cursor) and yields one response per
`STREAM_BATCH_ROWS` rows FETCHed (`StreamCursor.batches`: the next FETCH is sent before the
handler builds the batch it just got, so PostgreSQL reads ahead while Python builds and gRPC
sends; one FETCH in flight at most). When every column has a binary form loaded the same way
(numbers, bool, text, bytea, enums) or cheaper (timestamps as int8 microseconds, turned into a
Timestamp by `timestamp_micros` with no datetime in between), the plugin reads the cursor in
binary (`binary_loaders`; docs/performance.md). `stream` drives the handler: each step waits for
the handler's next batch within the caller's deadline, then for gRPC to take the response (an
awaited write: a slow reader holds the cursor where it is, so the server keeps at most two
batches per stream in memory, the one being sent and the one FETCHed ahead).
When the deadline passes during a FETCH, the FETCH is cancelled on the server and the stream
ends with DEADLINE_EXCEEDED; when the caller cancels, gRPC cancels the servicer's task, the
handler is closed and its transaction rolled back, which closes the cursor: the query stops.

COPY writes. The generated handler runs `COPY ... FROM STDIN` in a transaction (in PostgreSQL's
binary format where its columns allow, chosen at compile time) and writes each request's rows
(`rt.copy_rows` in runtime/copying.py for a batch, `write_row` for one); it runs under `Database.run` like any unary handler
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
import psycopg
from psycopg import AsyncConnection, AsyncServerCursor, postgres
from psycopg.adapt import AdaptersMap
from psycopg.rows import tuple_row
from psycopg.types.numeric import Int8BinaryLoader
from psycopg.types.string import TextBinaryLoader

from .database import Database, outcome

Req = TypeVar("Req")
Resp = TypeVar("Resp")
Item = TypeVar("Item")

#: Rows per FETCH, and so per streamed response.
STREAM_BATCH_ROWS = 1000

StreamHandler = Callable[[AsyncConnection[Any], Req], AsyncIterator[Resp]]


Row = tuple[Any, ...]


class StreamCursor(AsyncServerCursor[Row]):
    """A named (server-side) tuple-row cursor adapting with a given AdaptersMap (see
    convert.cursor), read in batches with the next FETCH in flight (`batches`)."""

    __slots__ = ("_ahead", "_loading")

    def __init__(self, conn: AsyncConnection[Any], name: str, adapters: AdaptersMap | None) -> None:
        self._loading = adapters if adapters is not None else conn.adapters
        self._ahead: asyncio.Task[list[Row]] | None = None
        super().__init__(conn, name, row_factory=tuple_row)

    @property
    def adapters(self) -> AdaptersMap:
        return self._loading

    async def batches(self, size: int = STREAM_BATCH_ROWS) -> AsyncIterator[list[Row]]:
        """The cursor's rows, `size` at a time. Before a batch is handed over, the FETCH of the
        next one is sent (a task, run once by the `sleep(0)`), so PostgreSQL produces it while
        the caller builds and sends this one; the caller's cancellation cancels that FETCH
        (psycopg cancels the query on the server), and `close` waits for it."""
        rows = await self.fetchmany(size)
        while rows:
            ahead = self._ahead = asyncio.ensure_future(self.fetchmany(size))
            await asyncio.sleep(0)
            yield rows
            rows = await ahead
            self._ahead = None

    async def close(self) -> None:
        ahead, self._ahead = self._ahead, None
        if ahead is not None and not ahead.done():
            ahead.cancel()
            with contextlib.suppress(asyncio.CancelledError, psycopg.Error):
                await ahead
        await super().close()


def server_cursor(conn: AsyncConnection[Any], name: str, adapters: AdaptersMap | None = None) -> StreamCursor:
    """A server-side cursor `name` on `conn` returning tuples, loaded by `adapters` (from
    `loaders` or `binary_loaders`) or psycopg's own."""
    return StreamCursor(conn, name, adapters)


#: The oid psycopg looks a type's loader up under when it has none for the type's own.
_UNKNOWN_OID = 0


def binary_loaders(timestamps: tuple[str, ...] = ()) -> AdaptersMap:
    """psycopg's default adapters for a cursor read in binary: the `timestamps` types
    (timestamp, timestamptz) as their int8 microseconds since 2000-01-01 (psycopg's C loader;
    `timestamp_micros` makes the Timestamp), and a type psycopg does not know (an enum: the
    plugin reads only enums that way) as text, its binary form being its label."""
    adapters = AdaptersMap(psycopg.adapters)
    for name in timestamps:
        adapters.register_loader(postgres.types[name].oid, Int8BinaryLoader)
    adapters.register_loader(_UNKNOWN_OID, TextBinaryLoader)
    return adapters


#: Seconds from 1970-01-01 to 2000-01-01, PostgreSQL's epoch.
_PG_EPOCH_SECONDS = 946_684_800
#: Timestamp's range (years 1 to 9999) in PostgreSQL's microseconds; `infinity` and `-infinity`
#: are int8's max and min, beyond either end.
_MAX_MICROS = (253_402_300_799 - _PG_EPOCH_SECONDS) * 1_000_000 + 999_999
_MIN_MICROS = (-62_135_596_800 - _PG_EPOCH_SECONDS) * 1_000_000


# Typed Any: the constructors take a dict for a message field, which their stubs do not list.
def timestamp_micros(micros: int) -> Any:
    """A timestamp(tz) read in binary (microseconds since 2000-01-01, UTC; `timestamp` taken as
    UTC) as a Timestamp field's value in a message's constructor, as convert.timestamp_value
    makes it from a datetime: `infinity` and years after 9999 are Timestamp's max, `-infinity`
    and BC years its min."""
    if micros > _MAX_MICROS:
        micros = _MAX_MICROS
    elif micros < _MIN_MICROS:
        micros = _MIN_MICROS
    seconds, us = divmod(micros, 1_000_000)
    return {"seconds": seconds + _PG_EPOCH_SECONDS, "nanos": us * 1000}


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
