"""One-to-many nesting (example_protos/shapes GetOrder, generated/shapes/v1) on a real PostgreSQL:
`array_agg(l ORDER BY l.id) FILTER (WHERE l.id IS NOT NULL)` of an order's lines fills the
repeated `Order.lines`, one OrderLine per row of shapes.order_lines, every column as a result
column of its type would read. An order without lines has no lines (not one empty line), the
lines come in the statement's order, and NULL columns leave their fields unset."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from psycopg.types.composite import CompositeInfo, register_composite
from psycopg_pool import AsyncConnectionPool
from pydb import runtime as rt
from shapes.v1 import shapes_pb2, shapes_pb2_grpc, shapes_pydb, shapes_pydb_server
from support.pg import Cluster, scratch_database

SCHEMA = Path(__file__).resolve().parents[2] / "example_protos" / "shapes" / "v1" / "schema.sql"

#: Text that PostgreSQL quotes (or escapes) inside a row's and an array's text form.
AWKWARD = ["plain", 'a "quoted" sku', "comma, (parens)", "back\\slash", " spaced ", "{braces}", "ünïcødé", "NULL"]


@pytest.fixture
def orders_url(pg_server: tuple[str, Cluster | None]) -> Iterator[str]:
    with scratch_database(pg_server[0], schema=SCHEMA) as url:
        yield url


def place(url: str, customer: str, lines: list[tuple[str, int, str, str | None, str | None]]) -> tuple[int, list[int]]:
    """An order with `lines` (sku, quantity, kind, note, shipped_at), inserted in that order:
    its id and the lines' ids."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("INSERT INTO shapes.orders (customer) VALUES (%s) RETURNING id", (customer,)).fetchone()
        assert row is not None
        ids = []
        for sku, quantity, kind, note, shipped in lines:
            found = conn.execute(
                "INSERT INTO shapes.order_lines (order_id, sku, quantity, kind, note, shipped_at) "
                "VALUES (%s, %s, %s, %s::shapes.item_kind, %s, %s::timestamptz) RETURNING id",
                (row[0], sku, quantity, kind, note, shipped),
            ).fetchone()
            assert found is not None
            ids.append(int(found[0]))
        return int(row[0]), ids


async def get(url: str, order_id: int) -> shapes_pb2.Order:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        return await shapes_pydb.get_order(conn, shapes_pb2.GetOrderRequest(id=order_id))


async def test_an_order_without_lines_has_an_empty_list(orders_url: str) -> None:
    order_id, _ = place(orders_url, "nobody buys", [])
    place(orders_url, "someone else", [("x", 1, "tool", None, None)])  # other orders' lines stay theirs
    order = await get(orders_url, order_id)
    assert order.id == order_id and order.customer == "nobody buys" and order.placed_at.seconds > 0
    assert list(order.lines) == []


async def test_lines_in_order_with_nulls_left_unset(orders_url: str) -> None:
    order_id, ids = place(
        orders_url,
        "ada",
        [
            ("first", 3, "part", "fragile", "2024-05-06 07:08:09.123456+00"),
            ("second", 1, "tool", None, None),
            ("third", 2, "part", "", "infinity"),
        ],
    )
    with psycopg.connect(orders_url, autocommit=True) as conn:
        # The first line's new version goes to the end of the heap: a scan meets it last, and
        # only the ORDER BY puts it first.
        conn.execute("UPDATE shapes.order_lines SET quantity = 4 WHERE id = %s", (ids[0],))
    order = await get(orders_url, order_id)
    assert [line.id for line in order.lines] == ids
    first, second, third = order.lines
    assert (first.sku, first.quantity, first.kind, first.note) == ("first", 4, shapes_pb2.ITEM_KIND_PART, "fragile")
    assert first.order_id == order_id
    assert first.shipped_at.ToDatetime(tzinfo=datetime.UTC) == datetime.datetime(
        2024, 5, 6, 7, 8, 9, 123456, tzinfo=datetime.UTC
    )
    # NULL columns: the optional field and the Timestamp are unset, not zero values.
    assert second.kind == shapes_pb2.ITEM_KIND_TOOL
    assert not second.HasField("note") and not second.HasField("shipped_at")
    # '' is not NULL; infinity reads as Timestamp's max, as in a result column.
    assert third.HasField("note") and third.note == ""
    assert third.shipped_at.ToDatetime() == datetime.datetime(9999, 12, 31, 23, 59, 59, 999999)


async def test_text_a_row_form_quotes_reads_back(orders_url: str) -> None:
    order_id, _ = place(orders_url, "quoting", [(s, i + 1, "tool", s, None) for i, s in enumerate(AWKWARD)])
    order = await get(orders_url, order_id)
    assert [line.sku for line in order.lines] == AWKWARD
    assert [line.note for line in order.lines] == AWKWARD


async def test_over_grpc_and_no_such_order(orders_url: str) -> None:
    order_id, ids = place(orders_url, "grace", [("a", 1, "tool", None, None), ("b", 2, "part", None, None)])
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        orders_url, min_size=1, max_size=1, timeout=10, kwargs={"autocommit": True}, open=False
    )
    await pool.open(wait=True)
    server = grpc.aio.server()
    shapes_pydb_server.register(server, pool)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = shapes_pb2_grpc.ShapesServiceStub(channel)
            order = await stub.GetOrder(shapes_pb2.GetOrderRequest(id=order_id))
            assert [(line.id, line.sku) for line in order.lines] == [(ids[0], "a"), (ids[1], "b")]
            with pytest.raises(grpc.aio.AioRpcError) as missing:
                await stub.GetOrder(shapes_pb2.GetOrderRequest(id=order_id + 1000))
            assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        await server.stop(None)
        await pool.close()


def test_table_rows_reads_the_text_forms() -> None:
    """The runtime's part alone: PostgreSQL's text form of an array of rows, elements and fields
    quoted the way it quotes them; a NULL element (the outer join's missing row) is dropped."""
    text = '{"(1,\\"a \\"\\"b\\"\\"\\",)",NULL,"(2,\\"\\",\\"x\\\\\\\\y\\")"}'
    assert rt.table_rows(text, ("int8", "text", "text")) == [(1, 'a "b"', None), (2, "", "x\\y")]
    assert rt.table_rows(None, ("int8",)) == []
    assert rt.table_rows("{}", ("int8",)) == []


async def test_a_composite_the_connection_registered_changes_nothing(orders_url: str) -> None:
    """The handler reads with loaders of its own: a loader the connection's owner registered for
    the lines' row type (psycopg would then hand over objects, not the text form) is not used."""
    order_id, ids = place(orders_url, "owner", [("a", 1, "tool", None, None)])
    async with await psycopg.AsyncConnection.connect(orders_url, autocommit=True) as conn:
        info = await CompositeInfo.fetch(conn, "shapes.order_lines")
        assert info is not None
        register_composite(info, conn)
        order = await shapes_pydb.get_order(conn, shapes_pb2.GetOrderRequest(id=order_id))
    assert [(line.id, line.sku) for line in order.lines] == [(ids[0], "a")]
