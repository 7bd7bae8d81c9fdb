"""What a call must get before it may take a pooled connection (database.py), and the checks it
must pass before its transaction commits. docs/server.md, "Limits"; docs/security.md, "Bounded resources".

- **One connection per row** (`RowGate`): calls that target one row by its primary key (the
  RPCs whose statement is `... WHERE pk = @param`) queue for that row in the process, not on the
  row lock in PostgreSQL. However many callers hammer one row, it holds at most one pooled
  connection; the others wait without one, at most the lock wait (`--lock-timeout`), then are
  answered ABORTED `row busy`. Calls on other rows find the pool as free as ever.
- **Before COMMIT** (`check_commit`): the answer must be one the server can send
  (RESOURCE_EXHAUSTED otherwise) and the caller's deadline must not have passed
  (DEADLINE_EXCEEDED otherwise); either way the transaction is rolled back, so a call refused
  for either reason has changed nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Hashable
from dataclasses import dataclass, field

from google.protobuf.message import Message

from .errors import Aborted, ResourceExhausted

ROW_BUSY_IN_PROCESS = "row busy (another call on this row is in progress), retry"


@dataclass
class _Queue:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class RowGate:
    """At most one call at a time per key (a row), each waiting at most `wait` seconds for its
    turn (None: as long as its deadline allows) before ABORTED."""

    def __init__(self) -> None:
        self._queues: dict[Hashable, _Queue] = {}

    def waiting(self, key: Hashable) -> int:
        """Calls holding or waiting for `key` (tests, metrics)."""
        queue = self._queues.get(key)
        return 0 if queue is None else queue.users

    @contextlib.asynccontextmanager
    async def hold(self, key: Hashable, wait: float | None) -> AsyncIterator[None]:
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = _Queue()
        queue.users += 1
        try:
            try:
                await asyncio.wait_for(queue.lock.acquire(), wait)
            except TimeoutError:
                raise Aborted(ROW_BUSY_IN_PROCESS) from None
            try:
                yield
            finally:
                queue.lock.release()
        finally:
            queue.users -= 1
            if queue.users == 0:
                del self._queues[key]


def answer_too_large(response: object, limit: int) -> ResourceExhausted | None:
    """RESOURCE_EXHAUSTED when `response` encodes to more than `limit` bytes: gRPC would refuse
    to send it (and log the call as answered); said here, before COMMIT, it is refused cleanly."""
    if not isinstance(response, Message):
        return None
    size = response.ByteSize()
    if size <= limit:
        return None
    return ResourceExhausted(
        f"answer too large: {size} bytes, this server sends at most {limit} "
        "(nothing was changed; ask for fewer or smaller rows)",
    )


class DeadlinePassed(TimeoutError):
    """The caller's deadline passed before COMMIT: the transaction is rolled back."""


def check_commit(response: object, limit: int, deadline: float | None) -> None:
    """Raise (so the transaction rolls back) unless `response` can be sent and `deadline`
    (the event loop's clock) has not passed."""
    refused = answer_too_large(response, limit)
    if refused is not None:
        raise refused
    if deadline is not None and asyncio.get_running_loop().time() >= deadline:
        raise DeadlinePassed
