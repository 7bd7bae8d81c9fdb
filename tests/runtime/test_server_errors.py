"""The database error -> gRPC status mapping: docs/errors.md's table checked row by row with
errors a real PostgreSQL raises, and the mapping end to end over gRPC (never INTERNAL with SQL
text or a traceback)."""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import psycopg
import pytest
from conftest import server_config, start_server
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc, task_pydb
from pydb.runtime import status_for_db_error
from support.pg import Cluster, scratch_database

if TYPE_CHECKING:
    from generation.task.v1.task_pb2_grpc import GenerationDataServiceAsyncStub as Stub

ROOT = Path(__file__).resolve().parents[2]
Code = grpc.StatusCode


def documented_rows() -> list[tuple[str, str, Code]]:
    """(SQLSTATE or class pattern, condition, status) for each row of docs/errors.md's table."""
    rows = []
    for line in (ROOT / "docs" / "errors.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and re.fullmatch(r"[0-9A-Z]{2}([0-9A-Z]{3}|xxx)", cells[0]):
            rows.append((cells[0], cells[1], Code.__members__[cells[2]]))
    return rows


ROWS = documented_rows()


def test_table_covers_the_issue_and_runtime() -> None:
    states = {r[0] for r in ROWS}
    assert {"23505", "23503", "22P02", "08xxx", "57014", "40001"} <= states
    from pydb.runtime import errors

    # Every exact code and class the runtime maps is documented.
    assert set(errors._BY_SQLSTATE) <= states
    assert {c + "xxx" for c in errors._BY_CLASS} <= states


@pytest.fixture
async def conn(database_url: str) -> AsyncIterator[psycopg.AsyncConnection[object]]:
    c: psycopg.AsyncConnection[object] = await psycopg.AsyncConnection.connect(database_url, autocommit=True)
    try:
        yield c
    finally:
        await c.close()


async def raised_by(conn: psycopg.AsyncConnection[object], sql: str) -> psycopg.Error:
    with pytest.raises(psycopg.Error) as err:
        await conn.execute(sql)
    return err.value


@pytest.mark.parametrize(("state", "condition", "code"), [r for r in ROWS if r[0] != "23503"], ids=lambda v: str(v))
async def test_documented_row(conn: psycopg.AsyncConnection[object], state: str, condition: str, code: Code) -> None:
    """The server raises the SQLSTATE (a class row: its generic code, e.g. 08xxx -> 08000);
    the runtime maps it as documented, and a non-INTERNAL message carries no SQL text."""
    sqlstate = state.replace("xxx", "000")
    err = await raised_by(conn, f"DO $$ BEGIN RAISE EXCEPTION 'simulated' USING ERRCODE = '{sqlstate}'; END $$")
    assert err.sqlstate == sqlstate
    got, message = status_for_db_error(err)
    assert got == code
    assert "DO $$" not in message and "RAISE" not in message


async def test_natural_errors(conn: psycopg.AsyncConnection[object]) -> None:
    """The issue's cases with errors PostgreSQL raises on its own."""
    await conn.execute(
        "CREATE TEMP TABLE parent (id int PRIMARY KEY, name text UNIQUE NOT NULL CHECK (name <> ''));"
        "CREATE TEMP TABLE child (parent_id int REFERENCES parent (id));"
        "INSERT INTO parent VALUES (1, 'one'); INSERT INTO child VALUES (1)"
    )
    cases: list[tuple[str, Code, str]] = [
        ("INSERT INTO parent VALUES (2, 'one')", Code.ALREADY_EXISTS, "already exists: Key (name)=(one)"),
        ("INSERT INTO child VALUES (42)", Code.NOT_FOUND, "a referenced row does not exist: Key (parent_id)=(42)"),
        ("DELETE FROM parent WHERE id = 1", Code.FAILED_PRECONDITION, "the row is still referenced: Key (id)=(1)"),
        ("SELECT 'nope'::uuid", Code.INVALID_ARGUMENT, "invalid input syntax for type uuid"),
        ("SELECT '{bad json'::jsonb", Code.INVALID_ARGUMENT, "invalid input syntax for type json"),
        ("INSERT INTO parent VALUES (3, NULL)", Code.INVALID_ARGUMENT, 'null value in column "name"'),
        ("INSERT INTO parent VALUES (3, '')", Code.INVALID_ARGUMENT, "violates check constraint"),
        ("SELECT 2147483647::int4 + 1", Code.INVALID_ARGUMENT, "integer out of range"),
        ("SET statement_timeout = 50; SELECT pg_sleep(5)", Code.DEADLINE_EXCEEDED, "statement timeout"),
        ("SELECT * FROM no_such_table", Code.INTERNAL, "database error (SQLSTATE 42P01)"),
    ]
    for sql, code, message in cases:
        err = await raised_by(conn, sql)
        got, text = status_for_db_error(err)
        assert (got, message in text) == (code, True), (sql, got, text)
        assert "INSERT" not in text and "SELECT" not in text and "no_such_table" not in text
    await conn.execute("RESET statement_timeout")


async def test_connection_errors_are_unavailable() -> None:
    with pytest.raises(psycopg.OperationalError) as err:
        await psycopg.AsyncConnection.connect("postgresql://postgres:pw@127.0.0.1:1/x?connect_timeout=2")
    assert status_for_db_error(err.value) == (Code.UNAVAILABLE, "database unavailable")


# -- over gRPC -------------------------------------------------------------------------------


async def expect(call: Awaitable[object], code: Code) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    assert err.value.code() == code, err.value.details()
    details = err.value.details() or ""
    for leak in ("Traceback", "INSERT", "SELECT", "UPDATE", 'File "', "psycopg"):
        assert leak not in details, details
    return details


async def test_grpc_foreign_key_and_bad_json(stub: Stub, tool: pb.Tool) -> None:
    missing = str(uuid.uuid4())
    details = await expect(stub.QueueTask(pb.QueueTaskRequest(tool_id=missing)), Code.NOT_FOUND)
    assert missing in details and "not present" in details
    details = await expect(stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id, input="{nope")), Code.INVALID_ARGUMENT)
    assert "invalid input syntax for type json" in details


@pytest.fixture
async def broken_database(pg_server: tuple[str, Cluster | None]) -> AsyncIterator[str]:
    """A database whose schema drifted from the one the code was generated against."""
    with scratch_database(pg_server[0]) as url:
        with psycopg.connect(url, autocommit=True) as c:
            c.execute("ALTER TABLE generation.tools RENAME COLUMN name TO tool_name")
            c.execute("ALTER TYPE generation.task_status ADD VALUE 'paused'")
        yield url


async def test_grpc_internal_never_leaks_sql_or_traceback(
    broken_database: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.ERROR)  # server faults are logged at ERROR whatever the level
    with psycopg.connect(broken_database, autocommit=True) as c:
        tool_id = c.execute("INSERT INTO generation.tools (tool_name) VALUES ('t') RETURNING id::text").fetchone()[0]  # type: ignore[index]
        task_id = c.execute(
            "INSERT INTO generation.tasks (tool_id, status) VALUES (%s, 'paused') RETURNING id::text", (tool_id,)
        ).fetchone()[0]  # type: ignore[index]
    running = await start_server(server_config(broken_database))
    try:
        async with grpc.aio.insecure_channel(running.address) as ch:
            stub = task_pb2_grpc.GenerationDataServiceStub(ch)
            # Schema drift: the statement itself fails (42703 undefined_column).
            details = await expect(stub.RegisterTool(pb.RegisterToolRequest(name="x")), Code.INTERNAL)
            assert details == "database error (SQLSTATE 42703)"
            # An enum label the proto lacks (added after generation) reads as UNSPECIFIED: no
            # stored value makes a read fail (docs/diagnostics.md).
            got = await stub.GetTask(pb.GetTaskRequest(task_id=task_id))
            assert got.task.status == pb.TASK_STATUS_UNSPECIFIED

            # A Python exception in a handler.
            def explode(row: object) -> object:
                raise KeyError("paused")

            monkeypatch.setattr(task_pydb, "_task_from_row", explode)
            details = await expect(stub.GetTask(pb.GetTaskRequest(task_id=task_id)), Code.INTERNAL)
            assert details == "internal error"
    finally:
        await running.close()
    lines = [r for r in caplog.records if r.name == "pydb"]
    assert [r.getMessage().split(" ms=")[0] for r in lines] == [
        "rpc=RegisterTool code=INTERNAL",
        "rpc=GetTask code=INTERNAL",
    ]
    assert "sqlstate=42703" in lines[0].getMessage()
    assert lines[1].exc_info is not None and "KeyError" in caplog.text  # the traceback: in the log only


async def test_grpc_terminated_backend_is_unavailable(stub: Stub, database_url: str) -> None:
    """An administrator (or a failover) kills the backend mid-statement: UNAVAILABLE, and the
    pool replaces the dead connection for the next call."""
    name = f"killed-{uuid.uuid4().hex[:8]}"
    holder: psycopg.AsyncConnection[object] = await psycopg.AsyncConnection.connect(database_url)
    watch: psycopg.AsyncConnection[object] = await psycopg.AsyncConnection.connect(database_url, autocommit=True)
    try:
        await holder.execute("INSERT INTO generation.tools (name) VALUES (%s)", (name,))
        call = asyncio.ensure_future(stub.RegisterTool(pb.RegisterToolRequest(name=name), timeout=10))
        blocked = (
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND state = 'active'"
            " AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO generation.tools%%'"
        )
        pids = await poll(lambda: _pids(watch, blocked))
        await watch.execute("SELECT pg_terminate_backend(p) FROM unnest(%s::int[]) AS p", (pids,))
        await expect(call, Code.UNAVAILABLE)
    finally:
        await holder.rollback()
        await holder.close()
        await watch.close()
    again = await stub.RegisterTool(pb.RegisterToolRequest(name=name), timeout=10)
    assert again.tool.name == name


async def _pids(conn: psycopg.AsyncConnection[object], sql: str) -> list[int]:
    cur = await conn.execute(sql)
    return [r[0] for r in await cur.fetchall()]  # type: ignore[index]


async def poll(fetch: Callable[[], Awaitable[list[int]]], timeout: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while not (found := await fetch()):
        if time.monotonic() > deadline:
            pytest.fail("the call never blocked on the row lock")
        await asyncio.sleep(0.02)
    return found
