"""The worker's Redis connections (events.py, wake.py): a lazily made client that is dropped
after a failure, and closing a client without letting a dead connection raise."""

from __future__ import annotations

import contextlib
from typing import Any

import redis.asyncio as aioredis


async def close_quietly(*closable: Any) -> None:
    """`aclose()` each of `closable` (clients, pub/subs), ignoring errors: after an outage a
    connection may already be broken, and closing it must not mask what happened."""
    for each in closable:
        with contextlib.suppress(Exception):
            await each.aclose()


class LazyRedis:
    """One Redis client with short connect and socket timeouts, made on first use. `drop()`
    after an error: its pool may hold a broken connection after an outage, so the next use makes
    a new client."""

    def __init__(self, url: str, timeout: float) -> None:
        self.url = url
        self.timeout = timeout
        self._client: aioredis.Redis | None = None

    def get(self) -> aioredis.Redis:
        if self._client is None:
            self._client = aioredis.Redis.from_url(
                self.url, socket_connect_timeout=self.timeout, socket_timeout=self.timeout
            )
        return self._client

    async def drop(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await close_quietly(client)
