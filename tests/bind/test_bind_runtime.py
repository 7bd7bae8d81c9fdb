"""Generated handlers run on a real PostgreSQL: names that need quoting (the probe), rows mapped
by name whatever the live table's column order, and values PostgreSQL stores that a proto type
cannot hold (converted, or refused before anything is written)."""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc
import psycopg
import pytest
from goldens.harness import generate, importable, write_tree
from google.protobuf import duration_pb2, timestamp_pb2
from pydb import runtime as rt
from support.pg import Cluster, scratch_database

Conn = psycopg.AsyncConnection[Any]
HEADER = 'syntax = "proto3";\npackage {package};\nimport "pydb/v1/options.proto";\n'
HEADER_WKT = HEADER + 'import "google/protobuf/timestamp.proto";\nimport "google/protobuf/duration.proto";\n'


def proto_str(text: str) -> str:
    """`text` as a .proto string literal (C escapes, as JSON writes them for ASCII)."""
    return json.dumps(text)


def rpc(name: str, request: str, response: str, sql: str, cardinality: str, result_field: str = "") -> str:
    field = f" result_field: {proto_str(result_field)}" if result_field else ""
    return (
        f"  rpc {name}({request}) returns ({response}) {{\n"
        f"    option (pydb.v1.sql) = {{ query: {proto_str(sql)} cardinality: CARDINALITY_{cardinality}{field} }};\n"
        "  }\n"
    )


@contextlib.contextmanager
def built(tmp: Path, package: str, proto: str, schema: str) -> Iterator[ModuleType]:
    """The handlers module generated from `proto` (package `package`) and `schema`, imported."""
    rel = package.replace(".", "/") + "/svc.proto"
    write_tree(tmp / "src", {rel: proto, str(Path(rel).parent / "schema.sql"): schema})
    outcome = generate(tmp / "src", rel, tmp / "out")
    assert outcome.error == "", outcome.error
    with importable(tmp / "out", package + ".svc_pydb") as module:
        yield module


@contextlib.contextmanager
def database(pg_server: tuple[str, Cluster | None], tmp: Path, ddl: str) -> Iterator[str]:
    (tmp / "live.sql").write_text(ddl, encoding="utf-8")
    with scratch_database(pg_server[0], schema=tmp / "live.sql") as url:
        yield url


def pb2(module: ModuleType) -> Any:
    return module.__dict__["svc_pb2"]


# -- names that need quoting -----------------------------------------------------------------

ODD = 'Line "Item" 100%\\'  # a quote, a percent sign, a backslash, upper case
ODD_SQL = '"' + ODD.replace('"', '""') + '"'
QUOTED_SCHEMA = f"""
CREATE TABLE "Order" (id bigint PRIMARY KEY, "limit" int NOT NULL, state text NOT NULL);
CREATE TABLE {ODD_SQL} (id bigint PRIMARY KEY, qty int NOT NULL);
"""
QUOTED_PROTO = (
    HEADER.format(package="bind_quoted.v1")
    + """
message Order { int64 id = 1; int32 limit = 2; string state = 3; }
message Item { int64 id = 1; int32 qty = 2; }
message SetLimitRequest { int64 id = 1; int32 limit = 2; }
message SetLimitResponse { Order order = 1; }
message RemoveItemRequest { int64 id = 1; }
message RemoveItemResponse { Item item = 1; }
service Orders {
"""
    + rpc(
        "SetLimit",
        "SetLimitRequest",
        "SetLimitResponse",
        """UPDATE "Order" SET "limit" = @limit WHERE id = @id AND state = 'open' RETURNING id, "limit", state""",
        "ONE",
        "order",
    )
    + rpc(
        "RemoveItem",
        "RemoveItemRequest",
        "RemoveItemResponse",
        f"DELETE FROM {ODD_SQL} WHERE id = @id AND qty = 0 RETURNING id, qty",
        "ONE",
        "item",
    )
    + "}\n"
)


async def test_the_probe_quotes_names(pg_server: tuple[str, Cluster | None], tmp_path: Path) -> None:
    """A ONE statement that matches nothing probes its table by primary key: NOT_FOUND for a
    missing row, FAILED_PRECONDITION for one in another state, with the table's name quoted
    (it used to be `SELECT 1 FROM public.Order ...`: UndefinedTable at run time)."""
    with (
        built(tmp_path, "bind_quoted.v1", QUOTED_PROTO, QUOTED_SCHEMA) as handlers,
        database(pg_server, tmp_path, QUOTED_SCHEMA) as url,
    ):
        m = pb2(handlers)
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute("""INSERT INTO "Order" VALUES (1, 5, 'open'), (2, 5, 'shipped')""")
            await conn.execute(f"INSERT INTO {ODD_SQL} VALUES (1, 0), (2, 3)")
            done = await handlers.set_limit(conn, m.SetLimitRequest(id=1, limit=9))
            assert (done.order.id, done.order.limit, done.order.state) == (1, 9, "open")
            with pytest.raises(rt.NotFound, match=re.escape("public.Order 7 does not exist")):
                await handlers.set_limit(conn, m.SetLimitRequest(id=7, limit=9))
            with pytest.raises(rt.FailedPrecondition, match=re.escape("SetLimit does not apply to public.Order 2")):
                await handlers.set_limit(conn, m.SetLimitRequest(id=2, limit=9))
            removed = await handlers.remove_item(conn, m.RemoveItemRequest(id=1))
            assert removed.item.id == 1
            with pytest.raises(rt.NotFound, match="does not exist"):
                await handlers.remove_item(conn, m.RemoveItemRequest(id=1))
            with pytest.raises(rt.FailedPrecondition):
                await handlers.remove_item(conn, m.RemoveItemRequest(id=2))


# -- rows map by name --------------------------------------------------------------------------

BOOKS_SCHEMA = """
CREATE SCHEMA app;
CREATE TABLE app.books (id bigint PRIMARY KEY, title text NOT NULL, subtitle text NOT NULL,
                        pages int NOT NULL, isbn int NOT NULL);
"""
#: The same table after migrations: same columns, another order.
BOOKS_LIVE = """
CREATE SCHEMA app;
CREATE TABLE app.books (subtitle text NOT NULL, pages int NOT NULL, id bigint PRIMARY KEY,
                        isbn int NOT NULL, title text NOT NULL);
"""
BOOKS_PROTO = (
    HEADER.format(package="bind_books.v1")
    + """
message Book { int64 id = 1; string title = 2; string subtitle = 3; int32 pages = 4; int32 isbn = 5; }
message GetBookRequest { int64 id = 1; }
message AddBookRequest { int64 id = 1; string title = 2; string subtitle = 3; int32 pages = 4; int32 isbn = 5; }
service Books {
"""
    + rpc("GetBook", "GetBookRequest", "Book", "SELECT * FROM app.books WHERE id = @id", "ONE")
    + rpc(
        "AddBook",
        "AddBookRequest",
        "Book",
        "INSERT INTO app.books (id, title, subtitle, pages, isbn) VALUES (@id, @title, @subtitle, @pages, @isbn) "
        "RETURNING *",
        "ONE",
    )
    + "}\n"
)


async def test_rows_map_by_name_whatever_the_live_column_order(
    pg_server: tuple[str, Cluster | None], tmp_path: Path
) -> None:
    """SELECT * / RETURNING * are expanded to explicit columns: a live table whose columns are
    in another order than schema.sql's (as after migrations) still fills each field from its
    own column (same-typed values used to be swapped)."""
    with (
        built(tmp_path, "bind_books.v1", BOOKS_PROTO, BOOKS_SCHEMA) as handlers,
        database(pg_server, tmp_path, BOOKS_LIVE) as url,
    ):
        m = pb2(handlers)
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            added = await handlers.add_book(
                conn, m.AddBookRequest(id=1, title="Dune", subtitle="A novel", pages=412, isbn=441013)
            )
            got = await handlers.get_book(conn, m.GetBookRequest(id=1))
            for book in (added, got):
                assert (book.id, book.title, book.subtitle, book.pages, book.isbn) == (
                    1,
                    "Dune",
                    "A novel",
                    412,
                    441013,
                )
        assert "SELECT *" not in handlers.GET_BOOK_SQL and "RETURNING *" not in handlers.ADD_BOOK_SQL


# -- values a proto type cannot hold ------------------------------------------------------------

EVENTS_SCHEMA = """
CREATE SCHEMA app;
CREATE TABLE app.events (
    id bigint PRIMARY KEY,
    day date NOT NULL,
    at timestamptz NOT NULL,
    amount numeric NOT NULL,
    ratio numeric NOT NULL,
    span interval NOT NULL,
    tags text[] NOT NULL DEFAULT '{}'
);
"""
EVENT_COLUMNS = "id, day, at, amount, ratio, span"
EVENTS_PROTO = (
    HEADER_WKT.format(package="bind_values.v1")
    + """
message Event {
  int64 id = 1; string day = 2; google.protobuf.Timestamp at = 3; string amount = 4; double ratio = 5;
  google.protobuf.Duration span = 6;
}
message AddEventRequest {
  int64 id = 1; string day = 2; google.protobuf.Timestamp at = 3; string amount = 4; double ratio = 5;
  google.protobuf.Duration span = 6;
}
message GetEventRequest { int64 id = 1; }
message ShiftEventRequest { int64 id = 1; google.protobuf.Duration by = 2; }
message StretchEventRequest { int64 id = 1; double factor = 2; }
message TagEventRequest { int64 id = 1; optional string tag = 2; }
message Tags { int64 id = 1; repeated string tags = 2; }
service Events {
"""
    + rpc(
        "AddEvent",
        "AddEventRequest",
        "Event",
        f"INSERT INTO app.events ({EVENT_COLUMNS}) VALUES (@id, @day, @at, @amount, @ratio, @span) "
        f"RETURNING {EVENT_COLUMNS}",
        "ONE",
    )
    + rpc("GetEvent", "GetEventRequest", "Event", f"SELECT {EVENT_COLUMNS} FROM app.events WHERE id = @id", "ONE")
    + rpc(
        "ShiftEvent",
        "ShiftEventRequest",
        "Event",
        f"UPDATE app.events SET at = at + @by WHERE id = @id RETURNING {EVENT_COLUMNS}",
        "ONE",
    )
    + rpc(
        "StretchEvent",
        "StretchEventRequest",
        "Event",
        f"UPDATE app.events SET span = span * @factor WHERE id = @id RETURNING {EVENT_COLUMNS}",
        "ONE",
    )
    + rpc(
        "TagEvent",
        "TagEventRequest",
        "Tags",
        "UPDATE app.events SET tags = array_append(tags, @tag::text) WHERE id = @id RETURNING id, tags",
        "ONE",
    )
    + "}\n"
)
TS_MAX = timestamp_pb2.Timestamp(seconds=253402300799, nanos=999999000)  # what `infinity` reads as
TS_MIN = timestamp_pb2.Timestamp(seconds=-62135596800)
DURATION_MAX = duration_pb2.Duration(seconds=315_576_000_000)  # 10000 years


@pytest.fixture
def events(pg_server: tuple[str, Cluster | None], tmp_path: Path) -> Iterator[tuple[ModuleType, str]]:
    with (
        built(tmp_path, "bind_values.v1", EVENTS_PROTO, EVENTS_SCHEMA) as handlers,
        database(pg_server, tmp_path, EVENTS_SCHEMA) as url,
    ):
        yield handlers, url


async def test_every_stored_value_reads(events: tuple[ModuleType, str]) -> None:
    """Every value PostgreSQL stores reads (dates used to fail every read): dates as PostgreSQL
    prints them (infinity, BC, years past 9999); timestamps' ±infinity, and years a Timestamp
    cannot hold, as Timestamp's max/min; intervals past 10000 years as Duration's max/min;
    numeric NaN and ±Infinity."""
    handlers, url = events
    m = pb2(handlers)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(
            "INSERT INTO app.events VALUES "
            "(1, 'infinity', 'infinity', 'NaN', 'Infinity', '1 day'), "
            "(2, '-infinity', '-infinity', 'Infinity', '-Infinity', '-20000 years'), "
            "(3, '0044-03-15 BC', '2024-05-06 07:08:09.123456+00', '-Infinity', 'NaN', '1 day 00:00:01.5'), "
            "(4, '12345-01-01', '12345-01-01 00:00+00', '1.5', 1.5, '178000000 years'), "
            "(5, '2024-02-29', '0044-03-15 10:00+00 BC', '0', 0, '1 month')"
        )
        read = {i: await handlers.get_event(conn, m.GetEventRequest(id=i)) for i in (1, 2, 3, 4, 5)}
        assert [read[i].day for i in (1, 2, 3, 4, 5)] == [
            "infinity",
            "-infinity",
            "0044-03-15 BC",
            "12345-01-01",
            "2024-02-29",
        ]
        assert [read[i].at for i in (1, 2, 4, 5)] == [TS_MAX, TS_MIN, TS_MAX, TS_MIN]
        assert read[3].at == timestamp_pb2.Timestamp(seconds=1714979289, nanos=123456000)
        assert [read[i].amount for i in (1, 2, 3, 4)] == ["NaN", "Infinity", "-Infinity", "1.5"]
        assert read[1].ratio == math.inf and read[2].ratio == -math.inf and math.isnan(read[3].ratio)
        assert read[2].span == duration_pb2.Duration(seconds=-315_576_000_000) and read[4].span == DURATION_MAX
        assert read[3].span == duration_pb2.Duration(seconds=86401, nanos=500_000_000)
        assert read[5].span == duration_pb2.Duration(seconds=30 * 86400)  # a month counts 30 days


async def test_timestamp_max_and_min_write_infinity(events: tuple[ModuleType, str]) -> None:
    """The way back: Timestamp's max/min bind as `infinity` / `-infinity`, dates as text."""
    handlers, url = events
    m = pb2(handlers)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        span = duration_pb2.Duration(seconds=60)
        for i, (day, at) in enumerate((("infinity", TS_MAX), ("-infinity", TS_MIN)), start=1):
            added = await handlers.add_event(
                conn, m.AddEventRequest(id=i, day=day, at=at, amount="NaN", ratio=math.nan, span=span)
            )
            assert (added.day, added.at, added.amount) == (day, at, "NaN") and math.isnan(added.ratio)
        cur = await conn.execute("SELECT day::text, at::text, amount::text FROM app.events ORDER BY id")
        assert await cur.fetchall() == [("infinity", "infinity", "NaN"), ("-infinity", "-infinity", "NaN")]


async def stored(conn: Conn, column: str) -> Any:
    cur = await conn.execute(f"SELECT {column}::text FROM app.events WHERE id = 1")
    row = await cur.fetchone()
    assert row is not None
    return row[0]


async def test_a_row_that_cannot_be_answered_is_not_written(events: tuple[ModuleType, str]) -> None:
    """A write whose returned row does not convert (an array with a NULL element, which a
    repeated field cannot hold) is refused and rolled back: the caller gets OUT_OF_RANGE and the
    table is as before (the row used to be committed, and every later read of it failed)."""
    handlers, url = events
    m = pb2(handlers)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(
            "INSERT INTO app.events VALUES (1, '2024-01-01', '2024-01-01 00:00+00', 1, 1, '1 day', '{a}')"
        )
        with pytest.raises(Exception) as refused:  # which one is checked below, after the table
            await handlers.tag_event(conn, m.TagEventRequest(id=1))  # tag unset: array_append(tags, NULL)
        assert await stored(conn, "tags") == "{a}"
        assert isinstance(refused.value, rt.RpcError) and refused.value.code == grpc.StatusCode.OUT_OF_RANGE
        assert "NULL element" in refused.value.message
        tagged = await handlers.tag_event(conn, m.TagEventRequest(id=1, tag="b"))
        assert list(tagged.tags) == ["a", "b"] and await stored(conn, "tags") == "{a,b}"
        # Values past a proto type's range are written, and read as its ends (documented).
        nine_thousand_years = duration_pb2.Duration(seconds=9000 * 366 * 86400)
        shifted = await handlers.shift_event(conn, m.ShiftEventRequest(id=1, by=nine_thousand_years))
        assert shifted.at == TS_MAX and (await stored(conn, "at")).startswith("11042-")
        stretched = await handlers.stretch_event(conn, m.StretchEventRequest(id=1, factor=5_000_000.0))
        assert stretched.span == DURATION_MAX


# -- enum arrays -------------------------------------------------------------------------------

GOLDENS = Path(__file__).resolve().parents[1] / "goldens"


async def test_enum_arrays_both_ways(pg_server: tuple[str, Cluster | None], tmp_path: Path) -> None:
    """A repeated proto enum binds to a pg enum array; pg enum arrays (which psycopg receives as
    text) read into repeated enum fields; a NULL array reads as an empty repeated field."""
    golden = GOLDENS / "enum_arrays"
    outcome = generate(golden, "goldens_enum_arrays.proto", tmp_path / "out")
    assert outcome.error == "", outcome.error
    with (
        importable(tmp_path / "out", "goldens_enum_arrays_pydb") as handlers,
        scratch_database(pg_server[0], schema=golden / "schema.sql") as url,
    ):
        m = handlers.__dict__["goldens_enum_arrays_pb2"]
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(
                "INSERT INTO app.people VALUES (1, 'happy', '{sad,meh}', '{happy}'), (2, 'sad', '{}', NULL), "
                "(3, 'meh', '{happy}', '{}')"
            )
            found = await handlers.find(conn, m.FindRequest(moods=[m.MOOD_HAPPY, m.MOOD_SAD]))
            assert [(p.id, p.mood, list(p.past), list(p.wished)) for p in found.people] == [
                (1, m.MOOD_HAPPY, [m.MOOD_SAD, m.MOOD_MEH], ["happy"]),
                (2, m.MOOD_SAD, [], []),
            ]
            remembered = await handlers.remember(conn, m.RememberRequest(id=3, past=[m.MOOD_MEH, m.MOOD_HAPPY]))
            assert list(remembered.past) == [m.MOOD_MEH, m.MOOD_HAPPY]
            cur = await conn.execute("SELECT past::text FROM app.people WHERE id = 3")
            assert await cur.fetchone() == ("{meh,happy}",)
            with pytest.raises(rt.InvalidArgument, match="moods must be set to a known value"):
                await handlers.find(conn, m.FindRequest(moods=[m.MOOD_UNSPECIFIED]))


# -- domains -----------------------------------------------------------------------------------

DOMAIN_SCHEMA = """
CREATE SCHEMA app;
CREATE TYPE app.mood AS ENUM ('calm', 'busy');
CREATE DOMAIN app.positive_money AS numeric(12, 2) CHECK (VALUE > 0);
CREATE DOMAIN app.quantity AS int CHECK (VALUE BETWEEN 1 AND 100);
CREATE DOMAIN app.known_mood AS app.mood NOT NULL;
CREATE TABLE app.orders (id bigint PRIMARY KEY, total app.positive_money NOT NULL, qty app.quantity NOT NULL,
                         mood app.known_mood);
"""
DOMAIN_PROTO = (
    HEADER.format(package="bind_domains.v1")
    + """
enum Mood { MOOD_UNSPECIFIED = 0; MOOD_CALM = 1; MOOD_BUSY = 2; }
message Order { int64 id = 1; string total = 2; int32 qty = 3; Mood mood = 4; }
message AddOrderRequest { int64 id = 1; string total = 2; int32 qty = 3; Mood mood = 4; }
message SetQtyRequest { int64 id = 1; int32 qty = 2; }
service Orders {
"""
    + rpc(
        "AddOrder",
        "AddOrderRequest",
        "Order",
        "INSERT INTO app.orders (id, total, qty, mood) VALUES (@id, @total, @qty, @mood) RETURNING *",
        "ONE",
    )
    + rpc("SetQty", "SetQtyRequest", "Order", "UPDATE app.orders SET qty = @qty WHERE id = @id RETURNING *", "ONE")
    + "}\n"
)


async def test_domain_parameters_bind_as_their_base_type(pg_server: tuple[str, Cluster | None], tmp_path: Path) -> None:
    """PostgreSQL types a parameter stored into a domain column as the domain; the handler binds
    the proto value as the domain's base type (numeric from a string, int4, an enum label), and
    a value the domain's CHECK refuses is INVALID_ARGUMENT with PostgreSQL's message."""
    with (
        built(tmp_path, "bind_domains.v1", DOMAIN_PROTO, DOMAIN_SCHEMA) as handlers,
        database(pg_server, tmp_path, DOMAIN_SCHEMA) as url,
    ):
        m = pb2(handlers)
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            added = await handlers.add_order(conn, m.AddOrderRequest(id=1, total="12.50", qty=3, mood=m.MOOD_BUSY))
            assert (added.id, added.total, added.qty, added.mood) == (1, "12.50", 3, m.MOOD_BUSY)
            changed = await handlers.set_qty(conn, m.SetQtyRequest(id=1, qty=7))
            assert changed.qty == 7
            # The handler raises PostgreSQL's error; the server answers it as docs/errors.md says.
            with pytest.raises(psycopg.errors.CheckViolation) as refused_qty:
                await handlers.set_qty(conn, m.SetQtyRequest(id=1, qty=0))
            assert rt.status_for_db_error(refused_qty.value) == (
                grpc.StatusCode.INVALID_ARGUMENT,
                'value for domain app.quantity violates check constraint "quantity_check"',
            )
            with pytest.raises(psycopg.errors.CheckViolation) as refused_total:
                await handlers.add_order(conn, m.AddOrderRequest(id=2, total="-1", qty=1, mood=m.MOOD_CALM))
            assert rt.status_for_db_error(refused_total.value)[0] == grpc.StatusCode.INVALID_ARGUMENT
            cur = await conn.execute("SELECT id, total::text, qty, mood::text FROM app.orders ORDER BY id")
            assert await cur.fetchall() == [(1, "12.50", 7, "busy")]
