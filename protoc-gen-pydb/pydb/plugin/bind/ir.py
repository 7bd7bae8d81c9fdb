"""The language-neutral IR that bind hands to a code generator: what each RPC runs and how every
value crosses between PostgreSQL and protobuf, already checked. Pure data: no Python text, no
decisions left to the generator about SQL validity. A second driver or language reads this too."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ..sql import PgType, QualifiedName


class Cardinality(enum.Enum):
    """How many rows an RPC's statement yields, and what the handler does with them."""

    ONE = "one"  # exactly one row; none is NOT_FOUND / FAILED_PRECONDITION / ALREADY_EXISTS
    OPTIONAL = "optional"  # zero or one row; none leaves the response (or result_field) empty
    MANY = "many"  # any number of rows, into a repeated result_field
    EXEC = "exec"  # no rows
    EXEC_ROWS = "exec_rows"  # no rows; the number of rows written, into an integer field


class Shape(enum.Enum):
    """How requests and responses flow: one each, rows streamed out, or rows streamed in."""

    UNARY = "unary"
    #: `returns (stream Response)` with CARDINALITY_MANY: rows from a server-side cursor, a batch
    #: of them per response (into the repeated result_field), each write awaited.
    SERVER_STREAM = "server_stream"
    #: `rpc Load(stream Row)` with `COPY table (cols) FROM STDIN`: each request is one row, fed to
    #: COPY in one transaction; the response says how many rows were written.
    COPY = "copy"


class Conversion(enum.Enum):
    """How one value crosses: a PostgreSQL value becomes the proto value (a result column) and a
    proto value becomes the PostgreSQL value (a parameter). Each has one runtime implementation
    per generator (for Python: pydb/runtime/convert.py); `bind/typemap.py` picks it per type pair.
    """

    #: The driver's value is the field's value both ways (integers, floats, bool, bytes, text).
    IDENTITY = "identity"
    #: PostgreSQL's text form both ways (json, jsonb, date, time, and every type without a
    #: dedicated mapping: inet, ranges, extension and composite types, ...): the value is read as
    #: the text PostgreSQL prints and bound as text PostgreSQL parses, so every stored value
    #: (`infinity` dates, BC dates, years past 9999) reads back.
    TEXT = "text"
    #: `uuid` as text; a bound value must be a UUID (INVALID_ARGUMENT naming the field otherwise).
    UUID = "uuid"
    #: `numeric` as its decimal text (`NaN`, `Infinity` included).
    NUMERIC_TEXT = "numeric_text"
    #: `numeric` as a double (NaN and ±Infinity included; precision beyond a double is lost).
    NUMERIC_DOUBLE = "numeric_double"
    #: `timestamp(tz)` <-> google.protobuf.Timestamp; `infinity` / `-infinity` are Timestamp's
    #: max / min (9999-12-31T23:59:59.999999Z, 0001-01-01T00:00:00Z) both ways, and years it
    #: cannot hold (after 9999, BC) read as max / min.
    TIMESTAMP = "timestamp"
    #: `interval` <-> google.protobuf.Duration (a month counts 30 days, as PostgreSQL's epoch
    #: does); past Duration's +-10000 years, its max / min.
    DURATION = "duration"
    #: A PostgreSQL enum <-> a proto enum, label by label (see `EnumMapping`); a label the proto
    #: does not know reads as its zero value.
    ENUM = "enum"


@dataclass(frozen=True)
class TypeRef:
    """A message or enum declared in a .proto: its full name, file, and name within the file
    (`Outer.Inner`)."""

    full_name: str
    file: str
    local_name: str


@dataclass(frozen=True)
class EnumMapping:
    """A PostgreSQL enum type and a proto enum, paired label by label."""

    pg_type: str  # the enum type's name, e.g. generation.task_status
    proto: TypeRef
    #: (pg label, proto value name), in the PostgreSQL type's label order.
    pairs: tuple[tuple[str, str], ...]
    #: The proto enum's zero value (`<ENUM>_UNSPECIFIED`): what a label the proto does not know
    #: (added to the type after the code was generated) reads as.
    zero: str


@dataclass(frozen=True)
class FieldRef:
    """A field of a request or response message."""

    name: str
    #: The proto type: a scalar name (`int64`, `string`, ...), `enum`, or a message.
    proto_type: str
    repeated: bool
    #: The field tells "unset" from its zero value (optional, message, oneof, proto2 optional).
    presence: bool
    #: For a wrapper type (google.protobuf.StringValue, ...): the wrapper; the value is its `.value`.
    wrapper: TypeRef | None = None


@dataclass(frozen=True)
class ParamRef:
    """A `@name` in the statement text."""

    name: str


@dataclass(frozen=True)
class ColumnList:
    """What a `*` or whole-row reference expands to: explicit, quoted column expressions, in the
    order PostgreSQL would produce them. A generator joins them with commas, laid out as it likes
    (whitespace between them is the only freedom)."""

    columns: tuple[str, ...]
    #: The `*`, `t.*` or whole-row reference as the statement wrote it.
    written: str = field(default="", compare=False)


@dataclass(frozen=True)
class Statement:
    """The SQL, as pieces: text, the column lists of `*` and whole-row references, and
    parameters. A generator writes the text as its driver wants it (escaping) and each parameter
    as its driver's placeholder."""

    pieces: tuple[str | ParamRef | ColumnList, ...]

    def numbered(self, expanded: bool = True) -> tuple[str, tuple[str, ...]]:
        """The text as PostgreSQL's PREPARE takes it (`$n` by first appearance of each @name; the
        column lists written out, or with `expanded=False` the `*` and whole-row references as
        written) and the parameter names in `$n` order."""
        numbers: dict[str, int] = {}
        text: list[str] = []
        for piece in self.pieces:
            if isinstance(piece, ParamRef):
                text.append(f"${numbers.setdefault(piece.name, len(numbers) + 1)}")
            elif isinstance(piece, ColumnList):
                text.append(", ".join(piece.columns) if expanded else piece.written)
            else:
                text.append(piece)
        return "".join(text), tuple(numbers)


@dataclass(frozen=True)
class Param:
    """A request field bound to a statement parameter."""

    name: str  # the @name, also the request field's name
    pg_type: PgType
    field: FieldRef
    conversion: Conversion
    enum: EnumMapping | None = None


@dataclass(frozen=True)
class Column:
    """A result column (at `position` in the row) filling a field of the row's message. (A NULL
    literal column, `NULL::text AS note`, has none: its field is left unset on purpose.)"""

    name: str
    position: int
    pg_type: PgType
    nullable: bool
    field: FieldRef
    conversion: Conversion
    enum: EnumMapping | None = None


@dataclass(frozen=True)
class Embedded:
    """A joined table's whole row (`SELECT o.*, c FROM orders o LEFT JOIN customers c ...`)
    filling a message field: its columns occupy consecutive row positions. When the row may be
    absent (outer join), `presence` is the position of a column that is NOT NULL in the table
    (NULL there means no row: the field is left unset); None when the row is always there."""

    name: str
    field: FieldRef
    row: Row
    presence: int | None


@dataclass(frozen=True)
class Nested:
    """An array of a table's rows (`array_agg(l ORDER BY l.id) FILTER (WHERE l.id IS NOT NULL)
    AS lines`) at `position`, filling a repeated message field: one message per element, its
    columns (in table order, each `Column.position` an index into the element) checked like
    result columns. A NULL array is no elements; a NULL element (an outer join's missing row,
    without FILTER) is dropped."""

    name: str
    position: int
    pg_type: PgType  # the array type, `shapes.order_lines[]`
    field: FieldRef
    row: Row


@dataclass(frozen=True)
class Row:
    """How a result row becomes a message."""

    message: TypeRef
    columns: tuple[Column | Embedded | Nested, ...]


@dataclass(frozen=True)
class Probe:
    """For a ONE statement that targets a row by its primary key and may match nothing: how to
    tell "no such row" (NOT_FOUND) from "the row is not in the state this call needs"
    (FAILED_PRECONDITION): whether `table` has a row whose `key` equals parameter `param`."""

    table: QualifiedName
    key: str
    param: str


@dataclass(frozen=True)
class Rpc:
    name: str  # ClaimNextTask
    request: TypeRef
    response: TypeRef
    comment: str  # the RPC's leading comment, as written (any characters)
    statement: Statement
    cardinality: Cardinality
    params: tuple[Param, ...]
    #: How rows become messages; None for EXEC and EXEC_ROWS.
    row: Row | None
    #: The response field the rows go into; None when a row is the response itself.
    result_field: str | None
    probe: Probe | None
    #: INSERT ... ON CONFLICT DO NOTHING: no row back means the row already existed.
    conflict_do_nothing: bool
    #: Whether the statement may write: rows that can fail to convert (a NULL array element) are
    #: then converted before it commits, so a row that cannot be answered is not written either.
    writes: bool
    #: `(pydb.v1.sql).primary`: run on the primary even when the statement only reads.
    primary: bool = False
    #: When the request has a string `w3c_traceparent` field the statement binds: the field
    #: (the server fills it from the call's `traceparent` metadata when the caller left it unset).
    traceparent: FieldRef | None = None
    #: Unary, a streamed read, or a COPY fed by a client stream (whose `params` are the COPY's
    #: columns in order, each bound to the request field of its name).
    shape: Shape = Shape.UNARY
    #: A COPY whose requests each carry a batch of rows: the request's repeated message field.
    copy_batch: str | None = None
    #: The statement in parts, each present under its condition (`/*@if field*/` blocks, the page
    #: predicate's place): empty when the statement is one constant text (`statement`). With
    #: parts, `statement` is its first variant (every optional block present).
    parts: tuple[Part, ...] = ()
    page: Page | None = None


class ListenFilter(enum.Enum):
    """How a listen RPC checks the values of its filter field (the NOTIFY payloads' type)."""

    TEXT = "text"
    UUID = "uuid"
    INTEGER = "integer"


@dataclass(frozen=True)
class Listen:
    """A server-streaming RPC with `(pydb.v1.listen)`: one response per NOTIFY on `channel`."""

    name: str
    request: TypeRef
    response: TypeRef
    comment: str
    channel: str
    payload_field: str
    filter_field: str | None
    filter: ListenFilter


@dataclass(frozen=True)
class Service:
    name: str  # GenerationDataService
    full_name: str  # generation.task.v1.GenerationDataService
    rpcs: tuple[Rpc, ...]
    #: RPCs without an annotation: answered UNIMPLEMENTED.
    unannotated: tuple[str, ...]
    listens: tuple[Listen, ...] = ()


@dataclass(frozen=True)
class File:
    proto: str  # generation/task/v1/task.proto
    package: str
    services: tuple[Service, ...]


@dataclass(frozen=True)
class Condition:
    """When a part of the statement applies: the request field is set (`values` empty), or the
    enum field (`enum`) holds one of `values` (its value names)."""

    field: FieldRef
    values: tuple[str, ...] = ()
    enum: TypeRef | None = None


@dataclass(frozen=True)
class Part:
    """A run of the statement's text present when `when` holds (always when None)."""

    statement: Statement
    when: Condition | None = None


@dataclass(frozen=True)
class Keyset:
    """A page's keyset for one ORDER BY: the predicate `(exprs) > / < (the token's values)`
    goes before `parts[slot]` when a page token is given, the token is made from the last row's
    values at `positions`."""

    exprs: tuple[str, ...]
    descending: tuple[bool, ...]
    #: PostgreSQL type names the token's values are cast to.
    types: tuple[str, ...]
    positions: tuple[int, ...]
    #: The statement has a top-level WHERE: the predicate is ANDed to it, else it adds WHERE.
    where: bool
    slot: int
    when: Condition | None = None


@dataclass(frozen=True)
class Page:
    """AIP-158 paging: page_size and page_token in the request, next_page_token in the response."""

    size_field: str
    token_field: str
    next_field: str
    default_size: int
    max_size: int
    keysets: tuple[Keyset, ...]
