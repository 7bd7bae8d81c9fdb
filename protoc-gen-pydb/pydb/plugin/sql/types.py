"""PostgreSQL types as the analyzer sees them."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp
from sqlglot.expressions.datatypes import DType

from ..diagnostics import SqlSpan

# Canonical names of the built-in types the catalog understands, keyed by sqlglot's DType.
_BUILTIN: dict[DType, str] = {
    exp.DataType.Type.SMALLINT: "int2",
    exp.DataType.Type.INT: "int4",
    exp.DataType.Type.BIGINT: "int8",
    exp.DataType.Type.SERIAL: "int4",
    exp.DataType.Type.SMALLSERIAL: "int2",
    exp.DataType.Type.BIGSERIAL: "int8",
    exp.DataType.Type.DECIMAL: "numeric",
    exp.DataType.Type.FLOAT: "float4",
    exp.DataType.Type.DOUBLE: "float8",
    exp.DataType.Type.BOOLEAN: "bool",
    exp.DataType.Type.TEXT: "text",
    exp.DataType.Type.VARCHAR: "varchar",
    exp.DataType.Type.CHAR: "bpchar",
    exp.DataType.Type.NAME: "name",
    exp.DataType.Type.UUID: "uuid",
    exp.DataType.Type.VARBINARY: "bytea",
    exp.DataType.Type.DATE: "date",
    exp.DataType.Type.TIME: "time",
    exp.DataType.Type.TIMETZ: "timetz",
    exp.DataType.Type.TIMESTAMP: "timestamp",
    exp.DataType.Type.TIMESTAMPTZ: "timestamptz",
    exp.DataType.Type.INTERVAL: "interval",
    exp.DataType.Type.JSON: "json",
    exp.DataType.Type.JSONB: "jsonb",
}

INTEGER = frozenset({"int2", "int4", "int8"})
NUMERIC = INTEGER | {"numeric", "float4", "float8"}
TEXTUAL = frozenset({"text", "varchar", "bpchar", "name"})
TEMPORAL = frozenset({"date", "time", "timetz", "timestamp", "timestamptz"})
JSON = frozenset({"json", "jsonb"})


@dataclass(frozen=True)
class PgType:
    """A column or expression type. `name` is canonical: the pg_type name without the array
    type's `_` prefix (`int4`, `varchar`, `timestamptz`, pseudo-types such as `anyelement`,
    `record`, `unknown`), or for a schema-defined type its qualified name; an array is
    `is_array=True` over its element's name; `labels` is set exactly for enums. The built-in
    catalog (builtins.py) describes every built-in name: display name, category, relations."""

    name: str
    is_array: bool = False
    labels: tuple[str, ...] | None = None

    @property
    def is_enum(self) -> bool:
        return self.labels is not None

    @property
    def element(self) -> PgType:
        return PgType(self.name, False, self.labels)

    def array(self) -> PgType:
        return PgType(self.name, True, self.labels)

    def __str__(self) -> str:
        return self.name + ("[]" if self.is_array else "")


# Types of expressions that are not columns.
UNKNOWN = PgType("unknown")  # an untyped string literal: it takes the type of its context
NULL = PgType("null")
BOOL = PgType("bool")
INT4 = PgType("int4")
INT8 = PgType("int8")
NUMERIC_T = PgType("numeric")
FLOAT8 = PgType("float8")
TEXT = PgType("text")
UUID = PgType("uuid")
TIMESTAMPTZ = PgType("timestamptz")
INTERVAL = PgType("interval")
JSONB = PgType("jsonb")


def qualified_name(node: exp.Expr) -> str:
    """`generation.task_status` from a Dot/Identifier/Table/Column node, lower-cased unless quoted."""
    if isinstance(node, exp.Dot):
        return f"{qualified_name(node.this)}.{qualified_name(node.expression)}"
    if isinstance(node, exp.Identifier):
        text = str(node.this)
        return text if node.quoted else text.lower()
    if isinstance(node, (exp.Table, exp.Column)):
        return ".".join(qualified_name(part) for part in node.parts)
    return node.sql(dialect="postgres").lower()


def span_of(node: exp.Expr) -> SqlSpan | None:
    """The smallest range covering every token of `node` that sqlglot placed (0-based,
    `end` inclusive), widened to the closing parenthesis of a call or group it ends in:
    sqlglot places no node on a `)`."""
    starts: list[int] = []
    ends: list[int] = []
    for sub in node.walk():
        meta = sub.meta
        if "start" in meta and "end" in meta:
            starts.append(int(meta["start"]))
            ends.append(int(meta["end"]))
    if not starts:
        return None
    return SqlSpan(min(starts), max(ends))


class UnknownType(Exception):
    """A type name the catalog does not know; the message names it, `node` is where it is."""

    def __init__(self, name: str, node: exp.Expr | None = None) -> None:
        super().__init__(name)
        self.node = node


def resolve_datatype(dt: exp.DataType, enums: dict[str, tuple[str, ...]]) -> PgType:
    """Map a sqlglot DataType to a PgType, looking user-defined names up in `enums`."""
    if dt.this == exp.DataType.Type.ARRAY:
        inner = dt.expressions[0] if dt.expressions else None
        if not isinstance(inner, exp.DataType):
            raise UnknownType(dt.sql(dialect="postgres"), dt)
        return resolve_datatype(inner, enums).array()
    if dt.this == exp.DataType.Type.USERDEFINED:
        kind = dt.args.get("kind")
        name = qualified_name(kind) if isinstance(kind, exp.Expr) else str(kind).lower()
        if name in enums:
            return PgType(name, False, enums[name])
        raise UnknownType(name, dt)
    builtin = _BUILTIN.get(dt.this)
    if builtin is None:
        raise UnknownType(dt.sql(dialect="postgres").lower(), dt)
    return PgType(builtin)
