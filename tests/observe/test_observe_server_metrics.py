"""The generated server's Prometheus endpoint (--metrics-addr), scraped over HTTP: every metric
moves when its event happens (docs/operations.md)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import grpc
import psycopg
import pytest
from conftest import RunningServer, private_service
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from pydb.runtime.metrics import callers_waiting
from support.observe_support import free_port, scrape, value
from support.pg import Cluster
from support.queue_support import claim_one, enqueue, new_tool, rpc_error
from support.worker_support import wait_until

METRICS_PORT = free_port()


@pytest.fixture(scope="module")
async def private(pg_server: tuple[str, Cluster | None]) -> AsyncIterator[tuple[str, RunningServer]]:
    # The calls test_pool_in_use_and_waiting blocks (two on a row lock, one on the pool) must
    # still be blocked when the metrics are scraped, however slow the machine: no lock timeout, a
    # pool timeout longer than any wait here (the defaults, 1 s and 5 s, made that a race), and the
    # health probe, another caller of the pool, made once at start only.
    async with private_service(
        pg_server[0],
        metrics_addr=f"127.0.0.1:{METRICS_PORT}",
        pool_max=2,
        lock_timeout=0.0,
        pool_timeout=60.0,
        health_interval=3600.0,
    ) as found:
        yield found


@pytest.fixture(scope="module")
async def stub(private: tuple[str, RunningServer]) -> AsyncIterator[task_pb2_grpc.GenerationDataServiceAsyncStub]:
    async with grpc.aio.insecure_channel(private[1].address) as ch:
        yield task_pb2_grpc.GenerationDataServiceStub(ch)


async def test_calls_latency_and_status_codes_move_per_call(stub: task_pb2_grpc.GenerationDataServiceAsyncStub) -> None:
    tool = await new_tool(stub, "metrics")
    before = await scrape(METRICS_PORT)
    await enqueue(stub, tool.id)
    await enqueue(stub, tool.id)
    err = await rpc_error(stub.GetTask, pb.GetTaskRequest(task_id=str(uuid.uuid4())))
    assert err.code() == grpc.StatusCode.NOT_FOUND
    after = await scrape(METRICS_PORT)
    calls = "pydb_rpc_calls_total"
    assert value(after, calls, method="QueueTask", code="OK") - value(before, calls, method="QueueTask", code="OK") == 2
    assert (
        value(after, calls, method="GetTask", code="NOT_FOUND")
        - value(before, calls, method="GetTask", code="NOT_FOUND")
        == 1
    )
    count = "pydb_rpc_duration_seconds_count"
    assert value(after, count, method="QueueTask") - value(before, count, method="QueueTask") == 2
    # Every observed latency is in some bucket: the +Inf bucket counts them all.
    assert value(after, "pydb_rpc_duration_seconds_bucket", method="QueueTask", le="+Inf") == value(
        after, count, method="QueueTask"
    )
    assert value(after, "pydb_rpc_duration_seconds_sum", method="QueueTask") > 0


async def test_database_errors_by_sqlstate_class(stub: task_pb2_grpc.GenerationDataServiceAsyncStub) -> None:
    tool = await new_tool(stub, "metrics")
    before = await scrape(METRICS_PORT)
    err = await rpc_error(stub.QueueTask, pb.QueueTaskRequest(tool_id=tool.id, priority=5000))  # CHECK: 23514
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    err = await rpc_error(stub.QueueTask, pb.QueueTaskRequest(tool_id=str(uuid.uuid4())))  # foreign key: 23503
    assert err.code() == grpc.StatusCode.NOT_FOUND
    after = await scrape(METRICS_PORT)
    name = "pydb_database_errors_total"
    assert (
        value(after, name, method="QueueTask", sqlstate_class="23")
        - value(before, name, method="QueueTask", sqlstate_class="23")
        == 2
    )
    # A handler's own refusal (a malformed id) is no database error.
    await rpc_error(stub.GetTask, pb.GetTaskRequest(task_id="not-a-uuid"))
    assert value(await scrape(METRICS_PORT), name, method="GetTask", sqlstate_class="22") == 0


async def test_pool_in_use_and_waiting(
    stub: task_pb2_grpc.GenerationDataServiceAsyncStub, private: tuple[str, RunningServer]
) -> None:
    """Calls blocked on a row lock hold both pooled connections (--pool-max 2); a third waits."""
    url = private[0]
    tool = await new_tool(stub, "metrics")
    # Three rows: calls on one row take turns in the server (admission.RowGate), off the pool.
    tasks = []
    for _ in range(3):
        await enqueue(stub, tool.id)
        tasks.append(await claim_one(stub, tool.id))
    idle = await scrape(METRICS_PORT)
    assert value(idle, "pydb_pool_connections_in_use", pool="pydb") == 0
    assert value(idle, "pydb_pool_connections_max", pool="pydb") == 2
    async with await psycopg.AsyncConnection.connect(url) as locker:
        await locker.execute("SELECT 1 FROM generation.tasks WHERE id = ANY(%s) FOR UPDATE", ([t.id for t in tasks],))

        async def beat(task: pb.Task) -> pb.HeartbeatTaskResponse:
            return await stub.HeartbeatTask(pb.HeartbeatTaskRequest(task_id=task.id, lease_token=task.lease_token))

        beats = [asyncio.create_task(beat(t)) for t in tasks]

        async def busy() -> bool:
            now = await scrape(METRICS_PORT)
            return (
                value(now, "pydb_pool_connections_in_use", pool="pydb") == 2
                and value(now, "pydb_pool_requests_waiting", pool="pydb") == 1
            )

        await wait_until(busy, timeout=20, what="two connections in use and one call waiting")
        await locker.rollback()
        await asyncio.gather(*beats)

    async def released() -> bool:
        now = await scrape(METRICS_PORT)
        return value(now, "pydb_pool_connections_in_use", pool="pydb") == 0 and (
            value(now, "pydb_pool_requests_waiting", pool="pydb") == 0
        )

    await wait_until(released, timeout=20, what="the pool idle again")


async def test_a_caller_that_gave_up_waiting_is_not_counted(private: tuple[str, RunningServer]) -> None:
    """pydb_pool_requests_waiting counts callers still waiting: psycopg_pool's own count keeps a
    caller whose wait timed out until a connection is returned (metrics.callers_waiting)."""
    async with AsyncConnectionPool(private[0], min_size=1, max_size=1, open=False) as pool:
        await pool.wait()
        held = await pool.getconn()
        with pytest.raises(PoolTimeout):
            await pool.getconn(timeout=0.05)
        assert pool.get_stats()["requests_waiting"] == 1  # psycopg_pool's count: the caller that left
        assert callers_waiting(pool) == 0
        waiter = asyncio.create_task(pool.getconn(timeout=60))

        async def one_waiting() -> bool:
            return callers_waiting(pool) == 1

        await wait_until(one_waiting, timeout=20, what="the new caller queued")
        await pool.putconn(held)
        await pool.putconn(await waiter)
        assert callers_waiting(pool) == 0
