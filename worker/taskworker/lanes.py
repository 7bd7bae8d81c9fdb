"""What a fleet holds per tool and per task: the lane (a tool's slots, held tasks, wake events),
the held task (its context, heartbeat schedule, running work), the tool's `TaskContext`, the
exceptions and result type a tool may use, and the fleet's counters.

`Resume` lets the fleet run a tool's first step eagerly, in the claim loop (fleet.py `_start`):
a tool that returns without awaiting (a no-op, a cache hit) costs no asyncio task at all; one
that awaits goes on in a task from where it stopped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from generation.task.v1 import task_pb2 as pb

from . import events as task_events

if TYPE_CHECKING:
    from .fleet import WorkerFleet


class RetryAfter(Exception):
    """Raised by a tool: fail this attempt, claimable again after `seconds` (while retries remain)."""

    def __init__(self, seconds: float, message: str = "") -> None:
        super().__init__(message or f"retry in {seconds:g} s")
        self.seconds = max(float(seconds), 0.0)


class Snooze(Exception):
    """Raised by a tool: back to the queue, claimable after `seconds`; not a failed attempt."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"snooze {seconds:g} s")
        self.seconds = max(float(seconds), 0.0)


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
        # The two below are made when first read (most tasks never need them).
        self._cancel_requested: asyncio.Event | None = None
        self._runtime_exceeded: asyncio.Event | None = None
        self.claimed_at = time.monotonic()

    @property
    def cancel_requested(self) -> asyncio.Event:
        """Set when the task was cancelled (CancelTask): stop soon; after the fleet's cancel_grace
        the coroutine is cancelled. Its result would be refused, so none is reported."""
        if self._cancel_requested is None:
            self._cancel_requested = asyncio.Event()
        return self._cancel_requested

    @property
    def runtime_exceeded(self) -> asyncio.Event:
        """Set when the attempt ran past its run-time limit (the heartbeat said so): the work is
        cancelled at once and the reaper fails the attempt."""
        if self._runtime_exceeded is None:
            self._runtime_exceeded = asyncio.Event()
        return self._runtime_exceeded

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

    @property
    def stopped(self) -> bool:
        """Cancelled, or past its run-time limit: whatever the work ends with is not reported."""
        cancelled, overdue = self._cancel_requested, self._runtime_exceeded
        return (cancelled is not None and cancelled.is_set()) or (overdue is not None and overdue.is_set())


# `process` returns a JSON-serialisable output, or a TaskResult carrying JSON text.
Process = Callable[[pb.Task, TaskContext], Coroutine[Any, Any, Any]]


@dataclass(slots=True)
class Held:
    """A claimed task while it runs and reports: what its heartbeat needs."""

    task: pb.Task
    ctx: TaskContext
    due: float  # monotonic time of the next heartbeat
    interval: float  # seconds between heartbeats: half the lease this claim took, at most
    # The asyncio task running the rest of the tool (and a failure's report); None while the
    # tool has not awaited yet, or when it finished on its first step.
    work: asyncio.Task[None] | None = None
    reporting: bool = False

    def cancel_work(self) -> None:
        """Stop the tool (a lost lease, a cancellation's grace over): never once it finished,
        since its outcome, on its way, decides then."""
        if not self.reporting and self.work is not None:
            self.work.cancel()


@dataclass
class Lane:
    tool_id: str
    process: Process
    concurrency: int
    heartbeat_interval: float
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    # Per task held: its work (an asyncio task) while the tool runs, then its report's answer
    # (a future) while the outcome is on its way. The drain waits on these, then cancels them.
    running: dict[str, asyncio.Future[Any]] = field(default_factory=dict)
    held: dict[str, Held] = field(default_factory=dict)
    reporting: int = 0  # of `running`, those whose work is done and whose outcome is on its way
    beat_tick: float = 1.0  # how often the heartbeat loop now checks due times
    beat_wake: asyncio.Event = field(default_factory=asyncio.Event)  # a task needs a finer tick
    asked: int = 0  # slots the claims in flight asked for (claims.py)


class Resume:
    """The rest of a coroutine whose first step already ran: awaiting it hands the task what
    that step yielded (the future it waits on), then drives the coroutine on, passing in what
    the task sends and throws (a cancellation reaches the tool where it waits)."""

    __slots__ = ("coro", "step")

    def __init__(self, coro: Coroutine[Any, Any, Any], step: Any) -> None:
        self.coro, self.step = coro, step

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, step = self.coro, self.step
        while True:
            try:
                sent = yield step
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # thrown in by the task (a cancellation): the tool's to handle
                try:
                    step = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    step = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


@dataclass
class FleetStats:
    claimed: int = 0
    completed: int = 0
    failed: int = 0
    # Tasks whose terminal outcome is `lease_lost`: their result or failure did not land.
    lease_lost: int = 0
    # Of `completed` + `failed`: landed by a report whose answer was lost (a kill, a cut
    # connection), found by GetTask when the resent batch left them out. A heartbeat refused
    # meanwhile (the row took the outcome, which ends the lease) does not make them lost.
    landed_after_lost_answer: int = 0
    heartbeats_refused: int = 0  # the task is no longer `processing` under our token
    abandoned: int = 0  # cancelled by a drain timeout: left for the lease to lapse
    sweeps: int = 0
    heartbeat_errors: int = 0  # transient: the lease may still hold, so the work goes on
    cancelled: int = 0  # cancelled by CancelTask while running: stopped, not reported
    runtime_exceeded: int = 0  # past their run-time limit: stopped, left to the reaper
    snoozed: int = 0  # Snooze raised: back in the queue, no retry burnt
    refused_too_large: int = 0  # of `failed`: a result too large to ever land, failed for good
    claim_errors: int = 0


async def raised(err: BaseException) -> Any:
    """A tool's first step that raised, as the work to await (its failure path runs in a task)."""
    raise err
