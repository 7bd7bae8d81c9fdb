"""The pg <-> proto compatibility table: which proto field types a PostgreSQL type reads into and binds from."""

from __future__ import annotations

from ..sql.types import PgType

# ---------------------------------------------------------------------------------------------
# pg <-> proto. A proto field type is named the way descriptor.proto names it: `int32`,
# `string`, ..., `enum` (any proto enum), or a message's full name for well-known types.

TIMESTAMP_MSG = "google.protobuf.Timestamp"
DURATION_MSG = "google.protobuf.Duration"

#: Wrapper messages that give a scalar presence; their `.value` holds the scalar.
WRAPPERS: dict[str, str] = {
    "google.protobuf.DoubleValue": "double",
    "google.protobuf.FloatValue": "float",
    "google.protobuf.Int64Value": "int64",
    "google.protobuf.UInt64Value": "uint64",
    "google.protobuf.Int32Value": "int32",
    "google.protobuf.UInt32Value": "uint32",
    "google.protobuf.BoolValue": "bool",
    "google.protobuf.StringValue": "string",
    "google.protobuf.BytesValue": "bytes",
}

_INT32 = frozenset({"int32", "sint32", "sfixed32"})
_INT64 = frozenset({"int64", "sint64", "sfixed64"})

#: For each pg type (element type for arrays), the proto scalar or message types it may map to.
#: Reading a column into a field and binding a field to a parameter use the same table.
COMPATIBLE: dict[str, frozenset[str]] = {
    "int2": _INT32 | _INT64,
    "int4": _INT32 | _INT64,
    "int8": _INT64,
    "numeric": frozenset({"string", "double"}),
    "float4": frozenset({"float", "double"}),
    "float8": frozenset({"double"}),
    "bool": frozenset({"bool"}),
    "text": frozenset({"string"}),
    "varchar": frozenset({"string"}),
    "bpchar": frozenset({"string"}),
    "name": frozenset({"string"}),
    "uuid": frozenset({"string"}),
    "bytea": frozenset({"bytes"}),
    "json": frozenset({"string"}),
    "jsonb": frozenset({"string"}),
    "date": frozenset({"string"}),
    "time": frozenset({"string"}),
    "timetz": frozenset({"string"}),
    "timestamp": frozenset({TIMESTAMP_MSG}),
    "timestamptz": frozenset({TIMESTAMP_MSG}),
    "interval": frozenset({DURATION_MSG}),
}


def compatible(pg: PgType, proto_type: str) -> bool:
    """Whether values of `pg` (element type, for arrays) fit a proto field of `proto_type`.

    `proto_type` is a scalar name, `enum`, or a message's full name; wrappers count as
    their scalar."""
    proto_type = WRAPPERS.get(proto_type, proto_type)
    if pg.is_enum:
        return proto_type in ("enum", "string")
    return proto_type in COMPATIBLE.get(pg.name, frozenset())


#: For binding a request field to a parameter: the proto types a pg parameter type accepts.
#: Narrower proto integers may feed wider columns, never the reverse.
PARAM_COMPATIBLE: dict[str, frozenset[str]] = {
    **COMPATIBLE,
    "int2": _INT32,
    "int4": _INT32,
    "int8": _INT32 | _INT64,
    "numeric": _INT32 | _INT64 | frozenset({"string", "double", "float"}),
    "float4": frozenset({"float"}),
    "float8": _INT32 | frozenset({"float", "double"}),
}


def param_compatible(pg: PgType, proto_type: str) -> bool:
    """Whether a request field of `proto_type` may be bound where Postgres expects `pg`."""
    proto_type = WRAPPERS.get(proto_type, proto_type)
    if pg.is_enum:
        return proto_type in ("enum", "string")
    return proto_type in PARAM_COMPATIBLE.get(pg.name, frozenset())
