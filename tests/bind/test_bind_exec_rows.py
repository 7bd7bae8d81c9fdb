"""CARDINALITY_EXEC_ROWS on a real PostgreSQL: the generated handlers answer the number of rows
their INSERT, UPDATE or DELETE wrote (tests/goldens/exec_rows), as PostgreSQL's command tag
counts them: ON CONFLICT DO NOTHING leaves out the rows that were there, a WHERE that matches
nothing answers 0."""

from __future__ import annotations

from pathlib import Path

import psycopg
from goldens.harness import generate, importable
from support.pg import Cluster, scratch_database

GOLDEN = Path(__file__).resolve().parents[1] / "goldens" / "exec_rows"


async def test_the_count_is_the_rows_written(pg_server: tuple[str, Cluster | None], tmp_path: Path) -> None:
    outcome = generate(GOLDEN, "goldens_exec_rows.proto", tmp_path / "out")
    assert outcome.error == "", outcome.error
    with (
        importable(tmp_path / "out", "goldens_exec_rows_pydb") as handlers,
        scratch_database(pg_server[0], schema=GOLDEN / "schema.sql") as url,
    ):
        m = handlers.__dict__["goldens_exec_rows_pb2"]
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            added = await handlers.add(conn, m.AddRequest(names=["a", "b", "c"]))
            assert added == m.Written(rows=3)
            again = await handlers.add(conn, m.AddRequest(names=["b", "c", "d"]))
            assert again.rows == 1  # b and c were there: DO NOTHING wrote only d
            await conn.execute("UPDATE sessions SET idle = 100 WHERE name IN ('a', 'b')")
            touched = await handlers.touch(conn, m.AddRequest(names=["a", "d", "zz"]))
            assert touched.rows == 2  # zz matches no row
            expired = await handlers.expire(conn, m.ExpireRequest(older_than=50))
            assert expired.rows == 1  # only b is still idle
            none = await handlers.expire(conn, m.ExpireRequest(older_than=50))
            assert none == m.Written(rows=0)
            cur = await conn.execute("SELECT name FROM sessions ORDER BY name")
            assert await cur.fetchall() == [("a",), ("c",), ("d",)]
