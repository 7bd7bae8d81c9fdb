"""WorkerFleet: claim, heartbeat, complete or fail, with concurrency lanes and graceful drain.

A fleet hosts one or more tools. Each tool is a *lane*: the user's `process(task, ctx)`, a
concurrency limit, and a poll loop that

1. clears the lane's wake event *before* each sweep, so a wake that lands mid-sweep is kept
   and triggers another sweep (no lost wakeup);
2. claims as many tasks as it has free slots (ClaimTasks) and keeps claiming while the queue
   fills them (fast drain);
3. backs off `capacity_backoff` (0.25 s) when every slot is busy (a finishing task ends the
   back-off early);
4. otherwise parks on the wake event, with a jittered fallback of `poll_interval` (2.0 s).

Every claimed task runs with a background heartbeat every `heartbeat_interval` (60 s against
the 120 s lease). A heartbeat the data plane rejects (the lease was lost: someone reclaimed the
task, or the reaper failed it) cancels the work, which is then never reported. Otherwise the
task ends with CompleteTask (output, reported usage) or FailTask(increment_retry=true).

`drain()` (SIGTERM/SIGINT with `install_signal_handlers`) stops claiming, lets running tasks
finish within `drain_timeout`, then cancels what is left *without* failing it and stops
heartbeating: the leases lapse and another fleet reclaims the work.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import signal
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import grpc
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc

from . import events as task_events

log = logging.getLogger("taskworker.fleet")

if TYPE_CHECKING:
    Stub = task_pb2_grpc.GenerationDataServiceAsyncStub

# Statuses with which the data plane says "this lease is not yours any more".
LEASE_LOST = (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND)
# Worth another try: the data plane or its database is briefly unreachable.
TRANSIENT = (
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.ABORTED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
)


@dataclass
class TaskResult:
    """What `process` may return to set the output and usage as JSON text directly."""

    output: str | None = None
    reported_usage: str | None = None


class TaskContext:
    """Handed to `process` with the task: usage reporting, live events and the lease state."""

    def __init__(self, task: pb.Task, fleet: WorkerFleet) -> None:
        self.task = task
        self.fleet = fleet
        self.usage: dict[str, Any] = {}
        self.lease_lost = asyncio.Event()
        self.claimed_at = time.monotonic()

    def report_usage(self, **amounts: Any) -> None:
        """Merged into the `reported_usage` JSON sent with CompleteTask (read to settle billing)."""
        self.usage.update(amounts)

    # Live events (docs/worker.md, "Live task events"): best effort, never block, never raise;
    # False when the event was dropped (buffer full) or the fleet has no event emitter.
    def emit_progress(self, fraction: float, message: str = "") -> bool:
        """Progress in [0, 1] (clamped) with an optional human-readable message."""
        return self.emit(task_events.PROGRESS, {"fraction": min(max(float(fraction), 0.0), 1.0), "message": message})

    def emit_url(self, url: str, **extra: Any) -> bool:
        """A URL the caller can open now, e.g. a streaming URL for the result."""
        return self.emit(task_events.URL, {"url": url, **extra})

    def emit_output(self, chunk: Any) -> bool:
        """A chunk of partial output (any JSON value); the final output still goes with CompleteTask."""
        return self.emit(task_events.OUTPUT, {"chunk": chunk})

    def emit(self, kind: str, data: Any) -> bool:
        """An event of any other kind (`terminal` is the fleet's own)."""
        if self.fleet.events is None or kind == task_events.TERMINAL:
            return False
        return self.fleet.events.emit(self.task.id, kind, data)


# `process` returns a JSON-serialisable output, or a TaskResult carrying JSON text.
Process = Callable[[pb.Task, TaskContext], Coroutine[Any, Any, Any]]


@dataclass
class _Lane:
    tool_id: str
    process: Process
    concurrency: int
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    running: dict[str, asyncio.Task[None]] = field(default_factory=dict)


@dataclass
class FleetStats:
    claimed: int = 0
    completed: int = 0
    failed: int = 0
    lease_lost: int = 0
    abandoned: int = 0  # cancelled by a drain timeout: left for the lease to lapse
    sweeps: int = 0
    heartbeat_errors: int = 0  # transient: the lease may still hold, so the work goes on


class WorkerFleet:
    def __init__(
        self,
        stub: Stub,
        *,
        poll_interval: float = 2.0,
        poll_jitter: float = 0.1,
        heartbeat_interval: float = 60.0,
        capacity_backoff: float = 0.25,
        drain_timeout: float = 30.0,
        rpc_timeout: float = 10.0,
        report_timeout: float = 60.0,
        events: task_events.EventEmitter | None = None,
        events_flush_timeout: float = 5.0,
    ) -> None:
        self.stub = stub
        # Live task events: TaskContext.emit_* and a terminal event per attempt. The caller
        # owns the emitter (and closes it); `run` only flushes it, for `events_flush_timeout`.
        self.events = events
        self.events_flush_timeout = events_flush_timeout
        self.poll_interval = poll_interval
        self.poll_jitter = poll_jitter
        self.heartbeat_interval = heartbeat_interval
        self.capacity_backoff = capacity_backoff
        self.drain_timeout = drain_timeout
        self.rpc_timeout = rpc_timeout
        self.report_timeout = report_timeout
        self.lanes: dict[str, _Lane] = {}
        self.stats = FleetStats()
        self._draining = False
        self._stop = asyncio.Event()
        self._loops: list[asyncio.Task[None]] = []
        self._background: list[asyncio.Task[Any]] = []
        self.started = asyncio.Event()

    # -- set-up ------------------------------------------------------------------------------
    def add_tool(self, tool_id: str, process: Process, *, concurrency: int = 1) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.lanes[tool_id] = _Lane(tool_id, process, concurrency)

    def add_background(self, coro: Awaitable[Any]) -> None:
        """Run `coro` (a wake subscriber, say) for the fleet's lifetime."""
        self._background.append(asyncio.ensure_future(coro))

    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.drain)

    # -- wake --------------------------------------------------------------------------------
    def wake(self, tool_id: str | None = None) -> bool:
        """Wake the lane hosting `tool_id` (every lane when None); False if none hosts it."""
        if tool_id is None:
            for lane in self.lanes.values():
                lane.wake.set()
            return True
        hosting = self.lanes.get(tool_id)
        if hosting is None:
            return False
        hosting.wake.set()
        return True

    # -- run ---------------------------------------------------------------------------------
    def drain(self) -> None:
        """Stop claiming; `run` returns once running tasks finish (or drain_timeout passes)."""
        if not self._draining:
            log.info("draining: no new claims, %.1fs for %d running task(s)", self.drain_timeout, self.running)
        self._draining = True
        self._stop.set()
        self.wake(None)

    @property
    def running(self) -> int:
        return sum(len(lane.running) for lane in self.lanes.values())

    async def run(self) -> None:
        """Poll every lane until `drain()`, then drain."""
        if not self.lanes:
            raise ValueError("add_tool() at least one tool first")
        self._loops = [
            asyncio.create_task(self._poll(lane), name=f"poll {lane.tool_id}") for lane in self.lanes.values()
        ]
        self.started.set()
        try:
            await self._stop.wait()
        finally:
            self._draining = True
            for lane in self.lanes.values():
                lane.wake.set()
            await asyncio.gather(*self._loops, return_exceptions=True)
            await self._finish_running()
            if self.events is not None:
                await self.events.flush(self.events_flush_timeout)
            for bg in self._background:
                bg.cancel()
            await asyncio.gather(*self._background, return_exceptions=True)

    async def _finish_running(self) -> None:
        running = [t for lane in self.lanes.values() for t in lane.running.values()]
        if not running:
            return
        _, pending = await asyncio.wait(running, timeout=self.drain_timeout)
        if pending:
            log.warning("drain timeout: abandoning %d task(s); their leases will lapse", len(pending))
            self.stats.abandoned += len(pending)
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def _poll(self, lane: _Lane) -> None:
        while not self._draining:
            lane.wake.clear()  # before the sweep: a wake during it triggers another sweep
            free = lane.concurrency - len(lane.running)
            if free <= 0:
                timeout = self.capacity_backoff
            else:
                self.stats.sweeps += 1
                try:
                    resp = await self.stub.ClaimTasks(
                        pb.ClaimTasksRequest(tool_id=lane.tool_id, limit=free), timeout=self.rpc_timeout
                    )
                    tasks = list(resp.tasks)
                except grpc.aio.AioRpcError as err:
                    log.warning("claim for tool %s failed: %s %s", lane.tool_id, err.code().name, err.details())
                    tasks = []
                for task in tasks:
                    if self._draining:  # claimed while a drain began: run it anyway, it is ours
                        log.info("task %s claimed during drain; running it", task.id)
                    self.stats.claimed += 1
                    lane.running[task.id] = asyncio.create_task(self._work(lane, task), name=f"task {task.id}")
                if tasks and len(tasks) == free:
                    continue  # fast drain: every slot filled, there may be more
                timeout = self.poll_interval * random.uniform(1 - self.poll_jitter, 1 + self.poll_jitter)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await lane.wake.wait()

    # -- one task ----------------------------------------------------------------------------
    async def _work(self, lane: _Lane, task: pb.Task) -> None:
        ctx = TaskContext(task, self)
        work = asyncio.create_task(lane.process(task, ctx), name=f"process {task.id}")
        # The heartbeat runs until the outcome is reported, so a slow report keeps the lease.
        beat = asyncio.create_task(self._heartbeat(task, ctx, work), name=f"heartbeat {task.id}")
        # The terminal event's data; every way out of this method sets it.
        outcome: dict[str, Any] = {"outcome": "abandoned", "retrying": True}
        try:
            try:
                result = await work
            except asyncio.CancelledError:
                if ctx.lease_lost.is_set():
                    log.warning("task %s: lease lost, work cancelled, not reported", task.id)
                    outcome = {"outcome": "lease_lost", "retrying": True}
                    return
                raise  # the drain timeout: no report, the lease lapses
            except Exception as err:
                error = f"{type(err).__name__}: {err}"
                if ctx.lease_lost.is_set():
                    outcome = {"outcome": "lease_lost", "retrying": True}
                elif await self._report_fail(task, ctx, error):
                    retrying = task.retry_count + 1 < task.max_retries  # as FailTask decides
                    outcome = {"outcome": "failed", "error": error, "retrying": retrying}
                elif ctx.lease_lost.is_set():  # the report was refused: the lease is gone
                    outcome = {"outcome": "lease_lost", "retrying": True}
                return
            if ctx.lease_lost.is_set():
                log.warning("task %s finished after its lease was lost; not reported", task.id)
                outcome = {"outcome": "lease_lost", "retrying": True}
                return
            if await self._report_complete(task, ctx, result):
                outcome = {"outcome": "completed", "retrying": False}
            elif ctx.lease_lost.is_set():  # the report was refused: the lease is gone
                outcome = {"outcome": "lease_lost", "retrying": True}
        finally:
            if self.events is not None:
                self.events.emit(task.id, task_events.TERMINAL, outcome)
            beat.cancel()
            if not work.done():
                work.cancel()
            with contextlib.suppress(BaseException):
                await beat
            lane.running.pop(task.id, None)
            lane.wake.set()  # a slot is free: end a capacity back-off early

    async def _heartbeat(self, task: pb.Task, ctx: TaskContext, work: asyncio.Task[Any]) -> None:
        interval = self.heartbeat_interval
        while True:
            await asyncio.sleep(interval)
            try:
                await self.stub.HeartbeatTask(
                    pb.HeartbeatTaskRequest(task_id=task.id, lease_token=task.lease_token), timeout=self.rpc_timeout
                )
                interval = self.heartbeat_interval
            except grpc.aio.AioRpcError as err:
                if err.code() in LEASE_LOST:
                    log.warning("task %s: heartbeat rejected (%s): lease lost, cancelling", task.id, err.details())
                    self.stats.lease_lost += 1
                    ctx.lease_lost.set()
                    work.cancel()
                    return
                # Transient (data plane unreachable): retry sooner; the lease may still hold.
                log.warning("task %s: heartbeat failed: %s", task.id, err.code().name)
                self.stats.heartbeat_errors += 1
                interval = max(self.heartbeat_interval / 4, 0.05)

    async def _report_complete(self, task: pb.Task, ctx: TaskContext, result: Any) -> bool:
        if isinstance(result, TaskResult):
            output, usage = result.output, result.reported_usage
        else:
            output, usage = json.dumps(result), None
        if usage is None and ctx.usage:
            usage = json.dumps(ctx.usage)
        req = pb.CompleteTaskRequest(task_id=task.id, lease_token=task.lease_token, output=output or "null")
        if usage is not None:
            req.reported_usage = usage
        if await self._report(
            task,
            ctx,
            "CompleteTask",
            lambda: self.stub.CompleteTask(req, timeout=self.rpc_timeout, wait_for_ready=True),
        ):
            self.stats.completed += 1
            return True
        return False

    async def _report_fail(self, task: pb.Task, ctx: TaskContext, error: str) -> bool:
        req = pb.FailTaskRequest(task_id=task.id, lease_token=task.lease_token, error=error, increment_retry=True)
        if await self._report(
            task, ctx, "FailTask", lambda: self.stub.FailTask(req, timeout=self.rpc_timeout, wait_for_ready=True)
        ):
            self.stats.failed += 1
            return True
        return False

    async def _report(self, task: pb.Task, ctx: TaskContext, rpc: str, call: Callable[[], Awaitable[Any]]) -> bool:
        """Send the outcome; retry transient errors while the lease may still hold.

        A rejection is a lost lease, except when an earlier attempt did land and only its
        answer was lost: GetTask tells (the row is terminal or re-queued under our lease).
        """
        deadline = time.monotonic() + self.report_timeout
        attempt = 0
        while True:
            attempt += 1
            try:
                await call()
                return True
            except grpc.aio.AioRpcError as err:
                if err.code() in LEASE_LOST:
                    if attempt > 1 and await self._landed(task, rpc):
                        return True
                    self.stats.lease_lost += 1
                    ctx.lease_lost.set()
                    log.warning("task %s: %s rejected, lease lost: %s", task.id, rpc, err.details())
                    return False
                if err.code() not in TRANSIENT or ctx.lease_lost.is_set() or time.monotonic() > deadline:
                    log.error("task %s: %s failed: %s %s", task.id, rpc, err.code().name, err.details())
                    return False
                log.warning("task %s: %s failed (%s), retrying", task.id, rpc, err.code().name)
                await asyncio.sleep(min(0.05 * 2**attempt, 2.0))

    async def _landed(self, task: pb.Task, rpc: str) -> bool:
        try:
            row = (await self.stub.GetTask(pb.GetTaskRequest(task_id=task.id), timeout=self.rpc_timeout)).task
        except grpc.aio.AioRpcError:
            return False
        if rpc == "CompleteTask":
            return row.status == pb.TASK_STATUS_COMPLETED and row.lease_token == task.lease_token
        return row.status in (pb.TASK_STATUS_QUEUED, pb.TASK_STATUS_FAILED) and row.retry_count == task.retry_count + 1
