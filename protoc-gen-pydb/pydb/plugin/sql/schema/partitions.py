"""Declarative partitioning, checked as PostgreSQL checks it when the DDL runs: the partition
key (PARTITION BY), a partition's bound (FOR VALUES ... / DEFAULT) against the key's strategy
and against its siblings' bounds (tablecmds.c, parse_utilcmd.c, partbounds.c), and the rule that
a partitioned table's primary key and unique constraints include every partition key column
(indexcmds.c), which is what makes `ON CONFLICT (col)` without the partition key impossible on
a partitioned table: no unique index can match it.

Bounds are compared only when their datums are plain literals of a type whose order the
catalog knows (integers, numeric, dates written YYYY-MM-DD, booleans, enum labels; text and
uuid for LIST equality only); otherwise the bound is kept but not compared (`comparable`).
"""

from __future__ import annotations

import re
import uuid
from decimal import Decimal, InvalidOperation
from typing import Literal

from pglast import ast

from ..catalog.model import BoundValue, Column, PartitionBound, PartitionKey, Table
from .state import PgNode, State

Strategy = Literal["hash", "list", "range"]
_STRATEGIES: dict[str, Strategy] = {"h": "hash", "l": "list", "r": "range"}
_INTEGERS = frozenset({"int2", "int4", "int8"})
_DECIMALS = frozenset({"numeric", "float4", "float8"})
#: Compared for LIST equality, but never ordered (their order is the collation's, or not useful).
_EQUALITY_ONLY = frozenset({"text", "varchar", "bpchar", "name", "uuid"})
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


class _Infinite:
    """MINVALUE / MAXVALUE in a range bound."""

    def __init__(self, name: str, rank: int) -> None:
        self.name, self.rank = name, rank

    def __repr__(self) -> str:
        return self.name


MINVALUE = _Infinite("MINVALUE", -1)
MAXVALUE = _Infinite("MAXVALUE", 1)


# -- PARTITION BY ---------------------------------------------------------------------------
def partition_key(state: State, columns: tuple[Column, ...], spec: PgNode) -> PartitionKey | None:
    """The partition key of CREATE TABLE ... PARTITION BY, or None after reporting PostgreSQL's error."""
    strategy = _STRATEGIES[spec.strategy.value]
    names = {c.name for c in columns}
    parts: list[str | None] = []
    for elem in spec.partParams or ():
        if elem.name:
            if elem.name not in names:
                state.error(f"column {elem.name} named in partition key does not exist", elem.location, len(elem.name))
                return None
            parts.append(elem.name)
        else:
            parts.append(None)
    if strategy == "list" and len(parts) > 1:
        state.error("cannot use list partition strategy with more than one column", spec.location)
        return None
    return PartitionKey(strategy, tuple(parts))


def unique_includes_key(state: State, table: Table, cols: tuple[str, ...], primary: bool, location: int | None) -> bool:
    """A PRIMARY KEY / UNIQUE constraint or unique index on `table`: on a partitioned table it must
    include every partition key column, which must all be plain columns. Reports and returns False
    when it does not."""
    key = table.partition_key
    if key is None:
        return True
    label = "PRIMARY KEY" if primary else "UNIQUE"
    if None in key.columns:
        state.error(
            f"unsupported {label} constraint with partition key definition ({label} constraints cannot be used "
            "when partition keys include expressions)",
            location,
        )
        return False
    for col in key.columns:
        if col not in cols:
            state.error(
                "unique constraint on partitioned table must include all partitioning columns "
                f"({label} constraint on table {table.name} lacks column {col} which is part of the partition key)",
                location,
            )
            return False
    return True


def inherited_keys_include_key(state: State, table: Table, parent_key: str, location: int | None) -> None:
    """A partition that is itself partitioned gets a partition of each of its parent's unique
    indexes (constraints first, then unique indexes, partial or on expressions too): each must
    include its own partition key as well."""
    keys = list(table.unique_keys)
    keys += [i.columns for i in state.indexes.values() if i.table == parent_key and i.unique and i.columns not in keys]
    for cols in keys:
        if not unique_includes_key(state, table, cols, cols == table.primary_key, location):
            return


# -- FOR VALUES ... / DEFAULT ---------------------------------------------------------------
def partition_bound(state: State, parent: Table, spec: PgNode, child_key: str) -> PartitionBound | None:
    """The bound of the partition `child_key` (`schema.name`) of `parent`, checked against the
    parent's strategy and its attached siblings (PostgreSQL's transformPartitionBound and
    check_new_partition_bound); None after reporting an error."""
    key = parent.partition_key
    if key is None:
        return None  # not partitioned: reported by the caller
    location = spec.location
    name = child_key.split(".", 1)[1]
    if spec.is_default:
        if key.strategy == "hash":
            state.error("a hash-partitioned table may not have a default partition", location)
            return None
        bound = PartitionBound("default")
    elif _STRATEGIES.get(spec.strategy) != key.strategy:
        state.error(f"invalid bound specification for a {key.strategy} partition", location)
        return None
    elif key.strategy == "hash":
        if spec.modulus <= 0:
            state.error("modulus for hash partition must be an integer value greater than zero", location)
            return None
        if spec.remainder < 0:
            state.error("remainder for hash partition must be an integer value greater than or equal to zero", location)
            return None
        if spec.remainder >= spec.modulus:
            state.error("remainder for hash partition must be less than modulus", location)
            return None
        bound = PartitionBound("hash", modulus=spec.modulus, remainder=spec.remainder)
    elif key.strategy == "list":
        col = _key_column(parent, key, 0)
        datums = [_datum(d, col) for d in spec.listdatums or ()]
        bound = PartitionBound(
            "list", values=tuple(v for v, _ in datums), comparable=all(kind != "opaque" for _, kind in datums)
        )
    else:
        lower, upper = spec.lowerdatums or (), spec.upperdatums or ()
        for which, given in (("FROM", lower), ("TO", upper)):
            if len(given) != len(key.columns):
                state.error(f"{which} must specify exactly one value per partitioning column", location)
                return None
        low = [_datum(d, _key_column(parent, key, i)) for i, d in enumerate(lower)]
        high = [_datum(d, _key_column(parent, key, i)) for i, d in enumerate(upper)]
        if any(kind == "null" for _, kind in (*low, *high)):
            state.error("cannot specify NULL in range bound", location)
            return None
        bound = PartitionBound(
            "range",
            lower=tuple(v for v, _ in low),
            upper=tuple(v for v, _ in high),
            comparable=all(kind == "ordered" for _, kind in (*low, *high)),
        )
        if bound.comparable and _order(bound.lower) >= _order(bound.upper):
            state.error(
                f"empty range bound specified for partition {name} (specified lower bound {_show(bound.lower)} "
                f"is greater than or equal to upper bound {_show(bound.upper)})",
                location,
            )
            return None
    siblings = [(state.tables[k].name, b) for k, b in _siblings(state, parent) if k != child_key]
    if _overlaps(state, name, bound, siblings, location):
        return None
    return bound


def _siblings(state: State, parent: Table) -> list[tuple[str, PartitionBound]]:
    """The partitions attached to `parent` now (`schema.name`), with their bounds, in the order
    they were made."""
    out = []
    for child, links in state.parents.items():
        table = state.tables.get(child)
        if table is not None and table.partition_bound is not None and (parent.qualified, True) in links:
            out.append((child, table.partition_bound))
    return out


def _overlaps(
    state: State, name: str, bound: PartitionBound, siblings: list[tuple[str, PartitionBound]], location: int | None
) -> bool:
    """Reports PostgreSQL's error when `bound` collides with a sibling's."""
    if bound.strategy == "default":
        other = next((n for n, b in siblings if b.strategy == "default"), None)
        if other is not None:
            state.error(f"partition {name} conflicts with existing default partition {other}", location)
            return True
        return False
    if bound.strategy == "hash":
        return _hash_overlaps(state, name, bound, [(n, b) for n, b in siblings if b.strategy == "hash"], location)
    for other, theirs in siblings:
        if theirs.strategy != bound.strategy or not (bound.comparable and theirs.comparable):
            continue
        if bound.strategy == "list":
            clash = any(v == w for v in bound.values for w in theirs.values)
        else:
            clash = _order(bound.lower) < _order(theirs.upper) and _order(theirs.lower) < _order(bound.upper)
        if clash:
            state.error(f"partition {name} would overlap partition {other}", location)
            return True
    return False


def _hash_overlaps(
    state: State, name: str, bound: PartitionBound, siblings: list[tuple[str, PartitionBound]], location: int | None
) -> bool:
    """Moduli must divide one another (partbounds.c: the nearest smaller one divides the new one,
    which divides the nearest larger one); then two partitions overlap when their remainders agree
    modulo the smaller modulus."""
    ordered = sorted(siblings, key=lambda nb: (nb[1].modulus, nb[1].remainder))
    new = (bound.modulus, bound.remainder)
    below = [nb for nb in ordered if (nb[1].modulus, nb[1].remainder) <= new]
    above = [nb for nb in ordered if (nb[1].modulus, nb[1].remainder) > new]
    detail = None
    if below and bound.modulus % below[-1][1].modulus:
        prev_name, prev = below[-1]
        detail = f"the new modulus {bound.modulus} is not divisible by {prev.modulus}, the modulus of existing partition {prev_name}"
    elif above and above[0][1].modulus % bound.modulus:
        next_name, nxt = above[0]
        detail = f"the new modulus {bound.modulus} is not a factor of {nxt.modulus}, the modulus of existing partition {next_name}"
    if detail is not None:
        state.error(f"every hash partition modulus must be a factor of the next larger modulus ({detail})", location)
        return True
    for other, theirs in ordered:
        smaller = min(bound.modulus, theirs.modulus)
        if bound.remainder % smaller == theirs.remainder % smaller:
            state.error(f"partition {name} would overlap partition {other}", location)
            return True
    return False


# -- datums ---------------------------------------------------------------------------------
def _key_column(table: Table, key: PartitionKey, i: int) -> Column | None:
    name = key.columns[i] if i < len(key.columns) else None
    return table.column(name) if name is not None else None


def _datum(node: PgNode, col: Column | None) -> tuple[BoundValue, str]:
    """(value, kind) of one bound datum for the key column `col`: kind "ordered" (compared and
    ordered: numbers, ISO dates, booleans, enum labels by position, MINVALUE/MAXVALUE), "equal"
    (compared for LIST equality only: text, uuid), "null", or "opaque" (not compared)."""
    fields = node.fields if isinstance(node, ast.ColumnRef) and node.fields else ()
    if len(fields) == 1 and isinstance(fields[0], ast.String):
        word = str(fields[0].sval).lower()
        if word in ("minvalue", "maxvalue"):
            return (MINVALUE if word == "minvalue" else MAXVALUE), "ordered"
    if isinstance(node, ast.TypeCast):
        node = node.arg
    if not isinstance(node, ast.A_Const) or col is None or col.type.is_array:
        return node, "opaque"
    if node.isnull:
        return None, "null"
    raw = str(next((getattr(node.val, a) for a in ("ival", "fval", "sval", "boolval") if hasattr(node.val, a)), ""))
    typ = col.type
    try:
        if typ.labels is not None:
            return ((typ.labels.index(raw), raw), "ordered") if raw in typ.labels else (node, "opaque")
        if typ.name in _INTEGERS:
            return int(raw), "ordered"
        if typ.name in _DECIMALS:
            return Decimal(raw), "ordered"
        if typ.name == "bool":
            return _bool(raw), "ordered"
        if typ.name == "date":
            return _iso_date(raw), "ordered"
        if typ.name == "uuid":
            return str(uuid.UUID(raw)), "equal"
        if typ.name in _EQUALITY_ONLY:
            return raw, "equal"
    except (ValueError, InvalidOperation):
        pass
    return node, "opaque"


def _bool(value: str) -> bool:
    text = value.lower()
    if text in ("true", "t", "yes", "on", "1"):
        return True
    if text in ("false", "f", "no", "off", "0"):
        return False
    raise ValueError(text)


def _iso_date(value: str) -> str:
    # A date written YYYY-MM-DD orders as its text does; any other spelling is not compared.
    if not _ISO_DATE.fullmatch(value):
        raise ValueError(value)
    return value


def _order(values: tuple[BoundValue, ...]) -> tuple[tuple[int, object], ...]:
    """A range bound as a sortable key: MINVALUE below every value, MAXVALUE above."""
    out: list[tuple[int, object]] = []
    for v in values:
        if isinstance(v, _Infinite):
            out.append((v.rank, 0))
        elif isinstance(v, tuple):  # an enum label: its position
            out.append((0, v[0]))
        else:
            out.append((0, v))
    return tuple(out)


def _show(values: tuple[BoundValue, ...]) -> str:
    """A range bound as PostgreSQL prints it: (10), ('2026-01-01'), (MINVALUE)."""
    shown = []
    for v in values:
        if isinstance(v, tuple):
            v = v[1]
        shown.append(f"'{v}'" if isinstance(v, str) else repr(v) if isinstance(v, _Infinite) else str(v))
    return "(" + ", ".join(shown) + ")"
