"""Delayed runs, backoff, snooze, pause and the run-time limit, through the generated RPCs on a
real PostgreSQL: a scheduled task is never claimed before its run_at and is claimed by the first
claim after it (no promotion needed); FailTask's backoff follows retry_after or the tool's policy;
SnoozeTask keeps the retry count; a paused tool's tasks are claimed by none of 8 concurrent
claimers; an attempt past its run-time limit is refused its heartbeat and failed by the reaper."""

from __future__ import annotations

import asyncio
import datetime as dt
import time

import grpc
import pytest
from generation.task.v1 import task_pb2 as pb
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp
from support.queue_support import (
    AT_ONCE,
    Stub,
    claim_next,
    claim_one,
    enqueue,
    execute,
    new_tool,
    row,
    rpc_error,
    wait_until,
)


def stamp(when: dt.datetime) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(when)
    return ts


def seconds(s: float) -> Duration:
    d = Duration()
    d.FromTimedelta(dt.timedelta(seconds=s))
    return d


async def fail(stub: Stub, task: pb.Task, retry_after: Duration | None = None) -> pb.Task:
    req = pb.FailTaskRequest(
        task_id=task.id, lease_token=task.lease_token, error="boom", increment_retry=True, retry_after=retry_after
    )
    return (await stub.FailTask(req)).task


@pytest.mark.serial
async def test_a_task_due_in_2s_is_not_claimed_early_and_is_claimed_by_the_first_claim_after(
    stub: Stub, database_url: str
) -> None:
    tool = await new_tool(stub, "delay")
    run_at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=2)
    queued = await enqueue(stub, tool.id, run_at=stamp(run_at))
    assert queued.status == pb.TASK_STATUS_SCHEDULED and queued.run_at.ToDatetime(dt.UTC) == run_at
    early = 0
    while dt.datetime.now(dt.UTC) < run_at - dt.timedelta(milliseconds=100):
        assert await claim_next(stub, queued.tool_id) is None, "claimed before its run_at"
        batch = await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=10))
        assert not batch.tasks, "claimed before its run_at"
        early += 1
        await asyncio.sleep(0.1)  # the poll interval of this test's claimer
    assert early >= 10
    await wait_until(lambda: _due(run_at), what="run_at to pass")
    # No PromoteDueTasks ran: the first claim after run_at takes the scheduled row itself.
    claimed = await claim_one(stub, tool.id)
    assert claimed.id == queued.id and claimed.retry_count == 0
    attempted = claimed.attempted_at.ToDatetime(dt.UTC)
    assert run_at <= attempted < run_at + dt.timedelta(seconds=1.5)
    assert (await row(database_url, queued.id))["status"] == "processing"


async def _due(when: dt.datetime) -> bool:
    return dt.datetime.now(dt.UTC) >= when


async def test_claim_tasks_ranks_due_scheduled_tasks_with_queued_ones(stub: Stub, database_url: str) -> None:
    tool = await new_tool(stub, "delay-rank")
    low = await enqueue(stub, tool.id, priority=0)
    due = await enqueue(stub, tool.id, priority=5, run_at=stamp(dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)))
    future = await enqueue(stub, tool.id, priority=9, run_at=stamp(dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)))
    await execute(
        database_url, "UPDATE generation.tasks SET run_at = now() - interval '1 second' WHERE id = %s", (due.id,)
    )
    first = await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=1))
    assert [t.id for t in first.tasks] == [due.id]  # priority 5 (due) before priority 0 (queued)
    rest = await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=10))
    assert [t.id for t in rest.tasks] == [low.id]  # the future one stays scheduled
    assert (await row(database_url, future.id))["status"] == "scheduled"


async def test_promote_due_tasks_flips_only_due_rows_and_rings_the_wake(stub: Stub, database_url: str) -> None:
    tool = await new_tool(stub, "promote")
    soon = await enqueue(stub, tool.id, run_at=stamp(dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)))
    later = await enqueue(stub, tool.id, run_at=stamp(dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)))
    await execute(database_url, "UPDATE generation.tasks SET run_at = now() WHERE id = %s", (soon.id,))
    call = stub.WatchTaskWakes(pb.WatchTaskWakesRequest(tool_ids=[tool.id]))
    await asyncio.wait_for(call.initial_metadata(), 10)
    try:
        promoted = await stub.PromoteDueTasks(pb.PromoteDueTasksRequest(limit=-1))  # 0 or less: 1000
        assert promoted.promoted >= 1
        wake = await asyncio.wait_for(call.read(), 10)
        assert isinstance(wake, pb.WatchTaskWakesResponse) and wake.tool_id == tool.id
    finally:
        call.cancel()
    assert (await row(database_url, soon.id))["status"] == "queued"
    assert (await row(database_url, later.id))["status"] == "scheduled"


async def test_queue_tasks_takes_a_run_at_per_entry(stub: Stub, database_url: str) -> None:
    tool = await new_tool(stub, "delay-bulk")
    future = time.time() + 3600
    resp = await stub.QueueTasks(
        pb.QueueTasksRequest(
            tool_ids=[tool.id, tool.id], billing_idempotency_keys=["now", "later"], run_at_unix=[0, future]
        )
    )
    by_key = {t.billing_idempotency_key: t for t in resp.tasks}
    assert by_key["now"].status == pb.TASK_STATUS_QUEUED
    assert by_key["later"].status == pb.TASK_STATUS_SCHEDULED
    assert abs(by_key["later"].run_at.ToDatetime(dt.UTC).timestamp() - future) < 0.001
    assert [t.id for t in (await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=5))).tasks] == [
        by_key["now"].id
    ]


async def test_fail_task_backoff_follows_retry_after_then_the_tool_policy(stub: Stub, database_url: str) -> None:
    tool = await new_tool(stub, "backoff")
    policy = await stub.SetToolRetryPolicy(
        pb.SetToolRetryPolicyRequest(tool_id=tool.id, retry_base_seconds=10, retry_cap_seconds=50)
    )
    assert (policy.tool.retry_base_seconds, policy.tool.retry_cap_seconds) == (10, 50)
    queued = await enqueue(stub, tool.id, max_retries=6)
    # retry_after wins over the policy; zero is "at once".
    failed = await fail(stub, await claim_one(stub, tool.id), retry_after=seconds(30))
    gap = (
        failed.run_at.ToDatetime(dt.UTC) - failed.completed_at.ToDatetime(dt.UTC)
        if failed.HasField("completed_at")
        else None
    )
    assert failed.status == pb.TASK_STATUS_SCHEDULED and gap is None
    r = await row(database_url, queued.id)
    assert dt.timedelta(seconds=29.9) < r["run_at"] - r["attempted_at"] < dt.timedelta(seconds=31)
    assert await claim_next(stub, tool.id) is None
    await execute(database_url, "UPDATE generation.tasks SET run_at = now() WHERE id = %s", (queued.id,))
    failed = await fail(stub, await claim_one(stub, tool.id), retry_after=AT_ONCE)
    assert failed.status == pb.TASK_STATUS_QUEUED
    # Unset: min(cap, base * 2^retry_count) plus up to 25% jitter, never past the cap.
    for retry_count, nominal in ((2, 40.0), (3, 50.0), (4, 50.0)):
        task = await claim_one(stub, tool.id)
        assert task.retry_count == retry_count
        failed = await fail(stub, task)
        assert failed.status == pb.TASK_STATUS_SCHEDULED
        r = await row(database_url, queued.id)
        delay = (r["run_at"] - r["attempted_at"]).total_seconds()
        assert nominal - 0.5 <= delay <= min(nominal * 1.25, 50.0) + 0.5, (retry_count, delay)
        await execute(database_url, "UPDATE generation.tasks SET run_at = now() WHERE id = %s", (queued.id,))


async def test_fail_tasks_takes_a_retry_after_per_entry(stub: Stub, database_url: str) -> None:
    tool = await new_tool(stub, "backoff-bulk")
    for _ in range(2):
        await enqueue(stub, tool.id)
    a, b = (await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=2))).tasks
    resp = await stub.FailTasks(
        pb.FailTasksRequest(
            task_ids=[a.id, b.id],
            lease_tokens=[a.lease_token, b.lease_token],
            errors=["x", "y"],
            retry_after_seconds=[0, -1],
        )
    )
    status = {t.id: t.status for t in resp.tasks}
    assert status == {a.id: pb.TASK_STATUS_QUEUED, b.id: pb.TASK_STATUS_SCHEDULED}
    r = await row(database_url, b.id)
    assert (
        dt.timedelta(seconds=1.9) < r["run_at"] - r["attempted_at"] < dt.timedelta(seconds=3)
    )  # the default policy: 2 s


async def test_bad_retry_policy_is_refused(stub: Stub) -> None:
    tool = await new_tool(stub, "backoff-bad")
    for base, cap in ((0, 10), (10, 5), (1, 10**7)):
        err = await rpc_error(
            stub.SetToolRetryPolicy,
            pb.SetToolRetryPolicyRequest(tool_id=tool.id, retry_base_seconds=base, retry_cap_seconds=cap),
        )
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_a_snoozed_task_keeps_its_retry_count_and_comes_back_after_the_delay(
    stub: Stub, database_url: str
) -> None:
    tool = await new_tool(stub, "snooze")
    queued = await enqueue(stub, tool.id, max_retries=2)
    task = await claim_one(stub, tool.id)
    await fail(stub, task, retry_after=AT_ONCE)
    task = await claim_one(stub, tool.id)
    assert task.retry_count == 1
    for _ in range(5):  # more snoozes than max_retries: none burns a retry
        snoozed = (
            await stub.SnoozeTask(
                pb.SnoozeTaskRequest(task_id=task.id, lease_token=task.lease_token, delay=seconds(60))
            )
        ).task
        assert snoozed.status == pb.TASK_STATUS_SCHEDULED and snoozed.retry_count == 1
        assert not snoozed.HasField("lease_token")
        assert await claim_next(stub, tool.id) is None  # not before the delay
        late = await rpc_error(stub.CompleteTask, pb.CompleteTaskRequest(task_id=task.id, lease_token=task.lease_token))
        assert late.code() == grpc.StatusCode.FAILED_PRECONDITION  # the lease was released
        await execute(database_url, "UPDATE generation.tasks SET run_at = now() WHERE id = %s", (queued.id,))
        task = await claim_one(stub, tool.id)
        assert task.id == queued.id and task.retry_count == 1
    await stub.CompleteTask(pb.CompleteTaskRequest(task_id=task.id, lease_token=task.lease_token, output="1"))
    assert (await row(database_url, queued.id))["retry_count"] == 1


async def test_pause_holds_under_8_concurrent_claimers_and_in_flight_tasks_finish(
    stub: Stub, database_url: str
) -> None:
    tool = await new_tool(stub, "pause")
    for _ in range(400):
        await enqueue(stub, tool.id)
    in_flight = await claim_one(stub, tool.id)
    paused_at: list[float] = []  # monotonic time PauseTool returned
    after_pause: list[int] = []  # tasks returned by claims started after that
    calls_after_pause = 0
    stop = asyncio.Event()

    async def claimer() -> None:
        nonlocal calls_after_pause
        while not stop.is_set():
            started = time.monotonic()
            got = (await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=2))).tasks
            if paused_at and started > paused_at[0]:
                calls_after_pause += 1
                after_pause.append(len(got))
            await asyncio.sleep(0)

    claimers = [asyncio.create_task(claimer()) for _ in range(8)]
    await wait_until(lambda: _claimed_some(database_url, tool.id), what="claims before the pause")
    paused = await stub.PauseTool(pb.PauseToolRequest(tool_id=tool.id))
    paused_at.append(time.monotonic())
    assert paused.tool.paused
    await wait_until(lambda: _at_least(lambda: calls_after_pause, 200), what="claims while paused")
    # The task held before the pause finishes normally.
    done = await stub.CompleteTask(pb.CompleteTaskRequest(task_id=in_flight.id, lease_token=in_flight.lease_token))
    assert done.task.status == pb.TASK_STATUS_COMPLETED
    assert sum(after_pause) == 0, "a claim started after PauseTool returned got a task"
    queued_left = await _count(database_url, tool.id, "queued")
    assert queued_left > 0
    await stub.ResumeTool(pb.ResumeToolRequest(tool_id=tool.id))
    await wait_until(lambda: _none_queued(database_url, tool.id), what="claims after the resume")
    stop.set()
    await asyncio.gather(*claimers)


async def _count(url: str, tool_id: str, status: str) -> int:
    from support.queue_support import fetch

    rows = await fetch(
        url, "SELECT count(*) AS n FROM generation.tasks WHERE tool_id = %s AND status = %s", (tool_id, status)
    )
    return int(rows[0]["n"])


async def _claimed_some(url: str, tool_id: str) -> bool:
    return await _count(url, tool_id, "processing") >= 20


async def _none_queued(url: str, tool_id: str) -> bool:
    return await _count(url, tool_id, "queued") == 0


async def _at_least(value: object, n: int) -> bool:
    assert callable(value)
    return bool(value() >= n)


async def test_past_its_run_time_limit_the_heartbeat_is_refused_and_the_reaper_fails_it(
    stub: Stub, database_url: str
) -> None:
    tool = await new_tool(stub, "runtime")
    limited = await stub.SetToolMaxRuntime(pb.SetToolMaxRuntimeRequest(tool_id=tool.id, max_runtime_seconds=600))
    assert limited.tool.max_runtime_seconds == 600
    own = await enqueue(stub, tool.id, max_runtime_seconds=30, max_retries=2)
    task = await claim_one(stub, tool.id)
    assert task.id == own.id and task.max_runtime_seconds == 30  # the task's own limit wins
    beat = await stub.HeartbeatTask(pb.HeartbeatTaskRequest(task_id=task.id, lease_token=task.lease_token))
    assert not beat.runtime_exceeded and not beat.cancel_requested
    assert (await stub.ReapOverdueTasks(pb.ReapOverdueTasksRequest())).reaped == 0 or (
        await row(database_url, task.id)
    )["status"] == "processing"
    # 31 s into the attempt (moved in time, not waited for).
    await execute(
        database_url,
        "UPDATE generation.tasks SET attempted_at = now() - interval '31 seconds' WHERE id = %s",
        (task.id,),
    )
    before = (await row(database_url, task.id))["claim_expires_at"]
    beat = await stub.HeartbeatTask(pb.HeartbeatTaskRequest(task_id=task.id, lease_token=task.lease_token))
    assert beat.runtime_exceeded and not beat.cancel_requested
    assert (await row(database_url, task.id))["claim_expires_at"] == before  # not renewed
    await wait_until(lambda: _reaped(stub, database_url, task.id), what="the reaper")
    r = await row(database_url, task.id)
    assert r["status"] == "queued" and r["retry_count"] == 1 and r["lease_token"] is None
    assert r["error"] == "run-time limit exceeded: the attempt ran longer than 30 s"
    late = await rpc_error(stub.CompleteTask, pb.CompleteTaskRequest(task_id=task.id, lease_token=task.lease_token))
    assert late.code() == grpc.StatusCode.FAILED_PRECONDITION
    # The last attempt past its limit: failed for good.
    again = await claim_one(stub, tool.id)
    await execute(
        database_url, "UPDATE generation.tasks SET attempted_at = now() - interval '1 hour' WHERE id = %s", (again.id,)
    )
    await wait_until(lambda: _reaped(stub, database_url, again.id, "failed"), what="the reaper")


async def _reaped(stub: Stub, url: str, task_id: str, status: str = "queued") -> bool:
    await stub.ReapOverdueTasks(pb.ReapOverdueTasksRequest())
    return bool((await row(url, task_id))["status"] == status)
