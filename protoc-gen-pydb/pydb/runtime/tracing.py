"""OpenTelemetry spans of a generated server (`--tracing`): one SERVER span per RPC, a child of
the caller's W3C `traceparent` metadata, named after the method and annotated by `Database.run`
with the status code, the rows answered and the statement's name (never its values).

Only the `opentelemetry-api` is imported, and only when tracing is on: where spans go (an SDK
and an exporter) is the deployment's choice. With the API but no SDK every span is a no-op.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

from .decoding import original_behaviour, rebuild_handler

TRACER_NAME = "pydb"


def annotate(rpc: str, statement: str, code: grpc.StatusCode, rows: int, sqlstate: str | None) -> None:
    """The current (server) span's attributes for one call."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    span.set_attribute("rpc.grpc.status_code", code.value[0])
    span.set_attribute("db.operation.name", rpc)
    span.set_attribute("db.query.summary", statement)  # the handler, as named in the generated module
    span.set_attribute("db.response.returned_rows", rows)
    if sqlstate:
        span.set_attribute("db.response.status_code", sqlstate)
    if code != grpc.StatusCode.OK:
        span.set_status(trace.Status(trace.StatusCode.ERROR, code.name))


def current_traceparent() -> str | None:
    """The W3C traceparent of the current span, when there is a valid one."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier.get("traceparent")


class TracingInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    """Each call's behaviour runs inside a SERVER span that continues the caller's trace."""

    def __init__(self) -> None:
        self.tracer = trace.get_tracer(TRACER_NAME)
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler[Any, Any], grpc.RpcMethodHandler[Any, Any]]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any]:
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_streaming:
            return handler
        method = handler_call_details.method
        cached = self._wrapped.get(method)
        if cached is None or cached[0] is not handler:
            cached = (handler, rebuild_handler(handler, self._traced(handler, method), handler.request_deserializer))
            self._wrapped[method] = cached
        return cached[1]

    def _traced(self, handler: grpc.RpcMethodHandler[Any, Any], method: str) -> Callable[..., Any]:
        inner = original_behaviour(handler)
        service, _, name = method.strip("/").rpartition("/")
        attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": name}
        tracer = self.tracer

        def parent(context: grpc.aio.ServicerContext[Any, Any]) -> otel_context.Context:
            carrier = {k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)}
            return propagate.extract(carrier)

        if inspect.isasyncgenfunction(inner):

            async def streaming(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
                with tracer.start_as_current_span(
                    method.strip("/"), context=parent(context), kind=trace.SpanKind.SERVER, attributes=attributes
                ):
                    async for response in inner(request, context):
                        yield response

            return streaming

        async def unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            with tracer.start_as_current_span(
                method.strip("/"), context=parent(context), kind=trace.SpanKind.SERVER, attributes=attributes
            ):
                return await inner(request, context)

        return unary
