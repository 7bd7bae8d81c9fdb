"""Bounded resources (issue 14): one LISTEN connection for any number of WatchTaskWakes streams
and a cap past which streams are refused; a locked row gives its connection back after
`--lock-timeout` (ABORTED "row busy") instead of tying up the pool; a pool that is merely full
says the server is busy; PostgreSQL's DETAIL stays out of the log unless enabled."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import psycopg
import pytest
from conftest import RunningServer, private_service
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from pydb.runtime import errors
from pydb.runtime.admission import ROW_BUSY_IN_PROCESS
from pydb.runtime.database import SERVER_BUSY
from support.pg import Cluster

Code = grpc.StatusCode
STREAMS = 500


async def wait_until(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 20.0) -> None:
    """Poll database state (pg_stat_activity, pg_locks) until `check` holds."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


async def scalar(conn: psycopg.AsyncConnection[Any], query: str, *params: Any) -> Any:
    cur = await conn.execute(query, params)
    row = await cur.fetchone()
    assert row is not None
    return row[0]


LISTENERS = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN %%'"
    " AND pid <> pg_backend_pid()"
)
WAITING = (
    "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
    " WHERE NOT l.granted AND a.datname = current_database() AND a.usename = 'pydb_task_service'"
)


# -- LISTEN fan-out --------------------------------------------------------------------------


async def test_500_streams_share_one_listen_connection(pg_server: tuple[str, Cluster | None]) -> None:
    async with (
        private_service(pg_server[0], max_listen_streams=STREAMS, pool_max=4) as (url, server),
        await psycopg.AsyncConnection.connect(url, autocommit=True) as watch,
        grpc.aio.insecure_channel(server.address) as ch,
    ):
        stub = task_pb2_grpc.GenerationDataServiceStub(ch)
        tool = (await stub.RegisterTool(pb.RegisterToolRequest(name="fan-out"))).tool
        calls = [stub.WatchTaskWakes(pb.WatchTaskWakesRequest()) for _ in range(STREAMS)]
        try:
            await asyncio.wait_for(asyncio.gather(*(c.initial_metadata() for c in calls)), 60)  # all listening
            assert await scalar(watch, LISTENERS) == 1
            backends = await scalar(
                watch,
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND usename = %s",
                "pydb_task_service",
            )
            assert backends <= 4 + 1, backends  # the pool, plus the one listening connection

            # Past the cap: RESOURCE_EXHAUSTED, and no connection is opened for it.
            extra = stub.WatchTaskWakes(pb.WatchTaskWakesRequest())
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await asyncio.wait_for(extra.read(), 10)
            assert err.value.code() == Code.RESOURCE_EXHAUSTED
            assert f"at most {STREAMS}" in (err.value.details() or "")

            # One enqueue wakes every stream, through the one connection.
            await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id))
            wakes = await asyncio.wait_for(asyncio.gather(*(c.read() for c in calls)), 60)
            assert {getattr(w, "tool_id", None) for w in wakes} == {tool.id} and len(wakes) == STREAMS

            # A stream that ends frees its place under the cap.
            calls.pop().cancel()
            again = stub.WatchTaskWakes(pb.WatchTaskWakesRequest())
            calls.append(again)

            async def admitted() -> bool:
                try:
                    await asyncio.wait_for(again.initial_metadata(), 5)
                    return True
                except grpc.aio.AioRpcError:
                    return False

            assert await admitted()
            assert await scalar(watch, LISTENERS) == 1
        finally:
            for call in calls:
                call.cancel()

        async def released() -> bool:
            return bool(await scalar(watch, LISTENERS) == 0)

        await wait_until(released, "the listening connection to close after its last stream")


# -- lock timeout ----------------------------------------------------------------------------


async def claimed_task(stub: Any, name: str) -> pb.Task:
    tool = (await stub.RegisterTool(pb.RegisterToolRequest(name=name))).tool
    await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id))
    task: pb.Task = (await stub.ClaimNextTask(pb.ClaimNextTaskRequest(tool_id=tool.id))).task
    assert task.id
    return task


async def test_a_locked_row_gives_connections_back_and_answers_row_busy(pg_server: tuple[str, Cluster | None]) -> None:
    async with (
        private_service(pg_server[0], pool_min=2, pool_max=4, lock_timeout=1.0) as (url, server),
        await psycopg.AsyncConnection.connect(url) as holder,
        await psycopg.AsyncConnection.connect(url, autocommit=True) as watch,
        grpc.aio.insecure_channel(server.address) as ch,
    ):
        stub = task_pb2_grpc.GenerationDataServiceStub(ch)
        locked = await claimed_task(stub, "locked-tool")
        others = [(await stub.QueueTask(pb.QueueTaskRequest(tool_id=locked.tool_id))).task.id for _ in range(20)]
        # A transaction holding the row for up to 30 s (it is rolled back below, once checked).
        await holder.execute("SET idle_in_transaction_session_timeout = '30s'")
        await holder.execute("SELECT 1 FROM generation.tasks WHERE id = %s FOR UPDATE", (locked.id,))
        started = time.monotonic()
        beats = [
            asyncio.ensure_future(
                stub.HeartbeatTask(
                    pb.HeartbeatTaskRequest(task_id=locked.id, lease_token=locked.lease_token), timeout=30
                )
            )
            for _ in range(8)  # twice the pool: without a lock timeout they would hold every connection
        ]

        async def blocked() -> bool:
            return bool(await scalar(watch, WAITING) >= 1)

        await wait_until(blocked, "a heartbeat to wait on the row lock")
        # Unrelated calls go through while the row stays locked.
        fetched = await asyncio.gather(*(stub.GetTask(pb.GetTaskRequest(task_id=t), timeout=15) for t in others))
        assert [f.task.id for f in fetched] == others
        outcomes = await asyncio.gather(*beats, return_exceptions=True)
        elapsed = time.monotonic() - started
        for outcome in outcomes:
            assert isinstance(outcome, grpc.aio.AioRpcError), outcome
            assert outcome.code() == Code.ABORTED
            # One waits on the lock in PostgreSQL; the others wait their turn on the row in the
            # server, holding no connection (admission.RowGate).
            assert outcome.details() in (errors.ROW_BUSY, ROW_BUSY_IN_PROCESS), outcome.details()
        assert elapsed < 15, elapsed  # bounded by the lock timeout, not by the 30 s lock
        assert await scalar(watch, WAITING) == 0, "no statement is left waiting on the lock"
        assert holder.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS  # still held throughout
        await holder.rollback()
        # The row is free again: the same heartbeat succeeds.
        ok = await stub.HeartbeatTask(pb.HeartbeatTaskRequest(task_id=locked.id, lease_token=locked.lease_token))
        assert ok.task.id == locked.id


async def test_a_full_pool_says_server_busy_not_database_unavailable(pg_server: tuple[str, Cluster | None]) -> None:
    async with (
        private_service(pg_server[0], pool_min=1, pool_max=2, pool_timeout=0.5, lock_timeout=0.0) as (url, server),
        await psycopg.AsyncConnection.connect(url) as holder,
        await psycopg.AsyncConnection.connect(url, autocommit=True) as watch,
        grpc.aio.insecure_channel(server.address) as ch,
    ):
        stub = task_pb2_grpc.GenerationDataServiceStub(ch)
        # Two rows: calls on one row take turns in the server, so two rows to hold both connections.
        held = [await claimed_task(stub, f"busy-tool-{i}") for i in range(2)]
        locked = held[0]
        await holder.execute("SELECT 1 FROM generation.tasks WHERE id = ANY(%s) FOR UPDATE", ([t.id for t in held],))
        beats = [
            asyncio.ensure_future(
                stub.HeartbeatTask(pb.HeartbeatTaskRequest(task_id=t.id, lease_token=t.lease_token), timeout=30)
            )
            for t in held
        ]
        try:

            async def pool_held() -> bool:
                return bool(await scalar(watch, WAITING) == 2)

            await wait_until(pool_held, "both pooled connections to wait on the row lock")
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.GetTask(pb.GetTaskRequest(task_id=locked.id), timeout=10)
            assert err.value.code() == Code.UNAVAILABLE
            assert err.value.details() == SERVER_BUSY
        finally:
            await holder.rollback()
        assert [b.task.id for b in await asyncio.gather(*beats)] == [t.id for t in held]


# -- log hygiene -----------------------------------------------------------------------------


async def _violate_check(server: RunningServer, secret: str) -> None:
    async with grpc.aio.insecure_channel(server.address) as ch:
        stub = task_pb2_grpc.GenerationDataServiceStub(ch)
        tool = (await stub.RegisterTool(pb.RegisterToolRequest(name="hygiene"))).tool
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id, priority=5000, input=f'{{"secret": "{secret}"}}'))
        assert err.value.code() == Code.INVALID_ARGUMENT
        assert secret not in (err.value.details() or "")


async def test_database_detail_stays_out_of_the_log_unless_enabled(
    pg_server: tuple[str, Cluster | None], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="pydb")
    secret = uuid.uuid4().hex
    async with private_service(pg_server[0], log_level="debug") as (_, server):
        await _violate_check(server, secret)
    line = next(r.getMessage() for r in caplog.records if "rpc=QueueTask code=INVALID_ARGUMENT" in r.getMessage())
    assert 'sqlstate=23514 schema="generation" table="tasks" constraint="tasks_priority_check"' in line
    assert secret not in caplog.text and "Failing row" not in caplog.text

    caplog.clear()
    try:
        async with private_service(pg_server[0], log_level="debug", log_database_detail=True) as (_, server):
            await _violate_check(server, secret)
        assert "Failing row contains" in caplog.text and secret in caplog.text  # asked for: there
    finally:
        errors.set_log_detail(False)
