"""A WorkerFleet's Prometheus endpoint (taskworker.serve_metrics), scraped over HTTP while a real
fleet claims, completes, fails and loses leases on the generated data plane."""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from support.observe_support import scrape, value
from support.worker_support import sql, wait_until
from taskworker import FleetObserver, QueueGauges, TaskContext, WorkerFleet, serve_metrics
from taskworker.metrics import new_registry, serve_registry

if TYPE_CHECKING:
    Stub = task_pb2_grpc.GenerationDataServiceAsyncStub


async def test_every_fleet_metric_moves_with_its_event(stub: Stub, tool: pb.Tool, database_url: str) -> None:
    release: dict[str, asyncio.Event] = {}
    started: dict[str, asyncio.Event] = {}

    async def process(task: pb.Task, ctx: TaskContext) -> object:
        started.setdefault(task.input, asyncio.Event()).set()
        await release.setdefault(task.input, asyncio.Event()).wait()
        if task.input == '{"n": "fail"}':
            raise RuntimeError("boom")
        return {"ok": True}

    fleet = WorkerFleet(stub, poll_interval=0.2, observer=FleetObserver(new_registry()))
    fleet.add_tool(tool.id, process, concurrency=3)
    port, stop_metrics = serve_metrics("127.0.0.1:0", fleet)
    running = asyncio.create_task(fleet.run())
    try:
        t = tool.id
        assert value(await scrape(port), "taskworker_tasks_in_flight", tool=t) == 0
        ok = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=t, input='{"n": "ok"}'))).task
        bad = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=t, input='{"n": "fail"}', max_retries=1))).task
        lost = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=t, input='{"n": "lost"}'))).task
        for task in (ok, bad, lost):
            await asyncio.wait_for(started.setdefault(task.input, asyncio.Event()).wait(), 20)
        held = await scrape(port)
        assert value(held, "taskworker_tasks_claimed_total", tool=t) == 3
        assert value(held, "taskworker_tasks_in_flight", tool=t) == 3
        assert value(held, "taskworker_tasks_completed_total", tool=t) == 0

        release[ok.input].set()
        await wait_until(lambda: fleet.stats.completed == 1, what="the completion landed")
        done = await scrape(port)
        assert value(done, "taskworker_tasks_completed_total", tool=t) == 1
        assert value(done, "taskworker_report_batch_size_count", kind="complete") == 1
        assert value(done, "taskworker_report_batch_size_bucket", kind="complete", le="1.0") == 1

        release[bad.input].set()
        await wait_until(lambda: fleet.stats.failed == 1, what="the failure landed")
        assert value(await scrape(port), "taskworker_tasks_failed_total", tool=t) == 1

        # Someone else took the lease: the completion is refused, the task counted lease-lost.
        await sql(database_url, "UPDATE generation.tasks SET lease_token = gen_random_uuid() WHERE id = %s", lost.id)
        release[lost.input].set()
        await wait_until(lambda: fleet.stats.lease_lost == 1, what="the lease loss")
        after = await scrape(port)
        assert value(after, "taskworker_tasks_lease_lost_total", tool=t) == 1
        assert value(after, "taskworker_tasks_completed_total", tool=t) == 1
        await wait_until(lambda: fleet.running == 0, what="every slot free")
        assert value(await scrape(port), "taskworker_tasks_in_flight", tool=t) == 0
    finally:
        fleet.drain()
        await asyncio.wait_for(running, 30)
        stop_metrics()


async def test_no_observer_no_metrics(stub: Stub) -> None:
    fleet = WorkerFleet(stub)
    assert fleet.observer is None and fleet.reports.on_batch is None


async def test_queue_gauges_follow_the_queue_on_their_interval(stub: Stub, database_url: str) -> None:
    """The gauges move when a refresh runs (one GetQueueStats on the interval), not per scrape."""
    tool = (await stub.RegisterTool(pb.RegisterToolRequest(name=f"gauges-{uuid.uuid4().hex[:8]}"))).tool
    gauges = QueueGauges(stub, interval=3600)
    registry = new_registry()
    registry.register(gauges)
    port, stop_metrics = serve_registry("127.0.0.1:0", registry)
    try:
        await gauges.refresh()
        labels = {"tool": tool.id, "tool_name": tool.name}
        empty = await scrape(port)
        assert value(empty, "taskqueue_tasks", status="queued", **labels) == 0
        assert ("taskqueue_tasks", frozenset({**labels, "status": "queued"}.items())) in empty, "an idle tool shows 0"
        await stub.QueueTasks(pb.QueueTasksRequest(tool_ids=[tool.id] * 3))
        await sql(database_url, "UPDATE generation.tasks SET created_at = now() - interval '90 seconds' WHERE tool_id = %s",
                  tool.id)  # fmt: skip
        await stub.ClaimNextTask(pb.ClaimNextTaskRequest(tool_id=tool.id))
        unchanged = await scrape(port)
        assert value(unchanged, "taskqueue_tasks", status="queued", **labels) == 0, "a scrape runs no statement"
        await gauges.refresh()
        now = await scrape(port)
        assert value(now, "taskqueue_tasks", status="queued", **labels) == 2
        assert value(now, "taskqueue_tasks", status="processing", **labels) == 1
        assert 90 <= value(now, "taskqueue_oldest_age_seconds", status="queued", **labels) < 200
        stop = asyncio.Event()
        runner = asyncio.create_task(QueueGauges(stub, interval=0.05).run(stop))
        stop.set()
        await asyncio.wait_for(runner, 10)
    finally:
        stop_metrics()
