"""Run one generated handler on a pooled connection: deadline, errors, logging."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from .errors import RpcError, status_for_db_error

log = logging.getLogger("pydb")

Req = TypeVar("Req")
Resp = TypeVar("Resp")

Handler = Callable[[AsyncConnection[Any], Req], Awaitable[Resp]]


class Database:
    """A connection pool plus the policy every RPC shares.

    - The caller's deadline bounds the whole call, statement included: when it passes the
      query is cancelled on the server and the call ends with DEADLINE_EXCEEDED.
    - `RpcError`s raised by a handler become their status; database errors are mapped by
      SQLSTATE (see errors.py); nothing else leaks: an unexpected exception is logged with
      its traceback and answered with a bare INTERNAL.
    """

    def __init__(self, pool: AsyncConnectionPool[Any], *, acquire_timeout: float = 5.0) -> None:
        self.pool = pool
        self.acquire_timeout = acquire_timeout

    async def run(
        self,
        context: grpc.aio.ServicerContext[Any, Any],
        rpc: str,
        handler: Callable[[AsyncConnection[Any], Req], Awaitable[Resp]],
        request: Req,
    ) -> Resp:
        started = time.perf_counter()
        code, message = grpc.StatusCode.OK, ""
        remaining = context.time_remaining()
        try:
            async with asyncio.timeout(remaining):
                async with self.pool.connection(timeout=self.acquire_timeout) as conn:
                    return await handler(conn, request)
        except RpcError as err:
            code, message = err.code, err.message
        except psycopg.Error as err:
            code, message = status_for_db_error(err)
            if code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNAVAILABLE):
                log.error("%s: database error %s: %s", rpc, err.sqlstate, err)
        except PoolTimeout:
            code, message = grpc.StatusCode.UNAVAILABLE, "database unavailable"
        except TimeoutError:
            code, message = grpc.StatusCode.DEADLINE_EXCEEDED, "deadline exceeded"
        except Exception:
            log.exception("%s: unexpected error", rpc)
            code, message = grpc.StatusCode.INTERNAL, "internal error"
        finally:
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s %s %.1fms", rpc, code.name, (time.perf_counter() - started) * 1000)
        await context.abort(code, message)
