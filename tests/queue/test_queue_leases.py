"""Leases: a claim stamps a fresh two-minute lease, a heartbeat extends it, a lapsed lease is
reclaimed by the next claim with retry_count + 1, a fresh claim never burns a retry. Time is
moved by writing claim_expires_at through SQL, never by waiting."""

from __future__ import annotations

import datetime as dt

from generation.task.v1 import task_pb2 as pb
from support.queue_support import (
    AT_ONCE,
    Stub,
    claim_next,
    claim_one,
    enqueue,
    execute,
    expire_leases,
    fetch,
    new_tool,
    row,
)

LEASE = dt.timedelta(minutes=2)


async def db_now(url: str) -> dt.datetime:
    return (await fetch(url, "SELECT now() AS now"))[0]["now"]  # type: ignore[no-any-return]


async def set_lease(url: str, task_id: str, seconds_from_now: float) -> None:
    await execute(
        url,
        "UPDATE generation.tasks SET claim_expires_at = now() + make_interval(secs => %s) WHERE id = %s",
        (seconds_from_now, task_id),
    )


async def test_heartbeat_extends_the_lease_and_keeps_the_task(stub: Stub, database_url: str) -> None:
    tool = await new_tool(stub, "lease")
    await enqueue(stub, tool.id)
    task = await claim_one(stub, tool.id)
    for _ in range(3):  # three lease periods, each almost used up before the beat
        await set_lease(database_url, task.id, 15)
        assert await claim_next(stub, tool.id) is None, "a live lease (15 s left) was reclaimed"
        before = await db_now(database_url)
        beat = (await stub.HeartbeatTask(pb.HeartbeatTaskRequest(task_id=task.id, lease_token=task.lease_token))).task
        after = await db_now(database_url)
        expires = beat.claim_expires_at.ToDatetime(tzinfo=dt.UTC)
        assert before + LEASE - dt.timedelta(seconds=1) <= expires <= after + LEASE + dt.timedelta(seconds=1)
        assert (beat.status, beat.retry_count, beat.lease_token) == (pb.TASK_STATUS_PROCESSING, 0, task.lease_token)
        assert beat.started_at == task.started_at
    r = await row(database_url, task.id)
    assert r["claim_expires_at"] > await db_now(database_url) + dt.timedelta(seconds=100)


async def test_holder_may_renew_a_lapsed_lease_nobody_reclaimed(stub: Stub, database_url: str) -> None:
    tool = await new_tool(stub, "lease")
    await enqueue(stub, tool.id)
    task = await claim_one(stub, tool.id)
    await expire_leases(database_url, [task.id], 30)
    beat = (await stub.HeartbeatTask(pb.HeartbeatTaskRequest(task_id=task.id, lease_token=task.lease_token))).task
    assert beat.lease_token == task.lease_token and beat.retry_count == 0
    assert await claim_next(stub, tool.id) is None, "the renewed lease must protect the task again"


async def test_lapsed_lease_is_reclaimed_with_one_more_retry(stub: Stub, database_url: str) -> None:
    tool = await new_tool(stub, "lease")
    queued = await enqueue(stub, tool.id, max_retries=3)
    first = await claim_one(stub, tool.id)
    assert first.id == queued.id and first.retry_count == 0, "a fresh claim must not burn a retry"
    tokens = {first.lease_token}
    for attempt in range(1, 4):
        await expire_leases(database_url, [first.id])
        now = await db_now(database_url)
        again = await claim_one(stub, tool.id)
        assert again.id == first.id and again.retry_count == attempt
        assert again.lease_token not in tokens, "every claim must mint a new lease token"
        tokens.add(again.lease_token)
        assert again.started_at == first.started_at, "a reclaim keeps the first start time"
        assert again.claim_expires_at.ToDatetime(tzinfo=dt.UTC) >= now + LEASE - dt.timedelta(seconds=1)
    # retry_count == max_retries: the lapsed zombie is no longer claimable (the reaper's job now).
    await expire_leases(database_url, [first.id])
    assert await claim_next(stub, tool.id) is None
    assert (await row(database_url, first.id))["retry_count"] == 3


async def test_fresh_claims_never_burn_a_retry(stub: Stub, database_url: str) -> None:
    tool = await new_tool(stub, "lease")
    fresh = [(await enqueue(stub, tool.id)).id for _ in range(3)]
    # A re-queued task (FailTask with increment_retry) is claimed fresh again: only the fail counted.
    requeued = await enqueue(stub, tool.id, priority=-1)
    batch = (await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=10))).tasks
    assert {t.id for t in batch} == {*fresh, requeued.id} and all(t.retry_count == 0 for t in batch)
    mine = next(t for t in batch if t.id == requeued.id)
    await stub.FailTask(
        pb.FailTaskRequest(
            task_id=mine.id, lease_token=mine.lease_token, error="e", increment_retry=True, retry_after=AT_ONCE
        )
    )
    again = await claim_one(stub, tool.id)
    assert again.id == requeued.id and again.retry_count == 1


async def test_batch_claim_reclaims_zombies_with_a_retry_and_fresh_rows_without(stub: Stub, database_url: str) -> None:
    tool = await new_tool(stub, "lease")
    zombies = [(await enqueue(stub, tool.id)).id for _ in range(3)]
    held = (await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=3))).tasks
    assert {t.id for t in held} == set(zombies)
    fresh = [(await enqueue(stub, tool.id, priority=10)).id for _ in range(3)]
    await expire_leases(database_url, zombies[:2])
    batch = {t.id: t for t in (await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=10))).tasks}
    assert set(batch) == {*zombies[:2], *fresh}, "the live lease (zombies[2]) must not be taken"
    assert all(batch[z].retry_count == 1 for z in zombies[:2])
    assert all(batch[f].retry_count == 0 for f in fresh)
    old_tokens = {t.id: t.lease_token for t in held}
    assert all(batch[z].lease_token != old_tokens[z] for z in zombies[:2])
