"""W3C Trace Context: the `traceparent` a caller sends as gRPC metadata."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import grpc

_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")


def valid_traceparent(value: str) -> bool:
    """Whether `value` is a traceparent header as https://www.w3.org/TR/trace-context/ defines it."""
    m = _TRACEPARENT.fullmatch(value)
    if m is None:
        return False
    version, trace_id, parent_id, _, rest = m.groups()
    if version == "ff" or trace_id == "0" * 32 or parent_id == "0" * 16:
        return False
    return version != "00" or rest is None


#: With tracing on (`--tracing`): the current span's traceparent (tracing.current_traceparent).
_current_span: Callable[[], str | None] | None = None


def use_current_span(source: Callable[[], str | None] | None) -> None:
    global _current_span
    _current_span = source


def traceparent(context: grpc.aio.ServicerContext[Any, Any]) -> str | None:
    """What an enqueue stores as its task's parent span: with tracing on, the call's own server
    span (a child of the caller's `traceparent`, or the root of a new trace); off, the call's
    `traceparent` metadata when it is well formed, else None (a malformed header is ignored,
    as the spec asks)."""
    if _current_span is not None and (current := _current_span()) is not None:
        return current
    for key, value in context.invocation_metadata() or ():
        if key == "traceparent" and isinstance(value, str):
            value = value.strip()
            return value if valid_traceparent(value) else None
    return None
