"""COPY's binary format on a real PostgreSQL (tests/goldens/copy): the generated handlers that
write their rows in PostgreSQL's binary format store exactly what the same rows store through
COPY's text format (the oracle: psycopg's text COPY of the same values, PostgreSQL's input
functions), edge values included; a value PostgreSQL refuses fails with the status the text
format gives it, and nothing is written. A COPY with a column the binary format cannot take
(uuid, timestamptz, numeric, an int32 into smallint) keeps the text format."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
import pytest
from goldens.harness import generate, importable
from pydb import runtime as rt
from support.pg import Cluster, scratch_database

GOLDEN = Path(__file__).resolve().parents[1] / "goldens" / "copy"
COLUMNS = ("t", "v", "c", "e", "es", "i4", "i8", "i8s", "f4", "f8", "f8f", "b", "by", "d", "w")
TEXT_COPY = f"COPY typed ({', '.join(COLUMNS)}) FROM STDIN"

#: Rows as column -> value (None: the field unset); `e` is the label, its proto enum value derived.
ROWS: list[dict[str, Any]] = [
    {"t": "plain"},
    {
        "t": "edges",
        "v": "ab\tc",
        "c": "x",
        "e": "busy",
        "es": "calm",
        "i4": 2**31 - 1,
        "i8": -(2**63),
        "i8s": -(2**31),
        "f4": 3.4028234663852886e38,
        "f8": 1e-310,
        "f8f": 0.1,
        "b": False,
        "by": b"\x00\xff\\\n",
        "d": 1,
        "w": "",
    },
    {
        "t": "ünïcode \\ back\nslash\r\t 🐘",
        "v": "",
        "c": "",
        "e": "calm",
        "es": "busy",
        "i4": -(2**31),
        "i8": 2**63 - 1,
        "i8s": 2**31 - 1,
        "f4": -math.inf,
        "f8": math.nan,
        "f8f": math.inf,
        "b": True,
        "by": b"",
        "d": 2**31 - 1,
        "w": "\\N",
    },
]


@pytest.fixture
def handlers(tmp_path: Path) -> Iterator[ModuleType]:
    outcome = generate(GOLDEN, "goldens_copy.proto", tmp_path / "out")
    assert outcome.error == "", outcome.error
    with importable(tmp_path / "out", "goldens_copy_pydb") as module:
        yield module


@pytest.fixture
def url(pg_server: tuple[str, Cluster | None]) -> Iterator[str]:
    with scratch_database(pg_server[0], schema=GOLDEN / "schema.sql") as url:
        yield url


def message(pb2: Any, row: dict[str, Any]) -> Any:
    fields = {k: v for k, v in row.items() if v is not None and k not in ("e", "w")}
    typed = pb2.Typed(**fields)
    if row.get("e") is not None:
        typed.e = {"calm": pb2.MOOD_CALM, "busy": pb2.MOOD_BUSY}[row["e"]]
    if row.get("w") is not None:
        typed.w.value = row["w"]
    return typed


async def each(*items: Any) -> AsyncIterator[Any]:
    for item in items:
        yield item


async def stored(conn: psycopg.AsyncConnection[Any]) -> list[tuple[Any, ...]]:
    """The table's rows as PostgreSQL prints them (text: NaN, -Infinity and padding compared as such)."""
    cur = await conn.execute(f"SELECT {', '.join(f'{c}::text' for c in COLUMNS)} FROM typed ORDER BY t")
    return await cur.fetchall()


def values(row: dict[str, Any], typed: Any) -> tuple[Any, ...]:
    """The row's values as the message holds them (a `float` field rounds to 32 bits)."""
    return tuple(None if row.get(c) is None else row[c] if c in ("e", "w") else getattr(typed, c) for c in COLUMNS)


async def text_copy(conn: psycopg.AsyncConnection[Any], pb2: Any, rows: list[dict[str, Any]]) -> None:
    async with conn.transaction(), conn.cursor() as cur, cur.copy(TEXT_COPY) as copy:
        for row in rows:
            await copy.write_row(values(row, message(pb2, row)))


async def test_the_binary_format_stores_what_the_text_format_does(handlers: ModuleType, url: str) -> None:
    pb2 = handlers.__dict__["goldens_copy_pb2"]
    assert "FORMAT BINARY" in handlers.LOAD_TYPED_SQL and "FORMAT BINARY" in handlers.LOAD_TYPED_ROWS_SQL
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await text_copy(conn, pb2, ROWS)
        oracle = await stored(conn)
        assert len(oracle) == len(ROWS)
        await conn.execute("TRUNCATE typed")
        first, rest = [message(pb2, r) for r in ROWS[:2]], [message(pb2, ROWS[2])]
        batches = [pb2.TypedBatch(rows=first), pb2.TypedBatch(), pb2.TypedBatch(rows=rest)]
        assert (await handlers.load_typed(conn, each(*batches))).rows == len(ROWS)
        assert await stored(conn) == oracle
        await conn.execute("TRUNCATE typed")
        assert (await handlers.load_typed_rows(conn, each(*(message(pb2, r) for r in ROWS)))).rows == len(ROWS)
        assert await stored(conn) == oracle


#: One bad value per case, each refused by PostgreSQL (or, for NUL in text, by psycopg).
BAD = {
    "varchar_too_long": {"v": "abcdef"},
    "char_too_long": {"c": "abcd"},
    "unknown_label": {"es": "sleepy"},
    "domain_check": {"d": 0},
    "nul_in_text": {"t": "a\x00b"},
}


@pytest.mark.parametrize("bad", list(BAD.values()), ids=list(BAD))
async def test_a_refused_value_fails_as_in_the_text_format(handlers: ModuleType, url: str, bad: dict[str, Any]) -> None:
    pb2 = handlers.__dict__["goldens_copy_pb2"]
    rows = [{"t": "first"}, {"t": "bad", **bad}]
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        with pytest.raises(psycopg.Error) as as_text:
            await text_copy(conn, pb2, rows)
        with pytest.raises(psycopg.Error) as as_binary:
            await handlers.load_typed(conn, each(pb2.TypedBatch(rows=[message(pb2, r) for r in rows])))
        with pytest.raises(psycopg.Error) as one_by_one:
            await handlers.load_typed_rows(conn, each(*(message(pb2, r) for r in rows)))
        text_status = rt.status_for_db_error(as_text.value)[0]
        assert text_status.name == "INVALID_ARGUMENT"
        for raised in (as_binary.value, one_by_one.value):
            assert rt.status_for_db_error(raised)[0] == text_status
            if as_text.value.sqlstate:  # psycopg refuses NUL in text before PostgreSQL sees it
                assert raised.sqlstate == as_text.value.sqlstate
        assert await stored(conn) == []  # all or nothing: not even the first row


async def test_a_copy_with_a_text_only_column_keeps_the_text_format(handlers: ModuleType, url: str) -> None:
    pb2 = handlers.__dict__["goldens_copy_pb2"]
    assert "FORMAT" not in handlers.LOAD_STAMPED_SQL and not hasattr(handlers, "LOAD_STAMPED_TYPES")
    row = pb2.Stamped(id="6F9619FF-8B86-D011-B42D-00C04FC964FF", amount="12.50", small=7)
    row.at.FromSeconds(86400)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        assert (await handlers.load_stamped(conn, each(pb2.StampedBatch(rows=[row])))).rows == 1
        cur = await conn.execute("SELECT id::text, at = '1970-01-02Z', amount::text, small FROM stamped")
        assert await cur.fetchall() == [("6f9619ff-8b86-d011-b42d-00c04fc964ff", True, "12.50", 7)]
        with pytest.raises(psycopg.Error) as raised:
            await handlers.load_stamped(conn, each(pb2.StampedBatch(rows=[pb2.Stamped(id=row.id, small=40000)])))
        assert raised.value.sqlstate == "22003"  # smallint out of range, from PostgreSQL's int2in
