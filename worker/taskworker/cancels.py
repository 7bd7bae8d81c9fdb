"""Cancellation at once: the data plane's WatchTaskCancels stream, relayed to a fleet.

CancelTask of a running task commits a NOTIFY on `task_cancel` (the schema's trigger) with the
task id; the generated server relays it over WatchTaskCancels. `CancelWatcher` hands each id to
`WorkerFleet.request_cancel`, which heartbeats the task at once: the heartbeat's answer
(`cancel_requested`) is what stops the work, so a stale or foreign id costs one heartbeat at
most. Best-effort like every wake: the periodic heartbeat is the floor. Reconnects forever.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable

import grpc
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc

log = logging.getLogger("taskworker.cancels")


class CancelWatcher:
    def __init__(
        self,
        stub: task_pb2_grpc.GenerationDataServiceAsyncStub,
        on_cancel: Callable[[str], bool],
        *,
        reconnect_min: float = 0.05,
        reconnect_max: float = 2.0,
    ) -> None:
        self.stub = stub
        self.on_cancel = on_cancel
        self.reconnect_min = reconnect_min
        self.reconnect_max = reconnect_max
        self.subscribed = asyncio.Event()
        self.received = 0  # cancellations of tasks this fleet holds
        self.ignored = 0  # of tasks held elsewhere

    async def run(self) -> None:
        delay = self.reconnect_min
        while True:
            # Every cancellation, not a filter of held ids: cancels are rare, held ids churn.
            call = self.stub.WatchTaskCancels(pb.WatchTaskCancelsRequest(), wait_for_ready=True)
            try:
                await call.initial_metadata()  # sent once the server LISTENs
                self.subscribed.set()
                delay = self.reconnect_min
                async for cancel in call:
                    if self.on_cancel(cancel.task_id):
                        self.received += 1
                    else:
                        self.ignored += 1
                log.warning("cancel stream ended; reconnecting")
            except asyncio.CancelledError:
                call.cancel()
                raise
            except grpc.aio.AioRpcError as err:
                if self.subscribed.is_set():
                    log.warning("cancel stream lost (%s); heartbeats carry on, reconnecting", err.code().name)
            finally:
                self.subscribed.clear()
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, self.reconnect_max)
