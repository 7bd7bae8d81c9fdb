"""Cancellation at once: a running task's cancellation relayed to its fleet as it happens.

CancelTask of a running task commits a NOTIFY on `task_cancel` (the schema's trigger) with the
task id; the generated server relays it over WatchTaskCancels, which `CancelWatcher` listens
to. Fleets that wake by Redis hear it on `{env}:common:task:cancel` instead
(`RedisCancelSubscriber`), published by whoever cancels, through `cancel_task` (CancelTask
first: the row is cancelled once the call returns; then the publish, whose failure only means
the heartbeat tells). Either hands each id to `WorkerFleet.request_cancel`, which heartbeats
the task at once: the heartbeat's answer (`cancel_requested`) is what stops the work, so a
stale or foreign id costs one heartbeat at most. Best-effort like every wake: the periodic
heartbeat is the floor. Both reconnect forever (listeners.py).
"""

from __future__ import annotations

from collections.abc import Callable

from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc

from . import config
from .listeners import GrpcStreamListener, RedisChannelListener
from .wake import WakePublisher


class CancelWatcher(GrpcStreamListener):
    """WatchTaskCancels, every cancellation (not a filter of held ids: cancels are rare, held
    ids churn), each handed to `on_cancel`."""

    fallback = "heartbeats carry on"

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
        super().__init__(
            "cancel stream",
            lambda: stub.WatchTaskCancels(pb.WatchTaskCancelsRequest(), wait_for_ready=True),
            lambda cancel: on_cancel(cancel.task_id),
            reconnect_min=reconnect_min,
            reconnect_max=reconnect_max,
        )


class RedisCancelSubscriber(RedisChannelListener):
    """The cancel channel on Redis, each task id handed to `on_cancel`."""

    fallback = "heartbeats carry on"

    def __init__(
        self,
        on_cancel: Callable[[str], bool],
        url: str | None = None,
        *,
        environment: str | None = None,
        reconnect_min: float = 0.05,
        reconnect_max: float = 2.0,
    ) -> None:
        self.on_cancel = on_cancel
        super().__init__(
            "cancel subscriber",
            url or config.redis_url(),
            config.cancel_channel(environment),
            on_cancel,
            reconnect_min=reconnect_min,
            reconnect_max=reconnect_max,
        )


async def cancel_task(
    stub: task_pb2_grpc.GenerationDataServiceAsyncStub,
    request: pb.CancelTaskRequest,
    publisher: WakePublisher | None,
    *,
    timeout: float | None = 10.0,
) -> pb.Task:
    """CancelTask, then (only once it committed) a best-effort publish of the task id on the
    cancel channel, so a fleet that wakes by Redis stops the task at once."""
    task = (await stub.CancelTask(request, timeout=timeout)).task
    if publisher is not None:
        await publisher.publish_cancel(task.id)
    return task
