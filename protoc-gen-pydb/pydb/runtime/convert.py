"""The Python side of each `Conversion` (pydb/plugin/bind/ir.py): request field -> SQL parameter
(each failing with INVALID_ARGUMENT that names the field) and result value -> proto value, with
the loaders that make every value PostgreSQL can store readable (docs/adding-a-type.md)."""

from __future__ import annotations

import datetime
import re
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import grpc
import psycopg
from google.protobuf import duration_pb2, timestamp_pb2
from psycopg import AsyncConnection, AsyncCursor, DataError, abc, postgres
from psycopg.abc import AdaptContext, Buffer
from psycopg.adapt import AdaptersMap, Loader
from psycopg.pq import Format, PipelineStatus
from psycopg.rows import tuple_row
from psycopg.types.string import TextLoader

from .errors import InvalidArgument, RpcError

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


class OutOfRange(RpcError):
    """A stored value the response's proto type cannot represent."""

    code = grpc.StatusCode.OUT_OF_RANGE


# Timestamp's range is 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59.999999999Z; PostgreSQL's
# `infinity` and `-infinity` are read as (and written from) its ends.
_MAX_SECONDS = 253402300799
_MIN_SECONDS = -62135596800
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_NAIVE_EPOCH = datetime.datetime(1970, 1, 1)


def timestamp_param(ts: timestamp_pb2.Timestamp, field: str) -> datetime.datetime | str:
    """A Timestamp as a timestamp(tz) parameter: Timestamp's max and min are `infinity` and
    `-infinity` (the values they read back from)."""
    if ts.seconds >= _MAX_SECONDS and ts.nanos >= 999_999_000:
        return "infinity"
    if ts.seconds == _MIN_SECONDS and ts.nanos == 0:
        return "-infinity"
    if not _MIN_SECONDS <= ts.seconds <= _MAX_SECONDS:
        raise InvalidArgument(f"{field} is outside google.protobuf.Timestamp's range (years 1 to 9999)")
    return ts.ToDatetime(tzinfo=datetime.UTC)


# Typed Any: the constructors take a dict for a message field, which their stubs do not list.
def timestamp_value(dt: datetime.datetime) -> Any:
    """A loaded timestamp(tz) as the value of a Timestamp field in a message's constructor (its
    `seconds` and `nanos`); naive values are taken as UTC.

    Twice as fast as letting protobuf convert the datetime (Timestamp.FromDatetime), which
    matters for every row with a few timestamp columns (see benchmarks/RESULTS.md). A dict, not
    a Timestamp: the constructor fills its field from a dict in place, while a Timestamp would be
    built first and then copied into the field (a third of the cost again)."""
    hit = _timestamp_values.get(id(dt))
    if hit is not None and hit[0] is dt:
        return hit[1]
    d = dt - (_NAIVE_EPOCH if dt.tzinfo is None else _EPOCH)
    value = {"seconds": d.days * 86400 + d.seconds, "nanos": d.microseconds * 1000}
    if len(_timestamp_values) >= _SEEN_MAX:
        _timestamp_values.clear()
    _timestamp_values[id(dt)] = (dt, value)
    return value


#: The values of the datetimes converted last, by identity (each kept alive beside its value, so
#: its id is not reused): the timestamp loaders hand out one datetime per distinct text in a
#: result (a claimed batch shares its lease's and claim's instants, an enqueued batch its
#: created_at), so a batch's timestamps convert once. The values are only read (a message's
#: constructor copies them).
_timestamp_values: dict[int, tuple[datetime.datetime, Any]] = {}
_SEEN_MAX = 256


#: google.protobuf.Duration's range: +-10000 years.
_MAX_DURATION_SECONDS = 315_576_000_000


def duration_value(td: datetime.timedelta) -> duration_pb2.Duration:
    """A loaded interval as a Duration (a month counts 30 days); beyond Duration's +-10000
    years (PostgreSQL's intervals reach 178 million), its max / min."""
    seconds = td.days * 86400 + td.seconds
    if seconds > _MAX_DURATION_SECONDS:
        return duration_pb2.Duration(seconds=_MAX_DURATION_SECONDS)
    if seconds < -_MAX_DURATION_SECONDS:
        return duration_pb2.Duration(seconds=-_MAX_DURATION_SECONDS)
    return duration_pb2.Duration(seconds=seconds, nanos=td.microseconds * 1000)


def elements(value: list[Any] | None) -> list[Any]:
    """An array for a repeated field: NULL is [] (no elements); a NULL element cannot be
    represented: OUT_OF_RANGE (refused before commit when the statement writes)."""
    if value is None:
        return []
    if None in value:
        raise OutOfRange("an array holds a NULL element, which a repeated field cannot")
    return value


def text_array(value: str | list[str] | None, *, drop_nulls: bool = False) -> list[str]:
    """A one-dimensional array of text-form values as its elements: a list when psycopg knows the
    array type (built-ins, loaded element by element as text), else PostgreSQL's text form
    (`{a,"b c"}`: enums, extension and composite types). A NULL array is [] (an empty repeated
    field); a NULL element cannot be represented: OUT_OF_RANGE (or, with `drop_nulls`, is left out)."""
    if value is None:
        return []
    if isinstance(value, list):
        return [v for v in value if v is not None] if drop_nulls else elements(value)
    out: list[str] = []
    i, end = 1, len(value) - 1  # inside the braces
    while i < end:
        if value[i] == '"':
            chars = []
            i += 1
            while value[i] != '"':
                if value[i] == "\\":
                    i += 1
                chars.append(value[i])
                i += 1
            out.append("".join(chars))
            i += 1
        else:
            stop = value.find(",", i)
            stop = end if stop == -1 else stop
            if value[i:stop] != "NULL":
                out.append(value[i:stop])
            elif not drop_nulls:
                raise OutOfRange("an array holds a NULL element, which a repeated field cannot")
            i = stop
        i += 1  # the comma
    return out


def array_text(values: Iterable[str], delimiter: str) -> str:
    """A repeated string as the text form of an array whose elements PostgreSQL separates with
    `delimiter` (box[]: `;`), every element quoted; PostgreSQL parses it as the inferred type."""
    quoted = ('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values)
    return "{" + delimiter.join(quoted) + "}"


def _clamping(name: str, high: datetime.datetime, low: datetime.datetime) -> type[Loader]:
    """psycopg's own text loader for timestamp type `name`, reading what Python's datetime (and
    Timestamp) cannot hold as its ends: `infinity` and years after 9999 as `high`, `-infinity`
    and BC years as `low` (psycopg refuses them all)."""
    oid = postgres.types[name].oid
    found = psycopg.adapters.get_loader(oid, Format.TEXT)
    assert found is not None
    base: type[abc.Loader] = found

    class ClampingLoader(Loader):
        def __init__(self, oid: int, context: AdaptContext | None = None) -> None:
            super().__init__(oid, context)
            self._base = base(oid, context)
            # A result's values by their text: the rows of a batch share a few instants (the
            # claim's now(), an enqueue's), each parsed once. One loader serves one cursor's
            # result (a transformer per cursor), so this lives as long as a result's loading.
            self._seen: dict[bytes, datetime.datetime] = {}

        def load(self, data: Buffer) -> datetime.datetime:
            text = bytes(data)
            value = self._seen.get(text)
            if value is None:
                value = self._parse(text)
                if len(self._seen) >= _SEEN_MAX:
                    self._seen.clear()
                self._seen[text] = value
            return value

        def _parse(self, text: bytes) -> datetime.datetime:
            if text in (b"infinity", b"-infinity"):
                return high if text == b"infinity" else low
            try:
                value: datetime.datetime = self._base.load(text)
            except DataError:  # "timestamp too large (after year 10K)" / "too small (before year 1)"
                return low if text.endswith(b" BC") else high
            return value

    ClampingLoader.__name__ = ClampingLoader.__qualname__ = f"Clamping{base.__name__}"
    return ClampingLoader


_TIMESTAMP_LOADERS = {
    "timestamptz": _clamping(
        "timestamptz",
        datetime.datetime.max.replace(tzinfo=datetime.UTC),
        datetime.datetime.min.replace(tzinfo=datetime.UTC),
    ),
    "timestamp": _clamping("timestamp", datetime.datetime.max, datetime.datetime.min),
}


def loaders(text: tuple[str, ...] = (), timestamps: tuple[str, ...] = ()) -> AdaptersMap:
    """psycopg's default adapters, with values of `text` types (uuid, json, date, inet,
    int4range, ...) loaded as the text PostgreSQL sends (what a proto `string` field gets, for
    every value the type can hold) and the `timestamps` types (timestamp, timestamptz) read with
    `infinity` (and years after 9999) as Timestamp's max, `-infinity` (and BC years) as its min.
    A type psycopg does not know (citext, hstore, a composite type, ...) loads as text anyway.

    Made once per handler (at import) and shared by its cursors (`cursor`): registering loaders
    on every call's cursor cost more than the rest of the handler's own work (each registration
    copies the loader table and rebuilds the cursor's transformer; benchmarks/RESULTS.md §2).
    Derived from psycopg's defaults, not the connection's adapters, so what a handler reads does
    not depend on loaders the connection's owner registered for their own queries."""
    adapters = AdaptersMap(psycopg.adapters)
    for name in text:
        if adapters.types.get(name) is not None:
            adapters.register_loader(name, TextLoader)
    for name in timestamps:
        adapters.register_loader(name, _TIMESTAMP_LOADERS[name])
    return adapters


class _LoadingCursor(AsyncCursor[tuple[Any, ...]]):
    """A tuple-row cursor that adapts with a given AdaptersMap instead of a copy of its
    connection's: psycopg's Transformer takes the adapters from its context's `adapters`."""

    __slots__ = ("_loading",)

    def __init__(self, conn: AsyncConnection[Any], adapters: AdaptersMap) -> None:
        self._loading = adapters  # before the base class builds its Transformer from it
        super().__init__(conn, row_factory=tuple_row)

    @property
    def adapters(self) -> AdaptersMap:
        return self._loading


def cursor(conn: AsyncConnection[Any], adapters: AdaptersMap) -> AsyncCursor[tuple[Any, ...]]:
    """A cursor on `conn` returning tuples, its values loaded by `adapters` (from `loaders`)."""
    return _LoadingCursor(conn, adapters)


async def row_count(conn: AsyncConnection[Any], cur: AsyncCursor[Any]) -> int:
    """The rows the statement just executed on `cur` touched. A writing call runs in pipeline
    mode (its BEGIN goes out with the statement, database.py), where the statement's result, and
    so its row count, arrives only at a sync: a nested pipeline block syncs as it ends."""
    if conn.pgconn.pipeline_status != PipelineStatus.OFF:
        async with conn.pipeline():
            pass
    return cur.rowcount
