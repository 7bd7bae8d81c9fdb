"""Every RPC of the generated GenerationDataService, over gRPC, against a real PostgreSQL."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import grpc
import psycopg
import pytest
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from google.protobuf.duration_pb2 import Duration

# Re-queued claimable at once (not after the tool's backoff): these tests re-claim right away.
AT_ONCE = Duration()

if TYPE_CHECKING:
    Stub = task_pb2_grpc.GenerationDataServiceAsyncStub
else:
    Stub = task_pb2_grpc.GenerationDataServiceStub


async def queue(stub: Stub, tool: pb.Tool, **kw: object) -> pb.Task:
    return (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id, **kw))).task  # type: ignore[arg-type]


async def claim(stub: Stub, tool: pb.Tool) -> pb.Task:
    resp = await stub.ClaimNextTask(pb.ClaimNextTaskRequest(tool_id=tool.id))
    assert resp.HasField("task")
    return resp.task


async def test_register_tool_is_idempotent(stub: Stub) -> None:
    a = (await stub.RegisterTool(pb.RegisterToolRequest(name="idempotent-tool"))).tool
    b = (await stub.RegisterTool(pb.RegisterToolRequest(name="idempotent-tool"))).tool
    assert a.id == b.id and a.name == "idempotent-tool"
    assert a.HasField("created_at")


async def test_queue_task_defaults_and_fields(stub: Stub, tool: pb.Tool) -> None:
    task = await queue(stub, tool)
    assert task.status == pb.TASK_STATUS_QUEUED
    assert (task.priority, task.retry_count, task.max_retries) == (0, 0, 3)
    assert json.loads(task.input) == {}
    assert not task.HasField("output") and not task.HasField("lease_token")
    assert not task.HasField("started_at") and task.HasField("created_at")
    full = await queue(
        stub,
        tool,
        input='{"prompt": "hi"}',
        priority=7,
        max_retries=5,
        reserved_token_amount=1200,
        billing_idempotency_key="bill-fields",
        w3c_traceparent="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    )
    assert json.loads(full.input) == {"prompt": "hi"}
    assert (full.priority, full.max_retries, full.reserved_token_amount) == (7, 5, 1200)
    assert full.billing_idempotency_key == "bill-fields"
    assert full.w3c_traceparent.startswith("00-4bf92f35")


async def test_queue_task_same_idempotency_key_returns_existing(stub: Stub, tool: pb.Tool) -> None:
    first = await queue(stub, tool, billing_idempotency_key="bill-dup", priority=1)
    again = await queue(stub, tool, billing_idempotency_key="bill-dup", priority=9)
    assert again.id == first.id and again.priority == 1


async def test_claim_heartbeat_complete(stub: Stub, tool: pb.Tool) -> None:
    queued = await queue(stub, tool, input='{"n": 1}')
    task = await claim(stub, tool)
    assert task.id == queued.id and task.status == pb.TASK_STATUS_PROCESSING
    assert task.lease_token and task.HasField("started_at") and task.HasField("claim_expires_at")
    lease_seconds = task.claim_expires_at.seconds - task.started_at.seconds
    assert 115 <= lease_seconds <= 121
    beat = (await stub.HeartbeatTask(pb.HeartbeatTaskRequest(task_id=task.id, lease_token=task.lease_token))).task
    assert beat.claim_expires_at.ToDatetime() >= task.claim_expires_at.ToDatetime()
    done = (
        await stub.CompleteTask(
            pb.CompleteTaskRequest(
                task_id=task.id, lease_token=task.lease_token, output='{"ok": true}', reported_usage='{"tokens": 5}'
            )
        )
    ).task
    assert done.status == pb.TASK_STATUS_COMPLETED and done.HasField("completed_at")
    assert json.loads(done.output) == {"ok": True} and json.loads(done.reported_usage) == {"tokens": 5}
    got = (await stub.GetTask(pb.GetTaskRequest(task_id=task.id))).task
    assert got == done


async def test_claim_next_task_empty_leaves_task_unset(stub: Stub, tool: pb.Tool) -> None:
    resp = await stub.ClaimNextTask(pb.ClaimNextTaskRequest(tool_id=tool.id))
    assert not resp.HasField("task")


async def test_claim_tasks_batch_in_priority_order(stub: Stub, tool: pb.Tool) -> None:
    for p in (1, 5, 3):
        await queue(stub, tool, priority=p)
    resp = await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=2))
    assert sorted(t.priority for t in resp.tasks) == [3, 5]
    assert all(t.status == pb.TASK_STATUS_PROCESSING and t.lease_token for t in resp.tasks)
    rest = await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=10))
    assert [t.priority for t in rest.tasks] == [1]


async def test_complete_tasks_batch_skips_lost_leases(stub: Stub, tool: pb.Tool) -> None:
    for _ in range(3):
        await queue(stub, tool)
    claimed = (await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=3))).tasks
    tokens = [t.lease_token for t in claimed]
    tokens[0] = "00000000-0000-0000-0000-000000000000"  # a lease this worker does not hold
    resp = await stub.CompleteTasks(
        pb.CompleteTasksRequest(
            task_ids=[t.id for t in claimed], lease_tokens=tokens, outputs=['{"i": 1}'] * 3, reported_usages=["{}"] * 3
        )
    )
    assert sorted(t.id for t in resp.tasks) == sorted(t.id for t in claimed[1:])
    assert all(t.status == pb.TASK_STATUS_COMPLETED for t in resp.tasks)
    first = (await stub.GetTask(pb.GetTaskRequest(task_id=claimed[0].id))).task
    assert first.status == pb.TASK_STATUS_PROCESSING


async def test_fail_task_requeues_then_fails(stub: Stub, tool: pb.Tool) -> None:
    await queue(stub, tool, max_retries=2)
    task = await claim(stub, tool)
    failed = (
        await stub.FailTask(
            pb.FailTaskRequest(
                task_id=task.id, lease_token=task.lease_token, error="boom", increment_retry=True, retry_after=AT_ONCE
            )
        )
    ).task
    assert failed.status == pb.TASK_STATUS_QUEUED and failed.retry_count == 1 and failed.error == "boom"
    assert not failed.HasField("lease_token")
    task = await claim(stub, tool)
    failed = (
        await stub.FailTask(
            pb.FailTaskRequest(
                task_id=task.id, lease_token=task.lease_token, error="again", increment_retry=True, retry_after=AT_ONCE
            )
        )
    ).task
    assert failed.status == pb.TASK_STATUS_FAILED and failed.retry_count == 2 and failed.HasField("completed_at")


async def test_stale_rows_listed_and_reaped(stub: Stub, tool: pb.Tool) -> None:
    trapped = await queue(stub, tool, max_retries=0)
    healthy = await queue(stub, tool)
    stale = (await stub.ListStaleTasks(pb.ListStaleTasksRequest())).tasks
    ids = {t.id for t in stale}
    assert trapped.id in ids and healthy.id not in ids
    reaped = (await stub.FailTask(pb.FailTaskRequest(task_id=trapped.id, error="reaped"))).task
    assert reaped.status == pb.TASK_STATUS_FAILED
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.FailTask(pb.FailTaskRequest(task_id=trapped.id, error="reaped twice"))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION


async def test_fencing_after_reclaim(stub: Stub, tool: pb.Tool, database_url: str) -> None:
    await queue(stub, tool)
    old = await claim(stub, tool)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            "UPDATE generation.tasks SET claim_expires_at = now() - interval '1 second' WHERE id = %s", (old.id,)
        )
    new = await claim(stub, tool)
    assert new.id == old.id and new.lease_token != old.lease_token and new.retry_count == old.retry_count + 1
    for call, req in (
        (stub.HeartbeatTask, pb.HeartbeatTaskRequest(task_id=old.id, lease_token=old.lease_token)),
        (stub.CompleteTask, pb.CompleteTaskRequest(task_id=old.id, lease_token=old.lease_token, output="{}")),
        (
            stub.FailTask,
            pb.FailTaskRequest(
                task_id=old.id, lease_token=old.lease_token, error="late", increment_retry=True, retry_after=AT_ONCE
            ),
        ),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await call(req)  # type: ignore[arg-type]  # each call gets its own request type
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    after = (await stub.GetTask(pb.GetTaskRequest(task_id=old.id))).task
    assert after.lease_token == new.lease_token and after.status == pb.TASK_STATUS_PROCESSING
    done = await stub.CompleteTask(pb.CompleteTaskRequest(task_id=new.id, lease_token=new.lease_token))
    assert done.task.status == pb.TASK_STATUS_COMPLETED


@pytest.mark.parametrize(
    ("rpc", "request_", "code"),
    [
        ("GetTask", pb.GetTaskRequest(task_id="not-a-uuid"), grpc.StatusCode.INVALID_ARGUMENT),
        ("GetTask", pb.GetTaskRequest(task_id="7d3c1f0e-0000-4000-8000-000000000000"), grpc.StatusCode.NOT_FOUND),
        ("ClaimNextTask", pb.ClaimNextTaskRequest(tool_id=""), grpc.StatusCode.INVALID_ARGUMENT),
        ("QueueTask", pb.QueueTaskRequest(tool_id="7d3c1f0e-0000-4000-8000-000000000000"), grpc.StatusCode.NOT_FOUND),
        (
            "HeartbeatTask",
            pb.HeartbeatTaskRequest(task_id="7d3c1f0e-0000-4000-8000-000000000000", lease_token="x"),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
    ],
)
async def test_bad_input_status(stub: Stub, rpc: str, request_: object, code: grpc.StatusCode) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await getattr(stub, rpc)(request_)
    assert err.value.code() == code
    details = err.value.details() or ""
    assert "SELECT" not in details and "UPDATE" not in details and "Traceback" not in details
