"""The reconciler against the generated data plane: what it fails, what it leaves alone, and
several replicas sweeping at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import grpc
import pytest
from conftest import RunningServer, private_service
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from support.pg import Cluster
from support.worker_support import sql, wait_until
from taskworker import Reconciler

if TYPE_CHECKING:
    Stub = task_pb2_grpc.GenerationDataServiceAsyncStub


# The reconciler fails every stale row it can see, not just this module's: give it a database
# of its own so it never reaps rows another test module left stale on purpose.
@pytest.fixture(scope="module")
async def private(pg_server: tuple[str, Cluster | None]) -> AsyncIterator[tuple[str, RunningServer]]:
    async with private_service(pg_server[0]) as found:
        yield found


@pytest.fixture(scope="module")
def database_url(private: tuple[str, RunningServer]) -> str:
    return private[0]


@pytest.fixture(scope="module")
async def channel(private: tuple[str, RunningServer]) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(private[1].address) as ch:
        yield ch


async def queue(stub: Stub, tool: pb.Tool, **kw: int) -> pb.Task:
    return (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id, **kw))).task  # type: ignore[arg-type]


async def get(stub: Stub, task_id: str) -> pb.Task:
    return (await stub.GetTask(pb.GetTaskRequest(task_id=task_id))).task


async def claim(stub: Stub, tool: pb.Tool) -> pb.Task:
    return (await stub.ClaimNextTask(pb.ClaimNextTaskRequest(tool_id=tool.id))).task


async def dead_zombie(stub: Stub, tool: pb.Tool, database_url: str) -> pb.Task:
    """A task whose worker died on its last retry, its lease long past the grace window."""
    t = await queue(stub, tool, max_retries=1)
    assert (await claim(stub, tool)).id == t.id
    await sql(database_url, "UPDATE generation.tasks SET retry_count = 1, "
              "claim_expires_at = now() - interval '10 minutes' WHERE id = %s", t.id)  # fmt: skip
    return t


async def test_reconciler_fails_unclaimable_rows_and_dead_zombies(stub: Stub, tool: pb.Tool, database_url: str) -> None:
    unclaimable = await queue(stub, tool, max_retries=0)
    zombie = await dead_zombie(stub, tool, database_url)
    fresh = await queue(stub, tool)
    live = await queue(stub, tool, priority=5)
    held = await claim(stub, tool)  # a live lease
    assert held.id == live.id

    reconciler = Reconciler(stub, processing_grace_seconds=60)
    result = await reconciler.sweep()
    assert {unclaimable.id, zombie.id} <= set(result.failed_ids)
    assert not {fresh.id, held.id} & set(result.failed_ids)
    for t in (unclaimable, zombie):
        row = await get(stub, t.id)
        assert row.status == pb.TASK_STATUS_FAILED and row.error.startswith("reaped:")
        assert row.HasField("completed_at") and not row.HasField("lease_token")
    assert (await get(stub, unclaimable.id)).retry_count == 0  # increment_retry=false
    # Live work and claimable work are left alone.
    assert (await get(stub, held.id)).status == pb.TASK_STATUS_PROCESSING
    assert (await get(stub, fresh.id)).status == pb.TASK_STATUS_QUEUED
    # Idempotent: a second sweep finds nothing of ours.
    again = await reconciler.sweep()
    listed_ours = {
        t.id for t in (await stub.ListStaleTasks(pb.ListStaleTasksRequest(processing_grace_seconds=60))).tasks
    }
    assert not listed_ours & {unclaimable.id, zombie.id, held.id, fresh.id}
    assert again.failed == 0


async def test_zombie_inside_grace_window_is_left_for_a_reclaim(stub: Stub, tool: pb.Tool, database_url: str) -> None:
    t = await queue(stub, tool, max_retries=1)
    await claim(stub, tool)
    await sql(database_url, "UPDATE generation.tasks SET retry_count = 1, "
              "claim_expires_at = now() - interval '5 seconds' WHERE id = %s", t.id)  # fmt: skip
    await Reconciler(stub, processing_grace_seconds=60).sweep()
    assert (await get(stub, t.id)).status == pb.TASK_STATUS_PROCESSING


async def test_replicas_sweeping_at_once_fail_each_row_once(stub: Stub, tool: pb.Tool, database_url: str) -> None:
    ids = {(await queue(stub, tool, max_retries=0)).id for _ in range(12)}
    ids |= {(await dead_zombie(stub, tool, database_url)).id for _ in range(3)}
    replicas = [Reconciler(stub, processing_grace_seconds=60, batch=500) for _ in range(4)]
    results = await asyncio.gather(*(r.sweep() for r in replicas))
    rows = await sql(database_url, "SELECT id::text, status::text, retry_count FROM generation.tasks WHERE tool_id = %s",
                     tool.id)  # fmt: skip
    assert {r[0] for r in rows} == ids and all(r[1] == "failed" for r in rows)
    # Every row was failed by exactly one replica; the others were told it no longer applied.
    ours = [i for r in results for i in r.failed_ids if i in ids]
    assert sorted(ours) == sorted(ids)
    assert all(r.listed == r.failed + r.skipped for r in results)


async def test_reconciler_loop_runs_every_interval(stub: Stub, tool: pb.Tool) -> None:
    stop = asyncio.Event()
    reconciler = Reconciler(stub, interval=0.05)
    loop = asyncio.create_task(reconciler.run(stop))
    try:
        await wait_until(lambda: reconciler.sweeps >= 1, what="first sweep")
        t = await queue(stub, tool, max_retries=0)  # appears after the first sweep
        await wait_until(lambda: _failed(stub, t.id), timeout=10, what="the loop's later sweep failed it")
        assert reconciler.sweeps >= 2
    finally:
        stop.set()
        await asyncio.wait_for(loop, 5)


async def _failed(stub: Stub, task_id: str) -> bool:
    return (await get(stub, task_id)).status == pb.TASK_STATUS_FAILED
