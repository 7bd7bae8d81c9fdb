"""Deliverable answers only: ClaimTasks commits no claim whose answer cannot reach the caller,
the reaper pages past stale rows of any size, the lease is per tool, and PruneTasks deletes only
old terminal rows (also while claims run)."""

from __future__ import annotations

import asyncio
import datetime as dt
import os

import grpc
import pytest
from conftest import private_service
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from pydb.runtime.database import cap_answer_budget
from support.queue_support import Stub, execute, fetch, new_tool
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
        await seed_sized(
            url, tool.id, 5, int(1.5 * MB), created_at="now() - interval '1 day'", run_at="now() - interval '1 day'"
        )
        await seed_sized(
            url, tool.id, 250, 100, created_at="now() - interval '1 day'", run_at="now() - interval '1 day'"
        )
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
        await seed_sized(url, tool.id, 300, 10, created_at=old, run_at=old)  # old but live: queued
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


@pytest.mark.parametrize("asked", [0, 2**31 - 1], ids=["no-budget", "huge-budget"])
async def test_the_servers_send_limit_caps_the_claim_budget(database_url: str, asked: int) -> None:
    """A caller asking for no budget or more than the server may send gets a claim the server can
    deliver: without the cap, 0 means 4,000,000 and the answer (about 300,000 bytes) would be
    refused by the server's 100,000-byte send limit after the claim committed."""
    limit = 100_000
    async with (
        private_service(database_url, max_send_message_bytes=limit) as (url, server),
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        stub = task_pb2_grpc.GenerationDataServiceStub(channel)
        tool = await new_tool(stub, "capped")
        await seed_sized(url, tool.id, 10, 30_000)
        await seed_sized(url, tool.id, 1, 2 * limit, priority="-1")  # larger than any answer
        delivered = 0
        for _ in range(12):  # bounded: 10 tasks in pages of 3
            resp = await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=100, max_bytes=asked))
            if not resp.tasks:
                break
            assert 0 < resp.ByteSize() <= limit
            delivered += len(resp.tasks)
            assert await held(url, tool.id) == delivered, "every committed claim was delivered"
        assert delivered == 10
        rows = await fetch(
            url,
            "SELECT retry_count, lease_token FROM generation.tasks WHERE tool_id = %s AND status = 'queued'",
            (tool.id,),
        )
        assert rows == [{"retry_count": 0, "lease_token": None}], "the oversized task stays claimable"


@pytest.mark.parametrize("asked", [0, 2**31 - 1], ids=["no-budget", "huge-budget"])
async def test_claim_next_never_claims_a_task_the_server_cannot_send(database_url: str, asked: int) -> None:
    """ClaimNextTask has the same budget: a task above the server's send limit is passed over
    (the next one is claimed) and stays claimable."""
    limit = 100_000
    async with (
        private_service(database_url, max_send_message_bytes=limit) as (url, server),
        grpc.aio.insecure_channel(server.address) as channel,
    ):
        stub = task_pb2_grpc.GenerationDataServiceStub(channel)
        tool = await new_tool(stub, "next-capped")
        await seed_sized(url, tool.id, 1, 2 * limit, priority="5")  # first in line, too large
        await seed_sized(url, tool.id, 1, 30_000)
        first = await stub.ClaimNextTask(pb.ClaimNextTaskRequest(tool_id=tool.id, max_bytes=asked))
        assert first.HasField("task") and first.task.priority == 0 and first.ByteSize() <= limit
        second = await stub.ClaimNextTask(pb.ClaimNextTaskRequest(tool_id=tool.id, max_bytes=asked))
        assert not second.HasField("task")
        rows = await fetch(
            url,
            "SELECT priority, retry_count, lease_token FROM generation.tasks WHERE tool_id = %s AND status = 'queued'",
            (tool.id,),
        )
        assert rows == [{"priority": 5, "retry_count": 0, "lease_token": None}], "the large task stays claimable"


def test_only_an_integer_max_bytes_field_is_capped() -> None:
    capped = pb.ClaimTasksRequest(tool_id="t", limit=5, max_bytes=0)
    cap_answer_budget(capped, 1000)
    assert capped.max_bytes == 1000
    for asked, kept in ((999, 999), (1000, 1000), (1001, 1000), (-5, 1000)):
        request = pb.ClaimTasksRequest(max_bytes=asked)
        cap_answer_budget(request, 1000)
        assert request.max_bytes == kept
    without = pb.GetTaskRequest(task_id="x")  # no budget field: left alone
    cap_answer_budget(without, 1000)
    assert without == pb.GetTaskRequest(task_id="x")


async def test_lease_length_is_per_task(stub: Stub, database_url: str) -> None:
    """A task's own lease (set at enqueue) outranks its tool's in every claim and heartbeat; the
    claim's answer carries the lease it took; a task without one takes the tool's."""
    tool = await new_tool(stub, "task-lease")
    await stub.SetToolLease(pb.SetToolLeaseRequest(tool_id=tool.id, lease_seconds=50))
    own = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id, lease_seconds=7, priority=3))).task
    assert own.lease_seconds == 7
    bulk = (
        await stub.QueueTasks(pb.QueueTasksRequest(tool_ids=[tool.id] * 2, priorities=[2, 1], lease_seconds=[9, 0]))
    ).tasks
    assert len(bulk) == 2 and [t.lease_seconds for t in bulk if t.HasField("lease_seconds")] == [9]
    first = (await stub.ClaimNextTask(pb.ClaimNextTaskRequest(tool_id=tool.id))).task
    rest = list((await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=5))).tasks)
    took = {t.priority: t for t in [first, *rest]}
    assert {p: t.lease_seconds for p, t in took.items()} == {3: 7, 2: 9, 1: 50}
    for t in took.values():
        assert t.claim_expires_at.ToDatetime() - t.started_at.ToDatetime() == dt.timedelta(seconds=t.lease_seconds)
        beat = (await stub.HeartbeatTask(pb.HeartbeatTaskRequest(task_id=t.id, lease_token=t.lease_token))).task
        rows = await fetch(
            database_url,
            "SELECT claim_expires_at - statement_timestamp() AS left FROM generation.tasks WHERE id = %s",
            (beat.id,),
        )
        assert dt.timedelta(seconds=t.lease_seconds - 2) < rows[0]["left"] <= dt.timedelta(seconds=t.lease_seconds)
    stored = (await stub.GetTask(pb.GetTaskRequest(task_id=took[1].id))).task
    assert not stored.HasField("lease_seconds"), "the row keeps no lease of its own: SetToolLease still rules it"
    with pytest.raises(grpc.aio.AioRpcError) as bad:
        await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id, lease_seconds=0))
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
