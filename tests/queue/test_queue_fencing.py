"""Fencing: once a task was reclaimed (or re-queued, or finished), the lease_token a worker
holds is dead. Heartbeat/Complete/Fail with it get FAILED_PRECONDITION and change nothing;
the current holder is unaffected. Also raced: old holders completing while others reclaim."""

from __future__ import annotations

import asyncio

import grpc
from conftest import RunningServer
from generation.task.v1 import task_pb2 as pb
from support.queue_support import AT_ONCE, Row, Stub, claim_one, enqueue, expire_leases, fetch, new_tool, row, rpc_error


def stale_calls(stub: Stub, task_id: str, token: str) -> list[tuple[str, object, object]]:
    return [
        ("HeartbeatTask", stub.HeartbeatTask, pb.HeartbeatTaskRequest(task_id=task_id, lease_token=token)),
        (
            "CompleteTask",
            stub.CompleteTask,
            pb.CompleteTaskRequest(task_id=task_id, lease_token=token, output='{"late": 1}', reported_usage='{"t": 1}'),
        ),
        (
            "FailTask(retry)",
            stub.FailTask,
            pb.FailTaskRequest(
                task_id=task_id, lease_token=token, error="late", increment_retry=True, retry_after=AT_ONCE
            ),
        ),
        (
            "FailTask(final)",
            stub.FailTask,
            pb.FailTaskRequest(task_id=task_id, lease_token=token, error="late", increment_retry=False),
        ),
    ]


async def assert_fenced(stub: Stub, url: str, task_id: str, token: str) -> Row:
    """Every call with `token` is refused and the row stays exactly as it was."""
    before = await row(url, task_id)
    for name, call, request in stale_calls(stub, task_id, token):
        err = await rpc_error(call, request)
        assert err.code() == grpc.StatusCode.FAILED_PRECONDITION, f"{name}: {err.code()} {err.details()}"
        assert await row(url, task_id) == before, f"{name} with a dead lease changed the row"
    batch = await stub.CompleteTasks(
        pb.CompleteTasksRequest(task_ids=[task_id], lease_tokens=[token], outputs=["{}"], reported_usages=["{}"])
    )
    assert list(batch.tasks) == []
    assert await row(url, task_id) == before, "CompleteTasks with a dead lease changed the row"
    return before


async def test_old_holder_is_fenced_after_reclaim(stub: Stub, database_url: str) -> None:
    tool = await new_tool(stub, "fence")
    await enqueue(stub, tool.id)
    old = await claim_one(stub, tool.id)
    await expire_leases(database_url, [old.id])
    new = await claim_one(stub, tool.id)
    assert new.id == old.id and new.lease_token != old.lease_token
    held = await assert_fenced(stub, database_url, old.id, old.lease_token)
    assert held["status"] == "processing" and str(held["lease_token"]) == new.lease_token
    # The new holder is unaffected: it heartbeats and completes normally.
    await stub.HeartbeatTask(pb.HeartbeatTaskRequest(task_id=new.id, lease_token=new.lease_token))
    done = (
        await stub.CompleteTask(
            pb.CompleteTaskRequest(task_id=new.id, lease_token=new.lease_token, output='{"by": "new"}')
        )
    ).task
    assert done.status == pb.TASK_STATUS_COMPLETED and done.output == '{"by": "new"}' and done.retry_count == 1
    # Once completed, neither lease can touch it.
    for token in (old.lease_token, new.lease_token):
        final = await assert_fenced(stub, database_url, old.id, token)
        assert final["status"] == "completed" and final["output"] == {"by": "new"}


async def test_lease_dies_when_the_task_is_requeued(stub: Stub, database_url: str) -> None:
    tool = await new_tool(stub, "fence")
    await enqueue(stub, tool.id)
    first = await claim_one(stub, tool.id)
    await stub.FailTask(
        pb.FailTaskRequest(
            task_id=first.id, lease_token=first.lease_token, error="e", increment_retry=True, retry_after=AT_ONCE
        )
    )
    queued = await assert_fenced(stub, database_url, first.id, first.lease_token)
    assert queued["status"] == "queued" and queued["lease_token"] is None
    second = await claim_one(stub, tool.id)
    await assert_fenced(stub, database_url, first.id, first.lease_token)
    done = await stub.CompleteTask(pb.CompleteTaskRequest(task_id=second.id, lease_token=second.lease_token))
    assert done.task.status == pb.TASK_STATUS_COMPLETED


async def test_old_holders_racing_reclaimers_never_both_win(
    stub: Stub, database_url: str, service: RunningServer
) -> None:
    """200 lapsed tasks: their old holders complete them while 4 other workers reclaim them, all
    at once. Per task exactly one side wins, and the row shows that side's outcome."""
    tool = await new_tool(stub, "fence-race")
    for _ in range(200):
        await enqueue(stub, tool.id)
    held = list((await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=200))).tasks)
    assert len(held) == 200
    await expire_leases(database_url, [t.id for t in held])

    old_won: set[str] = set()
    old_lost: set[str] = set()
    reclaimed: dict[str, str] = {}
    start = asyncio.Event()

    async def old_holder(t: pb.Task, s: Stub) -> None:
        await start.wait()
        req = pb.CompleteTaskRequest(task_id=t.id, lease_token=t.lease_token, output='{"by": "old"}')
        try:
            await s.CompleteTask(req)
            old_won.add(t.id)
        except grpc.aio.AioRpcError as err:
            assert err.code() == grpc.StatusCode.FAILED_PRECONDITION, err.details()
            old_lost.add(t.id)

    async def reclaimer(s: Stub, batch: int) -> None:
        await start.wait()
        while True:
            if batch:
                got = list((await s.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=batch))).tasks)
            else:
                resp = await s.ClaimNextTask(pb.ClaimNextTaskRequest(tool_id=tool.id))
                got = [resp.task] if resp.HasField("task") else []
            if not got:
                return
            for t in got:
                assert t.id not in reclaimed, "reclaimed twice"
                assert t.retry_count == 1
                reclaimed[t.id] = t.lease_token

    channels = [grpc.aio.insecure_channel(service.address) for _ in range(4)]
    try:
        stubs = [Stub(c) for c in channels]
        jobs = [old_holder(t, stubs[i % 2]) for i, t in enumerate(held)]
        jobs += [reclaimer(stubs[2], 0), reclaimer(stubs[3], 5), reclaimer(stubs[2], 0), reclaimer(stubs[3], 3)]
        tasks = [asyncio.ensure_future(j) for j in jobs]
        start.set()
        await asyncio.gather(*tasks)
    finally:
        for c in channels:
            await c.close(None)

    ids = {t.id for t in held}
    assert old_won | set(reclaimed) == ids, "a task was neither completed by its old holder nor reclaimed"
    assert not old_won & set(reclaimed), f"{len(old_won & set(reclaimed))} tasks won by both sides"
    assert old_lost == set(reclaimed)
    rows = {
        str(r["id"]): r
        for r in await fetch(database_url, "SELECT * FROM generation.tasks WHERE tool_id = %s", (tool.id,))
    }
    for task_id in old_won:
        assert rows[task_id]["status"] == "completed" and rows[task_id]["retry_count"] == 0
    for task_id, token in reclaimed.items():
        r = rows[task_id]
        assert (r["status"], str(r["lease_token"]), r["retry_count"], r["output"]) == ("processing", token, 1, None)
