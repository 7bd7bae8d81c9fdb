"""QueueTasks: many tasks in one statement with QueueTask's defaults, validation and idempotency,
also under concurrent retries of overlapping batches, and one wake per tool per batch."""

from __future__ import annotations

import asyncio
import random
import uuid

import pytest
from generation.task.v1 import task_pb2 as pb
from support.queue_support import Stub, fetch, new_tool

# Columns QueueTask and QueueTasks decide (the rest is the database's: ids, timestamps).
DECIDED = "tool_id, status, priority, retry_count, max_retries, input, output, error, reported_usage, "
DECIDED += "reserved_token_amount, w3c_traceparent, lease_token, claim_expires_at, started_at, completed_at"


async def decided(url: str, ids: list[str]) -> list[dict[str, object]]:
    rows = await fetch(url, f"SELECT id::text, {DECIDED} FROM generation.tasks WHERE id = ANY(%s::uuid[])", (ids,))
    by_id = {r.pop("id"): r for r in rows}
    return [by_id[i] for i in ids]


async def test_defaults_and_values_match_queue_task(stub: Stub, database_url: str) -> None:
    tool = await new_tool(stub, "bulk")
    singles = [
        pb.QueueTaskRequest(tool_id=tool.id),
        pb.QueueTaskRequest(tool_id=tool.id, input='{"a": [1, 2]}', priority=7, max_retries=5,
                            reserved_token_amount=40, w3c_traceparent="00-abc-def-01"),
    ]  # fmt: skip
    one_by_one = [(await stub.QueueTask(r)).task.id for r in singles]
    bulk = await stub.QueueTasks(
        pb.QueueTasksRequest(
            tool_ids=[tool.id, tool.id],
            inputs=["", '{"a": [1, 2]}'],
            priorities=[0, 7],
            max_retries=[3, 5],
            reserved_token_amounts=[0, 40],
            w3c_traceparents=["", "00-abc-def-01"],
        )
    )
    by_input = sorted(bulk.tasks, key=lambda t: t.priority)
    bulk_ids = [t.id for t in by_input]
    got = await decided(database_url, bulk_ids)
    want = await decided(database_url, one_by_one)
    # QueueTask's unset reserved_token_amount is NULL; the bulk list carries 0 for "none given".
    want[0]["reserved_token_amount"] = 0
    assert got == want
    # Lists left empty take the defaults for every task.
    empty = await stub.QueueTasks(pb.QueueTasksRequest(tool_ids=[tool.id] * 3))
    rows = await decided(database_url, [t.id for t in empty.tasks])
    assert {(r["priority"], r["max_retries"], str(r["input"]), r["reserved_token_amount"]) for r in rows} == {
        (0, 3, "{}", None)
    }


async def test_idempotent_within_and_across_batches(stub: Stub, database_url: str) -> None:
    tool = await new_tool(stub, "bulk-idem")
    k = uuid.uuid4().hex
    first = await stub.QueueTasks(
        pb.QueueTasksRequest(tool_ids=[tool.id] * 4, billing_idempotency_keys=[f"{k}-a", f"{k}-b", f"{k}-a", ""])
    )
    assert len(first.tasks) == 3  # a repeated key yields one task; "" is no key
    again = await stub.QueueTasks(
        pb.QueueTasksRequest(tool_ids=[tool.id] * 3, billing_idempotency_keys=[f"{k}-b", f"{k}-a", f"{k}-c"])
    )
    ids = {t.billing_idempotency_key: t.id for t in first.tasks if t.billing_idempotency_key}
    assert {t.billing_idempotency_key: t.id for t in again.tasks if t.billing_idempotency_key != f"{k}-c"} == ids
    single = await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id, billing_idempotency_key=f"{k}-c"))
    assert single.task.id in {t.id for t in again.tasks}
    count = await fetch(database_url, "SELECT count(*) AS n FROM generation.tasks WHERE tool_id = %s", (tool.id,))
    assert count[0]["n"] == 4


@pytest.mark.parametrize("round_", range(3))
async def test_idempotency_holds_under_concurrent_retries(stub: Stub, database_url: str, round_: int) -> None:
    """12 callers retry overlapping batches (each key in several, in shuffled order) all at once:
    one row per key, and every caller is answered with that row for each of its keys."""
    tool = await new_tool(stub, "bulk-race")
    keys = [f"{uuid.uuid4().hex}-{i}" for i in range(200)]
    rng = random.Random(round_)
    batches = [rng.sample(keys, 120) for _ in range(12)]
    barrier = asyncio.Barrier(len(batches))

    async def call(batch: list[str]) -> dict[str, str]:
        await barrier.wait()
        resp = await stub.QueueTasks(
            pb.QueueTasksRequest(tool_ids=[tool.id] * len(batch), billing_idempotency_keys=batch)
        )
        return {t.billing_idempotency_key: t.id for t in resp.tasks}

    answers = await asyncio.gather(*(call(b) for b in batches))
    rows = await fetch(
        database_url,
        "SELECT billing_idempotency_key AS k, id::text FROM generation.tasks WHERE tool_id = %s",
        (tool.id,),
    )
    stored = {r["k"]: r["id"] for r in rows}
    assert len(rows) == len(stored) == len(set().union(*batches))
    for batch, answer in zip(batches, answers, strict=True):
        assert answer == {k: stored[k] for k in batch}


async def test_one_wake_per_tool_per_batch(stub: Stub) -> None:
    a, b = await new_tool(stub, "bulk-wake-a"), await new_tool(stub, "bulk-wake-b")
    call = stub.WatchTaskWakes(pb.WatchTaskWakesRequest(tool_ids=[a.id, b.id]))
    await asyncio.wait_for(call.initial_metadata(), 10)
    try:
        await stub.QueueTasks(pb.QueueTasksRequest(tool_ids=[a.id, b.id] * 250))
        # A later, separate enqueue marks the end: wakes arrive in commit order.
        await stub.QueueTask(pb.QueueTaskRequest(tool_id=b.id, priority=1))
        wakes: list[str] = []
        while len(wakes) < 3:
            wake = await asyncio.wait_for(call.read(), 10)
            assert isinstance(wake, pb.WatchTaskWakesResponse)
            wakes.append(wake.tool_id)
        assert sorted(wakes[:2]) == sorted([a.id, b.id]) and wakes[2] == b.id
    finally:
        call.cancel()
