"""The catalog: every object the schema's DDL created, as PostgreSQL would hold it after applying
the DDL in order (`schema/apply.py` applies it; `schema/source.py` says where it comes from).

How to use it
-------------
`frontend.build_catalog(sql)` -> `(Catalog, problems)`: a schema text applied statement by statement.
`frontend.load_catalog(...)` does the same for a file, a `pg_dump` or a migrations directory.

Look objects up the way PostgreSQL resolves names, through the search path (`"$user", public`,
with `pg_catalog` searched first for types and functions); `schema=None` means unqualified:

- `catalog.table(schema, name)` -> `Table | None` (tables, partitioned tables, views,
  materialized views); `catalog.table("s.t")` / `catalog.table("t")` still work (legacy form).
- `catalog.type(schema, name)` -> `PgType | None`: the type a column of that name has (built-in,
  enum, domain (its base type, naming the domain), composite, range, extension type). `name` as pg_type spells it
  (`int4`, `_int4` for its array), as PostgreSQL's parser hands it over; SQL spellings such as
  `integer` are `builtins.load_builtins().type_named`'s.
- `catalog.functions(schema, name)` -> every `FunctionSig` of that name the resolver may
  choose from (schema-declared functions and procedures, and installed extensions' functions).
- `catalog.enum(schema, name)`, `catalog.domain(...)`, `catalog.composite(...)`,
  `catalog.sequence(...)` for the details.

Qualified names are `QualifiedName(schema, name)` (`identifiers.py`), already folded; dictionary keys
are their `str()` (`schema.name`). Never re-implement the `public` rule: call these methods.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from .builtins import BUILTIN_RELATION_SCHEMAS, load_builtins
from .identifiers import DEFAULT_SEARCH_PATH, PG_CATALOG, QualifiedName, candidates, closest
from .signatures import FunctionSig, OperatorSig
from .types import PgType

_T = TypeVar("_T")

#: pg_class.relkind, spelled out.
RelationKind = Literal["table", "partitioned_table", "view", "materialized_view", "foreign_table", "sequence"]


@dataclass(frozen=True)
class Column:
    name: str
    type: PgType
    not_null: bool
    has_default: bool
    #: GENERATED ALWAYS AS (...) STORED: computed, cannot be written.
    generated: bool = False
    #: GENERATED ALWAYS AS IDENTITY: writing it needs OVERRIDING SYSTEM VALUE.
    identity_always: bool = False


@dataclass(frozen=True)
class PartitionKey:
    """PARTITION BY: the strategy and the key, one column name per key part (None: an expression)."""

    strategy: Literal["hash", "list", "range"]
    columns: tuple[str | None, ...]


#: A partition bound's value: an int, Decimal, str or bool literal, None for NULL; range bounds
#: also MINVALUE / MAXVALUE.
BoundValue = object


@dataclass(frozen=True)
class PartitionBound:
    """FOR VALUES ... / DEFAULT of a partition, as far as the catalog can compare it with its
    siblings': `values` (LIST), `lower` and `upper` (RANGE) hold comparable literals, and
    `comparable` is False when some datum is not a plain literal of a type the catalog orders."""

    strategy: Literal["hash", "list", "range", "default"]
    modulus: int = 0
    remainder: int = 0
    values: tuple[BoundValue, ...] = ()
    lower: tuple[BoundValue, ...] = ()
    upper: tuple[BoundValue, ...] = ()
    comparable: bool = True


@dataclass(frozen=True)
class Table:
    """A relation statements can read: a table, partitioned table, view or materialized view."""

    schema: str
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    #: Column sets with a non-partial unique constraint or unique index (ON CONFLICT targets).
    unique_keys: tuple[tuple[str, ...], ...] = ()
    kind: RelationKind = "table"
    #: A partitioned table's PARTITION BY.
    partition_key: PartitionKey | None = None
    #: A partition's bound (while it is attached).
    partition_bound: PartitionBound | None = None

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"

    def column(self, name: str) -> Column | None:
        for col in self.columns:
            if col.name == name:
                return col
        return None


@dataclass(frozen=True)
class Index:
    name: str  # `schema.name`
    table: str  # `schema.name`
    #: Key columns; an expression key is its deparsed text in parentheses.
    columns: tuple[str, ...]
    unique: bool
    partial: bool
    #: The deparsed WHERE of a partial index (ON CONFLICT (...) WHERE ... must imply it).
    predicate: str | None = None
    nulls_not_distinct: bool = False
    #: The index's column names as pg_attribute holds them (a column's name, an expression's
    #: FigureIndexColname, made unique): what the names of its partitions' copies are made of.
    colnames: tuple[str, ...] = ()


@dataclass(frozen=True)
class Domain:
    name: QualifiedName
    base: PgType
    not_null: bool
    #: The deparsed CHECK expressions (VALUE ...).
    checks: tuple[str, ...] = ()


@dataclass(frozen=True)
class CompositeType:
    name: QualifiedName
    attributes: tuple[tuple[str, PgType], ...]


@dataclass(frozen=True)
class RangeType:
    name: QualifiedName
    subtype: PgType


@dataclass(frozen=True)
class Sequence:
    name: QualifiedName
    type: PgType
    #: OWNED BY table.column (`schema.table`, column).
    owned_by: tuple[str, str] | None = None


@dataclass(frozen=True)
class Catalog:
    schemas: frozenset[str]
    #: Enum labels by `schema.name`, in sort order.
    enums: dict[str, tuple[str, ...]]
    #: Relations by `schema.name`.
    tables: dict[str, Table]
    #: Indexes by `schema.name`.
    indexes: dict[str, Index]
    #: What a column of each schema-declared or extension type is, by `schema.name`.
    types: dict[str, PgType] = field(default_factory=dict)
    domains: dict[str, Domain] = field(default_factory=dict)
    composites: dict[str, CompositeType] = field(default_factory=dict)
    ranges: dict[str, RangeType] = field(default_factory=dict)
    sequences: dict[str, Sequence] = field(default_factory=dict)
    #: Functions and procedures by `schema.name` (overloads together).
    routines: dict[str, tuple[FunctionSig, ...]] = field(default_factory=dict)
    #: Operators installed by extensions.
    operators: tuple[OperatorSig, ...] = ()
    #: Installed extensions: name -> schema.
    extensions: dict[str, str] = field(default_factory=dict)
    #: The search path statements run with (the server's default, not the schema file's last SET).
    search_path: tuple[str, ...] = DEFAULT_SEARCH_PATH

    # -- lookups through the search path ---------------------------------------------------
    def _find(self, schema: str | None, name: str, objects: Mapping[str, _T], relation: bool = False) -> _T | None:
        for q in candidates(schema, name, self.search_path, relation):
            found = objects.get(str(q))
            if found is not None:
                return found
        return None

    def table(self, schema: str | None, name: str | None = None) -> Table | None:
        """A relation by schema (None: through the search path) and name. The legacy one-argument
        form takes `schema.name` or a bare name."""
        if name is None:
            legacy = schema or ""
            schema, dot, name = legacy.rpartition(".")
            if not dot:
                schema = None
        # pg_catalog is searched right after pg_temp unless the search path places it.
        path = self.search_path if PG_CATALOG in self.search_path else (PG_CATALOG, *self.search_path)
        for q in candidates(schema, name, path, relation=True):
            found = self.tables.get(str(q)) or builtin_relation(q.schema, q.name) or _sequence_relation(self, str(q))
            if found is not None:
                return found
        return None

    def type(self, schema: str | None, name: str) -> PgType | None:
        """The type a value of this type name has: a built-in (pg_catalog first, as PostgreSQL
        searches it), an enum, a domain's base type, a composite or range type, or a type an
        installed extension provides."""
        if schema in (None, PG_CATALOG):
            found = builtin_type(name)
            if found is not None or schema == PG_CATALOG:
                return found
        return self._find(schema, name, self.types)

    def type_name(self, schema: str | None, name: str) -> QualifiedName | None:
        """Where a type name resolves to (for messages and for ALTER/DROP TYPE)."""
        if schema in (None, PG_CATALOG) and builtin_type(name) is not None:
            return QualifiedName(PG_CATALOG, name)
        return next((q for q in candidates(schema, name, self.search_path) if str(q) in self.types), None)

    def enum(self, schema: str | None, name: str) -> tuple[str, ...] | None:
        return self._find(schema, name, self.enums)

    def domain(self, schema: str | None, name: str) -> Domain | None:
        return self._find(schema, name, self.domains)

    def composite(self, schema: str | None, name: str) -> CompositeType | None:
        return self._find(schema, name, self.composites)

    def sequence(self, schema: str | None, name: str) -> Sequence | None:
        return self._find(schema, name, self.sequences)

    def functions(self, schema: str | None, name: str) -> tuple[FunctionSig, ...]:
        """Every schema-declared or extension function of this name visible from the search
        path (qualified: in that schema only). Built-ins are `builtins.py`'s."""
        return tuple(sig for q in candidates(schema, name, self.search_path) for sig in self.routines.get(str(q), ()))

    def table_names(self) -> list[str]:
        return sorted(self.tables)

    def suggest_table(self, name: str) -> str | None:
        """The closest relation name, for "did you mean" hints."""
        bare = {t.name: t.qualified for t in self.tables.values()}
        return closest(name, [*bare, *self.tables])


def _sequence_relation(catalog: Catalog, key: str) -> Table | None:
    """A sequence read as a relation (SELECT last_value FROM seq): its one row's columns."""
    seq = catalog.sequences.get(key)
    if seq is None:
        return None
    int8, boolean = PgType("int8"), PgType("bool")
    columns = tuple(
        Column(n, pgtype, True, False)
        for n, pgtype in (("last_value", int8), ("log_cnt", int8), ("is_called", boolean))
    )
    return Table(seq.name.schema, seq.name.name, columns, kind="sequence")


_RELKINDS: dict[str, RelationKind] = {
    "r": "table",
    "p": "partitioned_table",
    "v": "view",
    "m": "materialized_view",
    "f": "foreign_table",
}


@functools.cache
def builtin_relation(schema: str, name: str) -> Table | None:
    """A table or view of pg_catalog or information_schema (pg_tables, information_schema.columns),
    from the data extracted from PostgreSQL 15: NOT NULL where pg_attribute says so."""
    if schema not in BUILTIN_RELATION_SCHEMAS:
        return None
    found = load_builtins().relation(schema, name)
    if found is None:
        return None
    columns = tuple(Column(c, pgtype, not_null, has_default=False) for c, pgtype, not_null in found.columns)
    return Table(schema, name, columns, kind=_RELKINDS[found.relkind])


def builtin_type(name: str) -> PgType | None:
    """The pg_catalog type of this pg_type name (`int4`, `_int4` = `int4[]`, `tstzrange`), from
    the data extracted from PostgreSQL 15 (`builtins.py`). SQL spellings such as `integer` are
    the parser's business: it hands us `pg_catalog.int4`."""
    found = load_builtins().type_named(name)
    if found is None or found.name != name.removeprefix("_") or found.is_array != name.startswith("_"):
        return None
    return found
