"""Idempotent enqueue: concurrent QueueTask calls with one billing_idempotency_key create one
row and all get its id; a retried enqueue never resets or duplicates the task."""

from __future__ import annotations

import asyncio
import uuid

import grpc
from conftest import RunningServer
from generation.task.v1 import task_pb2 as pb
from support.queue_support import Stub, claim_next, claim_one, enqueue, fetch, new_tool

CALLERS = 8
KEYS = 25


async def test_concurrent_enqueues_with_one_key_make_one_row(
    stub: Stub, database_url: str, service: RunningServer
) -> None:
    """8 clients (own channels) enqueue with the same key at the same moment, for 25 keys."""
    tool = await new_tool(stub, "idem")
    channels = [grpc.aio.insecure_channel(service.address) for _ in range(CALLERS)]
    try:
        stubs = [Stub(c) for c in channels]
        for c in channels:
            await c.channel_ready()
        keys = [f"bill-{uuid.uuid4()}" for _ in range(KEYS)]
        for key in keys:
            go = asyncio.Event()

            async def call(i: int, key: str = key, go: asyncio.Event = go) -> pb.Task:
                await go.wait()
                return await enqueue(
                    stubs[i], tool.id, billing_idempotency_key=key, priority=i, input=f'{{"caller": {i}}}'
                )

            calls = [asyncio.ensure_future(call(i)) for i in range(CALLERS)]
            go.set()
            tasks = await asyncio.gather(*calls)
            assert len({t.id for t in tasks}) == 1, f"{key}: {len({t.id for t in tasks})} different task ids"
            # Every caller got the same, complete row: the first writer's.
            assert all(t == tasks[0] for t in tasks)
            assert tasks[0].billing_idempotency_key == key
    finally:
        for c in channels:
            await c.close(None)
    rows = await fetch(
        database_url,
        "SELECT billing_idempotency_key AS k, count(*) AS n, min(priority) AS p, min(input->>'caller') AS c"
        " FROM generation.tasks WHERE tool_id = %s GROUP BY 1",
        (tool.id,),
    )
    assert len(rows) == KEYS and all(r["n"] == 1 for r in rows)
    assert all(str(r["p"]) == r["c"] for r in rows), "the row is one caller's, not a mix"


async def test_retried_enqueue_returns_the_task_as_it_is_now(stub: Stub, database_url: str) -> None:
    tool = await new_tool(stub, "idem")
    first = await enqueue(stub, tool.id, billing_idempotency_key=f"k-{uuid.uuid4()}", input='{"v": 1}')
    key = first.billing_idempotency_key
    task = await claim_one(stub, tool.id)
    again = await enqueue(stub, tool.id, billing_idempotency_key=key, input='{"v": 2}')
    assert again.id == first.id and again.status == pb.TASK_STATUS_PROCESSING and again.lease_token == task.lease_token
    await stub.CompleteTask(pb.CompleteTaskRequest(task_id=task.id, lease_token=task.lease_token, output='{"ok": 1}'))
    late = await enqueue(stub, tool.id, billing_idempotency_key=key, input='{"v": 3}')
    assert late.id == first.id and late.status == pb.TASK_STATUS_COMPLETED and late.input == '{"v": 1}'
    assert await claim_next(stub, tool.id) is None, "a retried enqueue must not re-queue finished work"
    n = await fetch(
        database_url, "SELECT count(*) AS n FROM generation.tasks WHERE billing_idempotency_key = %s", (key,)
    )
    assert n[0]["n"] == 1


async def test_without_a_key_every_enqueue_is_a_new_task(stub: Stub, database_url: str) -> None:
    tool = await new_tool(stub, "idem")
    a = await enqueue(stub, tool.id)
    b = await enqueue(stub, tool.id)
    # An empty key is no key: two unrelated callers sending "" must not share one task.
    c = await enqueue(stub, tool.id, billing_idempotency_key="")
    d = await enqueue(stub, tool.id, billing_idempotency_key="")
    assert len({a.id, b.id, c.id, d.id}) == 4
    assert not c.HasField("billing_idempotency_key") and not d.HasField("billing_idempotency_key")
