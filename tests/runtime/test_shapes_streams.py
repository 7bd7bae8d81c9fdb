"""The streaming shapes of example_protos/shapes (generated/shapes/v1), over gRPC on a real
PostgreSQL: a server-streaming read from a server-side cursor in batches (cancellation and the
deadline end its transaction), and a COPY fed by a client stream (all or nothing)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool
from pydb import runtime as rt
from shapes.v1 import shapes_pb2, shapes_pb2_grpc, shapes_pydb_server
from support.pg import Cluster, scratch_database

SCHEMA = Path(__file__).resolve().parents[2] / "example_protos" / "shapes" / "v1" / "schema.sql"
ROWS = 2 * rt.STREAM_BATCH_ROWS + 500


@pytest.fixture
def shapes_url(pg_server: tuple[str, Cluster | None]) -> Iterator[str]:
    with scratch_database(pg_server[0], schema=SCHEMA) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO shapes.items (sku, kind, quantity, note) "
                "SELECT 'sku-' || i, CASE WHEN i %% 2 = 0 THEN 'tool' ELSE 'part' END::shapes.item_kind, i, "
                "CASE WHEN i %% 3 = 0 THEN 'n' || i END FROM generate_series(1, %s) AS i",
                (ROWS,),
            )
        yield url


class Served:
    def __init__(self, stub: shapes_pb2_grpc.ShapesServiceAsyncStub, pool: AsyncConnectionPool[Any], url: str) -> None:
        self.stub, self.pool, self.url = stub, pool, url

    async def open_transactions(self) -> int:
        """Backends of this database in a transaction (a stream's cursor still open), but ours."""
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            cur = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND backend_type = 'client backend' "
                "AND (state LIKE 'idle in transaction%' OR state = 'active')"
            )
            row = await cur.fetchone()
            assert row is not None
            return int(row[0])


async def serve(url: str, max_size: int = 1) -> tuple[grpc.aio.Server, grpc.aio.Channel, Served]:
    # One connection: a call after a cancelled or expired stream runs only once the stream gave
    # its connection back, its transaction (and so its cursor) ended.
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        url, min_size=1, max_size=max_size, timeout=10, kwargs={"autocommit": True}, open=False
    )
    await pool.open(wait=True)
    server = grpc.aio.server()
    shapes_pydb_server.register(server, pool)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    return server, channel, Served(shapes_pb2_grpc.ShapesServiceStub(channel), pool, url)


async def stop(server: grpc.aio.Server, channel: grpc.aio.Channel, served: Served) -> None:
    await channel.close(None)
    await server.stop(None)
    await served.pool.close()


async def test_a_stream_reads_every_row_in_batches(shapes_url: str) -> None:
    server, channel, s = await serve(shapes_url)
    try:
        batches = [b async for b in s.stub.ExportItems(shapes_pb2.ExportItemsRequest(min_quantity=1))]
        assert [len(b.items) for b in batches] == [rt.STREAM_BATCH_ROWS, rt.STREAM_BATCH_ROWS, 500]
        items = [i for b in batches for i in b.items]
        assert [i.quantity for i in items] == list(range(1, ROWS + 1))
        assert items[2].sku == "sku-3" and items[2].note == "n3" and not items[0].HasField("note")
        assert items[1].kind == shapes_pb2.ITEM_KIND_TOOL and items[0].kind == shapes_pb2.ITEM_KIND_PART
        assert items[0].created_at.seconds > 0
        # The filter is a bound parameter; no row at all is an empty stream.
        few = [b async for b in s.stub.ExportItems(shapes_pb2.ExportItemsRequest(min_quantity=ROWS - 1))]
        assert [[i.quantity for i in b.items] for b in few] == [[ROWS - 1, ROWS]]
        assert [b async for b in s.stub.ExportItems(shapes_pb2.ExportItemsRequest(min_quantity=ROWS + 1))] == []
    finally:
        await stop(server, channel, s)


async def test_cancelling_a_stream_ends_its_query(shapes_url: str) -> None:
    server, channel, s = await serve(shapes_url)
    try:
        call = s.stub.ExportItems(shapes_pb2.ExportItemsRequest())
        first = await call.read()
        assert isinstance(first, shapes_pb2.ItemBatch) and len(first.items) == rt.STREAM_BATCH_ROWS
        assert call.cancel()
        assert await call.code() == grpc.StatusCode.CANCELLED
        # The pool's only connection serves the next call: the stream gave it back.
        again = [b async for b in s.stub.ExportItems(shapes_pb2.ExportItemsRequest(min_quantity=ROWS))]
        assert [[i.quantity for i in b.items] for b in again] == [[ROWS]]
        assert await s.open_transactions() == 0
    finally:
        await stop(server, channel, s)


async def test_the_deadline_ends_a_stream_the_caller_stopped_reading(shapes_url: str) -> None:
    server, channel, s = await serve(shapes_url)
    try:
        call = s.stub.ExportItems(shapes_pb2.ExportItemsRequest(), timeout=1.0)
        first = await call.read()
        assert isinstance(first, shapes_pb2.ItemBatch) and len(first.items) == rt.STREAM_BATCH_ROWS
        # The caller reads no more: the server waits on flow control until the deadline ends it.
        assert await call.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        again = [b async for b in s.stub.ExportItems(shapes_pb2.ExportItemsRequest(min_quantity=ROWS), timeout=10)]
        assert len(again) == 1
        assert await s.open_transactions() == 0
    finally:
        await stop(server, channel, s)


async def rows(items: list[shapes_pb2.NewItem]) -> AsyncIterator[shapes_pb2.NewItem]:
    for item in items:
        yield item


async def skus(url: str, like: str) -> list[str]:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute("SELECT sku FROM shapes.items WHERE sku LIKE %s ORDER BY id", (like,))
        return [r[0] for r in await cur.fetchall()]


def new(
    sku: str,
    quantity: int = 1,
    kind: shapes_pb2.ItemKind.ValueType = shapes_pb2.ITEM_KIND_TOOL,
    note: str | None = None,
) -> shapes_pb2.NewItem:
    item = shapes_pb2.NewItem(sku=sku, quantity=quantity, kind=kind)
    if note is not None:
        item.note = note
    return item


async def test_copy_writes_every_streamed_row(shapes_url: str) -> None:
    server, channel, s = await serve(shapes_url)
    try:
        batch = [new("copy-1", 5, note="first"), new("copy-2", 0, shapes_pb2.ITEM_KIND_PART), new("copy-3", 7)]
        written = await s.stub.LoadItems(rows(batch))
        assert written == shapes_pb2.LoadItemsResponse(rows_written=3)
        async with await psycopg.AsyncConnection.connect(shapes_url) as conn:
            cur = await conn.execute(
                "SELECT sku, kind::text, quantity, note FROM shapes.items WHERE sku LIKE 'copy-%' ORDER BY id"
            )
            assert await cur.fetchall() == [
                ("copy-1", "tool", 5, "first"),
                ("copy-2", "part", 0, None),
                ("copy-3", "tool", 7, None),
            ]
        assert await s.stub.LoadItems(rows([])) == shapes_pb2.LoadItemsResponse(rows_written=0)
    finally:
        await stop(server, channel, s)


async def test_a_writers_row_count_is_answered_through_the_server(shapes_url: str) -> None:
    """CARDINALITY_EXEC_ROWS through Database.run, whose writes run in pipeline mode (BEGIN sent
    with the statement): the count is the statement's, read once its result is in."""
    server, channel, s = await serve(shapes_url)
    try:
        request = shapes_pb2.InsertReadingsRequest(sensors=["a", "b", "c"], seqs=[1, 2, 3], values=[0.5, 1.5, 2.5])
        assert (await s.stub.InsertReadings(request)).rows_written == 3
        assert (await s.stub.InsertReadings(shapes_pb2.InsertReadingsRequest())).rows_written == 0
    finally:
        await stop(server, channel, s)


@pytest.mark.parametrize(
    ("bad", "code", "says"),
    [
        (new("bad-x", -1), grpc.StatusCode.INVALID_ARGUMENT, "items_quantity_check"),
        (new("sku-1"), grpc.StatusCode.ALREADY_EXISTS, "already exists"),
        (new("bad-x", kind=shapes_pb2.ITEM_KIND_UNSPECIFIED), grpc.StatusCode.INVALID_ARGUMENT, "kind"),
        # PostgreSQL's message, from COPY's binary format (psycopg refuses NUL in text itself).
        (new("bad-\x00"), grpc.StatusCode.INVALID_ARGUMENT, "0x00"),
    ],
    ids=["check", "unique", "enum", "nul"],
)
@pytest.mark.parametrize("batched", [False, True], ids=["row_per_request", "batches"])
async def test_copy_is_all_or_nothing(
    shapes_url: str, bad: shapes_pb2.NewItem, code: grpc.StatusCode, says: str, batched: bool
) -> None:
    server, channel, s = await serve(shapes_url)
    try:
        stream = [new("bad-1"), new("bad-2"), bad, new("bad-4")]
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            if batched:
                await s.stub.LoadItemBatches(batches(stream[:2], stream[2:]))
            else:
                await s.stub.LoadItems(rows(stream))
        assert raised.value.code() == code, raised.value.details()
        details = raised.value.details() or ""
        assert says in details
        assert "COPY" not in details and "shapes.items (" not in details  # no SQL
        assert await skus(shapes_url, "bad-%") == []  # rolled back: none of the rows
        # The connection is clean for the next call.
        assert (await s.stub.LoadItems(rows([new("bad-ok")]))).rows_written == 1
    finally:
        await stop(server, channel, s)


async def test_copy_and_stream_round_trip(shapes_url: str) -> None:
    """What LoadItems writes, ExportItems reads back (the two shapes agree on every type)."""
    server, channel, s = await serve(shapes_url, max_size=2)
    try:
        loaded = [new(f"rt-{i}", 100_000 + i, note=None if i % 2 else f"note {i}") for i in range(10)]
        assert (await s.stub.LoadItems(rows(loaded))).rows_written == 10
        got = [
            i async for b in s.stub.ExportItems(shapes_pb2.ExportItemsRequest(min_quantity=100_000)) for i in b.items
        ]
        assert [(i.sku, i.quantity, i.note if i.HasField("note") else None) for i in got] == [
            (x.sku, x.quantity, x.note if x.HasField("note") else None) for x in loaded
        ]
    finally:
        await stop(server, channel, s)


async def test_the_copy_deadline_rolls_back(shapes_url: str) -> None:
    server, channel, s = await serve(shapes_url)
    try:
        sent = asyncio.Event()

        async def stalled() -> AsyncIterator[shapes_pb2.NewItem]:
            yield new("late-1")
            sent.set()
            await asyncio.Event().wait()  # the caller never finishes its stream
            yield new("late-2")

        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await s.stub.LoadItems(stalled(), timeout=1.0)
        assert raised.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert sent.is_set()
        assert (await s.stub.LoadItems(rows([new("late-ok")]))).rows_written == 1
        assert await skus(shapes_url, "late-%") == ["late-ok"]
    finally:
        await stop(server, channel, s)


async def batches(*groups: list[shapes_pb2.NewItem]) -> AsyncIterator[shapes_pb2.NewItemBatch]:
    for group in groups:
        yield shapes_pb2.NewItemBatch(items=group)


async def test_copy_takes_a_batch_of_rows_per_request(shapes_url: str) -> None:
    server, channel, s = await serve(shapes_url)
    try:
        first, second = [new(f"b-{i}", i) for i in range(3)], [new("b-3", note="x")]
        written = await s.stub.LoadItemBatches(batches(first, [], second))
        assert written.rows_written == 4
        assert await skus(shapes_url, "b-%") == ["b-0", "b-1", "b-2", "b-3"]
        # A bad row in the second batch rolls back the first batch too.
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await s.stub.LoadItemBatches(batches([new("c-1"), new("c-2")], [new("c-3", -5)]))
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert await skus(shapes_url, "c-%") == []
    finally:
        await stop(server, channel, s)
