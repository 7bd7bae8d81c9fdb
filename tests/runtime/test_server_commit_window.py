"""A refused call has changed nothing (issue 27, row 3): a call that may write commits only if its
answer can be sent and the caller's deadline has not passed. Inside the documented window (COMMIT
sent, answer not yet delivered) every mutating RPC of the queue is safe to retry: idempotency
keys (QueueTasks), fencing by lease token (CompleteTask and FailTask: FAILED_PRECONDITION,
never applied twice, GetTask tells the outcome). docs/errors.md, "Retrying"."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest
from conftest import private_service
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc, task_pydb
from pydb.runtime import database
from support.pg import Cluster
from support.queue_support import fetch

Code = grpc.StatusCode


async def settled() -> None:
    """Until the in-process server has no handler task left (a cut-off call rolls back in the background)."""
    for _ in range(400):
        if not database._in_flight:
            return
        await asyncio.wait(list(database._in_flight), timeout=0.05)
    pytest.fail("a handler task never finished")


def batch(tool_id: str, keys: list[str], input_bytes: int = 10) -> pb.QueueTasksRequest:
    n = len(keys)
    body = '{"pad": "' + "x" * input_bytes + '"}'
    return pb.QueueTasksRequest(
        tool_ids=[tool_id] * n,
        inputs=[body] * n,
        priorities=[0] * n,
        max_retries=[3] * n,
        reserved_token_amounts=[0] * n,
        billing_idempotency_keys=keys,
        w3c_traceparents=[""] * n,
        lease_seconds=[0] * n,
        run_at_unix=[0.0] * n,
        max_runtime_seconds=[0] * n,
    )


async def stored(url: str, keys: list[str]) -> int:
    rows = await fetch(
        url, "SELECT count(*) AS n FROM generation.tasks WHERE billing_idempotency_key = ANY(%s)", (keys,)
    )
    return int(rows[0]["n"])


async def test_a_deadline_passing_after_the_statement_commits_nothing(
    pg_server: tuple[str, Cluster | None], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The statement has run (every row inserted) when the caller's real deadline passes, before
    the call could answer: what a slow conversion of a big batch, or a busy event loop, does. The
    handler stands still after its statement until then; the call is DEADLINE_EXCEEDED and no row
    is stored (before: all 200 were)."""
    caplog.set_level(logging.DEBUG, logger="pydb")
    real = task_pydb.queue_tasks
    ran = asyncio.Event()

    async def then_stall(conn: Any, request: pb.QueueTasksRequest) -> pb.QueueTasksResponse:
        response = await real(conn, request)
        assert len(response.tasks) == len(request.tool_ids)  # the statement ran, every row written
        ran.set()
        await asyncio.Event().wait()  # until the deadline cancels the call
        return response

    monkeypatch.setattr(task_pydb, "queue_tasks", then_stall)
    async with (
        private_service(pg_server[0], log_level="debug") as (url, server),
        grpc.aio.insecure_channel(server.address) as ch,
    ):
        stub = task_pb2_grpc.GenerationDataServiceStub(ch)
        tool = (await stub.RegisterTool(pb.RegisterToolRequest(name="late-commit"))).tool
        keys = [f"late-{uuid.uuid4()}" for _ in range(200)]
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.QueueTasks(batch(tool.id, keys), timeout=3.0)
        assert err.value.code() == Code.DEADLINE_EXCEEDED
        assert ran.is_set()
        await settled()
        assert await stored(url, keys) == 0, "a call answered DEADLINE_EXCEEDED committed its rows"
        monkeypatch.setattr(task_pydb, "queue_tasks", real)
        # The retry the caller makes: every task once.
        again = await stub.QueueTasks(batch(tool.id, keys), timeout=30)
        assert len({t.id for t in again.tasks}) == 200 and await stored(url, keys) == 200
    # Logged with its real outcome: cut off (by its deadline, which gRPC enforces by cancelling
    # the handler), nothing committed.
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("rpc=QueueTasks code=")]
    assert any(("code=DEADLINE_EXCEEDED" in line or "code=CANCELLED" in line) and "committed=false" in line
               for line in lines), lines  # fmt: skip


async def test_an_answer_too_large_to_send_commits_nothing(
    pg_server: tuple[str, Cluster | None], caplog: pytest.LogCaptureFixture
) -> None:
    """An answer over --max-send-message-bytes is RESOURCE_EXHAUSTED before COMMIT, logged so
    (not `code=OK` with a gRPC traceback), and the batch is not stored (before: it was)."""
    caplog.set_level(logging.DEBUG, logger="pydb")
    async with (
        private_service(pg_server[0], log_level="debug", max_send_message_bytes=4096) as (url, server),
        grpc.aio.insecure_channel(server.address) as ch,
    ):
        stub = task_pb2_grpc.GenerationDataServiceStub(ch)
        tool = (await stub.RegisterTool(pb.RegisterToolRequest(name="too-big"))).tool
        keys = [f"big-{uuid.uuid4()}" for _ in range(20)]
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.QueueTasks(batch(tool.id, keys, input_bytes=400), timeout=30)
        assert err.value.code() == Code.RESOURCE_EXHAUSTED
        assert "answer too large" in (err.value.details() or "") and "nothing was changed" in (
            err.value.details() or ""
        )
        await settled()
        assert await stored(url, keys) == 0
        # One that fits goes through.
        small = await stub.QueueTasks(batch(tool.id, keys[:2]), timeout=30)
        assert len(small.tasks) == 2
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("rpc=QueueTasks ")]
    assert any("code=RESOURCE_EXHAUSTED" in line for line in lines), lines
    assert not any("code=OK" in line for line in lines[:-1]), lines
    assert "Traceback" not in caplog.text


async def test_every_settling_rpc_is_safe_to_retry_after_a_lost_answer(pg_server: tuple[str, Cluster | None]) -> None:
    """The window: COMMIT sent, the answer lost. A retry of the same call is safe and tells what
    happened: CompleteTask is FAILED_PRECONDITION and GetTask shows it completed under the
    caller's lease (the first output stays), a CompleteTasks batch leaves the entry out; FailTask
    is FAILED_PRECONDITION and the task is failed once; QueueTasks with keys yields the same tasks."""
    async with (
        private_service(pg_server[0]) as (_, server),
        grpc.aio.insecure_channel(server.address) as ch,
    ):
        stub = task_pb2_grpc.GenerationDataServiceStub(ch)
        tool = (await stub.RegisterTool(pb.RegisterToolRequest(name="retry-safe"))).tool
        keys = [f"once-{uuid.uuid4()}" for _ in range(3)]
        first = await stub.QueueTasks(batch(tool.id, keys))
        assert [t.id for t in (await stub.QueueTasks(batch(tool.id, keys))).tasks] == [t.id for t in first.tasks]
        held = list((await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=3))).tasks)
        one, two, three = held

        complete = pb.CompleteTaskRequest(task_id=one.id, lease_token=one.lease_token, output="1")
        done = (await stub.CompleteTask(complete)).task
        # The retry is fenced (never applied twice) and GetTask tells the first one landed.
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.CompleteTask(pb.CompleteTaskRequest(task_id=one.id, lease_token=one.lease_token, output="2"))
        assert err.value.code() == Code.FAILED_PRECONDITION
        seen = (await stub.GetTask(pb.GetTaskRequest(task_id=one.id))).task
        assert seen == done and seen.output == "1" and seen.lease_token == one.lease_token

        request = pb.CompleteTasksRequest(
            task_ids=[two.id], lease_tokens=[two.lease_token], outputs=['"a"'], reported_usages=[""]
        )
        landed = (await stub.CompleteTasks(request)).tasks
        again = (await stub.CompleteTasks(request)).tasks
        assert [t.id for t in landed] == [two.id] and list(again) == []
        assert (await stub.GetTask(pb.GetTaskRequest(task_id=two.id))).task == landed[0]

        fail = pb.FailTaskRequest(task_id=three.id, lease_token=three.lease_token, error="boom", increment_retry=True)
        failed = (await stub.FailTask(fail)).task
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.FailTask(fail)
        assert err.value.code() == Code.FAILED_PRECONDITION
        now = (await stub.GetTask(pb.GetTaskRequest(task_id=three.id))).task
        assert now.retry_count == failed.retry_count == 1

        # A lease that is not the caller's is refused, completed or not.
        call: Callable[..., Awaitable[Any]] = stub.CompleteTask
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await call(pb.CompleteTaskRequest(task_id=one.id, lease_token=str(uuid.uuid4())))
        assert err.value.code() == Code.FAILED_PRECONDITION


async def test_a_caller_leaving_mid_answer_is_not_logged_ok(
    pg_server: tuple[str, Cluster | None], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 27 row 8: a GetTask whose 40 MB answer the caller cancels while gRPC sends it (the
    handler has returned) is logged CANCELLED with `event=answer_not_delivered`, not `code=OK`,
    and without gRPC's ExecuteBatchError traceback; the next call is logged OK."""
    caplog.set_level(logging.DEBUG)
    real = task_pydb.get_task
    returned = asyncio.Event()
    big = 40 * 1024 * 1024

    async def padded(conn: Any, request: pb.GetTaskRequest) -> pb.GetTaskResponse:
        response = await real(conn, request)
        if request.task_id == target:
            response.task.input = '{"pad": "' + "x" * big + '"}'
            returned.set()
        return response

    monkeypatch.setattr(task_pydb, "get_task", padded)
    limits = {"max_send_message_bytes": 2 * big, "max_unsent_answer_bytes": 4 * big,
              "max_unsent_answer_bytes_per_connection": 2 * big}  # fmt: skip
    async with (
        private_service(pg_server[0], log_level="debug", **limits) as (_, server),
        grpc.aio.insecure_channel(server.address, options=[("grpc.max_receive_message_length", -1)]) as ch,
    ):
        stub = task_pb2_grpc.GenerationDataServiceStub(ch)
        tool = (await stub.RegisterTool(pb.RegisterToolRequest(name="leaves"))).tool
        task = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id))).task
        target = task.id
        call = stub.GetTask(pb.GetTaskRequest(task_id=task.id), timeout=30)
        await returned.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await settled()
        target = ""
        assert (await stub.GetTask(pb.GetTaskRequest(task_id=task.id), timeout=30)).task.id == task.id
        await settled()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("rpc=GetTask ")]
    assert len(lines) == 2, lines
    assert "code=CANCELLED" in lines[0] and "event=answer_not_delivered" in lines[0], lines
    assert "code=OK" in lines[1], lines
    assert "ExecuteBatchError" not in caplog.text
