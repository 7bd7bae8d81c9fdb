"""The queue's scheduling features from the worker's side (WorkerFleet on the generated data
plane): a delayed task claimed within one poll after its run_at (or at once on the wake a
promotion rings); backoff spacing following the tool's policy and RetryAfter; Snooze keeping the
retry count; a running task cancelled mid-flight stopped within the grace period, through the
WatchTaskCancels relay, the Redis cancel channel or the heartbeat, its result never landing; a run-time limit stopping the
work and the reaper failing the attempt."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import pytest
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from google.protobuf.timestamp_pb2 import Timestamp
from support.worker_support import RedisServer, redis_server, wait_until
from taskworker import (
    CancelWatcher,
    ListenWakeSubscriber,
    RedisCancelSubscriber,
    RetryAfter,
    Snooze,
    TaskContext,
    WakePublisher,
    WorkerFleet,
    cancel_task,
)

if TYPE_CHECKING:
    Stub = task_pb2_grpc.GenerationDataServiceAsyncStub
Process = Callable[[pb.Task, TaskContext], Any]

__all__ = ["redis_server"]  # the fixture, re-exported for pytest


async def get(stub: Stub, task_id: str) -> pb.Task:
    return (await stub.GetTask(pb.GetTaskRequest(task_id=task_id))).task


async def status_is(stub: Stub, task_id: str, status: int) -> bool:
    return (await get(stub, task_id)).status == status


@pytest.fixture
async def fleets(stub: Stub) -> AsyncIterator[Callable[..., WorkerFleet]]:
    running: list[tuple[WorkerFleet, asyncio.Task[None]]] = []

    def start(tool: pb.Tool, process: Process, **opts: Any) -> WorkerFleet:
        fleet = WorkerFleet(stub, **{"poll_interval": 0.2, **opts})
        fleet.add_tool(tool.id, process, concurrency=2)
        running.append((fleet, asyncio.create_task(fleet.run())))
        return fleet

    yield start
    for fleet, task in running:
        fleet.drain()
        await asyncio.wait_for(task, 30)


async def test_a_delayed_task_is_claimed_within_one_poll_after_its_run_at(
    stub: Stub, tool: pb.Tool, fleets: Callable[..., WorkerFleet]
) -> None:
    claimed: list[dt.datetime] = []

    async def process(task: pb.Task, ctx: TaskContext) -> Any:
        claimed.append(task.attempted_at.ToDatetime(dt.UTC))
        return None

    poll = 0.5
    fleet = fleets(tool, process, poll_interval=poll, poll_jitter=0.1)
    await fleet.started.wait()
    run_at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=2)
    when = Timestamp()
    when.FromDatetime(run_at)
    queued = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id, run_at=when))).task
    sweeps = fleet.stats.sweeps
    await wait_until(partial(status_is, stub, queued.id, pb.TASK_STATUS_COMPLETED), what="the delayed task done")
    assert len(claimed) == 1
    assert claimed[0] >= run_at, "claimed before its run_at"
    assert claimed[0] - run_at <= dt.timedelta(seconds=poll * 1.1 + 0.3), claimed[0] - run_at
    assert fleet.stats.sweeps - sweeps >= 3  # it did poll meanwhile, and found nothing claimable


async def test_a_promotion_wakes_a_parked_fleet_at_once(
    stub: Stub, tool: pb.Tool, fleets: Callable[..., WorkerFleet]
) -> None:
    claimed: list[dt.datetime] = []

    async def process(task: pb.Task, ctx: TaskContext) -> Any:
        claimed.append(dt.datetime.now(dt.UTC))

    fleet = fleets(tool, process, poll_interval=60)  # polling alone would take a minute
    listener = ListenWakeSubscriber(stub, fleet.wake, [tool.id])
    fleet.add_background(listener.run())
    await asyncio.wait_for(listener.subscribed.wait(), 10)
    run_at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
    when = Timestamp()
    when.FromDatetime(run_at)
    queued = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id, run_at=when))).task

    async def promoted() -> bool:  # the reconciler's tick, every 0.2 s
        await stub.PromoteDueTasks(pb.PromoteDueTasksRequest())
        return (await get(stub, queued.id)).status == pb.TASK_STATUS_COMPLETED

    await wait_until(promoted, timeout=20, what="the woken fleet")
    assert run_at <= claimed[0] < run_at + dt.timedelta(seconds=3)


async def test_backoff_spacing_follows_the_policy_and_retry_after(
    stub: Stub, tool: pb.Tool, fleets: Callable[..., WorkerFleet]
) -> None:
    await stub.SetToolRetryPolicy(
        pb.SetToolRetryPolicyRequest(tool_id=tool.id, retry_base_seconds=0.4, retry_cap_seconds=1.0)
    )
    started: list[float] = []
    ended: list[float] = []

    async def process(task: pb.Task, ctx: TaskContext) -> Any:
        started.append(time.monotonic())
        ended.append(time.monotonic())
        if task.retry_count == 3:
            raise RetryAfter(1.5)  # the tool knows better than the policy
        raise RuntimeError("downstream down")

    queued = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id, max_retries=5))).task
    fleets(tool, process, poll_interval=0.1)
    await wait_until(partial(status_is, stub, queued.id, pb.TASK_STATUS_FAILED), timeout=60, what="retries exhausted")
    assert len(started) == 5
    gaps = [started[i + 1] - ended[i] for i in range(4)]
    # min(cap, base * 2^retry_count): 0.4, 0.8, 1.0 (capped), then RetryAfter's 1.5. No attempt
    # comes sooner; each comes within a poll (0.1 s) and the jitter (25%) after.
    for gap, nominal in zip(gaps, (0.4, 0.8, 1.0, 1.5), strict=True):
        assert nominal - 0.02 <= gap <= nominal * 1.25 + 0.6, (gaps, nominal)
    final = await get(stub, queued.id)
    assert final.retry_count == 5 and final.error == "RuntimeError: downstream down"


async def test_a_snoozed_task_keeps_its_retry_count(
    stub: Stub, tool: pb.Tool, fleets: Callable[..., WorkerFleet]
) -> None:
    attempts: list[int] = []

    async def process(task: pb.Task, ctx: TaskContext) -> Any:
        attempts.append(task.retry_count)
        if len(attempts) < 4:
            raise Snooze(0.3)
        return "done"

    queued = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id, max_retries=1))).task
    fleet = fleets(tool, process)
    await wait_until(partial(status_is, stub, queued.id, pb.TASK_STATUS_COMPLETED), what="the snoozed task done")
    # Four runs of a task allowed one attempt: snoozes are not failures.
    assert attempts == [0, 0, 0, 0] and fleet.stats.snoozed == 3
    assert (await get(stub, queued.id)).retry_count == 0


@pytest.mark.parametrize("path", ["watch", "redis", "heartbeat"])
async def test_a_running_task_cancelled_mid_flight_stops_within_the_grace_and_its_result_is_refused(
    stub: Stub, tool: pb.Tool, fleets: Callable[..., WorkerFleet], path: str, request: pytest.FixtureRequest
) -> None:
    started = asyncio.Event()
    told: list[float] = []
    stopped: list[float] = []

    async def process(task: pb.Task, ctx: TaskContext) -> Any:
        started.set()
        try:
            await ctx.cancel_requested.wait()
            told.append(time.monotonic())
            await asyncio.sleep(3600)  # a tool that ignores the request: the grace ends it
        finally:
            stopped.append(time.monotonic())
        return "never reported"

    grace = 1.0
    if path == "watch":  # heartbeats a minute apart: the relay is what tells the worker
        fleet = fleets(tool, process, cancel_grace=grace, heartbeat_interval=60)
        watcher = CancelWatcher(stub, fleet.request_cancel)
        fleet.add_background(watcher.run())
        await asyncio.wait_for(watcher.subscribed.wait(), 10)
    elif path == "redis":  # the same, told over Redis by whoever cancels (cancel_task)
        redis: RedisServer = request.getfixturevalue("redis_server")
        env = f"cancel{time.monotonic_ns()}"
        fleet = fleets(tool, process, cancel_grace=grace, heartbeat_interval=60)
        subscriber = RedisCancelSubscriber(fleet.request_cancel, redis.url, environment=env)
        fleet.add_background(subscriber.run())
        await asyncio.wait_for(subscriber.subscribed.wait(), 10)
        publisher = WakePublisher(redis.url, environment=env)
    else:  # no relay: the next heartbeat (every 0.5 s) tells it
        fleet = fleets(tool, process, cancel_grace=grace, heartbeat_interval=0.5)
    queued = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id))).task
    await asyncio.wait_for(started.wait(), 20)
    held = await get(stub, queued.id)
    cancelled_at = time.monotonic()
    cancel = pb.CancelTaskRequest(task_id=queued.id, reason="user closed the tab")
    if path == "redis":
        await cancel_task(stub, cancel, publisher)
        await publisher.aclose()
    else:
        await stub.CancelTask(cancel)
    await wait_until(lambda: _true(bool(stopped)), timeout=20, what="the tool stopped")
    assert told and told[0] - cancelled_at < (2.0 if path != "heartbeat" else 1.5)
    if path == "redis":
        assert subscriber.received == 1
    assert grace - 0.05 <= stopped[0] - told[0] <= grace + 0.5
    await wait_until(lambda: _true(fleet.stats.cancelled == 1), what="the fleet's verdict")
    final = await get(stub, queued.id)
    assert final.status == pb.TASK_STATUS_CANCELLED and not final.HasField("output")
    assert fleet.stats.completed == 0 and fleet.running == 0
    # What the tool would have sent is refused.
    with pytest.raises(Exception) as late:
        await stub.CompleteTask(pb.CompleteTaskRequest(task_id=held.id, lease_token=held.lease_token, output='"x"'))
    assert "FAILED_PRECONDITION" in str(late.value)


async def _true(value: bool) -> bool:
    return value


async def test_past_its_run_time_limit_the_work_is_stopped_and_the_reaper_fails_it(
    stub: Stub, tool: pb.Tool, fleets: Callable[..., WorkerFleet]
) -> None:
    async def process(task: pb.Task, ctx: TaskContext) -> Any:
        await asyncio.sleep(3600)  # hung, but the fleet keeps heartbeating it

    queued = (
        await stub.QueueTask(
            pb.QueueTaskRequest(tool_id=tool.id, max_runtime_seconds=1, lease_seconds=1, max_retries=1)
        )
    ).task
    fleet = fleets(tool, process)
    await wait_until(lambda: _true(fleet.stats.runtime_exceeded == 1), timeout=20, what="the heartbeat refused")

    async def reaped() -> bool:
        await stub.ReapOverdueTasks(pb.ReapOverdueTasksRequest())
        return (await get(stub, queued.id)).status == pb.TASK_STATUS_FAILED

    await wait_until(reaped, what="the reaper")
    final = await get(stub, queued.id)
    assert final.error == "run-time limit exceeded: the attempt ran longer than 1 s" and fleet.stats.completed == 0
