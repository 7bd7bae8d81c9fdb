"""Requests that cannot be decoded answer INVALID_ARGUMENT.

Left to itself grpc.aio answers a request whose bytes do not parse (corrupt bytes, invalid
UTF-8 in a `string` field) with UNKNOWN "Unexpected <class 'DecodeError'>: ..." and logs a
traceback: a Python class name leaks to the caller and one bad client fills the log. The
`DecodeGuard` interceptor wraps every method's deserializer so a failure becomes a marker
value; the wrapped handler answers it with INVALID_ARGUMENT and a plain message, and the
server logs one line.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

log = logging.getLogger("pydb")

UNDECODABLE_MESSAGE = "the request could not be decoded as the method's request message"

Behaviour = Callable[..., Any]


class _Undecodable:
    """What the guarded deserializer returns for bytes it cannot parse."""


_UNDECODABLE = _Undecodable()


def rebuild_handler(
    handler: grpc.RpcMethodHandler[Any, Any],
    behaviour: Behaviour,
    request_deserializer: Callable[[bytes], Any] | None,
) -> grpc.RpcMethodHandler[Any, Any]:
    """A method handler of the same kind (unary/stream in and out) as `handler`, serving `behaviour`."""
    make = {
        (False, False): grpc.unary_unary_rpc_method_handler,
        (False, True): grpc.unary_stream_rpc_method_handler,
        (True, False): grpc.stream_unary_rpc_method_handler,
        (True, True): grpc.stream_stream_rpc_method_handler,
    }[(handler.request_streaming, handler.response_streaming)]
    return make(behaviour, request_deserializer=request_deserializer, response_serializer=handler.response_serializer)


def original_behaviour(handler: grpc.RpcMethodHandler[Any, Any]) -> Behaviour:
    found = handler.unary_unary or handler.unary_stream or handler.stream_unary or handler.stream_stream
    assert found is not None, "a method handler serves one of the four kinds"
    return found


class DecodeGuard(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    """Undecodable requests → INVALID_ARGUMENT with a plain message and one WARNING line."""

    def __init__(self) -> None:
        # method -> (its handler, the guarded one): a method's handler is looked up on every
        # call but is the same object each time, so it is wrapped once.
        self._guarded: dict[str, tuple[grpc.RpcMethodHandler[Any, Any], grpc.RpcMethodHandler[Any, Any]]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any]:
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        method = handler_call_details.method
        cached = self._guarded.get(method)
        if cached is None or cached[0] is not handler:
            cached = (handler, _guard(handler, method))
            self._guarded[method] = cached
        return cached[1]


def _guard(handler: grpc.RpcMethodHandler[Any, Any], method: str) -> grpc.RpcMethodHandler[Any, Any]:
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

    inner = original_behaviour(handler)
    if handler.request_streaming:
        return rebuild_handler(handler, _guard_stream_in(inner, refuse), guarded)
    if inspect.isasyncgenfunction(inner):

        async def unary_in_stream_out(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
            if request is _UNDECODABLE:
                await refuse(context)
            async for response in inner(request, context):
                yield response

        return rebuild_handler(handler, unary_in_stream_out, guarded)

    async def unary_in(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        if request is _UNDECODABLE:
            await refuse(context)
        result = inner(request, context)
        return await result if inspect.isawaitable(result) else result

    return rebuild_handler(handler, unary_in, guarded)


def _guard_stream_in(
    inner: Behaviour, refuse: Callable[[grpc.aio.ServicerContext[Any, Any]], Awaitable[None]]
) -> Behaviour:
    """A client-streaming behaviour whose request iterator aborts the call at an undecodable message."""

    def checked(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
        async def each() -> AsyncIterator[Any]:
            async for request in requests:
                if request is _UNDECODABLE:
                    await refuse(context)
                yield request

        return each()

    if inspect.isasyncgenfunction(inner):

        async def stream_out(
            requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]
        ) -> AsyncIterator[Any]:
            async for response in inner(checked(requests, context), context):
                yield response

        return stream_out

    async def unary_out(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        result = inner(checked(requests, context), context)
        return await result if inspect.isawaitable(result) else result

    return unary_out
