"""The one pg <-> proto type table: for each PostgreSQL type, the proto field types a column of it
reads into and a parameter of it binds from, and how the value converts (`Conversion`, whose
runtime implementation lives in pydb/runtime/convert.py). The checks in bind, the conversions
pygen writes and the table in docs/diagnostics.md (`markdown_table`) all come from `TYPES`;
docs/adding-a-type.md walks through adding a row."""

from __future__ import annotations

from dataclasses import dataclass

from ..sql import PgType, load_builtins
from .ir import Conversion

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


@dataclass(frozen=True)
class Mapping:
    """One proto field type a PostgreSQL type pairs with."""

    proto: str  # a scalar name, or a well-known message's full name
    reads: bool  # a result column of the pg type may fill such a field
    binds: bool  # such a request field may feed a parameter of the pg type
    conversion: Conversion


def _pairs(protos: str, conversion: Conversion, *, reads: bool = True, binds: bool = True) -> tuple[Mapping, ...]:
    return tuple(Mapping(p, reads, binds, conversion) for p in protos.split())


_I, _T = Conversion.IDENTITY, Conversion.TEXT
_INT32 = "int32 sint32 sfixed32"
_INT64 = "int64 sint64 sfixed64"

#: PostgreSQL's text form into (and from) a `string`: what a type without a row of its own gets.
TEXT_FORM: tuple[Mapping, ...] = _pairs("string", _T)

#: PostgreSQL type (the element type, for arrays) -> its proto pairings. A narrower proto integer
#: may feed a wider column, never the reverse; a column may land in a wider field.
TYPES: dict[str, tuple[Mapping, ...]] = {
    "int2": _pairs(_INT32, _I) + _pairs(_INT64, _I, binds=False),
    "int4": _pairs(_INT32, _I) + _pairs(_INT64, _I, binds=False),
    "int8": _pairs(_INT64, _I) + _pairs(_INT32, _I, reads=False),
    "numeric": (
        _pairs("string", Conversion.NUMERIC_TEXT)
        + _pairs("double", Conversion.NUMERIC_DOUBLE)
        + _pairs("float", Conversion.NUMERIC_DOUBLE, reads=False)
        + _pairs(f"{_INT32} {_INT64}", _I, reads=False)
    ),
    "float4": _pairs("float", _I) + _pairs("double", _I, binds=False),
    "float8": _pairs("double", _I) + _pairs(f"float {_INT32}", _I, reads=False),
    "bool": _pairs("bool", _I),
    "text": _pairs("string", _I),
    "varchar": _pairs("string", _I),
    "bpchar": _pairs("string", _I),
    "name": _pairs("string", _I),
    "uuid": _pairs("string", Conversion.UUID),
    "bytea": _pairs("bytes", _I),
    "json": _pairs("string", _T),
    "jsonb": _pairs("string", _T),
    "date": _pairs("string", _T),
    "time": _pairs("string", _T),
    "timetz": _pairs("string", _T),
    "timestamp": _pairs(TIMESTAMP_MSG, Conversion.TIMESTAMP),
    "timestamptz": _pairs(TIMESTAMP_MSG, Conversion.TIMESTAMP),
    "interval": _pairs(DURATION_MSG, Conversion.DURATION),
}

#: Types with no dedicated mapping: PostgreSQL's text output into a `string`, and a `string`
#: PostgreSQL parses as a parameter (a Python str goes out untyped, so PostgreSQL's inferred type
#: parses it: no cast in the SQL). Listed: the built-ins psycopg would otherwise load as Python
#: objects (addresses, ranges, integers, ...) and common extension types; every other type that
#: is not a pseudo-type (extension types, composite types, schema ranges) maps the same way
#: (`mapping`). A composite's text form is its row literal `(1,"a b")`: to get its fields, select
#: them (`(p).x::int AS x`) or embed a joined row into a nested message (docs/diagnostics.md).
_TEXT_FORM_NAMES = (
    "char citext inet cidr macaddr macaddr8 bit varbit money xml tsvector tsquery "
    "point line lseg box path polygon circle "
    "int4range int8range numrange tsrange tstzrange daterange "
    "int4multirange int8multirange nummultirange tsmultirange tstzmultirange datemultirange "
    "oid cid xid xid8 tid regclass regtype regproc regprocedure regoper regoperator regconfig "
    "regdictionary regnamespace regrole regcollation pg_lsn txid_snapshot pg_snapshot jsonpath "
    "hstore ltree lquery ltxtquery cube seg isbn isbn13 ismn ismn13 issn issn13 ean13 upc"
)
TEXT_FORM_TYPES = tuple(_TEXT_FORM_NAMES.split())

#: Pseudo-types name no values (`void`, `anyelement`, `trigger`, ...): nothing to read or bind.
#: `record` (an anonymous row) is a value: its text form, like a composite type's.
_PSEUDO = frozenset(
    name
    for name in load_builtins().type_names
    if name != "record" and (info := load_builtins().type_info(PgType(name))) is not None and info.typtype == "p"
)

#: Array text forms whose elements are not separated by `,` (pg_type.typdelim).
ARRAY_DELIMITERS: dict[str, str] = {"box": ";"}

for _name in TEXT_FORM_TYPES:
    TYPES.setdefault(_name, TEXT_FORM)  # a row in TYPES above (a better mapping) wins
#: An anonymous row reads as its text form; PostgreSQL cannot parse one from text.
TYPES["record"] = _pairs("string", _T, binds=False)


#: Any PostgreSQL enum type: a proto enum label by label, or the label as a string.
ENUM_PAIRS: tuple[Mapping, ...] = (Mapping("enum", True, True, Conversion.ENUM), Mapping("string", True, True, _I))


def mapping(pg: PgType, proto_type: str) -> Mapping | None:
    """How values of `pg` (the element type, for arrays) pair with a proto field of `proto_type`
    (a scalar name, `enum`, or a message's full name; a wrapper counts as its scalar). A domain
    pairs as its base type (`pg.name`; PostgreSQL converts the base type's value to the domain,
    checking its constraints, where the value is stored)."""
    proto_type = WRAPPERS.get(proto_type, proto_type)
    if pg.is_enum:
        pairs = ENUM_PAIRS
    elif pg.name in TYPES:
        pairs = TYPES[pg.name]
    else:
        pairs = TEXT_FORM if pg.name not in _PSEUDO else ()
    for m in pairs:
        if m.proto == proto_type:
            return m
    return None


def compatible(pg: PgType, proto_type: str) -> bool:
    """Whether a result column of `pg` may fill a field of `proto_type`."""
    m = mapping(pg, proto_type)
    return m is not None and m.reads


def param_compatible(pg: PgType, proto_type: str) -> bool:
    """Whether a request field of `proto_type` may be bound where PostgreSQL expects `pg`."""
    m = mapping(pg, proto_type)
    return m is not None and m.binds


def markdown_table() -> str:
    """The type table of docs/diagnostics.md."""

    def names(pairs: tuple[Mapping, ...], reads: bool) -> str:
        return ", ".join(
            f"`{p.proto}`" for p in sorted(pairs, key=lambda p: p.proto) if (p.reads if reads else p.binds)
        )

    def conversions(pairs: tuple[Mapping, ...]) -> str:
        seen = dict.fromkeys(p.conversion.value for p in pairs)
        return ", ".join(f"`{c}`" for c in seen)

    rows = [
        "| Postgres type | a result column may land in | a parameter may be bound from | conversion |",
        "|---|---|---|---|",
    ]
    for pg, pairs in TYPES.items():
        rows.append(f"| `{pg}` | {names(pairs, True) or '—'} | {names(pairs, False) or '—'} | {conversions(pairs)} |")
    rows.append(
        "| any enum type | a proto `enum` (label by label), `string` | a proto `enum`, `string` | `enum`, `identity` |"
    )
    rows.append(
        "| any other type but a pseudo-type: extension types, composite types and `record`, ranges, "
        "other built-ins (a domain: as its base type) | `string` (PostgreSQL's text output) | `string` | `text` |"
    )
    rows.append("| `void` (`SELECT pg_advisory_lock(@id)`) | no field: the column is skipped | — | — |")
    return "\n".join(rows)
