"""OpenTelemetry spans of a generated server (`--tracing`): one SERVER span per RPC, a child of
the caller's W3C `traceparent` metadata, named after the method and annotated by `Database.run`
with the status code, the rows answered and the statement's name (never its values).

Only the `opentelemetry-api` is imported, and only when tracing is on: where spans go (an SDK
and an exporter) is the deployment's choice. With the API but no SDK every span is a no-op.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from typing import Any

import grpc
from opentelemetry import propagate, trace

from .interceptors import Context, Handler, WrapOnce, original_behaviour, rebuild_handler

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


class TracingInterceptor(WrapOnce):
    """Each unary-request call's behaviour runs inside a SERVER span continuing the caller's trace."""

    def __init__(self) -> None:
        super().__init__()
        self.tracer = trace.get_tracer(TRACER_NAME)

    def applies(self, handler: Handler, method: str) -> bool:
        return not handler.request_streaming

    def wrap(self, handler: Handler, method: str) -> Handler:
        inner = original_behaviour(handler)
        name = method.strip("/")
        service, _, rpc = name.rpartition("/")
        attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": rpc}
        tracer = self.tracer

        def span(context: Context) -> Any:
            carrier = {k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)}
            return tracer.start_as_current_span(
                name, context=propagate.extract(carrier), kind=trace.SpanKind.SERVER, attributes=attributes
            )

        if inspect.isasyncgenfunction(inner):

            async def streaming(request: Any, context: Context) -> AsyncIterator[Any]:
                with span(context):
                    async for response in inner(request, context):
                        yield response

            return rebuild_handler(handler, streaming, handler.request_deserializer)

        async def unary(request: Any, context: Context) -> Any:
            with span(context):
                return await inner(request, context)

        return rebuild_handler(handler, unary, handler.request_deserializer)
