"""ListStaleTasks and the reaper: the unclaimable max_retries = 0 trap, abandoned queued rows
(only after queued_max_age), dead zombies (only after the grace window); healthy rows never.
ListStaleTasks spans every tool, so these tests use a database of their own and compare the
exact set of listed rows."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
from conftest import RunningServer, private_service
from generation.task.v1 import task_pb2 as pb
from support.pg import Cluster
from support.queue_support import Stub, claim_next, claim_one, enqueue, execute, expire_leases, new_tool, row, rpc_error


@pytest.fixture(scope="module")
async def private(pg_server: tuple[str, Cluster | None]) -> AsyncIterator[tuple[str, RunningServer]]:
    async with private_service(pg_server[0], pool_min=1, pool_max=4) as found:
        yield found


@pytest.fixture(scope="module")
def stale_db(private: tuple[str, RunningServer]) -> str:
    return private[0]


@pytest.fixture(scope="module")
async def stale_stub(private: tuple[str, RunningServer]) -> AsyncIterator[Stub]:
    async with grpc.aio.insecure_channel(private[1].address) as ch:
        yield Stub(ch)


@pytest.fixture
async def clean(stale_db: str) -> str:
    """Each test starts from an empty queue."""
    await execute(stale_db, "DELETE FROM generation.tasks")
    return stale_db


async def listed(stub: Stub, **kw: int) -> set[str]:
    return {t.id for t in (await stub.ListStaleTasks(pb.ListStaleTasksRequest(**kw))).tasks}


async def age(url: str, task_id: str, seconds: float) -> None:
    await execute(
        url,
        # Queued since created and due since then (run_at): the queued age counts from both.
        "UPDATE generation.tasks SET created_at = now() - make_interval(secs => %s), run_at = now() - make_interval(secs => %s)"
        " WHERE id = %s",
        (seconds, seconds, task_id),
    )


async def exhausted_zombie(stub: Stub, url: str, lapsed_for: float) -> pb.Task:
    """A processing row on its last attempt (retry_count == max_retries) whose lease lapsed
    `lapsed_for` seconds ago: no claim will ever recover it. (On a tool of its own.)"""
    tool_id = (await new_tool(stub, "zombie")).id
    queued = await enqueue(stub, tool_id, max_retries=1)
    first = await claim_one(stub, tool_id)
    assert first.id == queued.id
    await expire_leases(url, [first.id])
    last = await claim_one(stub, tool_id)
    assert (last.id, last.retry_count) == (queued.id, 1)
    await expire_leases(url, [last.id], int(lapsed_for))
    assert await claim_next(stub, tool_id) is None
    return last


async def test_max_retries_zero_is_never_claimed_but_listed_at_once(stale_stub: Stub, clean: str) -> None:
    tool = await new_tool(stale_stub, "trap")
    trapped = await enqueue(stale_stub, tool.id, max_retries=0, priority=100)
    assert await claim_next(stale_stub, tool.id) is None
    assert list((await stale_stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=10))).tasks) == []
    assert (await row(clean, trapped.id))["status"] == "queued"
    assert await listed(stale_stub) == {trapped.id}, "an unclaimable row is stale however young"
    # A legacy `dispatched` row with no retries left is just as stuck.
    legacy = await enqueue(stale_stub, tool.id, max_retries=0)
    await execute(clean, "UPDATE generation.tasks SET status = 'dispatched' WHERE id = %s", (legacy.id,))
    assert await listed(stale_stub) == {trapped.id, legacy.id}
    # Claimable work queued behind it is unaffected.
    normal = await enqueue(stale_stub, tool.id)
    assert (await claim_one(stale_stub, tool.id)).id == normal.id


async def test_abandoned_rows_appear_only_after_queued_max_age(stale_stub: Stub, clean: str) -> None:
    tool = await new_tool(stale_stub, "abandoned")
    young = await enqueue(stale_stub, tool.id)
    await age(clean, young.id, 880)  # default max age 900 s
    old = await enqueue(stale_stub, tool.id)
    await age(clean, old.id, 920)
    old_dispatched = await enqueue(stale_stub, tool.id)
    await execute(clean, "UPDATE generation.tasks SET status = 'dispatched' WHERE id = %s", (old_dispatched.id,))
    await age(clean, old_dispatched.id, 920)
    fresh_dispatched = await enqueue(stale_stub, tool.id)
    await execute(clean, "UPDATE generation.tasks SET status = 'dispatched' WHERE id = %s", (fresh_dispatched.id,))
    assert await listed(stale_stub) == {old.id, old_dispatched.id}
    assert await listed(stale_stub, queued_max_age_seconds=0) == {old.id, old_dispatched.id}, "0 means 900"
    # A tighter cap: 60 s.
    sixty_minus = await enqueue(stale_stub, tool.id)
    await age(clean, sixty_minus.id, 45)
    sixty_plus = await enqueue(stale_stub, tool.id)
    await age(clean, sixty_plus.id, 75)
    assert await listed(stale_stub, queued_max_age_seconds=60) == {young.id, old.id, old_dispatched.id, sixty_plus.id}
    assert await listed(stale_stub, queued_max_age_seconds=1000) == set()


async def test_dead_zombies_appear_only_after_the_grace_window(stale_stub: Stub, clean: str) -> None:
    within = await exhausted_zombie(stale_stub, clean, lapsed_for=100)  # default grace 120 s
    beyond = await exhausted_zombie(stale_stub, clean, lapsed_for=140)
    assert await listed(stale_stub) == {beyond.id}
    assert await listed(stale_stub, processing_grace_seconds=0) == {beyond.id}, "0 means 120"
    assert await listed(stale_stub, processing_grace_seconds=90) == {within.id, beyond.id}
    assert await listed(stale_stub, processing_grace_seconds=130) == {beyond.id}
    assert await listed(stale_stub, processing_grace_seconds=200) == set()


async def claimed(stub: Stub) -> pb.Task:
    """A task freshly claimed on a tool of its own."""
    tool = await new_tool(stub, "claimed")
    queued = await enqueue(stub, tool.id)
    task = await claim_one(stub, tool.id)
    assert task.id == queued.id
    return task


async def test_healthy_rows_never_appear(stale_stub: Stub, clean: str) -> None:
    # In flight for a day, heartbeating: old created_at, live lease.
    in_flight = await claimed(stale_stub)
    await age(clean, in_flight.id, 86400)
    # The last attempt, still alive: retries exhausted but the lease is live.
    last_attempt = await exhausted_zombie(stale_stub, clean, lapsed_for=0)
    await stale_stub.HeartbeatTask(
        pb.HeartbeatTaskRequest(task_id=last_attempt.id, lease_token=last_attempt.lease_token)
    )
    await age(clean, last_attempt.id, 86400)
    # A lapsed lease with retries left: the next claim recovers it, the reaper must not.
    reclaimable = await claimed(stale_stub)
    await expire_leases(clean, [reclaimable.id], 86400)
    await age(clean, reclaimable.id, 86400)
    # Terminal rows, long ago.
    done = await claimed(stale_stub)
    await stale_stub.CompleteTask(pb.CompleteTaskRequest(task_id=done.id, lease_token=done.lease_token))
    gone = await claimed(stale_stub)
    await stale_stub.FailTask(pb.FailTaskRequest(task_id=gone.id, lease_token=gone.lease_token, error="x"))
    for task_id in (done.id, gone.id):
        await age(clean, task_id, 86400)
    # Fresh queued work.
    tool = await new_tool(stale_stub, "healthy")
    await enqueue(stale_stub, tool.id)
    await enqueue(stale_stub, tool.id, priority=9, max_retries=1)
    # Even the tightest windows list none of them.
    for kw in ({}, {"processing_grace_seconds": 1, "queued_max_age_seconds": 1}):
        assert await listed(stale_stub, **kw) == set(), kw
    # Negative windows are no way around it: they mean the default.
    assert await listed(stale_stub, processing_grace_seconds=-86400, queued_max_age_seconds=-86400) == set()
    assert (await row(clean, last_attempt.id))["retry_count"] == 1


async def test_limit_and_oldest_first(stale_stub: Stub, clean: str) -> None:
    tool = await new_tool(stale_stub, "limit")
    ids = [(await enqueue(stale_stub, tool.id, max_retries=0)).id for _ in range(5)]
    for i, task_id in enumerate(ids):
        await age(clean, task_id, 100 - i)  # ids[0] is the oldest
    got = [t.id for t in (await stale_stub.ListStaleTasks(pb.ListStaleTasksRequest(limit=3))).tasks]
    assert got == ids[:3]
    assert len((await stale_stub.ListStaleTasks(pb.ListStaleTasksRequest())).tasks) == 5


async def test_reaper_fails_what_is_listed_and_nothing_healthy(stale_stub: Stub, clean: str) -> None:
    tool = await new_tool(stale_stub, "reap")
    trapped = await enqueue(stale_stub, tool.id, max_retries=0)
    abandoned = await enqueue(stale_stub, tool.id)
    await age(clean, abandoned.id, 3600)
    zombie = await exhausted_zombie(stale_stub, clean, lapsed_for=600)
    live = await enqueue(stale_stub, tool.id, priority=5)
    held = await claim_one(stale_stub, tool.id)
    assert held.id == live.id
    stale = await listed(stale_stub)
    assert stale == {trapped.id, abandoned.id, zombie.id}
    for task_id in stale:
        reaped = (await stale_stub.FailTask(pb.FailTaskRequest(task_id=task_id, error="reaped"))).task
        assert reaped.status == pb.TASK_STATUS_FAILED and reaped.error == "reaped"
    assert await listed(stale_stub) == set(), "a reaped row is terminal and no longer stale"
    # The reaper cannot touch a live lease, nor re-queue (increment_retry needs a lease).
    before = await row(clean, held.id)
    for req in (
        pb.FailTaskRequest(task_id=held.id, error="reaped"),
        pb.FailTaskRequest(task_id=held.id, error="reaped", increment_retry=True),
    ):
        err = await rpc_error(stale_stub.FailTask, req)
        assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert await row(clean, held.id) == before
    # The dead zombie's last holder, should it wake up, is fenced.
    late = await rpc_error(
        stale_stub.CompleteTask, pb.CompleteTaskRequest(task_id=zombie.id, lease_token=zombie.lease_token, output="{}")
    )
    assert late.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert (await row(clean, zombie.id))["status"] == "failed"


async def test_reaper_loses_to_a_holder_who_came_back(stale_stub: Stub, clean: str) -> None:
    """Between ListStaleTasks and FailTask the zombie's holder heartbeats: the reap is refused."""
    zombie = await exhausted_zombie(stale_stub, clean, lapsed_for=600)
    assert await listed(stale_stub) == {zombie.id}
    await stale_stub.HeartbeatTask(pb.HeartbeatTaskRequest(task_id=zombie.id, lease_token=zombie.lease_token))
    err = await rpc_error(stale_stub.FailTask, pb.FailTaskRequest(task_id=zombie.id, error="reaped"))
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
    done = await stale_stub.CompleteTask(pb.CompleteTaskRequest(task_id=zombie.id, lease_token=zombie.lease_token))
    assert done.task.status == pb.TASK_STATUS_COMPLETED


async def test_reaper_loses_to_a_claim_of_an_abandoned_row(stale_stub: Stub, clean: str) -> None:
    """An abandoned (old) queued row is listed, then a worker finally claims it: the reap is refused."""
    tool = await new_tool(stale_stub, "late-claim")
    old = await enqueue(stale_stub, tool.id)
    await age(clean, old.id, 3600)
    assert await listed(stale_stub) == {old.id}
    t = await claim_one(stale_stub, tool.id)
    err = await rpc_error(stale_stub.FailTask, pb.FailTaskRequest(task_id=old.id, error="reaped"))
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
    done = await stale_stub.CompleteTask(pb.CompleteTaskRequest(task_id=t.id, lease_token=t.lease_token))
    assert done.task.status == pb.TASK_STATUS_COMPLETED
