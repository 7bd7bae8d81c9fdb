"""Deliverable answers only: ClaimTasks commits no claim whose answer cannot reach the caller,
the reaper pages past stale rows of any size, the lease is per tool, and PruneTasks deletes only
old terminal rows (also while claims run)."""

from __future__ import annotations

import asyncio
import datetime as dt
import os

import grpc
from conftest import private_service
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from queue_support import Stub, execute, fetch, new_tool
from taskworker import Reconciler

MB = 1_000_000
CLIENT_LIMIT = 4 * 1024 * 1024  # grpc's default receive limit


async def seed_sized(url: str, tool_id: str, count: int, payload_bytes: int, **columns: str) -> None:
    """`count` queued tasks whose input is a JSON string of `payload_bytes` incompressible characters."""
    extra_cols = "".join(f", {c}" for c in columns)
    extra_vals = "".join(f", {v}" for v in columns.values())
    await execute(
        url,
        f"""INSERT INTO generation.tasks (tool_id, input{extra_cols})
            SELECT %s, to_jsonb(repeat(md5(i::text || %s), %s / 32 + 1)::text){extra_vals}
            FROM generate_series(1, %s) AS i""",
        (tool_id, os.urandom(4).hex(), payload_bytes, count),
    )


async def held(url: str, tool_id: str) -> int:
    rows = await fetch(
        url, "SELECT count(*) AS n FROM generation.tasks WHERE tool_id = %s AND status = 'processing'", (tool_id,)
    )
    return int(rows[0]["n"])


async def test_big_tasks_are_claimed_only_as_far_as_the_answer_can_reach(stub: Stub, database_url: str) -> None:
    tool = await new_tool(stub, "big")
    await seed_sized(database_url, tool.id, 4, int(1.5 * MB))
    resp = await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=10))
    assert len(resp.tasks) == 2 and resp.ByteSize() < CLIENT_LIMIT
    assert await held(database_url, tool.id) == 2, "only what was delivered is held"
    # A budget smaller than one task: nothing is claimed, the rows stay claimable...
    small = await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=10, max_bytes=MB))
    assert list(small.tasks) == []
    rows = await fetch(
        database_url,
        "SELECT retry_count, lease_token FROM generation.tasks WHERE tool_id = %s AND status = 'queued'",
        (tool.id,),
    )
    assert rows == [{"retry_count": 0, "lease_token": None}] * 2
    # ...and a small task behind them is still claimed under that budget.
    small_task = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id, priority=-1))).task
    again = await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=10, max_bytes=MB))
    assert [t.id for t in again.tasks] == [small_task.id]
    rest = await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=10))
    assert len(rest.tasks) == 2 and await held(database_url, tool.id) == 5


async def test_ten_thousand_small_tasks_arrive_in_deliverable_pages(stub: Stub, database_url: str) -> None:
    tool = await new_tool(stub, "many")
    await seed_sized(database_url, tool.id, 10_000, 300)
    claimed = 0
    for _ in range(10):
        resp = await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=10_000))
        if not resp.tasks:
            break
        assert resp.ByteSize() < CLIENT_LIMIT
        claimed += len(resp.tasks)
        assert await held(database_url, tool.id) == claimed, "every committed claim was delivered"
    assert claimed == 10_000


async def test_the_budget_is_never_below_the_encoded_size(stub: Stub, database_url: str) -> None:
    """The SQL estimate bounds the real protobuf size, for rows carrying every optional field."""
    tool = await new_tool(stub, "sizes")
    for n in (0, 1, 100, 5000):
        await stub.QueueTask(
            pb.QueueTaskRequest(
                tool_id=tool.id, input=f'{{"s": "{"é" * n}"}}', reserved_token_amount=2**62,
                billing_idempotency_key=f"k{os.urandom(8).hex()}" * 10, w3c_traceparent="t" * 55,
            )
        )  # fmt: skip
    for budget in (600, 1200, 12_000, 60_000):
        resp = await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=10, max_bytes=budget))
        assert resp.ByteSize() <= budget
        await execute(
            database_url,
            "UPDATE generation.tasks SET status = 'queued', lease_token = NULL WHERE tool_id = %s",
            (tool.id,),
        )


async def test_reaper_progresses_past_stale_rows_of_any_size(database_url: str) -> None:
    async with private_service(database_url) as (url, server), grpc.aio.insecure_channel(server.address) as channel:
        stub = task_pb2_grpc.GenerationDataServiceStub(channel)
        tool = await new_tool(stub, "stale-big")
        await seed_sized(url, tool.id, 5, int(1.5 * MB), created_at="now() - interval '1 day'")
        await seed_sized(url, tool.id, 250, 100, created_at="now() - interval '1 day'")
        result = await Reconciler(stub, batch=100).sweep()
        assert result.failed == 255 and result.skipped == 0
        rows = await fetch(url, "SELECT status::text AS s, count(*) AS n FROM generation.tasks GROUP BY 1")
        assert rows == [{"s": "failed", "n": 255}]


async def test_lease_length_is_per_tool(stub: Stub, database_url: str) -> None:
    tool = await new_tool(stub, "lease")
    assert tool.lease_seconds == 120  # the schema's default
    short = (await stub.SetToolLease(pb.SetToolLeaseRequest(tool_id=tool.id, lease_seconds=5))).tool
    assert short.lease_seconds == 5
    again = (await stub.RegisterTool(pb.RegisterToolRequest(name=tool.name))).tool
    assert again.lease_seconds == 5, "registering again keeps the lease"
    await stub.QueueTasks(pb.QueueTasksRequest(tool_ids=[tool.id] * 2))
    one = (await stub.ClaimNextTask(pb.ClaimNextTaskRequest(tool_id=tool.id))).task
    many = (await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=5))).tasks
    beat = (await stub.HeartbeatTask(pb.HeartbeatTaskRequest(task_id=one.id, lease_token=one.lease_token))).task
    for task in (one, many[0]):  # claim_expires_at = now() + lease, started_at = now(): one statement
        assert task.claim_expires_at.ToDatetime() - task.started_at.ToDatetime() == dt.timedelta(seconds=5)
    rows = await fetch(
        database_url,
        "SELECT claim_expires_at - statement_timestamp() AS left FROM generation.tasks WHERE id = %s",
        (beat.id,),
    )
    assert dt.timedelta(seconds=3) < rows[0]["left"] <= dt.timedelta(seconds=5)


async def test_prune_deletes_only_old_terminal_rows_under_concurrent_claims(database_url: str) -> None:
    async with (
        private_service(database_url) as (url, server),
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        stub = task_pb2_grpc.GenerationDataServiceStub(channel)
        tool = await new_tool(stub, "prune")
        old = "now() - interval '2 days'"
        await seed_sized(url, tool.id, 3000, 10, status="'completed'", completed_at=old)
        await seed_sized(url, tool.id, 500, 10, status="'failed'", completed_at=old)
        await seed_sized(url, tool.id, 200, 10, status="'completed'", completed_at="now() - interval '1 hour'")
        await seed_sized(url, tool.id, 300, 10, created_at=old)  # old but live: queued
        await seed_sized(url, tool.id, 1000, 10)  # fresh live work, claimed while pruning runs
        before = await fetch(
            url,
            "SELECT id::text FROM generation.tasks WHERE status NOT IN ('completed', 'failed') OR completed_at > now() - interval '1 day'",
        )
        claimed: list[str] = []

        async def claim_all() -> None:
            while resp := (await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=25))).tasks:
                claimed.extend(t.id for t in resp)

        reconciler = Reconciler(stub, retention_seconds=86_400, prune_batch=250)
        claims = [asyncio.create_task(claim_all()) for _ in range(3)]
        deleted = await reconciler.prune()
        await asyncio.gather(*claims)
        assert deleted == 3500
        assert len(claimed) == len(set(claimed)) == 1300
        after = await fetch(url, "SELECT id::text FROM generation.tasks")
        assert {r["id"] for r in after} == {r["id"] for r in before}
        assert await reconciler.prune() == 0
