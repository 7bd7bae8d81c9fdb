"""The range operators of a range type the schema declares (CREATE TYPE r AS RANGE): pg_catalog's
polymorphic `anyrange` operators applied to it, as PostgreSQL's operator resolution picks them.
The built-in catalog describes the built-in range types only; a schema's range type reaches
these operators through this table.

    range_operator("@>", PgType("app.uuidrange"), PgType("uuid"), ranges) -> (bool, range, uuid)

An untyped side (unknown) takes the range type, as PostgreSQL resolves `span @> $1`."""

from __future__ import annotations

from collections.abc import Mapping

from ..catalog import types as t
from ..catalog.types import PgType

#: anyrange op anyrange -> bool
_BOOLEAN = frozenset({"@>", "<@", "&&", "<<", ">>", "&<", "&>", "-|-", "=", "<>", "<", ">", "<=", ">="})
#: anyrange op anyrange -> anyrange
_RANGE = frozenset({"+", "*", "-"})


def range_operator(
    symbol: str, left: PgType, right: PgType, subtypes: Mapping[str, PgType]
) -> tuple[PgType, PgType, PgType] | None:
    """(result, left operand type, right operand type) of `left symbol right` where one side is a
    schema-declared range type (`subtypes`: each range type's subtype, by name); None when no
    anyrange operator takes these operands."""
    for known, other, known_left in ((left, right, True), (right, left, False)):
        if known.is_array or known.name not in subtypes:
            continue
        subtype = subtypes[known.name]
        if other in (known, t.UNKNOWN):
            if symbol in _BOOLEAN:
                return t.BOOL, known, known
            if symbol in _RANGE:
                return known, known, known
        # anyrange @> anyelement, anyelement <@ anyrange: the element of that range's subtype
        element_op = "@>" if known_left else "<@"
        if symbol == element_op and other.name == subtype.name and not other.is_array:
            return (t.BOOL, known, subtype) if known_left else (t.BOOL, subtype, known)
    return None
