"""What a call must get before it may take a pooled connection (database.py), and the checks it
must pass before its transaction commits. docs/server.md, "Limits"; docs/security.md, "Bounded resources".

- **One connection per row** (`RowGate`): calls that target one row by its primary key (the
  RPCs whose statement is `... WHERE pk = @param`) queue for that row in the process, not on the
  row lock in PostgreSQL. However many callers hammer one row, it holds at most one pooled
  connection; the others wait without one, at most the lock wait (`--lock-timeout`), then are
  answered ABORTED `row busy`. Calls on other rows find the pool as free as ever.
- **Answers not yet read** (`AnswerBudget`): the bytes of answers waiting for slow callers are
  capped, in all and per connection; past the cap a call is answered UNAVAILABLE before COMMIT.
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

from .errors import Aborted, ResourceExhausted, Unavailable

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


def check_commit(response: object, limit: int, deadline: float | None) -> Exception | None:
    """What to raise (so the transaction rolls back) unless `response` can be sent and
    `deadline` (the event loop's clock) has not passed."""
    refused = answer_too_large(response, limit)
    if refused is not None:
        return refused
    if deadline is not None and asyncio.get_running_loop().time() >= deadline:
        return DeadlinePassed()
    return None


def answer_size(response: object) -> int:
    return response.ByteSize() if isinstance(response, Message) else 0


ANSWERS_BACKED_UP = "server busy: too many answers are waiting for their callers to read them, retry"


class AnswerBudget:
    """Bytes of answers handed to gRPC and not yet delivered (a caller that does not read keeps
    its answer in the server's memory until its connection goes: keepalive), at most `total` in
    all and `per_connection` per caller connection. An answer past either is refused
    UNAVAILABLE before COMMIT (so it changed nothing), a retry later is fine."""

    def __init__(self, total: int, per_connection: int) -> None:
        self.total, self.per_connection = total, per_connection
        self.pending = 0
        self._by_peer: dict[str, int] = {}

    def admit(self, peer: str) -> None:
        """Refuse a call at once, before it runs, while the budget (or its connection's) is spent."""
        if self.pending >= self.total or self._by_peer.get(peer, 0) >= self.per_connection:
            raise Unavailable(ANSWERS_BACKED_UP)

    def reserve(self, peer: str, size: int) -> Unavailable | None:
        """Take `size` bytes for an answer to `peer`, or say why not (to raise)."""
        held = self._by_peer.get(peer, 0)
        if self.pending + size > self.total or held + size > self.per_connection:
            return Unavailable(ANSWERS_BACKED_UP)
        self.pending += size
        self._by_peer[peer] = held + size
        return None

    def release(self, peer: str, size: int) -> None:
        self.pending -= size
        left = self._by_peer.get(peer, 0) - size
        if left > 0:
            self._by_peer[peer] = left
        else:
            self._by_peer.pop(peer, None)
