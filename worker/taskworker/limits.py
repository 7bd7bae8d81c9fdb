"""The data plane's message limits, which every batch the worker sends or asks for stays under.

A request over the server's receive limit (gRPC's 4 MiB) is refused before it is read, and an
answer over its send limit (--max-send-message-bytes, 4 MiB by default) is refused after the
statement ran: either is RESOURCE_EXHAUSTED "larger than max", permanent (retry.py). So the
fleet's report batches (reports.py) and the event writer's batches and readers' pages
(events.py) are bounded by bytes as well as by count, `FRAMING_MARGIN` under the limit.
"""

from __future__ import annotations

from dataclasses import dataclass

#: gRPC's default message limit: the server's receive limit, and its default send limit
#: (--max-send-message-bytes).
DEFAULT_MESSAGE_BYTES = 4 * 1024 * 1024
#: Left under each limit for the message's own framing (tags, lengths) and what estimates miss.
FRAMING_MARGIN = 64 * 1024
#: A failure's error text is cut to this many characters (the row keeps it, and its history).
MAX_ERROR_CHARS = 8192


@dataclass(frozen=True)
class MessageLimits:
    """The server's message limits, in bytes: `receive` bounds a request (gRPC's, 4 MiB unless
    the server was built otherwise), `send` an answer (--max-send-message-bytes)."""

    receive: int = DEFAULT_MESSAGE_BYTES
    send: int = DEFAULT_MESSAGE_BYTES

    def __post_init__(self) -> None:
        if min(self.receive, self.send) <= 2 * FRAMING_MARGIN:
            raise ValueError(f"message limits must be above {2 * FRAMING_MARGIN} bytes")

    @property
    def request_budget(self) -> int:
        return self.receive - FRAMING_MARGIN

    @property
    def answer_budget(self) -> int:
        return self.send - FRAMING_MARGIN


def stored_bytes(text: str) -> int:
    """An upper bound of `text`'s size once PostgreSQL stored it as jsonb and printed it back
    (jsonb::text puts a space after every ',' and ':' that compact JSON leaves out)."""
    return len(text.encode()) + text.count(",") + text.count(":") if text else 0
