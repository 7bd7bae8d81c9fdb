"""Database faults. A server started while PostgreSQL is down answers UNAVAILABLE (health
NOT_SERVING) and serves once the database is up, without a restart; the same for an outage
while it runs. Backends killed with pg_terminate_backend mid-load lose no task, and the pool
recovers."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import psycopg
import pytest
from conftest import RunningServer, server_config, start_server
from generation.task.v1 import task_pb2 as pb
from grpc_health.v1 import health_pb2, health_pb2_grpc
from psycopg.conninfo import make_conninfo
from support.pg import Cluster, scratch_database
from support.queue_support import (
    Stub,
    assert_clean_details,
    claim_next,
    enqueue,
    expire_leases,
    fetch,
    new_tool,
    seed,
    wait_until,
)

SERVICE = "generation.task.v1.GenerationDataService"
SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def outage_cluster() -> Iterator[Cluster]:
    """A private PostgreSQL we may stop and start (even when DATABASE_URL names a shared one)."""
    cluster = Cluster()
    try:
        yield cluster
    finally:
        cluster.destroy()


async def health(channel: grpc.aio.Channel, service: str = "") -> int:
    resp = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
    return resp.status  # type: ignore[no-any-return]


async def assert_unavailable(stub: Stub, tool_id: str) -> None:
    """Every kind of call is refused with UNAVAILABLE, within its deadline, saying why."""
    calls: list[tuple[Any, Any]] = [
        (stub.RegisterTool, pb.RegisterToolRequest(name="while-down")),
        (stub.QueueTask, pb.QueueTaskRequest(tool_id=tool_id)),
        (stub.ClaimNextTask, pb.ClaimNextTaskRequest(tool_id=tool_id)),
        (stub.GetTask, pb.GetTaskRequest(task_id="7d3c1f0e-0000-4000-8000-000000000000")),
    ]
    outcomes = await asyncio.gather(*(call(request, timeout=15) for call, request in calls), return_exceptions=True)
    for outcome in outcomes:
        assert isinstance(outcome, grpc.aio.AioRpcError), f"answered while the database is down: {outcome!r}"
        assert outcome.code() == grpc.StatusCode.UNAVAILABLE, outcome.details()
        assert "unavailable" in assert_clean_details(outcome).lower()


async def test_outages_answer_unavailable_and_recover_without_restart(outage_cluster: Cluster) -> None:
    with scratch_database(outage_cluster.url) as url:
        async with (
            await psycopg.AsyncConnection.connect(url, autocommit=True) as conn,
            conn.cursor() as cur,
        ):
            await cur.execute("INSERT INTO generation.tools (name) VALUES ('outage') RETURNING id::text")
            found = await cur.fetchone()
            assert found is not None
            tool_id = str(found[0])
        await asyncio.to_thread(outage_cluster.stop)

        running = await start_server(server_config(url, health_interval=0.1, pool_min=2, pool_max=4, pool_timeout=1.0))
        try:
            async with grpc.aio.insecure_channel(running.address) as ch:
                stub = Stub(ch)
                # 1. Started while the database is down: NOT_SERVING, and UNAVAILABLE for calls.
                assert await health(ch) == NOT_SERVING and await health(ch, SERVICE) == NOT_SERVING
                await assert_unavailable(stub, tool_id)
                assert await health(ch) == NOT_SERVING

                # The database comes up: the same server process serves, no restart.
                await asyncio.to_thread(outage_cluster.start)

                async def serving() -> bool:
                    return bool(await health(ch) == SERVING and await health(ch, SERVICE) == SERVING)

                await wait_until(serving, timeout=60, what="health SERVING after the database came up")
                queued = await enqueue(stub, tool_id, input='{"before": "outage"}')
                held = await claim_next(stub, tool_id)
                assert held is not None and held.id == queued.id

                # 2. An outage while serving: NOT_SERVING and UNAVAILABLE, then back again.
                await asyncio.to_thread(outage_cluster.stop)

                async def not_serving() -> bool:
                    return bool(await health(ch) == NOT_SERVING)

                await wait_until(not_serving, timeout=30, what="health NOT_SERVING after the database stopped")
                await assert_unavailable(stub, tool_id)
                await asyncio.to_thread(outage_cluster.start)
                await wait_until(serving, timeout=60, what="health SERVING after the second outage")
                # Nothing was lost: the lease taken before the outage still holds and completes.
                done = await stub.CompleteTask(pb.CompleteTaskRequest(task_id=held.id, lease_token=held.lease_token))
                assert done.task.status == pb.TASK_STATUS_COMPLETED and done.task.input == '{"before": "outage"}'
        finally:
            await running.close()


# --- pg_terminate_backend mid-load -------------------------------------------------------

TASKS = 1500
WORKERS = 6
KILL_EVERY = 150  # completions between two rounds of pg_terminate_backend
APP = "pydb-fault-kill"


@pytest.fixture
async def killable(database_url: str) -> AsyncIterator[RunningServer]:
    """A server of its own whose pooled backends are recognisable by application_name."""
    url = make_conninfo(database_url, application_name=APP)
    running = await start_server(server_config(url, pool_min=2, pool_max=4, health_interval=0.1))
    yield running
    await running.close()


class Load:
    def __init__(self) -> None:
        self.completed: Counter[str] = Counter()  # task id -> completions this side observed
        self.errors: Counter[grpc.StatusCode] = Counter()
        self.progress = asyncio.Event()

    async def call(self, fn: object, request: object) -> object:
        """Retry on UNAVAILABLE (a killed backend); every other error propagates."""
        while True:
            try:
                return await fn(request, timeout=30)  # type: ignore[operator]
            except grpc.aio.AioRpcError as err:
                self.errors[err.code()] += 1
                if err.code() != grpc.StatusCode.UNAVAILABLE:
                    raise
                await asyncio.sleep(0.01)  # retry back-off, not synchronisation

    async def complete(self, stub: Stub, task: pb.Task) -> None:
        req = pb.CompleteTaskRequest(task_id=task.id, lease_token=task.lease_token, output='{"ok": true}')
        try:
            await self.call(stub.CompleteTask, req)
        except grpc.aio.AioRpcError as err:
            # A retry after a completion whose answer was lost: the row must show it as ours.
            assert err.code() == grpc.StatusCode.FAILED_PRECONDITION, err.details()
            got = (await self.call(stub.GetTask, pb.GetTaskRequest(task_id=task.id))).task  # type: ignore[attr-defined]
            assert got.status == pb.TASK_STATUS_COMPLETED and got.lease_token == task.lease_token
        self.completed[task.id] += 1
        if sum(self.completed.values()) % KILL_EVERY == 0:
            self.progress.set()

    async def worker(self, stub: Stub, tool_id: str, batch: int) -> None:
        while True:
            if batch:
                resp = await self.call(stub.ClaimTasks, pb.ClaimTasksRequest(tool_id=tool_id, limit=batch))
                tasks = list(resp.tasks)  # type: ignore[attr-defined]
            else:
                one = await self.call(stub.ClaimNextTask, pb.ClaimNextTaskRequest(tool_id=tool_id))
                tasks = [one.task] if one.HasField("task") else []  # type: ignore[attr-defined]
            if not tasks:
                return
            for t in tasks:
                await self.complete(stub, t)


async def terminate_pool_backends(url: str) -> int:
    rows = await fetch(
        url,
        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) AS n FROM pg_stat_activity"
        " WHERE application_name = %s AND pid <> pg_backend_pid()",
        (APP,),
    )
    return int(rows[0]["n"])


async def test_terminated_backends_mid_load_lose_no_task(
    stub: Stub, database_url: str, killable: RunningServer
) -> None:
    tool = await new_tool(stub, "kill")
    await seed(database_url, tool.id, TASKS)
    load = Load()
    killed: list[int] = []
    channels = [grpc.aio.insecure_channel(killable.address) for _ in range(WORKERS)]
    try:
        stubs = [Stub(c) for c in channels]

        async def killer() -> None:
            while True:
                await load.progress.wait()
                load.progress.clear()
                killed.append(await terminate_pool_backends(database_url))

        kill_task = asyncio.create_task(killer())
        await asyncio.gather(*(load.worker(stubs[i], tool.id, 5 if i % 2 else 0) for i in range(WORKERS)))
        kill_task.cancel()

        # Claims whose answer was lost with a killed backend are leased to nobody: after the lease
        # lapses they are reclaimed like any zombie, and completed.
        orphans = await fetch(
            database_url,
            "SELECT id::text FROM generation.tasks WHERE tool_id = %s AND status = 'processing'",
            (tool.id,),
        )
        await expire_leases(database_url, [r["id"] for r in orphans])
        await asyncio.gather(*(load.worker(stubs[i], tool.id, 5 if i % 2 else 0) for i in range(2)))

        rows = await fetch(
            database_url,
            "SELECT id::text, status::text, retry_count FROM generation.tasks WHERE tool_id = %s",
            (tool.id,),
        )
        assert len(rows) == TASKS, "rows were lost or duplicated"
        assert all(r["status"] == "completed" for r in rows), Counter(r["status"] for r in rows)
        assert set(load.completed) == {r["id"] for r in rows} and set(load.completed.values()) == {1}
        orphan_ids = {r["id"] for r in orphans}
        assert {r["id"]: r["retry_count"] for r in rows} == {r["id"]: int(r["id"] in orphan_ids) for r in rows}
        assert len([k for k in killed if k]) >= 3, f"too few kill rounds landed: {killed}"
        assert load.errors[grpc.StatusCode.UNAVAILABLE] > 0, "no call was hit: the kills proved nothing"
        # FAILED_PRECONDITION only ever answers a retried completion, checked in Load.complete.
        assert set(load.errors) <= {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.FAILED_PRECONDITION}, load.errors

        # The pool has recovered: health SERVING, fresh backends, a burst of calls all succeed.
        async with grpc.aio.insecure_channel(killable.address) as ch:

            async def serving() -> bool:
                return bool(await health(ch) == SERVING)

            await wait_until(serving, timeout=30, what="health SERVING after the kills")
            s = Stub(ch)
            got = await asyncio.gather(*(s.GetTask(pb.GetTaskRequest(task_id=r["id"]), timeout=10) for r in rows[:40]))
            assert all(g.task.status == pb.TASK_STATUS_COMPLETED for g in got)
        live = await fetch(
            database_url, "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = %s", (APP,)
        )
        assert live[0]["n"] >= 1
    finally:
        for c in channels:
            await c.close(None)
