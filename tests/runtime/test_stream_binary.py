"""A streamed read's binary cursor (rt.binary_loaders, rt.timestamp_micros) reads what the text
cursor of every other handler reads (rt.loaders, rt.timestamp_value), on a real PostgreSQL:
timestamps at and past Timestamp's ends, before PostgreSQL's epoch, enums as their labels; and
StreamCursor.batches reads every row with the next FETCH in flight."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from pydb import runtime as rt
from support.pg import Cluster, scratch_database

VALUES = [
    "infinity",
    "-infinity",
    "10000-01-01 00:00:00+00",
    "294276-12-31 23:59:59+00",
    "0044-03-15 12:00:00+00 BC",
    "4713-01-01 00:00:00+00 BC",
    "0001-01-01 00:00:00+00",
    "9999-12-31 23:59:59.999999+00",
    "1969-12-31 23:59:59.000001+00",
    "1999-12-31 23:59:59.5+00",
    "2000-01-01 00:00:00+00",
    "2026-12-02 05:09:58.044576+00",
]


@pytest.fixture
def url(pg_server: tuple[str, Cluster | None]) -> Iterator[str]:
    with scratch_database(pg_server[0]) as found:
        with psycopg.connect(found, autocommit=True) as conn:
            conn.execute("CREATE TYPE mood AS ENUM ('calm', 'loud')")
            conn.execute("CREATE TABLE t (n int, at timestamptz, naive timestamp, m mood)")
            conn.execute(
                "INSERT INTO t SELECT i, v::timestamptz, v::timestamptz AT TIME ZONE 'UTC', "
                "CASE WHEN i %% 2 = 0 THEN 'calm' ELSE 'loud' END::mood "
                "FROM unnest(%s::text[]) WITH ORDINALITY AS u(v, i)",
                (VALUES,),
            )
        yield found


async def _read(url: str, binary: bool) -> list[tuple[Any, ...]]:
    adapters = (
        rt.binary_loaders(("timestamp", "timestamptz"))
        if binary
        else rt.loaders(timestamps=("timestamp", "timestamptz"))
    )
    convert = rt.timestamp_micros if binary else rt.timestamp_value
    out = []
    conn = await psycopg.AsyncConnection.connect(url)
    async with conn, conn.transaction(), rt.server_cursor(conn, "c", adapters) as cur:
        await cur.execute("SELECT n, at, naive, m FROM t ORDER BY n", binary=binary)
        async for rows in cur.batches(5):
            assert len(rows) <= 5
            out += [(n, convert(at), convert(naive), m) for n, at, naive, m in rows]
    return out


async def test_binary_reads_what_text_reads(url: str) -> None:
    text, binary = await _read(url, False), await _read(url, True)
    assert [r[0] for r in binary] == list(range(1, len(VALUES) + 1))
    assert binary == text
    by_value = dict(zip(VALUES, binary, strict=True))
    top = {"seconds": 253402300799, "nanos": 999999000}
    bottom = {"seconds": -62135596800, "nanos": 0}
    assert by_value["infinity"][1] == by_value["294276-12-31 23:59:59+00"][1] == top
    assert by_value["-infinity"][1] == by_value["0044-03-15 12:00:00+00 BC"][1] == bottom
    assert by_value["1969-12-31 23:59:59.000001+00"][1] == {"seconds": -1, "nanos": 1000}
    assert by_value["1999-12-31 23:59:59.5+00"][2] == {"seconds": 946684799, "nanos": 500000000}
    assert [r[3] for r in binary[:2]] == ["loud", "calm"]
