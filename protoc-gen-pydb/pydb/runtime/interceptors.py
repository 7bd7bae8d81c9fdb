"""What the server's own interceptors share (auth.py, decoding.py): a method handler rebuilt
around a new behaviour of the same kind, a behaviour that runs a step before the original one,
and an interceptor that wraps each method's handler once."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeAlias

import grpc

# Strings: grpc's classes are generic only to the type checker.
Behaviour: TypeAlias = "Callable[..., Any]"
Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"
Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"
#: Given a call's request (or request iterator) and context, the request the original behaviour
#: gets; it may abort the call instead.
Prepare: TypeAlias = "Callable[[Any, Context], Awaitable[Any]]"


def rebuild_handler(
    handler: Handler, behaviour: Behaviour, request_deserializer: Callable[[bytes], Any] | None
) -> Handler:
    """A method handler of the same kind (unary/stream in and out) as `handler`, serving `behaviour`."""
    make = {
        (False, False): grpc.unary_unary_rpc_method_handler,
        (False, True): grpc.unary_stream_rpc_method_handler,
        (True, False): grpc.stream_unary_rpc_method_handler,
        (True, True): grpc.stream_stream_rpc_method_handler,
    }[(handler.request_streaming, handler.response_streaming)]
    return make(behaviour, request_deserializer=request_deserializer, response_serializer=handler.response_serializer)


def original_behaviour(handler: Handler) -> Behaviour:
    found = handler.unary_unary or handler.unary_stream or handler.stream_unary or handler.stream_stream
    assert found is not None, "a method handler serves one of the four kinds"
    return found


def after(prepare: Prepare, inner: Behaviour) -> Behaviour:
    """`inner` called on what `prepare` makes of the request: a server-streaming behaviour stays
    an async generator, any other stays a coroutine function."""
    if inspect.isasyncgenfunction(inner):

        async def streaming(request: Any, context: Context) -> AsyncIterator[Any]:
            prepared = await prepare(request, context)
            async for response in inner(prepared, context):
                yield response

        return streaming

    async def single(request: Any, context: Context) -> Any:
        result = inner(await prepare(request, context), context)
        return await result if inspect.isawaitable(result) else result

    return single


def refusing(answer: Callable[[Context], Awaitable[None]]) -> Handler:
    """A handler that answers (`answer` aborts the call) without reading the request. It is
    request-streaming whatever the method is (unary and streaming requests are the same on the
    wire), so gRPC hands it the call before any of the body arrives; the call ends, and its
    stream is reset, before more than a flow-control window of the body is received: the body
    of a refused call is never buffered whole."""

    async def refuse(_requests: Any, context: Context) -> None:
        await answer(context)

    return grpc.stream_unary_rpc_method_handler(refuse)


def checked_before_reading(handler: Handler, check: Callable[[Context], Awaitable[None]]) -> Handler:
    """`handler` behind `check`, which runs before the request is read (it may abort the call):
    a unary request is then read here, from a request-streaming handler of the same method."""
    inner = original_behaviour(handler)
    deserializer = handler.request_deserializer
    serializer = handler.response_serializer
    if handler.request_streaming:
        return rebuild_handler(handler, after(_passing(check), inner), deserializer)

    async def one(requests: Any, context: Context) -> Any:
        await check(context)
        async for request in requests:
            return request
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no request message")

    if handler.response_streaming:

        async def streaming(requests: Any, context: Context) -> AsyncIterator[Any]:
            async for response in inner(await one(requests, context), context):
                yield response

        return grpc.stream_stream_rpc_method_handler(
            streaming, request_deserializer=deserializer, response_serializer=serializer
        )

    async def single(requests: Any, context: Context) -> Any:
        result = inner(await one(requests, context), context)
        return await result if inspect.isawaitable(result) else result

    return grpc.stream_unary_rpc_method_handler(
        single, request_deserializer=deserializer, response_serializer=serializer
    )


def _passing(check: Callable[[Context], Awaitable[None]]) -> Prepare:
    async def prepare(request: Any, context: Context) -> Any:
        await check(context)
        return request

    return prepare


class WrapOnce(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    """An interceptor that wraps the handler of each method it `applies` to, once: grpc.aio
    looks a method's handler up on every call but gets the same object each time, so the wrapped
    handler is kept per method (and made again should the handler change)."""

    def __init__(self) -> None:
        self._wrapped: dict[str, tuple[Handler, Handler]] = {}  # method -> (its handler, wrapped)

    def applies(self, handler: Handler, method: str) -> bool:
        return True

    def wrap(self, handler: Handler, method: str) -> Handler:
        raise NotImplementedError

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or not self.applies(handler, method):
            return handler
        cached = self._wrapped.get(method)
        if cached is None or cached[0] is not handler:
            cached = (handler, self.wrap(handler, method))
            self._wrapped[method] = cached
        return cached[1]
