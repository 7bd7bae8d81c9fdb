"""Timestamps read by a handler's loaders (rt.loaders) and converted by rt.timestamp_value, which
parse each distinct text of a result once and convert each datetime once: every row still gets
its own value, checked against PostgreSQL's own epoch of it, through repeats, distinct values
past the caches' bound, ±infinity and fractions PostgreSQL prints without trailing zeros."""

from __future__ import annotations

from typing import Any

import psycopg
from pydb import runtime as rt

# Row i: a repeated instant (every third row), a distinct one per row, ±infinity now and then.
QUERY = """
SELECT i,
       CASE WHEN i % 3 = 0 THEN timestamptz '2026-12-02 05:26:08.06906+00'
            WHEN i % 50 = 1 THEN timestamptz 'infinity'
            WHEN i % 50 = 2 THEN timestamptz '-infinity'
            ELSE timestamptz '2026-01-01 00:00:00+00' + i * interval '1.000001 second' END AS at,
       timestamp '2000-02-29 23:59:59.5' + (i % 7) * interval '1 day' AS naive
FROM generate_series(1, 700) AS i
ORDER BY i
"""
EPOCHS = """
SELECT i, extract(epoch FROM at)::numeric, extract(epoch FROM naive)::numeric FROM ({query}) AS q ORDER BY i
"""
TS_MAX = {"seconds": 253402300799, "nanos": 999999000}
TS_MIN = {"seconds": -62135596800, "nanos": 0}


def expected(epoch: Any) -> dict[str, int]:
    if epoch is None:
        raise AssertionError("no epoch")
    seconds = int(epoch // 1)
    return {"seconds": seconds, "nanos": round((epoch - seconds) * 1_000_000) * 1000}


async def test_every_row_reads_its_own_timestamp(database_url: str) -> None:
    loaders = rt.loaders(timestamps=("timestamp", "timestamptz"))
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        for _ in range(2):  # the second time on a prepared statement, as handlers run
            async with rt.cursor(conn, loaders) as cur:
                await cur.execute(QUERY, prepare=True)
                rows = await cur.fetchall()
            epochs = {
                i: (at, naive) for i, at, naive in await (await conn.execute(EPOCHS.format(query=QUERY))).fetchall()
            }
            assert len(rows) == 700
            for i, at, naive in rows:
                want_at = TS_MAX if i % 50 == 1 and i % 3 else TS_MIN if i % 50 == 2 and i % 3 else None
                assert rt.timestamp_value(at) == (want_at or expected(epochs[i][0])), (i, at)
                assert rt.timestamp_value(naive) == expected(epochs[i][1]), (i, naive)
            repeated = {id(at) for i, at, _ in rows if i % 3 == 0}
            assert len(repeated) <= 3, "one repeated text is parsed (and so built) once per cache fill"
