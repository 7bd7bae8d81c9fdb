"""What the generated handlers and servers import at run time.

Kept small and free of plugin internals: request-field conversion with clear
INVALID_ARGUMENT messages, the database-error -> gRPC status mapping, and `Database`,
which runs one handler on a pooled connection inside the caller's deadline.
"""

from __future__ import annotations

from .convert import (
    OutOfRange,
    array_text,
    cursor,
    duration_value,
    elements,
    enum_label,
    loaders,
    parse_ints,
    parse_uuid,
    parse_uuids,
    row_count,
    text_array,
    timestamp_param,
    timestamp_value,
)
from .copying import copy_rows
from .database import Database
from .errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    RpcError,
    Unavailable,
    status_for_db_error,
)
from .listen import listen
from .nesting import table_rows
from .paging import Keyset, next_page_token, page_after, page_size
from .streaming import (
    STREAM_BATCH_ROWS,
    StreamCursor,
    binary_loaders,
    requests,
    server_cursor,
    stream,
    timestamp_micros,
)
from .trace import traceparent

__all__ = [
    "STREAM_BATCH_ROWS",
    "AlreadyExists",
    "Database",
    "FailedPrecondition",
    "InvalidArgument",
    "Keyset",
    "NotFound",
    "OutOfRange",
    "RpcError",
    "StreamCursor",
    "Unavailable",
    "array_text",
    "binary_loaders",
    "copy_rows",
    "cursor",
    "duration_value",
    "elements",
    "enum_label",
    "listen",
    "loaders",
    "next_page_token",
    "page_after",
    "page_size",
    "parse_ints",
    "parse_uuid",
    "parse_uuids",
    "requests",
    "row_count",
    "server_cursor",
    "status_for_db_error",
    "stream",
    "table_rows",
    "text_array",
    "timestamp_micros",
    "timestamp_param",
    "timestamp_value",
    "traceparent",
]
