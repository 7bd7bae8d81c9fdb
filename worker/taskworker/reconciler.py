"""The reconciler (watchdog reaper): fails what no claim will ever recover.

Every `interval` seconds (reconcile_interval_seconds, default 60) it calls ListStaleTasks —
dead zombies past the grace window, unclaimable rows (retry_count >= max_retries, e.g.
max_retries = 0) and abandoned queued rows — then FailTask(increment_retry=false) with no lease
token for each. That forced failure only applies to rows no live lease protects, so a row that
a worker reclaimed in the meantime, or that another reconciler replica already failed, is
answered FAILED_PRECONDITION and skipped: the sweep is idempotent and safe to run in several
replicas at once.

ListStaleTasks answers ids and counters only, a page of `batch` (default 100) at a time, so a
sweep goes on past stale rows of any size: it pages until a short page (at most `max_pages`).

Retention: every `prune_interval` seconds (PRUNE_INTERVAL_SECONDS, default 600; 0 turns it off)
it calls PruneTasks, deleting terminal rows (completed, failed) older than
`retention_seconds` (RETENTION_SECONDS, default 7 days) in batches of `prune_batch` (1000),
until a short batch or `max_pages` batches. Each batch is its own short transaction over the
idx_gen_tasks_terminal index that skips locked rows, so it never waits on a worker.

The schedule tick: every `tick` seconds (default 1.0) it
- calls PromoteDueTasks: scheduled tasks now due (delayed, backed off, snoozed) become queued,
  which NOTIFYs their tools' wake, so parked workers claim them at once (a claim takes due
  scheduled tasks itself too, so none waits for this);
- calls ReapOverdueTasks: running attempts past their run-time limit are failed with a clear
  error (re-queued while retries remain);
- enqueues periodic tasks: for each schedule (ListPeriodicTasks) it computes the cron slots after
  the schedule's last enqueued slot up to now, in the schedule's time zone (cronsim), keeps at
  most `max_catch_up` of the newest (a reconciler that was down does not flood the queue), and
  calls EnqueuePeriodicTask for each. The slot key is unique in the table, so however many
  reconcilers run, each slot is enqueued exactly once, and the schedule's last_slot_at (advanced
  by the same statement) lets a restarted reconciler resume where the fleet left off.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import grpc
from cronsim import CronSim, CronSimError
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from google.protobuf import timestamp_pb2

from . import retry

log = logging.getLogger("taskworker.reconciler")


@dataclass
class SweepResult:
    listed: int = 0
    failed: int = 0
    skipped: int = 0  # reclaimed, finished or failed by someone else in between
    failed_ids: list[str] = field(default_factory=list)


class Reconciler:
    def __init__(
        self,
        stub: task_pb2_grpc.GenerationDataServiceAsyncStub,
        *,
        interval: float = 60.0,
        processing_grace_seconds: int = 0,
        queued_max_age_seconds: int = 0,
        batch: int = 0,
        rpc_timeout: float = 10.0,
        max_pages: int = 100,
        prune_interval: float = 600.0,
        retention_seconds: int = 7 * 24 * 3600,
        prune_batch: int = 1000,
        tick: float = 1.0,
        max_catch_up: int = 1,
    ) -> None:
        self.stub = stub
        self.interval = interval
        self.processing_grace_seconds = processing_grace_seconds
        self.queued_max_age_seconds = queued_max_age_seconds
        self.batch = batch
        self.rpc_timeout = rpc_timeout
        self.max_pages = max_pages
        self.prune_interval = prune_interval
        self.retention_seconds = retention_seconds
        self.prune_batch = prune_batch
        self.tick = tick
        self.max_catch_up = max(max_catch_up, 1)
        self.promoted = 0
        self.overdue = 0
        self.periodic_enqueued = 0
        self.sweeps = 0
        self.pruned = 0
        self._last_prune: float | None = None

    async def sweep(self) -> SweepResult:
        """One pass: list stale rows page by page, force each to failed."""
        result = SweepResult()
        page_size = self.batch or 100
        for _ in range(self.max_pages):
            listed = await self._sweep_page(result)
            # Failed rows leave the listing; a page of only skipped rows would come back again.
            if listed < page_size or result.failed == 0:
                break
        self.sweeps += 1
        if result.listed:
            log.info("reconciler: %d stale, %d failed, %d skipped", result.listed, result.failed, result.skipped)
        return result

    async def prune(self) -> int:
        """Delete terminal rows older than the retention window, batch by batch; returns how many."""
        deleted = 0
        for _ in range(self.max_pages):
            resp = await self.stub.PruneTasks(
                pb.PruneTasksRequest(older_than_seconds=self.retention_seconds, limit=self.prune_batch),
                timeout=self.rpc_timeout,
            )
            deleted += resp.deleted
            if resp.deleted < self.prune_batch:
                break
        self.pruned += deleted
        if deleted:
            log.info("reconciler: pruned %d terminal row(s)", deleted)
        return deleted

    async def schedule_tick(self, now: datetime | None = None) -> None:
        """Promote due tasks, reap overdue attempts, enqueue due periodic slots."""
        promoted = await self.stub.PromoteDueTasks(pb.PromoteDueTasksRequest(), timeout=self.rpc_timeout)
        self.promoted += promoted.promoted
        reaped = await self.stub.ReapOverdueTasks(pb.ReapOverdueTasksRequest(), timeout=self.rpc_timeout)
        if reaped.reaped:
            log.info("reconciler: %d attempt(s) past their run-time limit failed", reaped.reaped)
        self.overdue += reaped.reaped
        await self.enqueue_periodic(now or datetime.now(UTC))

    async def enqueue_periodic(self, now: datetime) -> int:
        """EnqueuePeriodicTask for every due slot of every schedule; how many tasks this call created."""
        created, after = 0, ""
        while True:
            page = await self.stub.ListPeriodicTasks(
                pb.ListPeriodicTasksRequest(after_name=after, limit=100), timeout=self.rpc_timeout
            )
            for schedule in page.periodic_tasks:
                for slot in self.due_slots(schedule, now):
                    stamp = timestamp_pb2.Timestamp()
                    stamp.FromDatetime(slot)
                    resp = await self.stub.EnqueuePeriodicTask(
                        pb.EnqueuePeriodicTaskRequest(name=schedule.name, slot_at=stamp), timeout=self.rpc_timeout
                    )
                    created += resp.HasField("task")
            if len(page.periodic_tasks) < 100:
                break
            after = page.periodic_tasks[-1].name
        self.periodic_enqueued += created
        return created

    def due_slots(self, schedule: pb.PeriodicTask, now: datetime) -> list[datetime]:
        """The schedule's slots after its last enqueued one (or its creation) up to `now`, the
        newest `max_catch_up` of them, in UTC. A schedule that cannot be read is logged, skipped."""
        start = schedule.last_slot_at if schedule.HasField("last_slot_at") else schedule.created_at
        try:
            zone = ZoneInfo(schedule.timezone)
            slots = CronSim(schedule.cron, start.ToDatetime(UTC).astimezone(zone))
        except (ZoneInfoNotFoundError, ValueError, CronSimError) as err:
            log.warning(
                "periodic task %s: cannot read %r in %s: %s", schedule.name, schedule.cron, schedule.timezone, err
            )
            return []
        newest: deque[datetime] = deque(maxlen=self.max_catch_up)
        for _ in range(100_000):  # a per-second schedule down for a day: still bounded
            slot = next(slots)
            if slot > now:
                break
            newest.append(slot.astimezone(UTC))
        return list(newest)

    async def _sweep_page(self, result: SweepResult) -> int:
        stale = await self.stub.ListStaleTasks(
            pb.ListStaleTasksRequest(
                processing_grace_seconds=self.processing_grace_seconds,
                queued_max_age_seconds=self.queued_max_age_seconds,
                limit=self.batch,
            ),
            timeout=self.rpc_timeout,
        )
        result.listed += len(stale.tasks)
        for task in stale.tasks:
            try:
                await self.stub.FailTask(
                    pb.FailTaskRequest(task_id=task.id, error=_reason(task), increment_retry=False),
                    timeout=self.rpc_timeout,
                )
                result.failed += 1
                result.failed_ids.append(task.id)
            except grpc.aio.AioRpcError as err:
                if err.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND):
                    result.skipped += 1  # taken meanwhile (claimed, completed): not stale any more
                elif retry.record("reconciler reap", err) == "permanent":
                    result.skipped += 1  # this one is refused (logged): the others are still reaped
                else:
                    raise  # the data plane is away: the next sweep goes on
        return len(stale.tasks)

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Sweep every `interval` (jittered by 10%) until `stop` is set; errors are logged."""
        stop = stop or asyncio.Event()
        ticking = asyncio.create_task(self._ticks(stop), name="reconciler ticks")
        try:
            await self._sweeps(stop)
        finally:
            ticking.cancel()
            await asyncio.gather(ticking, return_exceptions=True)

    async def _ticks(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.schedule_tick()
            except grpc.aio.AioRpcError as err:
                retry.record("reconciler tick", err)
                log.warning("reconciler tick failed: %s %s", err.code().name, err.details())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.tick * random.uniform(0.9, 1.1)):
                    await stop.wait()

    async def _sweeps(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.sweep()
            except grpc.aio.AioRpcError as err:
                retry.record("reconciler sweep", err)
                log.warning("reconciler sweep failed: %s %s", err.code().name, err.details())
            now = time.monotonic()
            if self.prune_interval > 0 and (self._last_prune is None or now - self._last_prune >= self.prune_interval):
                self._last_prune = now
                try:
                    await self.prune()
                except grpc.aio.AioRpcError as err:
                    retry.record("reconciler prune", err)
                    log.warning("reconciler prune failed: %s %s", err.code().name, err.details())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval * random.uniform(0.9, 1.1)):
                    await stop.wait()


def _reason(task: pb.StaleTask) -> str:
    if task.status == pb.TASK_STATUS_PROCESSING:
        return "reaped: worker died and retries are exhausted"
    if task.retry_count >= task.max_retries:
        return f"reaped: unclaimable (retry_count {task.retry_count} >= max_retries {task.max_retries})"
    return "reaped: never claimed within the queued age limit"
