"""One hot row does not exhaust the pool (issue 27, row 7): calls on one row by its key take
turns in the server, holding no pooled connection while they wait, so a hundred callers on a
locked row leave the pool to everyone else; a CompleteTasks / FailTasks batch with one locked
row settles the others at once (SKIP LOCKED) and leaves that one out of its answer."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import psycopg
from conftest import private_service
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from pydb.runtime import database
from pydb.runtime.database import SERVER_BUSY
from support.pg import Cluster
from test_security_limits import WAITING, claimed_task, scalar, wait_until

Code = grpc.StatusCode
HOT_CALLERS = 100


async def claimed(stub: Any, name: str, n: int) -> list[pb.Task]:
    tool = (await stub.RegisterTool(pb.RegisterToolRequest(name=name))).tool
    for _ in range(n):
        await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id))
    tasks = list((await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=n))).tasks)
    assert len(tasks) == n
    return tasks


async def test_a_hundred_callers_on_one_locked_row_leave_the_pool_to_other_rows(
    pg_server: tuple[str, Cluster | None],
) -> None:
    async with (
        private_service(pg_server[0], pool_min=2, pool_max=10, pool_timeout=2.0, lock_timeout=1.0) as (url, server),
        await psycopg.AsyncConnection.connect(url) as holder,
        await psycopg.AsyncConnection.connect(url, autocommit=True) as watch,
        grpc.aio.insecure_channel(server.address) as ch,
    ):
        stub = task_pb2_grpc.GenerationDataServiceStub(ch)
        hot = await claimed_task(stub, "hot-row")
        others = await claimed(stub, "cold-rows", 40)
        await holder.execute("SET idle_in_transaction_session_timeout = '60s'")
        await holder.execute("SELECT 1 FROM generation.tasks WHERE id = %s FOR UPDATE", (hot.id,))
        beat = pb.HeartbeatTaskRequest(task_id=hot.id, lease_token=hot.lease_token)
        hammering = [asyncio.ensure_future(stub.HeartbeatTask(beat, timeout=60)) for _ in range(HOT_CALLERS)]

        async def all_arrived() -> bool:
            return len(database._in_flight) >= HOT_CALLERS

        await wait_until(all_arrived, "the hundred calls on the hot row to reach the server")

        async def lock_waited() -> bool:
            return bool(await scalar(watch, WAITING) >= 1)

        await wait_until(lock_waited, "a call to wait on the row lock")
        # While they wait: calls on other rows, as many as the pool has connections and more.
        beats = [
            stub.HeartbeatTask(pb.HeartbeatTaskRequest(task_id=t.id, lease_token=t.lease_token), timeout=30)
            for t in others
        ]
        answered = await asyncio.gather(*beats, return_exceptions=True)
        refused = [a for a in answered if isinstance(a, grpc.aio.AioRpcError)]
        summary = {(e.code().name, e.details()) for e in refused}
        assert not refused, f"{len(refused)} of {len(others)} calls on other rows refused: {summary}"
        assert [a.task.id for a in answered if isinstance(a, pb.HeartbeatTaskResponse)] == [t.id for t in others]
        # Only one pooled connection ever waited on the hot row.
        assert await scalar(watch, WAITING) <= 1

        outcomes = await asyncio.gather(*hammering, return_exceptions=True)
        for outcome in outcomes:
            assert isinstance(outcome, grpc.aio.AioRpcError), outcome
            assert outcome.code() == Code.ABORTED, (outcome.code(), outcome.details())
            assert outcome.details() != SERVER_BUSY
        await holder.rollback()
        assert (await stub.HeartbeatTask(beat, timeout=10)).task.id == hot.id


async def test_a_batch_with_one_locked_row_settles_the_others(pg_server: tuple[str, Cluster | None]) -> None:
    async with (
        # No lock timeout: before, the batch waited on the locked row until its deadline.
        private_service(pg_server[0], lock_timeout=0.0) as (url, server),
        await psycopg.AsyncConnection.connect(url) as holder,
        grpc.aio.insecure_channel(server.address) as ch,
    ):
        stub = task_pb2_grpc.GenerationDataServiceStub(ch)
        tasks = await claimed(stub, "batch-hot", 6)
        complete, fail = tasks[:3], tasks[3:]
        locked = [complete[1].id, fail[1].id]
        await holder.execute("SET idle_in_transaction_session_timeout = '60s'")
        await holder.execute("SELECT 1 FROM generation.tasks WHERE id = ANY(%s) FOR UPDATE", (locked,))

        done = await stub.CompleteTasks(
            pb.CompleteTasksRequest(
                task_ids=[t.id for t in complete],
                lease_tokens=[t.lease_token for t in complete],
                outputs=['"ok"'] * 3,
                reported_usages=[""] * 3,
            ),
            timeout=10,
        )
        assert sorted(t.id for t in done.tasks) == sorted([complete[0].id, complete[2].id])
        assert all(t.status == pb.TASK_STATUS_COMPLETED for t in done.tasks)
        failed = await stub.FailTasks(
            pb.FailTasksRequest(
                task_ids=[t.id for t in fail],
                lease_tokens=[t.lease_token for t in fail],
                errors=["boom"] * 3,
                retry_after_seconds=[0.0] * 3,
            ),
            timeout=10,
        )
        assert sorted(t.id for t in failed.tasks) == sorted([fail[0].id, fail[2].id])
        await holder.rollback()

        # The rows left out were not applied: still held, and settled by the retry.
        for t in (complete[1], fail[1]):
            now = (await stub.GetTask(pb.GetTaskRequest(task_id=t.id))).task
            assert now.status == pb.TASK_STATUS_PROCESSING and now.lease_token == t.lease_token
        retry = await stub.CompleteTasks(
            pb.CompleteTasksRequest(
                task_ids=[complete[1].id],
                lease_tokens=[complete[1].lease_token],
                outputs=['"ok"'],
                reported_usages=[""],
            ),
            timeout=10,
        )
        assert [t.id for t in retry.tasks] == [complete[1].id]
