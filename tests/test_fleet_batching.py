"""Batched completion in the fleet on a real PostgreSQL: results and failures coalesced into
CompleteTasks / FailTasks, each task told whether its own row took the outcome, a lost answer
told apart from a lost lease, and results kept across a real server outage."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from conftest import server_config, start_server
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from taskworker import TaskContext, WorkerFleet, open_channel
from taskworker.connect import ChannelSettings
from taskworker.reports import Outcome, ReportBatcher
from worker_support import free_port, sql, wait_until

if TYPE_CHECKING:
    Stub = task_pb2_grpc.GenerationDataServiceAsyncStub


async def queue_many(stub: Stub, tool: pb.Tool, n: int, **kw: Any) -> list[pb.Task]:
    resp = await stub.QueueTasks(
        pb.QueueTasksRequest(tool_ids=[tool.id] * n, inputs=[json.dumps({"n": i}) for i in range(n)], **kw)
    )
    return list(resp.tasks)


async def statuses(database_url: str, tool: pb.Tool) -> Counter[str]:
    rows = await sql(database_url, "SELECT status::text FROM generation.tasks WHERE tool_id = %s", tool.id)
    return Counter(r[0] for r in rows)


async def test_results_and_failures_are_coalesced(stub: Stub, tool: pb.Tool, database_url: str) -> None:
    ran: Counter[str] = Counter()

    async def process(task: pb.Task, ctx: TaskContext) -> Any:
        ran[task.id] += 1
        n = json.loads(task.input)["n"]
        if n % 2:
            raise ValueError(f"odd {n}")
        return {"half": n // 2}

    tasks = await queue_many(stub, tool, 300, max_retries=[1] * 300)
    fleet = WorkerFleet(stub, poll_interval=0.2, report_window=0.02)
    fleet.add_tool(tool.id, process, concurrency=100)
    run = asyncio.create_task(fleet.run())
    await wait_until(
        lambda: fleet.stats.completed + fleet.stats.failed == 300, timeout=60, what="every outcome reported"
    )
    fleet.drain()
    await asyncio.wait_for(run, 30)
    assert await statuses(database_url, tool) == Counter({"completed": 150, "failed": 150})
    rows = await sql(
        database_url, "SELECT input->>'n', output, error FROM generation.tasks WHERE tool_id = %s", tool.id
    )
    for n, output, error in rows:
        if int(n) % 2:
            assert output is None and error == f"ValueError: odd {n}"
        else:
            assert output == {"half": int(n) // 2} and error is None
    assert set(ran) == {t.id for t in tasks} and set(ran.values()) == {1}
    # 300 outcomes in far fewer statements (one per task before batching).
    assert fleet.reports.stats.batches <= 60, fleet.reports.stats
    assert fleet.reports.stats.reported == 300 and fleet.stats.lease_lost == 0


async def test_each_task_is_told_whether_its_result_landed(stub: Stub, tool: pb.Tool, database_url: str) -> None:
    await queue_many(stub, tool, 6, max_retries=[3] * 6)
    claimed = list((await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=6))).tasks)
    # Someone else holds the leases of tasks 1 (to be completed) and 4 (to be failed) now.
    await sql(
        database_url,
        "UPDATE generation.tasks SET lease_token = gen_random_uuid() WHERE id = ANY(%s::uuid[])",
        [claimed[1].id, claimed[4].id],
    )
    batcher = ReportBatcher(stub, window=0.5, max_batch=3)  # the size cap fills before the window
    flusher = asyncio.create_task(batcher.run())
    outcomes = [Outcome("complete", t, asyncio.Event(), output=json.dumps({"i": i})) for i, t in enumerate(claimed[:3])]
    outcomes += [Outcome("fail", t, asyncio.Event(), error=f"e{i}") for i, t in enumerate(claimed[3:])]
    started = time.monotonic()
    landed = await asyncio.wait_for(asyncio.gather(*(batcher.report(o) for o in outcomes)), 10)
    flusher.cancel()
    assert landed == [True, False, True, True, False, True]
    assert time.monotonic() - started < 0.5, "full batches go out without waiting for the window"
    assert batcher.stats.batches == 2 and batcher.stats.lease_lost == 2
    rows = dict(
        await sql(
            database_url,
            "SELECT id::text, status::text FROM generation.tasks WHERE id = ANY(%s::uuid[])",
            [t.id for t in claimed],
        )
    )
    assert [rows[t.id] for t in claimed] == ["completed", "processing", "completed", "queued", "processing", "queued"]


class LosesFirstAnswer:
    """The real stub, except that the first CompleteTasks lands and then its answer is lost."""

    def __init__(self, stub: Stub, on_lost: Callable[[], None]) -> None:
        self.stub = stub
        self.lost = 0
        self.on_lost = on_lost

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stub, name)

    async def CompleteTasks(self, request: pb.CompleteTasksRequest, **kw: Any) -> pb.CompleteTasksResponse:
        resp = await self.stub.CompleteTasks(request, **kw)
        if self.lost == 0:
            self.lost += 1
            self.on_lost()
            raise grpc.aio.AioRpcError(
                grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), "lost", None
            )
        return resp


async def test_a_lost_answer_is_not_a_lost_lease(stub: Stub, tool: pb.Tool, database_url: str) -> None:
    await queue_many(stub, tool, 3)
    claimed = list((await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=3))).tasks)
    # Task 2's lease is lost before the first attempt: it must still be answered False.
    await sql(database_url, "UPDATE generation.tasks SET lease_token = gen_random_uuid() WHERE id = %s", claimed[2].id)
    outcomes = [Outcome("complete", t, asyncio.Event(), output="1") for t in claimed]
    # Task 0's heartbeat is refused meanwhile: its row is completed (by the lost attempt), which
    # ends the lease as surely as a reclaim. The verdict must still be "landed".
    flaky = LosesFirstAnswer(stub, on_lost=outcomes[0].lease_lost.set)
    batcher = ReportBatcher(flaky, window=0.05)  # type: ignore[arg-type]
    flusher = asyncio.create_task(batcher.run())
    landed = await asyncio.wait_for(asyncio.gather(*(batcher.report(o) for o in outcomes)), 10)
    flusher.cancel()
    assert flaky.lost == 1 and batcher.stats.retried_batches == 1
    assert landed == [True, True, False]


@pytest.mark.parametrize(
    "outage_seconds",
    [
        # Down until the reports have been retried twice (a few seconds): the mechanism (batch kept,
        # resent with wait_for_ready, 1 s reconnect back-off) does not depend on the outage's length.
        0.0,
        # The real 75 s outage (under the seed's 120 s lease, which the kept results outlive).
        pytest.param(75.0, marks=pytest.mark.slow),
    ],
)
async def test_no_result_is_dropped_across_a_server_outage(
    database_url: str, tool: pb.Tool, outage_seconds: float
) -> None:
    port = free_port()
    cfg = server_config(database_url, listen_addr=f"127.0.0.1:{port}")
    server = await start_server(cfg)
    release = asyncio.Event()
    ran: Counter[str] = Counter()

    async def process(task: pb.Task, ctx: TaskContext) -> Any:
        ran[task.id] += 1
        await release.wait()
        return {"ok": True}

    async with open_channel(server.address, ChannelSettings()) as channel:
        stub = task_pb2_grpc.GenerationDataServiceStub(channel)
        tasks = await queue_many(stub, tool, 20)
        fleet = WorkerFleet(stub, poll_interval=0.2, report_window=0.01, rpc_timeout=2.0)
        fleet.add_tool(tool.id, process, concurrency=20)
        run = asyncio.create_task(fleet.run())
        await wait_until(lambda: len(ran) == 20, what="all 20 tasks running")
        await server.close()
        down = time.monotonic()
        release.set()  # the results are ready while the server is down
        await wait_until(lambda: fleet.reports.stats.retried_batches >= 2, timeout=30, what="reports retried")
        # The outage itself is timed (what is tested is its length), not a synchronisation.
        await asyncio.sleep(max(0.0, outage_seconds - (time.monotonic() - down)))
        assert fleet.stats.completed == 0 and run.done() is False
        server = await start_server(cfg)
        back = time.monotonic()
        try:
            await wait_until(lambda: fleet.stats.completed == 20, timeout=30, what="results landed after the outage")
            recovered = time.monotonic() - back
            fleet.drain()
            await asyncio.wait_for(run, 30)
        finally:
            await server.close()
    assert set(ran.values()) == {1} and set(ran) == {t.id for t in tasks}, "every task ran exactly once"
    rows = await sql(
        database_url, "SELECT count(*) FROM generation.tasks WHERE tool_id = %s AND status = 'completed'", tool.id
    )
    assert rows == [(20,)]
    # Reconnect back-off capped at 1 s, resend back-off at 1 s: well under the old 35 s.
    assert recovered < 2.5, f"results landed {recovered:.2f}s after the server returned"
