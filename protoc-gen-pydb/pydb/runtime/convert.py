"""Request field -> SQL parameter conversions, each failing with INVALID_ARGUMENT that names
the field, and the result-side loader set-up."""

from __future__ import annotations

import datetime
import re
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from google.protobuf import timestamp_pb2
from psycopg import AsyncCursor
from psycopg.types.string import TextLoader

from .errors import InvalidArgument

E = TypeVar("E", bound=int)


# The canonical form Postgres and uuid.UUID print: passed through without a parse-and-format.
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}").fullmatch


def parse_uuid(value: str, field: str) -> str:
    """`value` if it is a UUID (canonical or not), else INVALID_ARGUMENT naming `field`."""
    if _CANONICAL_UUID(value):
        return value
    if not value:
        raise InvalidArgument(f"{field} is required (a UUID)")
    try:
        return str(uuid.UUID(value))
    except ValueError:
        shown = value if len(value) <= 64 else value[:61] + "..."
        raise InvalidArgument(f"{field} must be a UUID, got {shown!r}") from None


def parse_uuids(values: Iterable[str], field: str) -> list[str]:
    return [parse_uuid(v, f"{field}[{i}]") for i, v in enumerate(values)]


def parse_ints(values: Iterable[str], field: str) -> list[str]:
    """Integers written as text, the way Postgres prints them; anything else is INVALID_ARGUMENT."""
    out = []
    for i, value in enumerate(values):
        try:
            out.append(str(int(value.strip())))
        except ValueError:
            shown = value if len(value) <= 64 else value[:61] + "..."
            raise InvalidArgument(f"{field}[{i}] must be an integer, got {shown!r}") from None
    return out


def enum_label(labels: Mapping[E, str], value: E, field: str) -> str:
    """The Postgres enum label for a proto enum value; unspecified or unknown is an error."""
    label = labels.get(value)
    if label is None:
        raise InvalidArgument(f"{field} must be set to a known value, got {int(value)}")
    return label


def timestamp_param(ts: timestamp_pb2.Timestamp) -> datetime.datetime:
    return ts.ToDatetime(tzinfo=datetime.UTC)


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_NAIVE_EPOCH = datetime.datetime(1970, 1, 1)


def timestamp_value(dt: datetime.datetime) -> timestamp_pb2.Timestamp:
    """A loaded timestamp(tz) as a Timestamp; naive values are taken as UTC.

    Twice as fast as letting protobuf convert the datetime (Timestamp.FromDatetime), which
    matters for every row with a few timestamp columns (see benchmarks/RESULTS.md)."""
    d = dt - (_NAIVE_EPOCH if dt.tzinfo is None else _EPOCH)
    return timestamp_pb2.Timestamp(seconds=d.days * 86400 + d.seconds, nanos=d.microseconds * 1000)


# Result columns whose Python value should be the text Postgres sends: UUIDs and JSON
# reach proto `string` fields as-is, with no parse-and-reformat round trip.
_TEXT_TYPES = ("uuid", "json", "jsonb")


def text_results(cur: AsyncCursor[Any]) -> None:
    """Make `cur` load uuid, json and jsonb columns as str."""
    for name in _TEXT_TYPES:
        cur.adapters.register_loader(name, TextLoader)
