"""The best-effort wake signal: Redis pub/sub (or the data plane's LISTEN/NOTIFY relay) on `{env}:common:task:wake`, payload the tool_id.

Polling stays the floor. A wake only shortens the wait of a fleet parked between polls; a lost
wake (Redis down, a publish that failed, a subscriber reconnecting) costs at most one poll
interval, never a task.

- `WakePublisher` / `enqueue`: the producer. QueueTask first (the row is committed when the
  call returns), then publish, swallowing every Redis error so Redis never fails an enqueue.
- `RedisWakeSubscriber`: the consumer. One connection per fleet; each message is handed to
  the fleet, which wakes only the tool lanes it hosts. It reconnects after Redis restarts and,
  on every (re)subscribe, wakes all lanes once, since wakes sent while it was away are lost.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from typing import Any

import grpc
import redis.asyncio as aioredis
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from redis.exceptions import RedisError

from . import config
from .redisconn import LazyRedis, close_quietly

log = logging.getLogger("taskworker.wake")

# Called with the tool_id of a wake, or None for "wake every lane" (after a (re)subscribe).
WakeCallback = Callable[[str | None], bool]


class WakePublisher:
    """Publishes wakes; never raises. `publish` returns whether Redis took the message."""

    def __init__(self, url: str | None = None, *, environment: str | None = None, timeout: float = 0.5) -> None:
        self.url = url or config.redis_url()
        self.channel = config.wake_channel(environment)
        self.timeout = timeout
        self._redis = LazyRedis(self.url, timeout)

    async def publish(self, tool_id: str) -> bool:
        try:
            async with asyncio.timeout(self.timeout * 2):
                await self._redis.get().publish(self.channel, tool_id)
            return True
        except (RedisError, OSError, TimeoutError) as err:
            log.warning("wake for tool %s not published (polling will pick it up): %s", tool_id, err)
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


class RedisWakeSubscriber:
    """Listens on the wake channel and hands each payload to `on_wake`; reconnects forever."""

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
        self.url = url or config.redis_url()
        self.channel = config.wake_channel(environment)
        self.reconnect_min = reconnect_min
        self.reconnect_max = reconnect_max
        self.subscribed = asyncio.Event()  # set while subscribed
        self.subscriptions = 0  # how many times it (re)subscribed
        self.received = 0  # wakes for a hosted tool
        self.ignored = 0  # wakes for tools this fleet does not host

    async def run(self) -> None:
        delay = self.reconnect_min
        while True:
            client = aioredis.Redis.from_url(self.url, socket_connect_timeout=1.0, health_check_interval=5)
            pubsub = client.pubsub()
            try:
                await pubsub.subscribe(self.channel)
                while True:
                    message = await pubsub.get_message(timeout=1.0)
                    if message is None:
                        continue
                    self._handle(message)
                    delay = self.reconnect_min
            except asyncio.CancelledError:
                raise
            except (RedisError, OSError) as err:
                if self.subscribed.is_set():
                    log.warning("wake subscriber lost Redis (%s); polling carries on, reconnecting", err)
                self.subscribed.clear()
            finally:
                self.subscribed.clear()
                await close_quietly(pubsub, client)
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, self.reconnect_max)

    def _handle(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "subscribe":
            self.subscriptions += 1
            self.subscribed.set()
            log.info("wake subscriber listening on %s", self.channel)
            # Wakes published while we were not subscribed are lost: sweep every lane once.
            self.on_wake(None)
        elif kind == "message":
            data = message.get("data")
            tool_id = data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data)
            if self.on_wake(tool_id.strip()):
                self.received += 1
            else:
                self.ignored += 1


class ListenWakeSubscriber:
    """The wake signal without Redis: the data plane's WatchTaskWakes stream.

    PostgreSQL NOTIFYs `task_wake` from a trigger inside the enqueue's own transaction (so only
    committed enqueues wake anyone) and the generated server relays it over a server-streaming
    RPC; workers hold no database credentials. Reconnects forever; every (re)connect wakes all
    lanes once, since wakes sent while the stream was down are lost.
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
        self.reconnect_min = reconnect_min
        self.reconnect_max = reconnect_max
        self.subscribed = asyncio.Event()
        self.subscriptions = 0
        self.received = 0
        self.ignored = 0

    async def run(self) -> None:
        delay = self.reconnect_min
        while True:
            call = self.stub.WatchTaskWakes(pb.WatchTaskWakesRequest(tool_ids=self.tool_ids), wait_for_ready=True)
            try:
                await call.initial_metadata()  # sent once the server LISTENs
                self.subscriptions += 1
                self.subscribed.set()
                delay = self.reconnect_min
                self.on_wake(None)
                async for wake in call:
                    if self.on_wake(wake.tool_id):
                        self.received += 1
                    else:
                        self.ignored += 1
                log.warning("wake stream ended; reconnecting")
            except asyncio.CancelledError:
                call.cancel()
                raise
            except grpc.aio.AioRpcError as err:
                if self.subscribed.is_set():
                    log.warning("wake stream lost (%s); polling carries on, reconnecting", err.code().name)
            finally:
                self.subscribed.clear()
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, self.reconnect_max)
