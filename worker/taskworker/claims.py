"""A lane's claim loop (fleet.py's module docstring has the whole cycle).

Each sweep claims at most the lane's free slots (and `claim_max_bytes` of answer), so the data
plane never commits a claim that cannot run here or reach this worker. A claimed task starts at
once, in this loop (`WorkerFleet.start_task`): a tool that finishes without awaiting has its
outcome in the report batcher before the next claim goes out, so a drain of quick tasks is one
claim after the other while the reports of the previous ones travel.

A claim that comes back full (a backlog) is followed by the next at once; a short one (the queue
ran dry) by a wait on the lane's wake event (a new task, a freed slot) or the jittered poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import uuid
from typing import TYPE_CHECKING

import grpc
from generation.task.v1 import task_pb2 as pb

from . import retry
from .lanes import Lane

if TYPE_CHECKING:
    from .fleet import WorkerFleet

log = logging.getLogger("taskworker.fleet")

# A claim answered so may have committed: retried with the same request_id.
_OUTCOME_UNKNOWN = frozenset(
    {grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNKNOWN}
)


def free_slots(lane: Lane) -> int:
    """A slot is busy while its work runs, or while a claim in flight may fill it; an outcome
    waiting for its batch frees it, so claims overlap with reports. At most 3 x `concurrency`
    outcomes may wait on top (a few batches on the wire: measured, 2 x held the claims back
    behind the reports)."""
    free = lane.concurrency - (len(lane.running) - lane.reporting) - lane.asked
    return min(free, 4 * lane.concurrency - len(lane.running) - lane.asked)


class Claimer:
    """One of a lane's claim loops. With `fleet.claimers` > 1 several run at once, each asking
    for at most its share of the slots and never for slots another's claim in flight may fill:
    while one claim is in the data plane, the tasks of another run and report. Each keeps the
    request id of its own claim whose answer was lost, to send it again."""

    def __init__(self, fleet: WorkerFleet, lane: Lane, share: int) -> None:
        self.fleet, self.lane, self.share = fleet, lane, share
        # The request_id of a claim whose outcome is unknown (its answer was lost): the next
        # claim sends it again, so the data plane returns the tasks that claim holds.
        self.request_id: str | None = None

    async def claim(self, limit: int) -> list[pb.Task] | None:
        """One ClaimTasks of at most `limit`; None when the claim is refused for good (the loop
        backs off). A fresh request id per claim attempt, the same one again when retrying an
        attempt whose answer was lost (it may have committed)."""
        fleet, lane = self.fleet, self.lane
        fleet.stats.sweeps += 1
        request_id = self.request_id or uuid.uuid4().hex
        lane.asked += limit
        try:
            resp = await fleet.stub.ClaimTasks(
                pb.ClaimTasksRequest(
                    tool_id=lane.tool_id, limit=limit, max_bytes=fleet.claim_max_bytes, request_id=request_id
                ),
                timeout=fleet.rpc_timeout,
                wait_for_ready=True,
            )
        except grpc.aio.AioRpcError as err:
            log.warning("claim for tool %s failed: %s %s", lane.tool_id, err.code().name, err.details())
            fleet.stats.claim_errors += 1
            if retry.record("claim", err) == "permanent":  # the same claim fails alike: back off
                return None
            self.request_id = request_id if err.code() in _OUTCOME_UNKNOWN else None
            return []
        finally:
            lane.asked -= limit
        self.request_id = None
        return list(resp.tasks)

    async def run(self) -> None:
        """Claim and start tasks until the fleet drains."""
        fleet, lane = self.fleet, self.lane
        while not fleet.draining:
            lane.wake.clear()  # before the sweep: a wake during it triggers another sweep
            free = min(free_slots(lane), self.share)
            if free <= 0:
                timeout = fleet.capacity_backoff
            else:
                tasks = await self.claim(free)
                if tasks is None:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(fleet.poll_interval * 8):
                            await fleet.stopping.wait()
                    continue
                if fleet.observer is not None:
                    fleet.observer.count("claimed", lane.tool_id, len(tasks))
                for task in tasks:
                    if fleet.draining:  # claimed while a drain began: run it anyway, it is ours
                        log.info("task %s claimed during drain; running it", task.id)
                    fleet.start_task(lane, task)
                if tasks and len(tasks) == free:
                    continue  # fast drain: every slot asked for filled, there may be more
                timeout = fleet.poll_interval * random.uniform(1 - fleet.poll_jitter, 1 + fleet.poll_jitter)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await lane.wake.wait()


def claimers(fleet: WorkerFleet, lane: Lane) -> list[Claimer]:
    """The lane's claim loops: `fleet.claimers` of them (at most one per slot), sharing its slots."""
    n = max(1, min(fleet.claimers, lane.concurrency))
    share = -(-lane.concurrency // n)
    return [Claimer(fleet, lane, share) for _ in range(n)]
