"""PostgreSQL types as the analyzer sees them."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from ...diagnostics import SqlSpan

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
    catalog (builtins.py) describes every built-in name: display name, category, relations.

    `domain` names the domain (`schema.name`) when the value's type is one: `name` is then the
    domain's base type, which every rule of the analyzer and bind/ applies (PostgreSQL reduces a
    domain to its base type for operators, functions and the wire), while a parameter that
    PostgreSQL types as the domain (a value stored into a domain column, a cast to it) reports
    it (`pg_name`). It takes no part in equality: a domain's values are its base type's. On an
    array, `domain` names the element's domain: PostgreSQL keeps an array over a domain as that
    array type (`positive_money[]`) in expressions, parameters and result columns alike."""

    name: str
    is_array: bool = False
    labels: tuple[str, ...] | None = None
    domain: str | None = field(default=None, compare=False)

    @property
    def pg_name(self) -> str:
        """PostgreSQL's name for the type: the domain (or the array over it), else as `str`."""
        if self.domain is None:
            return str(self)
        return self.domain + ("[]" if self.is_array else "")

    @property
    def described_name(self) -> str:
        """The type PostgreSQL's describe gives a result column of this type: a domain as its
        base type (the wire carries the base type's values), an array over a domain as itself."""
        return self.pg_name if self.is_array else str(self)

    @property
    def is_enum(self) -> bool:
        return self.labels is not None

    @property
    def element(self) -> PgType:
        return PgType(self.name, False, self.labels, self.domain)

    def array(self) -> PgType:
        return PgType(self.name, True, self.labels, self.domain)

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
