"""gRPC status for what goes wrong in a handler.

A handler raises `RpcError` subclasses for what it can tell itself (a malformed id, no such
row); database errors are mapped by SQLSTATE. Messages never carry SQL text or a traceback.
"""

from __future__ import annotations

import grpc
import psycopg
from psycopg import errors as pg_errors

from .logfmt import quote as _quote


class RpcError(Exception):
    """An error with the gRPC status it should be answered with."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(RpcError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(RpcError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(RpcError):
    code = grpc.StatusCode.ALREADY_EXISTS


class FailedPrecondition(RpcError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class Unavailable(RpcError):
    code = grpc.StatusCode.UNAVAILABLE


class DeadlineExceeded(RpcError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class Aborted(RpcError):
    code = grpc.StatusCode.ABORTED


class ResourceExhausted(RpcError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


ROW_BUSY = "row busy (locked by another transaction), retry"

# SQLSTATE classes and codes -> gRPC status. Documented in docs/errors.md.
_BY_SQLSTATE: dict[str, grpc.StatusCode] = {
    "23505": grpc.StatusCode.ALREADY_EXISTS,  # unique_violation
    "23503": grpc.StatusCode.FAILED_PRECONDITION,  # foreign_key_violation
    "23502": grpc.StatusCode.INVALID_ARGUMENT,  # not_null_violation
    "23514": grpc.StatusCode.INVALID_ARGUMENT,  # check_violation
    "23P01": grpc.StatusCode.FAILED_PRECONDITION,  # exclusion_violation
    "40001": grpc.StatusCode.ABORTED,  # serialization_failure
    "40P01": grpc.StatusCode.ABORTED,  # deadlock_detected
    "55P03": grpc.StatusCode.ABORTED,  # lock_not_available (lock_timeout): the row is busy, retry
    "57014": grpc.StatusCode.DEADLINE_EXCEEDED,  # query_canceled (statement_timeout / cancel)
    "57P01": grpc.StatusCode.UNAVAILABLE,  # admin_shutdown
    "57P02": grpc.StatusCode.UNAVAILABLE,  # crash_shutdown
    "57P03": grpc.StatusCode.UNAVAILABLE,  # cannot_connect_now
    # read_only_sql_transaction: a write reached a standby (a failover the pool has not caught up
    # with yet, or a misrouted URL): the same call succeeds once it reaches the primary.
    "25006": grpc.StatusCode.UNAVAILABLE,
    "53300": grpc.StatusCode.RESOURCE_EXHAUSTED,  # too_many_connections
}
_BY_CLASS: dict[str, grpc.StatusCode] = {
    "08": grpc.StatusCode.UNAVAILABLE,  # connection exception
    "22": grpc.StatusCode.INVALID_ARGUMENT,  # data exception (bad text representation, range)
    "53": grpc.StatusCode.RESOURCE_EXHAUSTED,  # insufficient resources
    "54": grpc.StatusCode.INVALID_ARGUMENT,  # program limit exceeded (a value too large to index, JSON nested too deep)
}


def status_for_db_error(err: psycopg.Error) -> tuple[grpc.StatusCode, str]:
    """The status and a client-safe message for a database error."""
    if isinstance(err, (psycopg.OperationalError, psycopg.InterfaceError)) and not err.sqlstate:
        return grpc.StatusCode.UNAVAILABLE, "database unavailable"
    if isinstance(err, psycopg.DataError) and not err.sqlstate:
        # Refused by psycopg before it reached the server: a value Postgres cannot store, e.g.
        # "PostgreSQL text fields cannot contain NUL (0x00) bytes". The caller's input, not a fault.
        return grpc.StatusCode.INVALID_ARGUMENT, f"invalid value: {err}"
    state = err.sqlstate or ""
    code = _BY_SQLSTATE.get(state) or _BY_CLASS.get(state[:2]) or grpc.StatusCode.INTERNAL
    if code == grpc.StatusCode.INTERNAL:
        return code, f"database error (SQLSTATE {state or 'unknown'})"
    if code == grpc.StatusCode.UNAVAILABLE:
        return code, "database unavailable"
    if state == "55P03":
        # The statement waited --lock-timeout for a row another transaction holds, and gave its
        # connection back rather than tie it up: not the database failing, a conflict to retry.
        return code, ROW_BUSY
    diag = err.diag
    primary = diag.message_primary or type(err).__name__
    if isinstance(err, pg_errors.ForeignKeyViolation):
        # Writing a row that points at a missing one is NOT_FOUND ("Key (tool_id)=(...) is not
        # present in table ..."); removing a row others still point at is FAILED_PRECONDITION.
        detail = diag.message_detail or ""
        if "is not present in table" in detail:
            return grpc.StatusCode.NOT_FOUND, f"a referenced row does not exist: {detail}"
        return code, f"the row is still referenced: {detail}" if detail else primary
    if isinstance(err, pg_errors.UniqueViolation):
        detail = diag.message_detail or ""
        return code, f"already exists: {detail}" if detail else primary
    return code, primary


# Whether log lines may carry PostgreSQL's messages in full (`--log-database-detail`). Off, a
# database error is logged by its SQLSTATE and the names PostgreSQL attaches to it (schema,
# table, column, constraint): never its DETAIL ("Failing row contains (...)": a whole row) nor
# its primary message, which may quote a value ('invalid input syntax for type uuid: "..."').
_log_detail = False


def set_log_detail(enabled: bool) -> None:
    global _log_detail
    _log_detail = enabled


def describe_for_log(err: BaseException) -> str:
    """logfmt fields describing `err` for the server log, without row contents unless enabled."""
    if not isinstance(err, psycopg.Error) or not err.sqlstate:
        # Connection-level failures (refused, lost, pool timeout): libpq's text names hosts, not rows.
        return f"error={_quote(str(err))}"
    diag = err.diag
    fields = [f"sqlstate={err.sqlstate}"]
    for key, value in (
        ("schema", diag.schema_name),
        ("table", diag.table_name),
        ("column", diag.column_name),
        ("constraint", diag.constraint_name),
    ):
        if value:
            fields.append(f"{key}={_quote(value)}")
    if _log_detail:
        fields.append(f"error={_quote(diag.message_primary or '')}")
        if diag.message_detail:
            fields.append(f"detail={_quote(diag.message_detail)}")
    return " ".join(fields)
