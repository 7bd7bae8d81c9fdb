"""What every task-event transport shares (events.py tells the whole design): the event kinds and
limits, the stored `TaskEvent`, the buffered `PendingEvent`, the writer's and the reader's
protocols, and `ReadProgress`, where a reader of one task's stream is (resume, idle deadline,
reconnect back-off)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

import grpc

from . import config, retry
from .limits import DEFAULT_MESSAGE_BYTES, FRAMING_MARGIN

PROGRESS = "progress"
URL = "url"
OUTPUT = "output"
TERMINAL = "terminal"

DEFAULT_MAXLEN = 10_000  # Redis: entries kept per task stream (approximate trim)
DEFAULT_RETENTION = 3600.0  # seconds a task's events are kept after its terminal event
DEFAULT_IDLE_TTL = 86_400.0  # seconds a stream without a terminal event lives past its last event
DEFAULT_MAX_EVENT_BYTES = 1024 * 1024  # an event's JSON data at most
#: A batch of events written at once, at most (under the server's receive limit).
DEFAULT_BATCH_BYTES = DEFAULT_MESSAGE_BYTES - FRAMING_MARGIN
#: A page of events read at once, at most (under the server's send limit).
DEFAULT_PAGE_BYTES = 4_000_000


def events_key(task_id: str, environment_name: str | None = None) -> str:
    """`{env}:common:task:{id}:events`, namespaced by the deploy environment."""
    env = environment_name if environment_name is not None else config.environment()
    return f"{env}:common:task:{task_id}:events"


@dataclass(frozen=True)
class TaskEvent:
    """One stored event. `data` is the decoded JSON; `emitted_at` is the worker's clock (unix s)."""

    task_id: str
    seq: int
    kind: str
    data: Any
    emitted_at: float

    @property
    def terminal(self) -> bool:
        return self.kind == TERMINAL


@dataclass
class PendingEvent:
    """An event in the emit buffer; it has no sequence number until stored."""

    task_id: str
    kind: str
    data: str  # JSON text
    emitted_at: float
    # A terminal event whose data is an object: how many of its task's events were lost before
    # it, filled in as its batch is written (the transport adds what the store itself lost, and
    # sets `"dropped"` in the data when the total is not 0). -1: not such an event.
    dropped: int = -1

    @property
    def size(self) -> int:
        """Its share of a batch written or a page read."""
        return 64 + len(self.task_id) + len(self.kind) + len(self.data.encode())

    def data_with_dropped(self, lost: int = 0) -> str:
        """`data`, with `"dropped"` set to this event's count plus `lost` when that is not 0."""
        total = self.dropped + lost
        if self.dropped < 0 or total <= 0:
            return self.data
        return json.dumps({**json.loads(self.data), "dropped": total})


class EventTransport(Protocol):
    async def append(self, batch: list[PendingEvent]) -> dict[str, int] | None:
        """Store the batch, per task in order; raise on failure (the batch is then dropped).
        Returns, per task, how many of its events stored earlier the store was found to have
        lost (already added to a terminal event of this batch); None or {}: none."""

    async def aclose(self) -> None: ...


class EventSource(Protocol):
    def watch(self, task_id: str, from_seq: int, idle_timeout: float | None) -> AsyncIterator[TaskEvent]: ...


class ReadProgress:
    """Where a reader of one task's events is: the last seq it yielded (a reconnect resumes after
    it), the idle deadline (reset by every event, and kept while reconnecting: a reader of a
    store that is away times out as one of a silent stream does), the reconnect back-off
    (retry.py: doubling to a maximum, jittered, reset once a read succeeds)."""

    def __init__(self, task_id: str, from_seq: int, idle_timeout: float | None, reconnect_max: float) -> None:
        self.task_id = task_id
        self.after = max(from_seq, 1) - 1
        self.idle_timeout = idle_timeout
        self.reconnect_max = reconnect_max
        self.deadline = None if idle_timeout is None else time.monotonic() + idle_timeout
        self.backoff = retry.Backoff("events read", cap=max(reconnect_max, 0.05))
        self.largest = 1  # bytes of the largest event seen (Redis pages)

    def seen(self, event: TaskEvent) -> TaskEvent:
        self.after = event.seq
        if self.idle_timeout is not None:
            self.deadline = time.monotonic() + self.idle_timeout
        return event

    def remaining(self) -> float | None:
        """Seconds left before the idle timeout (0 once passed), None without one."""
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def timed_out(self) -> TimeoutError:
        return TimeoutError(f"no event for task {self.task_id} after seq {self.after} in {self.idle_timeout}s")

    def connected(self) -> None:
        self.backoff.reset()

    def bounded(self, seconds: float) -> float:
        """`seconds`, or less if the idle deadline comes first; TimeoutError once it passed."""
        remaining = self.remaining()
        if remaining is None:
            return seconds
        if remaining == 0:
            raise self.timed_out()
        return min(seconds, remaining)

    async def back_off(self, why: grpc.aio.AioRpcError | str) -> None:
        """Wait before reconnecting (never past the idle deadline: then TimeoutError)."""
        delay = self.bounded(self.backoff.next_delay())
        retry.COUNTS[(self.backoff.what, why if isinstance(why, str) else why.code().name, "transient")] += 1
        await asyncio.sleep(delay)
        self.bounded(0.0)
