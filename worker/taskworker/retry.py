"""The worker SDK's one retry policy: which failures are worth another try, and how long to wait.

Every place the SDK retries (the fleet's claims and reports, the event writer and readers, the
wake and cancel listeners, the reconciler, the first connect) asks `transient(err)` and waits
with a `Backoff`, so they all agree (docs/errors.md, "What a status means for the worker"):

- transient: UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED, CANCELLED, and RESOURCE_EXHAUSTED that is
  not about size (the database out of connections, a stream cap): tried again after a back-off;
- permanent: a message over a size limit (RESOURCE_EXHAUSTED "larger than max"), INVALID_ARGUMENT,
  FAILED_PRECONDITION, NOT_FOUND, OUT_OF_RANGE, ALREADY_EXISTS, PERMISSION_DENIED,
  UNAUTHENTICATED, UNIMPLEMENTED, INTERNAL, UNKNOWN, DATA_LOSS: the same call would fail the same
  way, so it is not sent again as it was (the caller settles, splits or gives up, and logs why).

A back-off is exponential (`base * 2**n`, capped at `cap`) with jitter (a uniform draw in the
upper half: never two retries in lock-step, never a zero wait). Every retry and every permanent
failure is counted in `COUNTS` by (what, gRPC code, verdict), which metrics.py exports as
`taskworker_retries_total` and `taskworker_permanent_errors_total`.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import Counter
from typing import Literal

import grpc

log = logging.getLogger("taskworker.retry")

Verdict = Literal["transient", "permanent"]

TRANSIENT_CODES = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,  # unless about size: see too_large()
    }
)

#: (what, code name, verdict) -> how many; read by metrics.py.
COUNTS: Counter[tuple[str, str, Verdict]] = Counter()


def too_large(err: grpc.aio.AioRpcError) -> bool:
    """A message over a size limit, sent or answered: gRPC's own "Received/Sent message larger
    than max", or the server's "answer too large" (refused before COMMIT): the same call can
    never pass."""
    details = (err.details() or "").lower()
    return err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and (
        "larger than max" in details or "answer too large" in details
    )


def may_have_committed(err: grpc.aio.AioRpcError) -> bool:
    """Whether a size refusal may follow a commit: gRPC refusing an answer after the handler
    returned may; the server's own "answer too large" (it rolls back first) says nothing changed."""
    return too_large(err) and "nothing was changed" not in (err.details() or "")


def transient(err: grpc.aio.AioRpcError) -> bool:
    """Worth sending again as it was, after a back-off."""
    return err.code() in TRANSIENT_CODES and not too_large(err)


def record(what: str, err: grpc.aio.AioRpcError | str) -> Verdict:
    """Count `err` (a gRPC error, or a name for another failure, always transient) for `what`;
    a permanent gRPC error is logged here, once, with what it means."""
    if isinstance(err, str):
        COUNTS[(what, err, "transient")] += 1
        return "transient"
    verdict: Verdict = "transient" if transient(err) else "permanent"
    COUNTS[(what, err.code().name, verdict)] += 1
    if verdict == "permanent":
        log.error(
            "%s: %s is permanent (%s): not retried", what, err.code().name, "too large" if too_large(err) else "refused"
        )
    return verdict


def delay(attempt: int, base: float, cap: float) -> float:
    """The wait before retry number `attempt` (1, 2, ...): base * 2**(attempt-1), capped, jittered."""
    return float(min(cap, base * 2.0 ** min(max(attempt, 1) - 1, 30)) * random.uniform(0.5, 1.0))


class Backoff:
    """The back-off of one retrying loop: `wait()` sleeps the next delay, `reset()` after success."""

    def __init__(self, what: str, *, base: float = 0.05, cap: float = 2.0) -> None:
        if base <= 0 or cap < base:
            raise ValueError("back-off needs 0 < base <= cap")
        self.what = what
        self.base = base
        self.cap = cap
        self.attempt = 0

    def reset(self) -> None:
        self.attempt = 0

    def next_delay(self) -> float:
        self.attempt += 1
        return delay(self.attempt, self.base, self.cap)

    async def wait(self, err: grpc.aio.AioRpcError | str | None = None) -> None:
        """Count `err` as a retry of `what` (when given) and sleep the next delay."""
        if err is not None:
            COUNTS[(self.what, err if isinstance(err, str) else err.code().name, "transient")] += 1
        await asyncio.sleep(self.next_delay())
