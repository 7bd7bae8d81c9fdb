"""The render model: frozen dataclasses holding the Python the templates print, already decided
by pygen/lower.py from the IR. Templates only lay it out (and escape what lands in strings,
docstrings and comments); no logic about SQL or protobuf lives in them."""

from __future__ import annotations

from dataclasses import dataclass

from ..bind.ir import Cardinality


@dataclass(frozen=True)
class EnumMap:
    """A PostgreSQL enum <-> proto enum correspondence, label by label."""

    from_pg_name: str  # the dict literal's name in the generated module
    to_pg_name: str
    proto_type: str  # Python type of the proto enum, e.g. task_pb2.TaskStatus
    pairs: tuple[tuple[str, str], ...]  # (pg label, proto value expression)
    pg_type: str
    used_from_pg: bool
    used_to_pg: bool


@dataclass(frozen=True)
class ParamBinding:
    """A `@name` bound to a request field: `expr` computes the value to send."""

    name: str
    expr: str


@dataclass(frozen=True)
class FieldValue:
    """One keyword argument of a message constructor: `field=expr` (or `**{"field": expr}` for
    a field named like a Python keyword)."""

    argument: str
    comment: str


@dataclass(frozen=True)
class RowConverter:
    """A function turning a result row into a message."""

    function: str
    message_type: str  # Python type, e.g. task_pb2.Task
    doc: str
    values: tuple[FieldValue, ...]
    #: For the elements of an array of a table's rows: the constant naming how rt.table_rows
    #: loads each column (`_ORDER_LINE_COLUMNS`), its tuple literal and the table; else None.
    loads: tuple[str, str, str] | None = None


@dataclass(frozen=True)
class Probe:
    const: str  # CLAIM_TASK_EXISTS_SQL
    sql: str  # psycopg-ready, identifiers quoted
    param: str
    table: str  # for messages: schema.name
    #: Python expressions (f-strings) for the NOT_FOUND and FAILED_PRECONDITION messages.
    missing: str
    wrong_state: str


@dataclass(frozen=True)
class Paged:
    """AIP-158 pages: each a Python expression or statement the handler prints."""

    keysets_const: str  # LIST_TASKS_KEYSETS
    keysets: tuple[str, ...]  # rt.Keyset(...) expressions
    size: str  # the page's size (rt.page_size)
    keyset: str  # the statement(s) choosing the keyset of the request's sort
    after: str  # the predicate's parameters from the token ({} on the first page)
    next_token: str  # the token after rows[size - 1]
    next_field: str


@dataclass(frozen=True)
class Shaped:
    """A statement joined from constant parts at run time (optional blocks, a sort, a page)."""

    parts: tuple[str, ...]  # Python literals of the parts' texts
    items: tuple[str, ...]  # per joined item, its expression (a part, or "" when its condition fails)
    checks: tuple[str, ...]  # statements checking a sort's enum value
    page: Paged | None


@dataclass(frozen=True)
class Rpc:
    name: str  # ClaimNextTask
    function: str  # claim_next_task
    sql_const: str  # CLAIM_NEXT_TASK_SQL
    sql: str  # psycopg-ready: %(name)s placeholders, % doubled
    request_type: str
    response_type: str
    cardinality: Cardinality
    summary: str
    params: tuple[ParamBinding, ...]
    #: Python expression of the response built from `row` (ONE, OPTIONAL) or `rows` (MANY).
    response: str
    result_field: str | None
    #: The module constant holding the adapters that load its columns (rt.loaders), made once at
    #: import, or None when the RPC reads with psycopg's own loaders (tuple_row).
    loaders_const: str | None
    #: rt.loaders' arguments: the PostgreSQL types whose values are loaded as the text PostgreSQL
    #: sends (uuid, json, date...) and the timestamp types loaded with ±infinity as max/min.
    loaders_args: str
    #: The cursor the handler opens: with those loaders, or psycopg's own returning tuples.
    cursor: str
    probe: Probe | None
    conflict_do_nothing: bool
    #: Run in a transaction: the rows are converted before the statement's writes commit.
    transaction: bool
    #: The Python condition for "the caller left w3c_traceparent unset", when the statement
    #: binds it; the servicer then fills it from the call's `traceparent` metadata.
    traceparent_unset: str | None = None
    #: Where the servicer runs it: on a replica (a read-only statement, when the server has one)
    #: or on the primary (a writer, or `(pydb.v1.sql).primary`).
    on_replica: bool = False
    #: The statement only reads (on the primary nonetheless when `(pydb.v1.sql).primary` is set).
    reads_only: bool = False
    #: A COPY's row, written per request: (Python expression, comment) per column, in order.
    #: A streamed read's row as the keyword arguments of `add` on the batch's repeated field (in
    #: place: building each message and then copying it into the batch costs three times as much).
    stream_values: tuple[FieldValue, ...] = ()
    stream_add: str = ""
    #: A streamed read's cursor is read in binary (lower.binary_stream), its loaders made by
    #: `loaders_factory` (rt.binary_loaders then, rt.loaders otherwise).
    binary: bool = False
    loaders_factory: str = "rt.loaders"
    copy_values: tuple[tuple[str, str], ...] = ()
    #: How a COPY reads the batch of rows each request carries (`request.items`); None when
    #: each request is one row.
    copy_batch: str | None = None
    #: A COPY in binary format: the module constant holding, per column, the type psycopg writes
    #: its value as (`copy.set_types`), and (type, column) per column; None for the text format.
    copy_types_const: str | None = None
    copy_types: tuple[tuple[str, str], ...] = ()
    #: The statement in parts (sql_const is then the tuple of them), else None.
    shaped: Shaped | None = None


@dataclass(frozen=True)
class Listen:
    """A server-streaming RPC with `(pydb.v1.listen)`: one response per NOTIFY on `channel`."""

    name: str  # WatchTaskWakes
    request_type: str
    response_type: str
    channel: str  # task_wake
    payload_field: str  # the response's string field that gets the payload
    response: str  # the Python expression of the response for `payload`
    filter_field: str | None  # the request's repeated string field that filters payloads
    filter_access: str | None  # how the handler reads it from `request`
    #: How the filter's values are checked: a runtime function (e.g. `rt.parse_uuids`) or None.
    filter_parser: str | None
    summary: str


@dataclass(frozen=True)
class Service:
    name: str  # GenerationDataService
    full_name: str  # generation.task.v1.GenerationDataService
    handlers_class: str  # GenerationDataServiceHandlers
    rpcs: tuple[Rpc, ...]
    unannotated: tuple[str, ...]
    listens: tuple[Listen, ...] = ()
    #: Server-streaming RPCs (rows from a server-side cursor) and client-streaming ones (COPY).
    streams: tuple[Rpc, ...] = ()
    copies: tuple[Rpc, ...] = ()


@dataclass(frozen=True)
class File:
    proto: str  # generation/task/v1/task.proto
    pb2_module: str  # generation.task.v1.task_pb2
    pb2_alias: str  # task_pb2
    grpc_module: str
    grpc_alias: str
    handlers_module: str  # generation.task.v1.task_pydb
    handlers_path: str  # generation/task/v1/task_pydb.py
    server_path: str
    extra_imports: tuple[tuple[str, str], ...]  # (module, alias) of other pb2 modules used
    enums: tuple[EnumMap, ...]
    converters: tuple[RowConverter, ...]
    services: tuple[Service, ...]
    version: str
    #: Some RPC reads with psycopg's plain tuple_row (no loaders of its own): import it.
    uses_tuple_row: bool
    #: Some RPC streams rows out or in (the handlers take or give an AsyncIterator).
    streams: bool = False
