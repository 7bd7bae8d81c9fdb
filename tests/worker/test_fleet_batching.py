"""Batched completion in the fleet on a real PostgreSQL: results and failures coalesced into
CompleteTasks / FailTasks, each task told whether its own row took the outcome, a lost answer
told apart from a lost lease, and results kept across a real server outage."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from conftest import server_config, start_server
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from support.worker_support import free_port, sql, wait_until
from taskworker import TaskContext, WorkerFleet, open_channel
from taskworker.connect import ChannelSettings
from taskworker.events import TERMINAL, EventEmitter, PendingEvent
from taskworker.reports import LEASE_LOST, Outcome, ReportBatcher

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
    # A failure with retries left waits out the tool's backoff: `scheduled`, not claimable yet.
    assert [rows[t.id] for t in claimed] == [
        "completed",
        "processing",
        "completed",
        "scheduled",
        "processing",
        "scheduled",
    ]


class LosesFirstAnswer:
    """The real stub, except that the first CompleteTasks lands (committed by the real server)
    and then its answer is lost, after `on_lost` has run (the outage a kill would cause). The
    heartbeats the server refuses are recorded."""

    def __init__(self, stub: Stub, on_lost: Callable[[], Awaitable[None] | None]) -> None:
        self.stub = stub
        self.lost = 0
        self.on_lost = on_lost
        self.refused_heartbeats: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stub, name)

    async def HeartbeatTask(self, request: pb.HeartbeatTaskRequest, **kw: Any) -> pb.HeartbeatTaskResponse:
        try:
            return await self.stub.HeartbeatTask(request, **kw)
        except grpc.aio.AioRpcError as err:
            if err.code() in LEASE_LOST:
                self.refused_heartbeats.add(request.task_id)
            raise

    async def CompleteTasks(self, request: pb.CompleteTasksRequest, **kw: Any) -> pb.CompleteTasksResponse:
        resp = await self.stub.CompleteTasks(request, **kw)
        if self.lost == 0:
            self.lost += 1
            lost = self.on_lost()
            if lost is not None:
                await lost
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


async def test_an_entry_skipped_while_its_row_was_locked_is_sent_again(
    stub: Stub, tool: pb.Tool, database_url: str
) -> None:
    """CompleteTasks skips a row another transaction holds (it does not wait): the entry left out
    of the answer is still this worker's, so it is sent again rather than dropped as a lost lease."""
    import psycopg

    await queue_many(stub, tool, 3)
    claimed = list((await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=3))).tasks)
    outcomes = [Outcome("complete", t, asyncio.Event(), output=json.dumps({"i": i})) for i, t in enumerate(claimed)]
    batcher = ReportBatcher(stub, window=0.05)
    flusher = asyncio.create_task(batcher.run())
    async with await psycopg.AsyncConnection.connect(database_url) as holder:
        await holder.execute("SELECT 1 FROM generation.tasks WHERE id = %s FOR UPDATE", (claimed[1].id,))
        reports = asyncio.gather(*(batcher.report(o) for o in outcomes))
        await wait_until(lambda: batcher.stats.skipped_locked >= 1, timeout=30, what="the locked entry left out")
        await holder.rollback()  # the lock goes; the entry is sent again
        landed = await asyncio.wait_for(reports, 30)
    flusher.cancel()
    assert landed == [True, True, True] and batcher.stats.lease_lost == 0
    rows = await sql(
        database_url, "SELECT id::text, status::text, output FROM generation.tasks WHERE tool_id = %s", tool.id
    )
    assert {r[0]: (r[1], r[2]) for r in rows} == {t.id: ("completed", {"i": i}) for i, t in enumerate(claimed)}


class KeptEvents:
    """An event transport that keeps what the fleet writes, in order."""

    def __init__(self) -> None:
        self.events: list[PendingEvent] = []

    async def append(self, batch: list[PendingEvent]) -> None:
        self.events.extend(batch)

    async def aclose(self) -> None:
        pass


@pytest.mark.serial
async def test_a_result_that_landed_unseen_is_not_counted_as_a_lost_lease(
    stub: Stub, tool: pb.Tool, database_url: str
) -> None:
    """The failover's finding, without killing a server: a CompleteTasks batch commits, its answer
    is lost, and before the resend the server refuses the tasks' heartbeats (their rows are
    completed). The resend's answer leaves them out and GetTask shows them completed under their
    own tokens: they count as completed and as landed after a lost answer, their terminal events
    say completed, and only the task whose lease was really taken counts as lease_lost."""
    n = 8
    await stub.SetToolLease(pb.SetToolLeaseRequest(tool_id=tool.id, lease_seconds=2))  # beats every second
    tasks = await queue_many(stub, tool, n + 1)
    taken = tasks[n]  # its lease is taken by someone else while it runs
    taken_running = asyncio.Event()

    async def process(task: pb.Task, ctx: TaskContext) -> Any:
        if task.id == taken.id:
            taken_running.set()
            await asyncio.Event().wait()  # until the refused heartbeat cancels it
        return {"ok": True}

    async def refused_meanwhile() -> None:
        # The answer is held back until the server has refused every one of the batch's
        # heartbeats, as it did after the promotion (bounded polling of the recorded refusals).
        await wait_until(lambda: {t.id for t in tasks[:n]} <= flaky.refused_heartbeats, what="heartbeats refused")

    flaky = LosesFirstAnswer(stub, on_lost=refused_meanwhile)
    kept = KeptEvents()
    emitter = EventEmitter(kept)
    # One batch of n results: it goes out once all n wait (the window is only a fallback).
    fleet = WorkerFleet(flaky, poll_interval=0.2, report_window=5.0, report_batch=n, events=emitter)  # type: ignore[arg-type]
    fleet.add_tool(tool.id, process, concurrency=n + 1)
    run = asyncio.create_task(fleet.run())
    await asyncio.wait_for(taken_running.wait(), 10)
    await sql(database_url, "UPDATE generation.tasks SET lease_token = gen_random_uuid() WHERE id = %s", taken.id)
    await wait_until(lambda: fleet.running == 0, timeout=20, what="every task settled")
    fleet.drain()
    await asyncio.wait_for(run, 30)
    await emitter.aclose()

    assert flaky.lost == 1 and fleet.reports.stats.retried_batches == 1
    assert fleet.stats.completed == n and fleet.stats.landed_after_lost_answer == n
    assert fleet.reports.stats.landed_unseen == n
    assert fleet.stats.heartbeats_refused >= n + 1
    assert fleet.stats.lease_lost == 1  # only the task whose lease was taken
    assert fleet.stats.claimed == n + 1 == fleet.stats.completed + fleet.stats.lease_lost  # one outcome each
    terminals = {e.task_id: json.loads(e.data) for e in kept.events if e.kind == TERMINAL}
    assert terminals == {
        **{t.id: {"outcome": "completed", "retrying": False} for t in tasks[:n]},
        taken.id: {"outcome": "lease_lost", "retrying": True},
    }
    rows = await sql(
        database_url,
        "SELECT status::text, count(*) FROM generation.tasks WHERE id = ANY(%s::uuid[]) GROUP BY 1",
        [t.id for t in tasks[:n]],
    )
    assert rows == [("completed", n)]


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
