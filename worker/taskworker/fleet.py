"""WorkerFleet: claim, heartbeat, complete or fail, with concurrency lanes and graceful drain.

A fleet hosts one or more tools. Each tool is a *lane*: the user's `process(task, ctx)`, a
concurrency limit, and a poll loop (claims.py) that

1. clears the lane's wake event *before* each sweep, so a wake that lands mid-sweep is kept
   and triggers another sweep (no lost wakeup);
2. claims as many tasks as it has free slots (ClaimTasks) and keeps claiming while the queue
   fills them (fast drain);
3. backs off `capacity_backoff` (0.25 s) when every slot is busy (a finishing task ends the
   back-off early);
4. otherwise parks on the wake event, with a jittered fallback of `poll_interval` (2.0 s).

A claim asks for at most the lane's free slots and at most `claim_max_bytes` of answer (under
the channel's 4 MiB receive limit), so the data plane never commits a claim that cannot reach
this worker. A claimed task's tool starts at once, in the poll loop: one that returns without
awaiting costs no asyncio task (its result goes straight to the batcher, and a callback ends the
attempt when the answer comes); one that awaits goes on in one task, from where it stopped
(lanes.py `Resume`), in a context of its own. Every claimed task runs with a background heartbeat at half the lease its claim took (the
claim's answer carries it: the task's own lease, else its tool's) or every `heartbeat_interval`
(60 s) if sooner.
A heartbeat the data plane rejects (the lease was lost: someone reclaimed the task, or the
reaper failed it) cancels the work, which is then never reported. Otherwise the outcome goes to
the `ReportBatcher` (reports.py): results and failures of all lanes are coalesced for at most
`report_window` seconds (or `report_batch` outcomes) into one CompleteTasks / FailTasks each,
every task fenced by its own lease token and told whether its own row took the outcome. An
outcome is kept and resent across outages until it lands or its lease is certainly lost; the
heartbeat keeps the lease alive meanwhile. Claims and reports use `wait_for_ready`.
Report batches are bounded by bytes too (`server_receive_bytes`, `server_send_bytes`: the
server's message limits, gRPC's 4 MiB by default); a result too large to ever be stored and
read back fails its task for good with an error saying so (reports.py). A claim refused
permanently (retry.py: a tool id the server rejects, say) backs off to `poll_interval` x 8.

Scheduling from the tool's side (docs/worker.md, "Delays, backoff, cancellation"): a tool
raises `RetryAfter(seconds)` to fail this attempt and be claimable again after that long
(retries remain: otherwise failed), or `Snooze(seconds)` to go back to the queue without
burning a retry (SnoozeTask). A plain exception is retried after the tool's retry policy.
A task cancelled while running (CancelTask) is learnt from the heartbeat's `cancel_requested`
or at once from `request_cancel` (a `CancelWatcher` relaying WatchTaskCancels calls it, and the
heartbeat confirms): `TaskContext.cancel_requested` is set, and after `cancel_grace` seconds
(5.0) the tool's coroutine is cancelled; nothing is reported (the row is already terminal).
A heartbeat answering `runtime_exceeded` (the attempt ran past its run-time limit) cancels the
work at once, unreported: the reaper's ReapOverdueTasks fails it with a clear error.

`drain()` (SIGTERM/SIGINT with `install_signal_handlers`) stops claiming, lets running tasks
finish within `drain_timeout`, then cancels what is left *without* failing it and stops
heartbeating: the leases lapse and another fleet reclaims the work.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import datetime
import functools
import json
import logging
import math
import signal
import time
from collections.abc import Awaitable, Coroutine
from typing import TYPE_CHECKING, Any

import grpc
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from google.protobuf import duration_pb2

from . import events as task_events
from . import retry
from .claims import claimers
from .lanes import FleetStats, Held, Lane, Process, Resume, RetryAfter, Snooze, TaskContext, TaskResult, raised
from .limits import DEFAULT_MESSAGE_BYTES, MessageLimits
from .metrics import FleetObserver
from .reports import LEASE_LOST, Outcome, ReportBatcher

__all__ = ["FleetStats", "Process", "RetryAfter", "Snooze", "TaskContext", "TaskResult", "WorkerFleet"]

log = logging.getLogger("taskworker.fleet")

if TYPE_CHECKING:
    Stub = task_pb2_grpc.GenerationDataServiceAsyncStub

#: Under gRPC's default 4 MiB receive limit, with room for the response's own framing.
DEFAULT_CLAIM_MAX_BYTES = 4_000_000


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
        report_window: float = 0.002,
        report_batch: int = 500,
        report_in_flight: int = 4,
        claim_max_bytes: int = DEFAULT_CLAIM_MAX_BYTES,
        claimers: int = 1,
        server_receive_bytes: int = DEFAULT_MESSAGE_BYTES,
        server_send_bytes: int = DEFAULT_MESSAGE_BYTES,
        events: task_events.EventEmitter | None = None,
        events_flush_timeout: float = 5.0,
        cancel_grace: float = 5.0,
        observer: FleetObserver | None = None,
    ) -> None:
        self.stub = stub
        # Metrics and task spans (metrics.py); None: neither.
        self.observer = observer
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
        self.claim_max_bytes = claim_max_bytes
        # Claim loops per lane, sharing its slots (claims.py): more than one overlaps a claim's
        # round trip with the previous claim's tasks, at the cost of smaller claims.
        self.claimers = claimers
        self.cancel_grace = cancel_grace
        self.reports = ReportBatcher(
            stub,
            window=report_window,
            max_batch=report_batch,
            max_in_flight=report_in_flight,
            rpc_timeout=rpc_timeout,
            limits=MessageLimits(receive=server_receive_bytes, send=server_send_bytes),
            on_batch=None if observer is None else observer.batch,
        )
        self.lanes: dict[str, Lane] = {}
        self.stats = FleetStats()
        self.draining = False
        self.stopping = asyncio.Event()  # set by drain()
        self._loops: list[asyncio.Task[None]] = []
        self._background: list[asyncio.Task[Any]] = []
        self.started = asyncio.Event()

    # -- set-up ------------------------------------------------------------------------------
    def add_tool(
        self, tool_id: str, process: Process, *, concurrency: int = 1, lease_seconds: int | None = None
    ) -> None:
        """Host `tool_id`. With `lease_seconds` (the Tool's, from RegisterTool) the heartbeat comes
        at half the lease, or every `heartbeat_interval` if that is sooner."""
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        beat = min(lease_seconds / 2, self.heartbeat_interval) if lease_seconds else self.heartbeat_interval
        self.lanes[tool_id] = Lane(tool_id, process, concurrency, beat)

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

    def request_cancel(self, task_id: str) -> bool:
        """A task was cancelled (a WatchTaskCancels relay): heartbeat it now, so the data plane's
        answer confirms it. False if this fleet does not hold the task."""
        for lane in self.lanes.values():
            held = lane.held.get(task_id)
            if held is not None:
                if held.due != math.inf:  # not while a beat is in flight: its answer will tell
                    held.due = 0.0
                lane.beat_wake.set()
                return True
        return False

    # -- run ---------------------------------------------------------------------------------
    def drain(self) -> None:
        """Stop claiming; `run` returns once running tasks finish (or drain_timeout passes)."""
        if not self.draining:
            log.info("draining: no new claims, %.1fs for %d running task(s)", self.drain_timeout, self.running)
        self.draining = True
        self.stopping.set()
        self.wake(None)

    @property
    def running(self) -> int:
        return sum(len(lane.running) for lane in self.lanes.values())

    async def run(self) -> None:
        """Poll every lane until `drain()`, then drain."""
        if not self.lanes:
            raise ValueError("add_tool() at least one tool first")
        reporting = asyncio.create_task(self.reports.run(), name="reports")
        beating = [
            asyncio.create_task(self._heartbeats(lane), name=f"heartbeats {lane.tool_id}")
            for lane in self.lanes.values()
        ]
        self._loops = [
            asyncio.create_task(claimer.run(), name=f"poll {lane.tool_id}")
            for lane in self.lanes.values()
            for claimer in claimers(self, lane)
        ]
        self.started.set()
        try:
            await self.stopping.wait()
        finally:
            self.draining = True
            for lane in self.lanes.values():
                lane.wake.set()
            await asyncio.gather(*self._loops, return_exceptions=True)
            await self._finish_running()
            reporting.cancel()
            for beats in beating:
                beats.cancel()
            await asyncio.gather(reporting, *beating, return_exceptions=True)
            if self.events is not None:
                await self.events.flush(self.events_flush_timeout)
            for bg in self._background:
                bg.cancel()
            await asyncio.gather(*self._background, return_exceptions=True)

    async def _finish_running(self) -> None:
        """Wait for every held task's outcome, up to `drain_timeout`: a task's work, then its
        report's answer (a finished work hands over to it), then cancel what is left."""
        deadline = time.monotonic() + self.drain_timeout
        while running := [t for lane in self.lanes.values() for t in lane.running.values()]:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            await asyncio.wait(running, timeout=left)
        else:
            return
        log.warning("drain timeout: abandoning %d task(s); their leases will lapse", len(running))
        self.stats.abandoned += len(running)
        for t in running:
            t.cancel()
        await asyncio.gather(*running, return_exceptions=True)

    # -- one task ----------------------------------------------------------------------------
    def start_task(self, lane: Lane, task: pb.Task) -> None:
        """Hold a claimed task and run the tool's first step now, in the claim loop, in a context
        of its own. A tool that returns without awaiting costs no asyncio task: its outcome goes
        straight to the report batcher. One that awaits goes on in a task (`_attempt`) from where
        it stopped; so does a first step that raised, for its failure's report."""
        self.stats.claimed += 1
        ctx = TaskContext(task, self)
        # Heartbeats go on until the outcome is reported, so a slow report keeps the lease.
        interval = self._beat_interval(lane, task)
        held = Held(task, ctx, time.monotonic() + interval, interval)
        lane.held[task.id] = held
        if interval / 4 < lane.beat_tick:  # a shorter lease than the loop's tick serves
            lane.beat_wake.set()
        context = contextvars.copy_context()
        if self.observer is not None:  # the span holds the whole attempt, in its task's context
            work: Coroutine[Any, Any, None] = self._observed(lane, held)
        else:
            coro = lane.process(task, ctx)
            try:
                step = context.run(coro.send, None)
            except StopIteration as stop:
                self._done(lane, held, stop.value)
                return
            except (Exception, asyncio.CancelledError) as err:  # the tool failed: _attempt reports it
                work = self._attempt(lane, held, raised(err))
            else:
                work = self._attempt(lane, held, Resume(coro, step))
        held.work = lane.running[task.id] = asyncio.create_task(work, name=f"task {task.id}", context=context)

    async def _observed(self, lane: Lane, held: Held) -> None:
        assert self.observer is not None
        with self.observer.task_span(held.task):
            await self._attempt(lane, held, lane.process(held.task, held.ctx))
            landed = lane.running.get(held.task.id)
            if landed is not None and landed is not held.work:  # the outcome on its way
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(landed)

    async def _attempt(self, lane: Lane, held: Held, work: Awaitable[Any]) -> None:
        """The rest of a tool that awaited (or raised), then its outcome: a result goes on to
        `_done`; a failure is reported from here."""
        task, ctx = held.task, held.ctx
        # The terminal event's data; every way out of this method sets it (None: `_done` will).
        outcome: dict[str, Any] | None = {"outcome": "abandoned", "retrying": True}
        try:
            try:
                result = await work
            except asyncio.CancelledError:
                if ctx.stopped:
                    outcome = self._stopped(task, ctx)
                    return
                if ctx.lease_lost.is_set():
                    log.warning("task %s: lease lost, work cancelled, not reported", task.id)
                    outcome = {"outcome": "lease_lost", "retrying": True}
                    return
                raise  # the drain timeout: no report, the lease lapses
            except Snooze as snooze:
                self._reporting(lane, held)
                outcome = await self._snooze(task, ctx, snooze.seconds)
                return
            except Exception as err:
                error = f"{type(err).__name__}: {err}"
                self._reporting(lane, held)
                retry_after = err.seconds if isinstance(err, RetryAfter) else None
                if ctx.stopped:
                    outcome = self._stopped(task, ctx)
                elif ctx.lease_lost.is_set():
                    outcome = {"outcome": "lease_lost", "retrying": True}
                elif await self._report_fail(task, ctx, error, retry_after):
                    retrying = task.retry_count + 1 < task.max_retries  # as FailTask decides
                    outcome = {"outcome": "failed", "error": error, "retrying": retrying}
                elif ctx.lease_lost.is_set():  # the report was refused: the lease is gone
                    outcome = {"outcome": "lease_lost", "retrying": True}
                return
            outcome = None
            self._done(lane, held, result)
        finally:
            if outcome is not None:
                self._end(lane, held, outcome)

    def _done(self, lane: Lane, held: Held, result: Any) -> None:
        """The tool returned: its result goes to the batcher, and `_landed` ends the attempt
        once the batch's answer says whether the row took it."""
        task, ctx = held.task, held.ctx
        if ctx.stopped:
            self._end(lane, held, self._stopped(task, ctx))
            return
        if ctx.lease_lost.is_set():
            log.warning("task %s finished after its lease was lost; not reported", task.id)
            self._end(lane, held, {"outcome": "lease_lost", "retrying": True})
            return
        self._reporting(lane, held)
        if isinstance(result, TaskResult):
            output, usage = result.output, result.reported_usage
        else:
            output = "null" if result is None else json.dumps(result)
            usage = None
        if usage is None and ctx.usage:
            usage = json.dumps(ctx.usage)
        outcome = Outcome("complete", task, ctx.lease_lost, output=output or "null", reported_usage=usage or "")
        landed = self.reports.submit(outcome)
        lane.running[task.id] = landed  # the drain waits on the answer now, and may cancel it
        landed.add_done_callback(functools.partial(self._landed, lane, held, outcome))

    def _landed(self, lane: Lane, held: Held, outcome: Outcome, landed: asyncio.Future[bool]) -> None:
        if landed.cancelled():  # the drain timeout: no report, the lease lapses
            self._end(lane, held, {"outcome": "abandoned", "retrying": True})
        elif not landed.result():  # refused: the lease is gone
            held.ctx.lease_lost.set()
            self._end(lane, held, {"outcome": "lease_lost", "retrying": True})
        else:
            if outcome.landed_unseen:
                self.stats.landed_after_lost_answer += 1
            if outcome.kind == "complete":
                self.stats.completed += 1
                self._end(lane, held, {"outcome": "completed", "retrying": False})
            else:  # too large to ever land: failed for good instead
                self.stats.failed += 1
                self.stats.refused_too_large += 1
                self._end(lane, held, {"outcome": "failed", "error": outcome.error, "retrying": False})

    def _end(self, lane: Lane, held: Held, outcome: dict[str, Any]) -> None:
        """The attempt is over: its terminal event, counters, and its slot freed."""
        task_id = held.task.id
        if outcome["outcome"] == "lease_lost":
            self.stats.lease_lost += 1
        if self.observer is not None and outcome["outcome"] in ("completed", "failed", "lease_lost"):
            self.observer.count(outcome["outcome"], lane.tool_id)
        if self.events is not None:
            self.events.emit(task_id, task_events.TERMINAL, outcome)
        lane.held.pop(task_id, None)
        if held.reporting:
            lane.reporting -= 1
        lane.running.pop(task_id, None)
        lane.wake.set()  # a slot is free: end a capacity back-off early

    def _stopped(self, task: pb.Task, ctx: TaskContext) -> dict[str, Any]:
        """The work ended after a cancellation or past its run-time limit: nothing to report."""
        if ctx.cancel_requested.is_set():
            log.info("task %s: cancelled, work stopped, not reported", task.id)
            self.stats.cancelled += 1
            return {"outcome": "cancelled", "retrying": False}
        log.warning("task %s: past its run-time limit, work stopped; the reaper fails the attempt", task.id)
        self.stats.runtime_exceeded += 1
        return {"outcome": "runtime_exceeded", "retrying": task.retry_count + 1 < task.max_retries}

    async def _snooze(self, task: pb.Task, ctx: TaskContext, seconds: float) -> dict[str, Any]:
        delay = duration_pb2.Duration()
        delay.FromTimedelta(datetime.timedelta(seconds=seconds))
        try:
            await self.stub.SnoozeTask(
                pb.SnoozeTaskRequest(task_id=task.id, lease_token=task.lease_token, delay=delay),
                timeout=self.rpc_timeout,
                wait_for_ready=True,
            )
        except grpc.aio.AioRpcError as err:
            # The lease is gone (or the data plane is away: the lease lapses and the task is
            # reclaimed, as after a crash).
            log.warning("task %s: snooze refused: %s %s", task.id, err.code().name, err.details())
            ctx.lease_lost.set()
            return {"outcome": "lease_lost", "retrying": True}
        self.stats.snoozed += 1
        return {"outcome": "snoozed", "retrying": True}

    def _cancel_soon(self, held: Held) -> None:
        """CancelTask reached this task: tell the tool, cancel its coroutine after the grace."""
        if held.ctx.cancel_requested.is_set():
            return
        log.info("task %s: cancel requested; stopping it within %.1fs", held.task.id, self.cancel_grace)
        held.ctx.cancel_requested.set()
        if not held.reporting:
            asyncio.get_running_loop().call_later(self.cancel_grace, held.cancel_work)

    @staticmethod
    def _reporting(lane: Lane, held: Held) -> None:
        """The work is done: its slot is free for a new claim while the outcome is reported."""
        held.reporting = True
        lane.reporting += 1
        lane.wake.set()

    def _beat_interval(self, lane: Lane, task: pb.Task) -> float:
        """Half the lease the claim took (its answer carries it: the task's own, else the tool's),
        or the lane's interval for an answer without it; never above `heartbeat_interval`."""
        if task.HasField("lease_seconds") and task.lease_seconds > 0:
            return min(task.lease_seconds / 2, self.heartbeat_interval)
        return lane.heartbeat_interval

    async def _heartbeats(self, lane: Lane) -> None:
        """One loop per lane beats every held task when due (a task of its own per claim would cost
        more than a no-op task's whole work). Due times are checked every quarter interval, at
        most every second, so a beat comes at most that late: far inside the lease's other half.
        A task claimed with a shorter lease than any held wakes the loop to tick finer at once."""
        in_flight: set[asyncio.Task[None]] = set()
        try:
            while True:
                shortest = min((h.interval for h in lane.held.values()), default=lane.heartbeat_interval)
                lane.beat_tick = max(min(shortest / 4, 1.0), 0.01)
                lane.beat_wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(lane.beat_tick):
                        await lane.beat_wake.wait()
                now = time.monotonic()
                for held in [h for h in lane.held.values() if h.due <= now]:
                    held.due = math.inf  # until this beat is answered
                    beat = asyncio.create_task(self._beat(held), name=f"heartbeat {held.task.id}")
                    in_flight.add(beat)
                    beat.add_done_callback(in_flight.discard)
        finally:
            for beat in in_flight:
                beat.cancel()

    async def _beat(self, held: Held) -> None:
        task, ctx = held.task, held.ctx
        try:
            beat = await self.stub.HeartbeatTask(
                pb.HeartbeatTaskRequest(task_id=task.id, lease_token=task.lease_token), timeout=self.rpc_timeout
            )
            if beat.cancel_requested:
                self._cancel_soon(held)
                return  # no more beats: the row is terminal
            if beat.runtime_exceeded:
                log.warning("task %s: heartbeat refused: past its run-time limit", task.id)
                self.stats.heartbeats_refused += 1
                ctx.runtime_exceeded.set()
                held.cancel_work()
                return
            held.due = time.monotonic() + held.interval
        except grpc.aio.AioRpcError as err:
            if err.code() in LEASE_LOST:
                log.warning("task %s: heartbeat rejected (%s): lease lost", task.id, err.details())
                # Counted as lost only by the task's terminal outcome (_work): a report in
                # flight may yet show the row took it.
                self.stats.heartbeats_refused += 1
                ctx.lease_lost.set()
                # While its outcome is on the wire, the report's own answer decides (the row may
                # have just taken it, which ends a lease too); before that, the work is moot.
                held.cancel_work()
                return
            # Transient (data plane unreachable): retry sooner; the lease may still hold. Anything
            # else is logged as permanent by retry.py and retried at the normal pace: only the
            # data plane's word (LEASE_LOST above) ends the work.
            log.warning("task %s: heartbeat failed: %s", task.id, err.code().name)
            if retry.record("heartbeat", err) == "permanent":
                self.stats.heartbeat_errors += 1
                held.due = time.monotonic() + held.interval
                return
            self.stats.heartbeat_errors += 1
            held.due = time.monotonic() + max(held.interval / 4, 0.05)

    async def _report_fail(self, task: pb.Task, ctx: TaskContext, error: str, retry_after: float | None) -> bool:
        if await self._report(ctx, Outcome("fail", task, ctx.lease_lost, error=error, retry_after=retry_after)):
            self.stats.failed += 1
            return True
        return False

    async def _report(self, ctx: TaskContext, outcome: Outcome) -> bool:
        """Through the batcher; False (the lease is gone) also sets ctx.lease_lost."""
        if await self.reports.report(outcome):
            if outcome.landed_unseen:
                self.stats.landed_after_lost_answer += 1
            return True
        ctx.lease_lost.set()
        return False
