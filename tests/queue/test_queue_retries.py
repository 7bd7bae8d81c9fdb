"""Retries: FailTask(increment_retry=true) re-queues until retry_count reaches max_retries, then
the task is `failed`; increment_retry=false fails it at once. Every failed or lapsed attempt
counts on the same retry_count."""

from __future__ import annotations

import grpc
import pytest
from generation.task.v1 import task_pb2 as pb
from support.queue_support import AT_ONCE, Stub, claim_next, claim_one, enqueue, expire_leases, new_tool, row, rpc_error


@pytest.mark.parametrize("max_retries", [1, 2, 3, 5])
async def test_fail_with_retry_requeues_until_max_retries(stub: Stub, database_url: str, max_retries: int) -> None:
    tool = await new_tool(stub, "retry")
    queued = await enqueue(stub, tool.id, max_retries=max_retries)
    claims = 0
    while True:
        task = await claim_next(stub, tool.id)
        if task is None:
            break
        claims += 1
        assert task.id == queued.id and task.retry_count == claims - 1
        failed = (
            await stub.FailTask(
                pb.FailTaskRequest(
                    task_id=task.id,
                    lease_token=task.lease_token,
                    error=f"try {claims}",
                    increment_retry=True,
                    retry_after=AT_ONCE,
                )
            )
        ).task
        assert failed.retry_count == claims and failed.error == f"try {claims}"
        assert not failed.HasField("lease_token") and not failed.HasField("claim_expires_at")
        if claims < max_retries:
            assert failed.status == pb.TASK_STATUS_QUEUED and not failed.HasField("completed_at")
        else:
            assert failed.status == pb.TASK_STATUS_FAILED and failed.HasField("completed_at")
        assert claims <= max_retries, "claimed more often than max_retries allows"
    assert claims == max_retries
    final = await row(database_url, queued.id)
    assert (final["status"], final["retry_count"], final["error"]) == ("failed", max_retries, f"try {max_retries}")
    # A failed task is terminal: listed by no claim, refused to every lease-less reaper call.
    err = await rpc_error(stub.FailTask, pb.FailTaskRequest(task_id=queued.id, error="again"))
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert await row(database_url, queued.id) == final


async def test_fail_without_retry_is_final_at_once(stub: Stub, database_url: str) -> None:
    tool = await new_tool(stub, "retry")
    queued = await enqueue(stub, tool.id, max_retries=5)
    task = await claim_one(stub, tool.id)
    await stub.FailTask(
        pb.FailTaskRequest(
            task_id=task.id, lease_token=task.lease_token, error="e1", increment_retry=True, retry_after=AT_ONCE
        )
    )
    task = await claim_one(stub, tool.id)
    assert task.retry_count == 1
    failed = (
        await stub.FailTask(
            pb.FailTaskRequest(task_id=task.id, lease_token=task.lease_token, error="fatal", increment_retry=False)
        )
    ).task
    assert failed.id == queued.id and failed.status == pb.TASK_STATUS_FAILED
    assert failed.retry_count == 1, "a final failure does not count a retry"
    assert failed.error == "fatal" and failed.HasField("completed_at")
    assert await claim_next(stub, tool.id) is None
    refused = await rpc_error(
        stub.CompleteTask, pb.CompleteTaskRequest(task_id=task.id, lease_token=task.lease_token, output="{}")
    )
    assert refused.code() == grpc.StatusCode.FAILED_PRECONDITION


async def test_failures_and_lapsed_leases_share_one_retry_budget(stub: Stub, database_url: str) -> None:
    tool = await new_tool(stub, "retry")
    queued = await enqueue(stub, tool.id, max_retries=3)
    t = await claim_one(stub, tool.id)  # attempt 1: fails
    await stub.FailTask(
        pb.FailTaskRequest(
            task_id=t.id, lease_token=t.lease_token, error="e", increment_retry=True, retry_after=AT_ONCE
        )
    )
    t = await claim_one(stub, tool.id)  # attempt 2: the worker dies, the lease lapses
    assert t.retry_count == 1
    await expire_leases(database_url, [t.id])
    t = await claim_one(stub, tool.id)  # attempt 3 (a reclaim): fails, budget spent
    assert t.retry_count == 2
    last = (
        await stub.FailTask(
            pb.FailTaskRequest(
                task_id=t.id, lease_token=t.lease_token, error="e3", increment_retry=True, retry_after=AT_ONCE
            )
        )
    ).task
    assert (last.id, last.status, last.retry_count) == (queued.id, pb.TASK_STATUS_FAILED, 3)
    assert await claim_next(stub, tool.id) is None


async def test_requeued_task_waits_its_turn(stub: Stub, database_url: str) -> None:
    """A re-queued task keeps its priority and created_at: it goes back to its place in line."""
    tool = await new_tool(stub, "retry")
    first = await enqueue(stub, tool.id, priority=1)
    later = await enqueue(stub, tool.id, priority=1)
    urgent = await enqueue(stub, tool.id, priority=2)
    t = await claim_one(stub, tool.id)
    assert t.id == urgent.id
    t = await claim_one(stub, tool.id)
    assert t.id == first.id
    await stub.FailTask(
        pb.FailTaskRequest(
            task_id=t.id, lease_token=t.lease_token, error="e", increment_retry=True, retry_after=AT_ONCE
        )
    )
    order = [(await claim_one(stub, tool.id)).id for _ in range(2)]
    assert order == [first.id, later.id], "the re-queued task keeps its created_at and goes first"
