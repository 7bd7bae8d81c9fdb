"""Which types meet without an explicit cast (implicit and assignment coercion) and which casts
exist, simplified from PostgreSQL's pg_cast; how types are written in messages."""

from __future__ import annotations

from sqlglot import exp

from . import types as t
from .types import PgType


def assignable(value: PgType, target: PgType, assignment: bool = False) -> bool:
    """Whether a value of type `value` may be stored in, or compared with, `target` without
    an explicit cast (Postgres' implicit casts, simplified). With `assignment`, also the
    assignment casts of INSERT and UPDATE: anything may be stored in a text column."""
    if value in (t.UNKNOWN, t.NULL) or value == target:
        return True
    if assignment and target.name in t.TEXTUAL and not target.is_array:
        return True
    if value.is_array != target.is_array:
        return False
    if value.is_array:
        return assignable(value.element, target.element)
    if value.is_enum or target.is_enum:
        return value.name == target.name
    for family in (t.NUMERIC, t.TEXTUAL, t.JSON, frozenset({"timestamp", "timestamptz", "date"})):
        if value.name in family and target.name in family:
            return True
    return False


#: Explicit casts between families Postgres has besides the I/O casts to and from text:
#: (from, to) by type name.
_CASTS = {
    ("int4", "bool"),
    ("bool", "int4"),
    ("date", "timestamp"),
    ("date", "timestamptz"),
    ("timestamp", "date"),
    ("timestamptz", "date"),
    ("timestamp", "time"),
    ("timestamptz", "time"),
    ("timestamptz", "timetz"),
    ("time", "interval"),
    ("interval", "time"),
    ("time", "timetz"),
    ("timetz", "time"),
} | {("jsonb", name) for name in ("bool", "int2", "int4", "int8", "numeric", "float4", "float8")}


def castable(value: PgType, target: PgType) -> bool:
    """Whether `value::target` exists (Postgres' pg_cast, simplified): within a family,
    to or from a string type (I/O conversion), or one of _CASTS; arrays element-wise."""
    if value in (t.UNKNOWN, t.NULL) or assignable(value, target):
        return True
    if value.is_array or target.is_array:
        if value.is_array and target.is_array:
            return castable(value.element, target.element)
        return value.name in t.TEXTUAL and not value.is_array  # '{a,b}'::text::uuid[]
    if value.name in t.TEXTUAL or target.name in t.TEXTUAL:
        return True
    if value.name in t.NUMERIC and target.name in t.NUMERIC:
        return True
    return (value.name, target.name) in _CASTS


def same_family(a: PgType, b: PgType) -> bool:
    return assignable(a, b) and assignable(b, a)


def wider(a: PgType, b: PgType) -> PgType:
    order = ["int2", "int4", "int8", "numeric", "float4", "float8"]
    return a if order.index(a.name) >= order.index(b.name) else b


def describe(p: PgType) -> str:
    if p.is_enum:
        return f"enum {p.name}" + ("[]" if p.is_array else "")
    return str(p)


def is_untyped(node: exp.Expr | None) -> bool:
    """Parameters, string literals and NULL take their type from the context."""
    if isinstance(node, exp.Paren):
        return is_untyped(node.this)
    return isinstance(node, (exp.Parameter, exp.Null)) or (isinstance(node, exp.Literal) and node.is_string)
