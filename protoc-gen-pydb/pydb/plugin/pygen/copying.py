"""The format a COPY's rows travel in, chosen at compile time from its columns' types.

PostgreSQL parses COPY's binary format far more cheaply than its text format (no digits to
read for an integer or a float), and psycopg writes it more cheaply too; but a binary value is
read with the column type's receive function, which applies no cast: the bytes must be that
type's own. So a COPY goes binary only when every column's value is one whose binary form
psycopg writes exactly as the column's type reads it, and PostgreSQL then refuses a bad value as
it would the text (the same SQLSTATE, so the same gRPC status):

- a `string` (or an enum's label) into text, varchar, bpchar and enums (their receive functions
  take the text and apply the length, padding and label checks of their input functions);
- an integer into an integer column at least as wide, a float or double into float8, a float into
  float4, a bool into bool, bytes into bytea;
- a domain over one of those as its base type (the domain's receive function checks its
  constraints).

Anything else (uuid, timestamps with their `infinity`, numeric, json, arrays, the text-form types,
a narrower integer column) keeps the text format for the whole COPY.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..bind import ir, typemap
from ..sql import scan

_INT32 = frozenset({"int32", "sint32", "sfixed32"})
_INT64 = frozenset({"int64", "sint64", "sfixed64"})
_STRING = frozenset({"string"})

#: Column type (a domain's base type) -> (the type psycopg dumps the value as, the proto types
#: of the field whose value it takes).
_BINARY: dict[str, tuple[str, frozenset[str]]] = {
    "text": ("text", _STRING),
    "varchar": ("text", _STRING),
    "bpchar": ("text", _STRING),
    "int4": ("int4", _INT32),
    "int8": ("int8", _INT32 | _INT64),
    "float4": ("float4", frozenset({"float"})),
    "float8": ("float8", frozenset({"float", "double"})),
    "bool": ("bool", frozenset({"bool"})),
    "bytea": ("bytea", frozenset({"bytes"})),
}


def _binary_type(p: ir.Param) -> str | None:
    """What psycopg dumps `p`'s value as in a binary COPY, or None if the value must go as text."""
    pg, f = p.pg_type, p.field
    if pg.is_array or f.repeated:
        return None
    if p.conversion is ir.Conversion.ENUM:
        return "text"  # the label
    if p.conversion is not ir.Conversion.IDENTITY:
        return None
    proto = typemap.WRAPPERS.get(f.proto_type, f.proto_type)
    if pg.is_enum:
        return "text" if proto == "string" else None
    found = _BINARY.get(pg.name)
    return found[0] if found is not None and proto in found[1] else None


def binary_types(params: Sequence[ir.Param]) -> tuple[str, ...]:
    """Per column of a COPY (its parameters, in order), the type psycopg writes its value as in
    COPY's binary format; () when some column must go as text (then the whole COPY does)."""
    types = tuple(_binary_type(p) for p in params)
    return () if not types or None in types else tuple(t for t in types if t is not None)


def binary_copy(sql: str) -> str:
    """`COPY table (columns) FROM STDIN` (bind took no options) with `(FORMAT BINARY)` after STDIN."""
    stdin = [t for t in scan(sql) if t.name == "STDIN"][-1]
    return f"{sql[: stdin.end + 1]} (FORMAT BINARY){sql[stdin.end + 1 :]}"
