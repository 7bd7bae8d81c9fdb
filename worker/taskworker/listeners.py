"""The worker's best-effort listeners, reconnecting forever: one loop for all of them.

A listener relays what a channel says (a wake's tool id, a cancelled task's id) to a callback
that returns whether this fleet cared (`received` / `ignored`). Two kinds of channel:

- `GrpcStreamListener`: a server-streaming RPC of the data plane (WatchTaskWakes,
  WatchTaskCancels), live once its initial metadata arrives (the server LISTENs by then);
- `RedisChannelListener`: a Redis pub/sub channel, live once SUBSCRIBE is confirmed.

Each (re)connect counts in `subscriptions`, sets `subscribed` while live and calls `on_connect`
(a wake listener wakes every lane then: what was said while it was away is lost). Losing the
channel is logged once and retried after a back-off (retry.py: exponential, jittered, capped at
`reconnect_max`, reset once live, counted); a permanent refusal (retry.py: UNIMPLEMENTED,
UNAUTHENTICATED, INVALID_ARGUMENT, ...) ends the listener with an error logged: the same call
would be refused alike, and polling and heartbeats, the floor, carry on without it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import grpc
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from . import retry
from .redisconn import close_quietly

log = logging.getLogger("taskworker.listeners")


class Listener:
    """The reconnect loop; a subclass's `_listen` connects, calls `_live()` once live, hands
    each message to `_deliver`, and returns when the channel ends (or raises)."""

    #: What carries on while this listener is away (for its log lines).
    fallback = "polling carries on"

    def __init__(
        self,
        what: str,
        *,
        on_connect: Callable[[], Any] | None = None,
        reconnect_min: float = 0.05,
        reconnect_max: float = 2.0,
    ) -> None:
        self.what = what
        self.on_connect = on_connect
        self.reconnect_min = reconnect_min
        self.reconnect_max = reconnect_max
        self.subscribed = asyncio.Event()  # set while live
        self.subscriptions = 0  # how many times it (re)connected
        self.received = 0  # messages the callback took
        self.ignored = 0  # messages it did not (a tool or task this fleet does not hold)
        self._backoff = retry.Backoff(what, base=reconnect_min, cap=max(reconnect_max, reconnect_min))

    async def run(self) -> None:
        while True:
            why: grpc.aio.AioRpcError | str = "ended"
            try:
                await self._listen()
                log.warning("%s ended; reconnecting", self.what)
            except grpc.aio.AioRpcError as err:
                if retry.record(self.what, err) == "permanent":
                    log.error("%s refused (%s %s): not listening; %s", self.what, err.code().name, err.details(),
                              self.fallback)  # fmt: skip
                    return
                why = err
                if self.subscribed.is_set():
                    log.warning("%s lost (%s); %s, reconnecting", self.what, err.code().name, self.fallback)
            except (RedisError, OSError) as err:
                why = type(err).__name__
                if self.subscribed.is_set():
                    log.warning("%s lost Redis (%s); %s, reconnecting", self.what, err, self.fallback)
            finally:
                self.subscribed.clear()
            await self._backoff.wait(why)

    async def _listen(self) -> None:
        raise NotImplementedError

    def _live(self) -> None:
        self.subscriptions += 1
        self.subscribed.set()
        self._backoff.reset()
        if self.on_connect is not None:
            self.on_connect()

    def _deliver(self, taken: bool) -> None:
        if taken:
            self.received += 1
        else:
            self.ignored += 1


class GrpcStreamListener(Listener):
    """`open_call()` starts the stream (with wait_for_ready); `on_item(message)` takes each."""

    def __init__(self, what: str, open_call: Callable[[], Any], on_item: Callable[[Any], bool], **kw: Any) -> None:
        super().__init__(what, **kw)
        self.open_call = open_call
        self.on_item = on_item

    async def _listen(self) -> None:
        call = self.open_call()
        try:
            await call.initial_metadata()  # sent once the server LISTENs
            self._live()
            async for item in call:
                self._deliver(self.on_item(item))
        finally:
            call.cancel()


class RedisChannelListener(Listener):
    """SUBSCRIBE `channel` on `url`; `on_message(text)` takes each message's payload."""

    def __init__(self, what: str, url: str, channel: str, on_message: Callable[[str], bool], **kw: Any) -> None:
        super().__init__(what, **kw)
        self.url = url
        self.channel = channel
        self.on_message = on_message

    async def _listen(self) -> None:
        client = aioredis.Redis.from_url(self.url, socket_connect_timeout=1.0, health_check_interval=5)
        pubsub = client.pubsub()
        try:
            await pubsub.subscribe(self.channel)
            while True:
                message = await pubsub.get_message(timeout=1.0)
                if message is None:
                    continue
                kind = message.get("type")
                if kind == "subscribe":
                    log.info("%s listening on %s", self.what, self.channel)
                    self._live()
                elif kind == "message":
                    data = message.get("data")
                    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data)
                    self._deliver(self.on_message(text.strip()))
        finally:
            await close_quietly(pubsub, client)
