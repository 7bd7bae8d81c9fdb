"""Batched reporting: the fleet's results and failures, coalesced into CompleteTasks / FailTasks.

A finished task hands its outcome to a `ReportBatcher` and awaits a per-task answer: True when
its own row took the outcome (fenced by its lease token), False when the lease is certainly
lost. Outcomes wait at most `window` seconds (or until `max_batch` are waiting) and go out in
one statement each; up to `max_in_flight` batches travel at once, so the next batch fills while
one is on the wire.

No result is dropped while its lease may still hold. A batch that fails transiently
(UNAVAILABLE, DEADLINE_EXCEEDED, ...) is kept and sent again (with `wait_for_ready`, so it
waits for the server rather than failing fast) until it lands, however long the outage; the
only ways out are an answer from the server (the row took the outcome, or the lease is gone)
and the task's own `lease_lost` event (a heartbeat rejected). Once a batch was sent without
an answer, an entry missing from a later answer may have landed the first time: GetTask tells.
A batch the server refuses as a whole (one entry's output is not JSON, say) is split into
single CompleteTask / FailTask calls, so each entry gets its own verdict.

Batches are bounded by bytes as well as by count (`MessageLimits`: the server's receive limit
for the request, its send limit for the answer, which carries every row taken, less
`FRAMING_MARGIN`). An outcome that could never fit alone (an output over the receive limit, or a
completed row over the send limit, which no one could ever read back) is not sent: the task is
failed for good, with an error saying so (FailTask, increment_retry false), and logged. A size
refusal from the server (RESOURCE_EXHAUSTED "larger than max") is permanent too, never retried
as it was: a batch is split, a single completion refused that way is failed in the same way.
Which errors are retried, and how (back-off with jitter, a cap, counted): retry.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import grpc
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from google.protobuf import duration_pb2

from . import retry
from .limits import MAX_ERROR_CHARS, MessageLimits, stored_bytes

log = logging.getLogger("taskworker.reports")

if TYPE_CHECKING:
    Stub = task_pb2_grpc.GenerationDataServiceAsyncStub

# Statuses with which the data plane says "this lease is not yours any more".
LEASE_LOST = (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND)

Kind = Literal["complete", "fail"]


@dataclass
class Outcome:
    """One task's result (kind complete: output/usage JSON text) or failure (kind fail: error)."""

    kind: Kind
    task: pb.Task
    lease_lost: asyncio.Event
    output: str = ""
    reported_usage: str = ""
    error: str = ""
    # kind fail: claimable again after this many seconds; None: the tool's retry policy.
    retry_after: float | None = None
    landed: asyncio.Future[bool] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    # Sent at least once without an answer: it may already have landed.
    uncertain: bool = False
    # It had landed, by an attempt whose answer was lost: GetTask found the row took it.
    landed_unseen: bool = False
    attempts: int = 0
    # kind fail: failed for good (FailTask increment_retry false), not re-queued: an output
    # that could never be stored and read back (MessageLimits).
    permanent: bool = False
    # A completion turned into that failure (refuse): if the row is found too large to be read
    # back, it is the completion that landed (the claim's answer fitted without the output).
    refused_completion: bool = False

    def __post_init__(self) -> None:
        if len(self.error) > MAX_ERROR_CHARS:
            self.error = self.error[: MAX_ERROR_CHARS - 20] + f"... ({len(self.error)} chars)"

    @functools.cached_property
    def request_bytes(self) -> int:
        """This entry's share of a CompleteTasks / FailTasks request."""
        return 96 + len(self.output.encode()) + len(self.reported_usage.encode()) + len(self.error.encode())

    @functools.cached_property
    def answer_bytes(self) -> int:
        """This entry's share of the answer: the whole row as it will be (the claimed row, now
        with the output and usage, or the error and its history entry)."""
        extra = stored_bytes(self.output) + stored_bytes(self.reported_usage) + 2 * len(self.error.encode())
        return 256 + self.task.ByteSize() + extra

    def refuse(self, why: str) -> None:
        """Turn a completion that can never land into the task's failure for good."""
        log.error("task %s: %s", self.task.id, why)
        self.kind, self.error, self.permanent, self.refused_completion = "fail", why, True, True
        self.output = self.reported_usage = ""
        for size in ("request_bytes", "answer_bytes"):  # measured again, without the output
            self.__dict__.pop(size, None)

    def settle(self, landed: bool) -> None:
        if not self.landed.done():
            self.landed.set_result(landed)


@dataclass
class ReportStats:
    batches: int = 0
    reported: int = 0
    retried_batches: int = 0  # transient failures, kept and sent again
    lease_lost: int = 0
    split_batches: int = 0  # refused as a whole, resent one by one
    landed_unseen: int = 0  # of `reported`, those that landed by an attempt whose answer was lost
    skipped_locked: int = 0  # entries a batch left out while their row was locked, sent again
    refused_too_large: int = 0  # completions that could never fit: failed for good instead
    byte_bounded: int = 0  # batches closed by the byte limits before `max_batch`


class ReportBatcher:
    def __init__(
        self,
        stub: Stub,
        *,
        window: float = 0.002,
        max_batch: int = 500,
        max_in_flight: int = 4,
        rpc_timeout: float = 10.0,
        max_backoff: float = 1.0,
        limits: MessageLimits | None = None,
        on_batch: Callable[[Kind, int], None] | None = None,
    ) -> None:
        if max_batch < 1 or max_in_flight < 1 or window < 0:
            raise ValueError("max_batch and max_in_flight must be >= 1 and window >= 0")
        self.stub = stub
        self.window = window
        self.max_batch = max_batch
        self.rpc_timeout = rpc_timeout
        self.max_backoff = max_backoff
        self.limits = limits or MessageLimits()
        #: Told each batch's kind and size as it is sent (FleetObserver.batch).
        self.on_batch = on_batch
        self.stats = ReportStats()
        self._waiting: dict[Kind, deque[Outcome]] = {"complete": deque(), "fail": deque()}
        self._ready = asyncio.Event()  # something waits
        self._full = asyncio.Event()  # a whole batch waits
        self._slots = asyncio.Semaphore(max_in_flight)
        self._sends: set[asyncio.Task[None]] = set()

    # -- the fleet's side --------------------------------------------------------------------
    async def report(self, outcome: Outcome) -> bool:
        """Queue `outcome`; True once its row took it, False when its lease is certainly lost.
        A completion that could never fit is turned into the task's failure (`outcome.kind`
        says which landed)."""
        return await self.submit(outcome)

    def submit(self, outcome: Outcome) -> asyncio.Future[bool]:
        """Queue `outcome` without waiting: its `landed` future, as `report` answers it
        (cancelling it abandons the outcome: it is not sent, or its answer is ignored)."""
        self._check_size(outcome)
        self._put(outcome)
        return outcome.landed

    def _put(self, outcome: Outcome, *, front: bool = False) -> None:
        queue = self._waiting[outcome.kind]
        if front:
            queue.appendleft(outcome)
        else:
            queue.append(outcome)
        self._ready.set()
        if len(queue) >= self.max_batch:
            self._full.set()

    def _check_size(self, outcome: Outcome) -> None:
        if outcome.kind != "complete":
            return
        request, answer = outcome.request_bytes, outcome.answer_bytes
        if request > self.limits.request_budget:
            what = f"the request would be {request} bytes, over the server's receive limit ({self.limits.receive})"
        elif answer > self.limits.answer_budget:
            what = f"the completed task would be {answer} bytes, over the server's send limit ({self.limits.send})"
        else:
            return
        self.stats.refused_too_large += 1
        outcome.refuse(f"output refused: {len(outcome.output.encode())} bytes of output is too large: {what}")

    def _take(self, queue: deque[Outcome]) -> list[Outcome]:
        """The next batch: at most `max_batch`, and within both byte budgets (at least one)."""
        batch: list[Outcome] = []
        request = answer = 0
        while queue and len(batch) < self.max_batch:
            nxt = queue[0]
            request += nxt.request_bytes
            answer += nxt.answer_bytes
            if batch and (request > self.limits.request_budget or answer > self.limits.answer_budget):
                self.stats.byte_bounded += 1
                break
            batch.append(queue.popleft())
        return batch

    @property
    def pending(self) -> int:
        return sum(len(q) for q in self._waiting.values())

    # -- the flusher -------------------------------------------------------------------------
    async def run(self) -> None:
        """Send batches until cancelled; cancelling abandons what waits (the leases lapse)."""
        try:
            while True:
                await self._ready.wait()
                if self.window > 0 and not self._full.is_set():
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self.window):
                            await self._full.wait()
                for kind, queue in self._waiting.items():
                    while queue:
                        batch = [o for o in self._take(queue) if not self._abandoned(o)]
                        if batch:
                            await self._slots.acquire()
                            send = asyncio.create_task(self._send(kind, batch), name=f"report {kind} x{len(batch)}")
                            self._sends.add(send)
                            send.add_done_callback(self._sends.discard)
                self._full.clear()
                if not self.pending:
                    self._ready.clear()
        finally:
            for send in list(self._sends):
                send.cancel()
            await asyncio.gather(*self._sends, return_exceptions=True)

    def _abandoned(self, outcome: Outcome) -> bool:
        """The task gave up waiting (drain timeout), or a heartbeat found its lease gone. Not if
        an earlier attempt may have landed: that ends the lease too (a heartbeat is refused once
        the row is completed), so the batch's answer and GetTask decide."""
        if outcome.landed.done():
            return True
        if outcome.lease_lost.is_set() and not outcome.uncertain:
            self.stats.lease_lost += 1
            outcome.settle(False)
            return True
        return False

    async def _send(self, kind: Kind, batch: list[Outcome]) -> None:
        try:
            self.stats.batches += 1
            if self.on_batch is not None:
                self.on_batch(kind, len(batch))
            for outcome in batch:
                outcome.attempts += 1
            alone = [o for o in batch if o.permanent]
            if alone:  # failed for good: FailTask(increment_retry=false), one by one
                await asyncio.gather(*(self._send_one(o) for o in alone))
                batch = [o for o in batch if not o.permanent]
                if not batch:
                    return
            try:
                tasks = await self._call(kind, batch)
            except grpc.aio.AioRpcError as err:
                if retry.record(f"report {kind}", err) == "transient":
                    await self._retry_later(kind, batch, err)
                else:
                    log.warning("%s batch of %d refused (%s): sending one by one", kind, len(batch), err.code().name)
                    self.stats.split_batches += 1
                    if retry.may_have_committed(err):  # gRPC refused an answer after a commit
                        for outcome in batch:
                            outcome.uncertain = True
                    await asyncio.gather(*(self._send_one(o) for o in batch))
                return
            landed = {t.id for t in tasks}
            for outcome in batch:
                if outcome.task.id in landed:
                    self.stats.reported += 1
                    outcome.settle(True)
                else:
                    # Left out: its lease is gone, an earlier attempt landed (its answer lost), or
                    # its row was locked elsewhere (the batch skips locked rows): the row tells.
                    await self._settle_uncertain(outcome)
        finally:
            self._slots.release()

    async def _call(self, kind: Kind, batch: list[Outcome]) -> list[pb.Task]:
        ids = [o.task.id for o in batch]
        tokens = [o.task.lease_token for o in batch]
        if kind == "complete":
            done = await self.stub.CompleteTasks(
                pb.CompleteTasksRequest(
                    task_ids=ids,
                    lease_tokens=tokens,
                    outputs=[o.output for o in batch],
                    reported_usages=[o.reported_usage for o in batch],
                ),
                timeout=self.rpc_timeout,
                wait_for_ready=True,
            )
            return list(done.tasks)
        failed = await self.stub.FailTasks(
            pb.FailTasksRequest(
                task_ids=ids,
                lease_tokens=tokens,
                errors=[o.error for o in batch],
                # -1: the tool's retry policy (FailTasks' convention for "unset").
                retry_after_seconds=[-1.0 if o.retry_after is None else max(o.retry_after, 0.0) for o in batch],
            ),
            timeout=self.rpc_timeout,
            wait_for_ready=True,
        )
        return list(failed.tasks)

    async def _retry_later(self, kind: Kind, batch: list[Outcome], err: grpc.aio.AioRpcError) -> None:
        """Keep the batch: back off (bounded), then put it back in front of newer outcomes."""
        self.stats.retried_batches += 1
        attempts = max(o.attempts for o in batch)
        log.warning("%s batch of %d failed (%s), kept for retry #%d", kind, len(batch), err.code().name, attempts)
        await asyncio.sleep(retry.delay(attempts, 0.05, self.max_backoff))
        for outcome in reversed(batch):
            outcome.uncertain = True
            if not self._abandoned(outcome):
                self._put(outcome, front=True)

    async def _send_one(self, outcome: Outcome) -> None:
        """One entry alone, through the single-task RPC: its own verdict."""
        task = outcome.task
        try:
            if outcome.kind == "complete":
                req = pb.CompleteTaskRequest(task_id=task.id, lease_token=task.lease_token, output=outcome.output)
                if outcome.reported_usage:
                    req.reported_usage = outcome.reported_usage
                await self.stub.CompleteTask(req, timeout=self.rpc_timeout, wait_for_ready=True)
            else:
                await self.stub.FailTask(
                    pb.FailTaskRequest(
                        task_id=task.id,
                        lease_token=task.lease_token,
                        error=outcome.error,
                        increment_retry=not outcome.permanent,
                        retry_after=None if outcome.retry_after is None else _duration(outcome.retry_after),
                    ),
                    timeout=self.rpc_timeout,
                    wait_for_ready=True,
                )
        except grpc.aio.AioRpcError as err:
            verdict = retry.record(f"report {outcome.kind}", err)
            if verdict == "transient":
                outcome.uncertain = True
                await asyncio.sleep(retry.delay(outcome.attempts, 0.05, self.max_backoff))
                outcome.attempts += 1
                self._put(outcome, front=True)
            elif retry.too_large(err) and outcome.kind == "complete":
                # Over a limit this worker was not told of: fail the task, once, with a short error.
                self.stats.refused_too_large += 1
                outcome.uncertain = retry.may_have_committed(err)  # gRPC's refusal follows a commit
                outcome.refuse(f"output refused: {len(outcome.output.encode())} bytes of output: {err.details()}")
                await self._send_one(outcome)
            elif err.code() in LEASE_LOST and outcome.uncertain:
                await self._settle_uncertain(outcome)
            elif err.code() in LEASE_LOST:
                self._lost(outcome)
            else:  # this entry itself is refused (its output is not JSON): nothing can land it
                log.error("task %s: %s refused: %s %s", task.id, outcome.kind, err.code().name, err.details())
                outcome.settle(False)
            return
        self.stats.reported += 1
        outcome.settle(True)

    async def _settle_uncertain(self, outcome: Outcome) -> None:
        """An earlier attempt may have landed with its answer lost: the row tells."""
        try:
            row = (await self.stub.GetTask(pb.GetTaskRequest(task_id=outcome.task.id), timeout=self.rpc_timeout)).task
        except grpc.aio.AioRpcError as err:
            if retry.record("report confirm", err) == "transient":  # cannot tell yet: ask again later
                await asyncio.sleep(retry.delay(outcome.attempts, 0.05, self.max_backoff))
                self._put(outcome, front=True)
                return
            if retry.too_large(err) and (outcome.kind == "complete" or outcome.refused_completion):
                # Only the completion's output makes the row too large to send: it landed (a
                # send limit lower than this worker was told), though no one can read it back.
                log.error("task %s: completed, but its row is over the server's send limit", outcome.task.id)
                outcome.kind, outcome.permanent = "complete", False
                self.stats.reported += 1
                self.stats.landed_unseen += 1
                outcome.landed_unseen = True
                outcome.settle(True)
                return
            self._lost(outcome)  # the row cannot be read back: settled once, as lost
            return
        if landed_earlier(outcome, row):
            self.stats.reported += 1
            self.stats.landed_unseen += 1
            outcome.landed_unseen = True
            outcome.settle(True)
        elif still_ours(outcome, row):
            # Not taken, and the lease is still this worker's: the row was locked when the batch
            # ran (CompleteTasks / FailTasks skip locked rows rather than wait); send it again.
            self.stats.skipped_locked += 1
            await asyncio.sleep(retry.delay(outcome.attempts, 0.01, self.max_backoff))
            outcome.attempts += 1
            self._put(outcome, front=True)
        else:
            self._lost(outcome)

    def _lost(self, outcome: Outcome) -> None:
        log.warning("task %s: %s not taken: lease lost", outcome.task.id, outcome.kind)
        self.stats.lease_lost += 1
        outcome.settle(False)


def still_ours(outcome: Outcome, row: pb.Task) -> bool:
    """Whether `row` is still processing under `outcome`'s lease, not lapsed: nothing took it yet
    (a lapsed lease is as good as lost: the next claim takes the task)."""
    if row.status != pb.TASK_STATUS_PROCESSING or row.lease_token != outcome.task.lease_token:
        return False
    now = datetime.datetime.now(datetime.UTC)
    return not row.HasField("claim_expires_at") or row.claim_expires_at.ToDatetime(datetime.UTC) > now


def landed_earlier(outcome: Outcome, row: pb.Task) -> bool:
    """Whether `row` shows `outcome` landed under its own lease (CompleteTasks keeps the token;
    FailTasks clears it but counts exactly one more retry)."""
    task = outcome.task
    if outcome.kind == "complete":
        return row.status == pb.TASK_STATUS_COMPLETED and row.lease_token == task.lease_token
    if outcome.permanent:
        return (
            row.status == pb.TASK_STATUS_FAILED and row.retry_count == task.retry_count and row.error == outcome.error
        )
    return (
        row.status in (pb.TASK_STATUS_QUEUED, pb.TASK_STATUS_FAILED)
        and row.retry_count == task.retry_count + 1
        and row.error == outcome.error
    )


def _duration(seconds: float) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromTimedelta(datetime.timedelta(seconds=max(seconds, 0.0)))
    return d
