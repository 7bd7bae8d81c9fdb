"""Run one generated handler on a pooled connection: deadline, errors, logging."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar, cast

import grpc
import psycopg
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from psycopg import AsyncConnection, pq
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from .admission import AnswerBudget, RowGate, answer_size, answer_too_large, check_commit
from .errors import RpcError, describe_for_log, status_for_db_error
from .metrics import observer_for

log = logging.getLogger("pydb")

Req = TypeVar("Req")
Resp = TypeVar("Resp")

Handler = Callable[[AsyncConnection[Any], Req], Awaitable[Resp]]

# Codes that mean the server or its database failed, not the caller: always logged, at ERROR.
# Every other outcome is one DEBUG line.
SERVER_FAULTS = frozenset(
    {
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DATA_LOSS,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    }
)

#: The request field through which a caller says how many bytes of answer it can receive (a
#: statement bounds its result by it, as ClaimTasks does). The server caps it by what it can send.
ANSWER_BUDGET_FIELD = "max_bytes"
#: gRPC's default receive limit on clients, and so the largest answer a server sends by default.
DEFAULT_MAX_ANSWER_BYTES = 4 * 1024 * 1024

_max_answer_bytes: dict[int, int] = {}
#: Per pool: how long a call waits for its turn on a row (--lock-timeout; None: no limit).
_row_wait: dict[int, float | None] = {}
#: Per pool: the calls queued on one row (admission.RowGate).
_row_gates: dict[int, RowGate] = {}
#: Per pool: the bytes of answers not yet delivered (admission.AnswerBudget); none: no cap.
_answer_budgets: dict[int, AnswerBudget] = {}
#: The defaults of --max-unsent-answer-bytes and --max-unsent-answer-bytes-per-connection.
DEFAULT_UNSENT_ANSWER_BYTES = 64 * 1024 * 1024
DEFAULT_UNSENT_ANSWER_BYTES_PER_CONNECTION = 16 * 1024 * 1024
_INTEGER_TYPES = frozenset(
    {
        FieldDescriptor.CPPTYPE_INT32,
        FieldDescriptor.CPPTYPE_INT64,
        FieldDescriptor.CPPTYPE_UINT32,
        FieldDescriptor.CPPTYPE_UINT64,
    }
)


def configure_max_answer(pool: AsyncConnectionPool[Any], max_bytes: int) -> None:
    """The largest answer the server serving `pool` sends (its max send message size)."""
    _max_answer_bytes[id(pool)] = max_bytes


def configure_row_wait(pool: AsyncConnectionPool[Any], seconds: float) -> None:
    """How long a call on `pool` waits for its turn on a row (the lock wait, --lock-timeout; 0: no limit)."""
    _row_wait[id(pool)] = seconds if seconds > 0 else None


def configure_answer_budget(pool: AsyncConnectionPool[Any], total: int, per_connection: int) -> None:
    """Cap the bytes of answers handed to gRPC and not yet delivered, in all and per connection."""
    _answer_budgets[id(pool)] = AnswerBudget(total, per_connection)


def row_gate(pool: AsyncConnectionPool[Any]) -> RowGate:
    return _row_gates.setdefault(id(pool), RowGate())


def cap_answer_budget(request: object, limit: int) -> None:
    """Cap the caller's answer budget (an integer `max_bytes` field, 0 or unset meaning "no
    preference") at `limit`, before the statement sees it: a budget the server could not send
    would let the statement commit work (a claim) whose answer is then refused on the way out."""
    if not isinstance(request, Message):
        return
    field = request.DESCRIPTOR.fields_by_name.get(ANSWER_BUDGET_FIELD)
    if field is None or field.cpp_type not in _INTEGER_TYPES:
        return
    asked = getattr(request, ANSWER_BUDGET_FIELD)
    if isinstance(asked, int) and (asked <= 0 or asked > limit):  # not a repeated field
        setattr(request, ANSWER_BUDGET_FIELD, limit)


class Database:
    """A connection pool plus the policy every RPC shares.

    - The caller's deadline bounds the whole call (waiting for a connection included). When it
      passes, or the caller cancels, the call ends at once with DEADLINE_EXCEEDED (or
      CANCELLED) and the statement is cancelled on the server: the task running it is
      cancelled exactly once, so psycopg sends PostgreSQL a cancel request, waits for the
      backend to stop, and the connection goes back to the pool clean. (Were that task
      cancelled twice, as gRPC's own deadline handling would do, psycopg would give up and
      drop the connection while a backend blocked on a lock kept running the statement.)
    - Waiting for a pooled connection is bounded by the pool's `timeout` (UNAVAILABLE after it:
      "server busy" when every connection is in use, "database unavailable" when none can be opened).
    - A call that may write runs in a transaction that commits only if its answer can be sent
      and the caller's deadline has not passed (admission.check_commit): a call answered
      DEADLINE_EXCEEDED, CANCELLED or RESOURCE_EXHAUSTED (answer too large) has changed nothing,
      unless its deadline passed, or the caller left, after COMMIT was sent (docs/errors.md).
    - A call on one row by its primary key (`row=(table, field)`) waits in the process for the
      calls before it on that row (admission.RowGate), holding no pooled connection meanwhile.
    - `RpcError`s raised by a handler become their status; database errors are mapped by
      SQLSTATE (see errors.py); nothing else leaks: an unexpected exception is logged with
      its traceback and answered with a bare INTERNAL.
    - One log line per call: DEBUG, or ERROR when the server is at fault (SERVER_FAULTS).
    - Where a call runs is decided by the compiler: `replica=True` (a read-only statement) runs on
      the replica pool when the server has one (DATABASE_REPLICA_URL), everything else on `pool`,
      the primary. A connection lost mid-call (the primary died, a failover) is UNAVAILABLE, so
      the caller retries; the pool then opens new connections, to whichever host is the primary.
    """

    def __init__(self, pool: AsyncConnectionPool[Any], replica: AsyncConnectionPool[Any] | None = None) -> None:
        self.pool = pool
        self.replica = replica
        #: A request's `max_bytes` answer budget is capped at this (configure_max_answer).
        self.max_answer_bytes = _max_answer_bytes.get(id(pool), DEFAULT_MAX_ANSWER_BYTES)
        #: Metrics and span attributes (--metrics-addr, --tracing); None when both are off.
        self.observer = observer_for(pool)
        self.row_wait = _row_wait.get(id(pool), 1.0)

    async def run(
        self,
        context: grpc.aio.ServicerContext[Any, Any],
        rpc: str,
        handler: Callable[[AsyncConnection[Any], Req], Awaitable[Resp]],
        request: Req,
        *,
        replica: bool = False,
        row: tuple[str, str] | None = None,
    ) -> Resp:
        started = time.perf_counter()
        code, message, cause = grpc.StatusCode.OK, "", ""
        unexpected: Exception | None = None
        response: Resp | None = None
        sqlstate: str | None = None  # of a database error
        cap_answer_budget(request, self.max_answer_bytes)
        pool = self.replica if replica and self.replica is not None else self.pool
        timeout = context.time_remaining()
        call = _Call(
            pool,
            handler,
            request,
            writes=not replica,
            max_answer=self.max_answer_bytes,
            deadline=None if timeout is None else asyncio.get_running_loop().time() + timeout,
            row=None if row is None else (row[0], getattr(request, row[1], None)),
            row_wait=self.row_wait,
            budget=_answer_budgets.get(id(self.pool)),
            peer=_peer(context),
        )
        try:
            response = await self._bounded(call, timeout)
            return response
        except asyncio.CancelledError:
            # gRPC cancels the handler when the deadline passes (by its clock, a little ahead of
            # time_remaining's), as when the caller leaves.
            remaining = context.time_remaining()
            late = remaining is not None and remaining <= _DEADLINE_SLACK
            code = grpc.StatusCode.DEADLINE_EXCEEDED if late else grpc.StatusCode.CANCELLED
            cause = _commit_outcome(call)
            raise
        except Exception as err:
            code, message, cause, sqlstate, unexpected = outcome(err, pool)
            if isinstance(err, TimeoutError):  # from _bounded or check_commit
                cause = _commit_outcome(call)
        finally:
            elapsed = (time.perf_counter() - started) * 1000
            if self.observer is not None:
                self.observer.observe(rpc, handler.__name__, code, elapsed / 1000, response, sqlstate)
            if code == grpc.StatusCode.OK:
                # Logged once the answer has left (or not): a caller that leaves mid-send, or
                # whose deadline passes then, is logged CANCELLED / DEADLINE_EXCEEDED (committed).
                _log_when_sent(context, rpc, started, call)
            else:
                call.release()
                _log_call(rpc, code, elapsed, cause, unexpected)
        await context.abort(code, message)

    def finished(
        self,
        rpc: str,
        statement: str,
        started: float,
        code: grpc.StatusCode,
        response: object,
        sqlstate: str | None,
        cause: str,
        unexpected: Exception | None,
    ) -> None:
        """A call's end told by a caller of its own (a streamed read): its metrics and log line."""
        elapsed = (time.perf_counter() - started) * 1000
        if self.observer is not None:
            self.observer.observe(rpc, statement, code, elapsed / 1000, response, sqlstate)
        _log_call(rpc, code, elapsed, cause, unexpected)

    async def _bounded(self, call: _Call[Req, Resp], timeout: float | None) -> Resp:
        """`call` on a pooled connection within `timeout` seconds, else TimeoutError."""
        task = asyncio.ensure_future(call.run())
        _track(task, call.pool)
        try:
            done, _ = await asyncio.wait((task,), timeout=timeout)
        except asyncio.CancelledError:
            _cancel_in_background(task)
            raise
        if not done:
            _cancel_in_background(task)
            raise TimeoutError
        return task.result()


def outcome(
    err: Exception, pool: AsyncConnectionPool[Any]
) -> tuple[grpc.StatusCode, str, str, str | None, Exception | None]:
    """What a call that raised `err` answers: (status, client-safe message, the log line's cause,
    the SQLSTATE of a database error, the exception to log with its traceback when unexpected).
    `TimeoutError` is the caller's deadline (psycopg raises errors of its own)."""
    if isinstance(err, RpcError):
        return err.code, err.message, "", None, None
    if isinstance(err, PoolTimeout):  # no pooled connection within --pool-timeout: busy, or unreachable
        return grpc.StatusCode.UNAVAILABLE, pool_timeout_message(pool), f"error={_quote(str(err))}", None, None
    if isinstance(err, psycopg.Error):
        if isinstance(err, psycopg.OperationalError):
            recheck_idle(pool)
        code, message = status_for_db_error(err)
        return code, message, describe_for_log(err), err.sqlstate or "", None
    if isinstance(err, TimeoutError):
        return grpc.StatusCode.DEADLINE_EXCEEDED, "deadline exceeded", "", None, None
    return grpc.StatusCode.INTERNAL, "internal error", f"error={_quote(repr(err))}", None, err


def _commit_outcome(call: _Call[Any, Any]) -> str:
    """For a call cut off by its deadline or its caller: whether anything may have changed."""
    if not call.writes:
        return ""
    # Cut off while COMMIT was under way (or just after): the transaction's outcome decides.
    return "committed=unknown" if call.committed else "committed=false"


def _log_call(rpc: str, code: grpc.StatusCode, elapsed: float, cause: str, unexpected: Exception | None) -> None:
    level = logging.ERROR if code in SERVER_FAULTS else logging.DEBUG
    if log.isEnabledFor(level):
        line = f"rpc={rpc} code={code.name} ms={elapsed:.1f}"
        log.log(level, f"{line} {cause}" if cause else line, exc_info=unexpected)


def _peer(context: grpc.aio.ServicerContext[Any, Any]) -> str:
    try:
        return str(context.peer())
    except (AttributeError, NotImplementedError, RuntimeError):
        return ""


class _Delivery:
    """Whether gRPC failed to send one call's answer (its done callback reads it)."""

    __slots__ = ("failed",)

    def __init__(self) -> None:
        self.failed = False

    def watch(self, context: grpc.aio.ServicerContext[Any, Any], task: asyncio.Task[Any] | None) -> None:
        """Once the handler has returned: the send of the answer, which grpc.aio starts in the
        handler's task without a step between (status marked sent, then the batch awaited)."""
        waiter = getattr(task, "_fut_waiter", None)
        if context.done() and isinstance(waiter, asyncio.Future):
            waiter.add_done_callback(self._settled)

    def _settled(self, batch: asyncio.Future[Any]) -> None:
        self.failed = self.failed or batch.cancelled() or batch.exception() is not None


#: The answer the handler's task sends; for the filter of gRPC's own log lines.
_sending: contextvars.ContextVar[_Delivery | None] = contextvars.ContextVar("pydb_sending", default=None)


class _ToldSendFailures(logging.Filter):
    """gRPC's traceback of an answer it could not send, when pydb's own line of that call says so."""

    def filter(self, record: logging.LogRecord) -> bool:
        delivery = _sending.get()
        if delivery is None or record.exc_info is None or record.exc_info[0] is None:
            return True
        if record.exc_info[0].__name__ != "ExecuteBatchError":
            return True
        delivery.failed = True
        return False


_GRPC_LOG = logging.getLogger("grpc._cython.cygrpc")
if not any(isinstance(f, _ToldSendFailures) for f in _GRPC_LOG.filters):
    _GRPC_LOG.addFilter(_ToldSendFailures())


def _log_when_sent(
    context: grpc.aio.ServicerContext[Any, Any], rpc: str, started: float, call: _Call[Any, Any]
) -> None:
    committed = call.committed
    # When the caller leaves while grpc.aio sends the answer, the send fails, but grpc swallows
    # that (or logs a bare traceback) and the context's code()/cancelled() still say OK: they
    # tell only what the handler set. No public API reports it, so the send's own future, awaited
    # by this task once the handler has returned, is watched.
    delivery = _Delivery()
    _sending.set(delivery)

    def sent(done: grpc.aio.ServicerContext[Any, Any]) -> None:
        call.release()
        elapsed = (time.perf_counter() - started) * 1000
        outcome = done.code() if done.code() is not None else grpc.StatusCode.OK
        if (done.cancelled() or delivery.failed) and outcome == grpc.StatusCode.OK:
            remaining = done.time_remaining()
            late = remaining is not None and remaining <= _DEADLINE_SLACK
            outcome = grpc.StatusCode.DEADLINE_EXCEEDED if late else grpc.StatusCode.CANCELLED
        cause = "" if outcome == grpc.StatusCode.OK else "event=answer_not_delivered"
        if cause and committed:
            cause += " committed=true"
        _log_call(rpc, outcome, elapsed, cause, None)

    try:
        context.add_done_callback(cast(Any, sent))
        asyncio.get_running_loop().call_soon(delivery.watch, context, asyncio.current_task())
    except (AttributeError, NotImplementedError, RuntimeError):  # a context of another kind (tests)
        call.release()
        _log_call(rpc, grpc.StatusCode.OK, (time.perf_counter() - started) * 1000, "", None)


class _Call(Generic[Req, Resp]):
    """One handler call on a pooled connection: its row's turn first, then, for a call that may
    write, a transaction that commits only past `check_commit`."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        handler: Callable[[AsyncConnection[Any], Req], Awaitable[Resp]],
        request: Req,
        *,
        writes: bool,
        max_answer: int,
        deadline: float | None,
        row: tuple[str, object] | None,
        row_wait: float | None,
        budget: AnswerBudget | None = None,
        peer: str = "",
    ) -> None:
        self.pool, self.handler, self.request = pool, handler, request
        self.writes, self.max_answer, self.deadline = writes, max_answer, deadline
        self.row, self.row_wait = row, row_wait
        self.budget, self.peer = budget, peer
        #: Bytes of the answer reserved in `budget` (released once it is delivered, or not).
        self.reserved = 0
        #: COMMIT has been sent (the outcome of a call cut off after this is the transaction's).
        self.committed = False

    async def run(self) -> Resp:
        if self.budget is not None:
            self.budget.admit(self.peer)
        if self.row is None:
            return await self._on_connection()
        async with row_gate(self.pool).hold(self.row, self.row_wait):
            return await self._on_connection()

    async def _on_connection(self) -> Resp:
        async with self.pool.connection() as conn:
            key = id(self.pool)
            _holding[key] = _holding.get(key, 0) + 1
            try:
                if not self.writes:
                    response = await self.handler(conn, self.request)
                    refused = answer_too_large(response, self.max_answer) or self._reserve(response)
                    if refused is not None:
                        # Not referenced by the exception's traceback: a big answer refused is
                        # freed now, not when the garbage collector next finds the cycle.
                        del response
                        raise refused
                    return response
                if not isinstance(self.request, Message):  # a client stream (COPY): no pipeline mode
                    async with conn.transaction():
                        response = await self._checked(conn)
                        self.committed = True  # leaving this block sends COMMIT
                    return response
                return await self._pipelined(conn)
            finally:
                _holding[key] -= 1

    async def _checked(self, conn: AsyncConnection[Any]) -> Resp:
        response = await self.handler(conn, self.request)
        refused = check_commit(response, self.max_answer, self.deadline) or self._reserve(response)
        if refused is not None:
            del response  # as above
            raise refused  # and the transaction rolls back
        return response

    async def _pipelined(self, conn: AsyncConnection[Any]) -> Resp:
        """The handler in a transaction whose BEGIN goes out with its first statement (pipeline
        mode): one round trip for both, the COMMIT (sent once `check_commit` passes) the second,
        where `conn.transaction()` takes three. A failed statement, a refused answer or a
        cancellation rolls back."""
        try:
            async with conn.pipeline():
                await conn.execute(b"BEGIN")
                response = await self._checked(conn)
                self.committed = True  # COMMIT is sent as the pipeline ends
                await conn.execute(b"COMMIT")
        except BaseException:
            if conn.pgconn.status == _CONNECTION_OK and conn.pgconn.transaction_status != _IDLE:
                await conn.rollback()
            raise
        return response

    def _reserve(self, response: object) -> Exception | None:
        if self.budget is not None:
            size = answer_size(response)
            refused = self.budget.reserve(self.peer, size)
            if refused is not None:
                return refused
            self.reserved = size
        return None

    def release(self) -> None:
        """The answer is delivered, or will never be: its bytes leave the budget (once)."""
        if self.budget is not None and self.reserved:
            self.budget.release(self.peer, self.reserved)
            self.reserved = 0


_CONNECTION_OK = pq.ConnStatus.OK
_IDLE = pq.TransactionStatus.IDLE

#: A handler cancelled this close to its deadline was cancelled by it (logged DEADLINE_EXCEEDED).
_DEADLINE_SLACK = 0.1

SERVER_BUSY = "server busy: every database connection is in use, retry"
DATABASE_UNAVAILABLE = "database unavailable"


# Connections each pool has lent to calls right now (the pool's own statistics cannot tell a
# connection in use from one it is still trying to open while the database is down).
_holding: dict[int, int] = {}


def pool_timeout_message(pool: AsyncConnectionPool[Any]) -> str:
    """Why no connection came within the pool timeout: calls hold every one the pool may open
    (the server is busy, the database fine), or the pool cannot open them (the database is
    unreachable)."""
    return SERVER_BUSY if _holding.get(id(pool), 0) >= pool.max_size else DATABASE_UNAVAILABLE


# Pools whose idle connections are being checked (recheck_idle), with the check's task.
_rechecking: dict[int, asyncio.Task[None]] = {}


def recheck_idle(pool: AsyncConnectionPool[Any]) -> None:
    """A connection was lost (the database, or a pooler in front of it, restarted): check the
    pool's idle connections now, in the background, so the broken ones are replaced at once
    instead of each failing one more call."""
    key = id(pool)
    if key in _rechecking or pool.closed:
        return
    task = asyncio.ensure_future(pool.check())
    _rechecking[key] = task

    def checked(done: asyncio.Task[None]) -> None:
        _rechecking.pop(key, None)
        if not done.cancelled() and done.exception() is not None:
            log.debug("event=recheck_failed error=%s", _quote(repr(done.exception())))

    task.add_done_callback(checked)


# Every handler task until it finishes, with the pool it runs on (strong references: a task
# whose call has ended may still be cancelling its statement), and those already cancelled.
_in_flight: dict[asyncio.Future[Any], AsyncConnectionPool[Any]] = {}
_cancel_requested: set[asyncio.Future[Any]] = set()


def _track(task: asyncio.Future[Any], pool: AsyncConnectionPool[Any]) -> None:
    _in_flight[task] = pool
    task.add_done_callback(_finished)


def _finished(task: asyncio.Future[Any]) -> None:
    _in_flight.pop(task, None)
    if task in _cancel_requested:
        _cancel_requested.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.debug("event=cancelled_call error=%s", _quote(repr(task.exception())))


def _cancel_in_background(task: asyncio.Future[Any]) -> None:
    """Cancel `task` once (a second cancel would interrupt psycopg's own cancel request)."""
    if task not in _cancel_requested and not task.done():
        _cancel_requested.add(task)
        task.cancel()


async def drain(pool: AsyncConnectionPool[Any], timeout: float) -> None:
    """At shutdown, once the gRPC server has stopped: cancel the statements of calls still on
    `pool` (the grace period is over) and wait at most `timeout` seconds for them to stop,
    so every connection is back in the pool before it closes."""
    tasks = [t for t, p in _in_flight.items() if p is pool]
    for task in tasks:
        _cancel_in_background(task)
    if tasks:
        await asyncio.wait(tasks, timeout=timeout)


def _quote(text: str) -> str:
    """A logfmt value: one line, double-quoted."""
    return '"' + " ".join(text.split()).replace("\\", "\\\\").replace('"', '\\"') + '"'
