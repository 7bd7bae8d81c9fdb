"""Requests that cannot be decoded answer INVALID_ARGUMENT.

Left to itself grpc.aio answers a request whose bytes do not parse (corrupt bytes, invalid
UTF-8 in a `string` field) with UNKNOWN "Unexpected <class 'DecodeError'>: ..." and logs a
traceback: a Python class name leaks to the caller and one bad client fills the log. The
`DecodeGuard` interceptor wraps every method's deserializer so a failure becomes a marker
value; the wrapped handler answers it with INVALID_ARGUMENT and a plain message, and the
server logs one line.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc

from .interceptors import WrapOnce, after, original_behaviour, rebuild_handler

log = logging.getLogger("pydb")

UNDECODABLE_MESSAGE = "the request could not be decoded as the method's request message"


class _Undecodable:
    """What the guarded deserializer returns for bytes it cannot parse."""


_UNDECODABLE = _Undecodable()


class DecodeGuard(WrapOnce):
    """Undecodable requests → INVALID_ARGUMENT with a plain message and one WARNING line."""

    def applies(self, handler: grpc.RpcMethodHandler[Any, Any], method: str) -> bool:
        return handler.request_deserializer is not None

    def wrap(self, handler: grpc.RpcMethodHandler[Any, Any], method: str) -> grpc.RpcMethodHandler[Any, Any]:
        """`handler` with a deserializer that cannot fail and a behaviour that refuses what it could not decode."""
        deserialize = handler.request_deserializer
        assert deserialize is not None

        def guarded(raw: bytes) -> Any:
            try:
                return deserialize(raw)
            except Exception:  # DecodeError, or whatever a custom deserializer raises
                return _UNDECODABLE

        async def refuse(context: grpc.aio.ServicerContext[Any, Any]) -> None:
            log.warning("rpc=%s code=INVALID_ARGUMENT event=undecodable_request", method.rsplit("/", 1)[-1])
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, UNDECODABLE_MESSAGE)

        async def decoded(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            if request is _UNDECODABLE:
                await refuse(context)
            return request

        async def each_decoded(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            async def each() -> AsyncIterator[Any]:
                async for request in requests:
                    yield await decoded(request, context)

            return each()

        prepare = each_decoded if handler.request_streaming else decoded
        return rebuild_handler(handler, after(prepare, original_behaviour(handler)), guarded)
