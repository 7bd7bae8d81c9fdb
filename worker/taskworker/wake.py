"""The best-effort wake signal: Redis pub/sub (or the data plane's LISTEN/NOTIFY relay) on `{env}:common:task:wake`, payload the tool_id.

Polling stays the floor. A wake only shortens the wait of a fleet parked between polls; a lost
wake (Redis down, a publish that failed, a subscriber reconnecting) costs at most one poll
interval, never a task.

- `WakePublisher` / `enqueue`: the producer. QueueTask first (the row is committed when the
  call returns), then publish, swallowing every Redis error so Redis never fails an enqueue.
- `RedisWakeSubscriber`: the consumer. One connection per fleet; each message is handed to
  the fleet, which wakes only the tool lanes it hosts. It reconnects after Redis restarts and,
  on every (re)subscribe, wakes all lanes once, since wakes sent while it was away are lost.
- `WakePublisher.publish_cancel` / cancels.py's `cancel_task`: a cancelled task's id on
  `{env}:common:task:cancel`, for fleets that wake by Redis (RedisCancelSubscriber).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from redis.exceptions import RedisError

from . import config
from .listeners import GrpcStreamListener, RedisChannelListener
from .redisconn import LazyRedis

log = logging.getLogger("taskworker.wake")

# Called with the tool_id of a wake, or None for "wake every lane" (after a (re)subscribe).
WakeCallback = Callable[[str | None], bool]


class WakePublisher:
    """Publishes wakes; never raises. `publish` returns whether Redis took the message."""

    def __init__(self, url: str | None = None, *, environment: str | None = None, timeout: float = 0.5) -> None:
        self.url = url or config.redis_url()
        self.channel = config.wake_channel(environment)
        self.cancel_channel = config.cancel_channel(environment)
        self.timeout = timeout
        self._redis = LazyRedis(self.url, timeout)

    async def publish(self, tool_id: str) -> bool:
        return await self._publish(self.channel, tool_id, "wake", "polling will pick it up")

    async def publish_cancel(self, task_id: str) -> bool:
        """A cancelled task's id on the cancel channel (after CancelTask committed)."""
        return await self._publish(self.cancel_channel, task_id, "cancel", "its next heartbeat tells its worker")

    async def _publish(self, channel: str, payload: str, what: str, fallback: str) -> bool:
        try:
            async with asyncio.timeout(self.timeout * 2):
                await self._redis.get().publish(channel, payload)
            return True
        except (RedisError, OSError, TimeoutError) as err:
            log.warning("%s for %s not published (%s): %s", what, payload, fallback, err)
            await self._redis.drop()
            return False

    async def aclose(self) -> None:
        await self._redis.drop()


async def enqueue(
    stub: task_pb2_grpc.GenerationDataServiceAsyncStub,
    request: pb.QueueTaskRequest,
    publisher: WakePublisher | None,
    *,
    timeout: float | None = 10.0,
) -> pb.Task:
    """QueueTask, then (only once it succeeded, i.e. committed) a best-effort wake."""
    task = (await stub.QueueTask(request, timeout=timeout)).task
    if publisher is not None:
        await publisher.publish(task.tool_id)
    return task


class RedisWakeSubscriber(RedisChannelListener):
    """Listens on the wake channel and hands each payload (a tool id) to `on_wake`; reconnects
    forever (listeners.py); every (re)subscribe wakes all lanes once (`on_wake(None)`)."""

    def __init__(
        self,
        on_wake: WakeCallback,
        url: str | None = None,
        *,
        environment: str | None = None,
        reconnect_min: float = 0.05,
        reconnect_max: float = 2.0,
    ) -> None:
        self.on_wake = on_wake
        super().__init__(
            "wake subscriber",
            url or config.redis_url(),
            config.wake_channel(environment),
            on_wake,
            on_connect=lambda: on_wake(None),  # wakes sent while away are lost: sweep every lane
            reconnect_min=reconnect_min,
            reconnect_max=reconnect_max,
        )


class ListenWakeSubscriber(GrpcStreamListener):
    """The wake signal without Redis: the data plane's WatchTaskWakes stream.

    PostgreSQL NOTIFYs `task_wake` from a trigger inside the enqueue's own transaction (so only
    committed enqueues wake anyone) and the generated server relays it over a server-streaming
    RPC; workers hold no database credentials. Reconnects forever (listeners.py); every
    (re)connect wakes all lanes once, since wakes sent while the stream was down are lost.
    """

    def __init__(
        self,
        stub: task_pb2_grpc.GenerationDataServiceAsyncStub,
        on_wake: WakeCallback,
        tool_ids: list[str] | None = None,
        *,
        reconnect_min: float = 0.05,
        reconnect_max: float = 2.0,
    ) -> None:
        self.stub = stub
        self.on_wake = on_wake
        self.tool_ids = list(tool_ids or [])
        super().__init__(
            "wake stream",
            lambda: stub.WatchTaskWakes(pb.WatchTaskWakesRequest(tool_ids=self.tool_ids), wait_for_ready=True),
            lambda wake: on_wake(wake.tool_id),
            on_connect=lambda: on_wake(None),
            reconnect_min=reconnect_min,
            reconnect_max=reconnect_max,
        )
