"""W3C Trace Context: the `traceparent` a caller sends as gRPC metadata."""

from __future__ import annotations

import re
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


def traceparent(context: grpc.aio.ServicerContext[Any, Any]) -> str | None:
    """The call's `traceparent` metadata when it is well formed, else None (a malformed
    header is ignored, as the spec asks)."""
    for key, value in context.invocation_metadata() or ():
        if key == "traceparent" and isinstance(value, str):
            value = value.strip()
            return value if valid_traceparent(value) else None
    return None
