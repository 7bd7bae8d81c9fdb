"""Cancellation and redrive through the generated RPCs: a queued task is cancelled at once and
never claimed; a running one is `cancelled` at once, its heartbeat answers cancel_requested, a
NOTIFY reaches WatchTaskCancels, and its late CompleteTask / FailTask is refused and changes
nothing. RetryTask / RetryTasks give failed and cancelled tasks a fresh attempt budget and keep
their failure history, in bounded batches."""

from __future__ import annotations

import asyncio
import datetime as dt

import grpc
from generation.task.v1 import task_pb2 as pb
from google.protobuf.timestamp_pb2 import Timestamp
from support.queue_support import Stub, claim_next, claim_one, enqueue, execute, new_tool, row, rpc_error


async def test_a_queued_task_is_cancelled_at_once_and_never_claimed(stub: Stub, database_url: str) -> None:
    tool = await new_tool(stub, "cancel-q")
    queued = await enqueue(stub, tool.id)
    cancelled = (await stub.CancelTask(pb.CancelTaskRequest(task_id=queued.id, reason="user left"))).task
    assert cancelled.status == pb.TASK_STATUS_CANCELLED and cancelled.error == "cancelled: user left"
    assert cancelled.HasField("completed_at") and not cancelled.HasField("lease_token")
    assert await claim_next(stub, tool.id) is None
    again = await rpc_error(stub.CancelTask, pb.CancelTaskRequest(task_id=queued.id))
    assert again.code() == grpc.StatusCode.FAILED_PRECONDITION  # already terminal
    unknown = await rpc_error(stub.CancelTask, pb.CancelTaskRequest(task_id="00000000-0000-0000-0000-000000000000"))
    assert unknown.code() == grpc.StatusCode.NOT_FOUND
    # Scheduled tasks are cancelled as queued ones are.
    later = await enqueue(stub, tool.id, run_at=Timestamp(seconds=int(dt.datetime.now(dt.UTC).timestamp()) + 3600))
    assert (await stub.CancelTask(pb.CancelTaskRequest(task_id=later.id))).task.error == "cancelled"


async def test_a_running_task_cancelled_is_told_and_its_late_result_is_refused(stub: Stub, database_url: str) -> None:
    tool = await new_tool(stub, "cancel-run")
    await enqueue(stub, tool.id)
    task = await claim_one(stub, tool.id)
    watch = stub.WatchTaskCancels(pb.WatchTaskCancelsRequest(task_ids=[task.id]))
    await asyncio.wait_for(watch.initial_metadata(), 10)
    try:
        cancelled = (await stub.CancelTask(pb.CancelTaskRequest(task_id=task.id, reason="stop"))).task
        assert cancelled.status == pb.TASK_STATUS_CANCELLED
        heard = await asyncio.wait_for(watch.read(), 10)
        assert isinstance(heard, pb.WatchTaskCancelsResponse) and heard.task_id == task.id
    finally:
        watch.cancel()
    beat = await stub.HeartbeatTask(pb.HeartbeatTaskRequest(task_id=task.id, lease_token=task.lease_token))
    assert beat.cancel_requested and not beat.runtime_exceeded and beat.task.status == pb.TASK_STATUS_CANCELLED
    before = await row(database_url, task.id)
    for call, req in (
        (stub.CompleteTask, pb.CompleteTaskRequest(task_id=task.id, lease_token=task.lease_token, output='"late"')),
        (
            stub.FailTask,
            pb.FailTaskRequest(task_id=task.id, lease_token=task.lease_token, error="late", increment_retry=True),
        ),
    ):
        err = await rpc_error(call, req)
        assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
    done = await stub.CompleteTasks(
        pb.CompleteTasksRequest(task_ids=[task.id], lease_tokens=[task.lease_token], outputs=['"late"'])
    )
    failed = await stub.FailTasks(
        pb.FailTasksRequest(task_ids=[task.id], lease_tokens=[task.lease_token], errors=["x"])
    )
    assert not done.tasks and not failed.tasks
    assert await row(database_url, task.id) == before  # nothing changed
    # The reaper leaves a cancelled row alone: it is terminal.
    await execute(
        database_url,
        "UPDATE generation.tasks SET claim_expires_at = now() - interval '1 hour' WHERE id = %s",
        (task.id,),
    )
    stale = await stub.ListStaleTasks(pb.ListStaleTasksRequest(processing_grace_seconds=1, limit=1000))
    assert task.id not in {t.id for t in stale.tasks}
    assert await claim_next(stub, tool.id) is None


async def test_cancel_tasks_in_bulk_skips_finished_ones(stub: Stub) -> None:
    tool = await new_tool(stub, "cancel-bulk")
    a, b, c = [await enqueue(stub, tool.id) for _ in range(3)]
    held = await claim_one(stub, tool.id)
    await stub.CompleteTask(pb.CompleteTaskRequest(task_id=held.id, lease_token=held.lease_token))
    resp = await stub.CancelTasks(pb.CancelTasksRequest(task_ids=[a.id, b.id, c.id], reason="bulk"))
    assert {t.id for t in resp.tasks} == {a.id, b.id, c.id} - {held.id}
    assert all(t.status == pb.TASK_STATUS_CANCELLED for t in resp.tasks)


async def test_retry_task_redrives_with_a_fresh_budget_and_keeps_the_history(stub: Stub, database_url: str) -> None:
    tool = await new_tool(stub, "redrive")
    queued = await enqueue(stub, tool.id, max_retries=1)
    task = await claim_one(stub, tool.id)
    await stub.FailTask(
        pb.FailTaskRequest(task_id=task.id, lease_token=task.lease_token, error="first", increment_retry=True)
    )
    assert (await row(database_url, queued.id))["status"] == "failed"
    redriven = (await stub.RetryTask(pb.RetryTaskRequest(task_id=queued.id))).task
    assert redriven.status == pb.TASK_STATUS_QUEUED and redriven.retry_count == 0 and not redriven.HasField("error")
    history = (await row(database_url, queued.id))["errors"]
    assert [(h["status"], h["error"], h["retry_count"]) for h in history] == [("failed", "first", 1)]
    task = await claim_one(stub, tool.id)
    assert task.id == queued.id
    await stub.CancelTask(pb.CancelTaskRequest(task_id=task.id, reason="second"))
    await stub.RetryTask(pb.RetryTaskRequest(task_id=queued.id))
    history = (await row(database_url, queued.id))["errors"]
    assert [(h["status"], h["error"]) for h in history] == [("failed", "first"), ("cancelled", "cancelled: second")]
    # Only failed and cancelled tasks are redriven.
    err = await rpc_error(stub.RetryTask, pb.RetryTaskRequest(task_id=queued.id))
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION


async def test_retry_tasks_filters_and_goes_in_bounded_batches(stub: Stub, database_url: str) -> None:
    tool = await new_tool(stub, "redrive-bulk")
    ids = [(await enqueue(stub, tool.id, max_retries=1)).id for _ in range(12)]
    for i, task_id in enumerate(ids):
        task = await claim_one(stub, tool.id)
        assert task.id == task_id  # FIFO
        await stub.FailTask(
            pb.FailTaskRequest(task_id=task.id, lease_token=task.lease_token, error="timeout" if i % 2 else "bad input")
        )
    await execute(
        database_url,
        "UPDATE generation.tasks SET completed_at = now() - interval '2 days' WHERE id = ANY(%s::uuid[])",
        (ids[:4],),
    )
    since = Timestamp()
    since.FromDatetime(dt.datetime.now(dt.UTC) - dt.timedelta(days=1))
    batches = []
    while True:
        n = (
            await stub.RetryTasks(
                pb.RetryTasksRequest(tool_id=tool.id, error_contains="timeout", ended_after=since, limit=2)
            )
        ).retried
        batches.append(n)
        if n < 2:
            break
    # 6 "timeout" failures, 2 of them ended two days ago: 4 redriven, 2 per call at most.
    assert batches == [2, 2, 0]
    rows = {r: (await row(database_url, r))["status"] for r in ids}
    redriven = {i for i, s in rows.items() if s == "queued"}
    assert redriven == {ids[i] for i in range(4, 12) if i % 2}
    # A limit of 0 or less is the default batch (1000): the two old ones come back too.
    assert (
        await stub.RetryTasks(pb.RetryTasksRequest(tool_id=tool.id, error_contains="timeout", limit=-1))
    ).retried == 2
