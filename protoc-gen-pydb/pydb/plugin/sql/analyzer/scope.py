"""Scopes, as data: the row sources a clause sees (tables, CTEs, subqueries, VALUES and functions
in FROM, and the outer queries of a correlated subquery) and the typed values they hold. A leaf:
how FROM items are built and column references resolved in them is `from_items.py`'s."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from ..catalog.builtins import load_builtins
from ..catalog.identifiers import quote_ident
from ..catalog.model import Catalog, Table
from ..catalog.types import PgType


@dataclass(frozen=True)
class Typed:
    type: PgType | None  # None: not known (an error was reported, or beyond the analyzer)
    nullable: bool
    #: A whole-row reference to a FROM item (`SELECT c FROM customers c`): the row's columns.
    #: `nullable` then says whether the whole row may be absent (an outer join's far side).
    embedded: tuple[tuple[str, Typed], ...] | None = None


@dataclass(frozen=True)
class StarColumn:
    """A column `*` yields, with the SQL that names it unambiguously in its query."""

    name: str
    typed: Typed
    sql: str


def system_columns() -> list[tuple[str, Typed]]:
    """Every table's hidden columns (ctid, xmin, cmin, xmax, cmax, tableoid), as PostgreSQL
    declares them."""
    return [(name, Typed(pgtype, False)) for name, pgtype in load_builtins().system_columns]


@dataclass
class Relation:
    """A row source visible in a scope: a table, CTE, subquery or function in FROM."""

    alias: str
    names: tuple[str, ...]  # every name it can be qualified by
    columns: list[tuple[str, Typed]]
    table: Table | None = None
    #: Built from a query that had errors: its column list may be short, so a column not
    #: found in it is a consequence, not a new error.
    incomplete: bool = False
    #: On the far side of an outer join: every column may be NULL because the row may be
    #: absent. `own_columns` keeps the columns' nullability within the row.
    optional: bool = False
    own_columns: list[tuple[str, Typed]] = field(default_factory=list)
    #: A table's system columns (ctid, xmin, ...): found by name, never part of `*`.
    system: list[tuple[str, Typed]] = field(default_factory=list)
    #: A function in FROM returning one value: a reference to its alias is that value.
    scalar: bool = False
    #: A function in FROM returning a table's row type or a composite (`RETURNS SETOF events`):
    #: a whole-row reference to its alias is of that type.
    row_type: PgType | None = None

    def make_optional(self) -> None:
        if not self.optional:
            self.own_columns = list(self.columns)
            self.optional = True
        self.columns = [(n, Typed(typed.type, True, typed.embedded)) for n, typed in self.columns]

    def row_columns(self) -> list[tuple[str, Typed]]:
        """The columns as they are within one row of this item (before any outer join)."""
        return self.own_columns if self.optional else self.columns

    def star(self) -> list[StarColumn]:
        """What `alias.*` yields: every column, qualified by the name the item is known by."""
        qualifier = quote_ident(self.alias)
        return [StarColumn(n, typed, f"{qualifier}.{quote_ident(n)}") for n, typed in self.columns]

    def column(self, name: str) -> Typed | None:
        for cname, typed in (*self.columns, *self.system):
            if cname == name:
                return typed
        return None


@dataclass
class Scope:
    relations: list[Relation] = field(default_factory=list)
    parent: Scope | None = None
    ctes: dict[str, Relation] = field(default_factory=dict)
    #: Output column aliases, visible to ORDER BY.
    output: dict[str, Typed] = field(default_factory=dict)
    #: A FROM item failed to resolve (unknown table, ...): columns it would have provided
    #: are missing, so unresolved names here are not reported again.
    broken: bool = False
    #: What `*` yields here, in PostgreSQL's order (a USING column once, first in its join).
    star: list[StarColumn] = field(default_factory=list)
    #: The columns JOIN ... USING merged: an unqualified reference to one is not ambiguous.
    merged: dict[str, Typed] = field(default_factory=dict)
    #: The side's column a merged USING column is (inner and LEFT joins: the left one, RIGHT:
    #: the right one; FULL: neither, it is a COALESCE), as SQL: grouping by one groups the other.
    merged_as: dict[str, str] = field(default_factory=dict)

    def add_relation(self, rel: Relation) -> None:
        self.relations.append(rel)
        self.star.extend(rel.star())

    def lenient(self) -> bool:
        """Whether an error already reported makes a missing name here expected."""
        scope: Scope | None = self
        while scope is not None:
            if scope.broken or any(rel.incomplete for rel in scope.relations):
                return True
            scope = scope.parent
        return False

    def cte(self, name: str) -> Relation | None:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.ctes:
                return scope.ctes[name]
            scope = scope.parent
        return None


def owner(col: exp.Column, scope: Scope) -> Relation | None:
    """The relation of this query's FROM that `col` belongs to (None: an outer query's)."""
    if col.table:
        return next((rel for rel in scope.relations if col.table in rel.names), None)
    owners = [rel for rel in scope.relations if rel.column(col.name) is not None]
    return owners[0] if len(owners) == 1 else None


def local_column_names(scope: Scope) -> set[str]:
    return {name for rel in scope.relations for name, _ in rel.columns}


def rename(cols: list[tuple[str, Typed]], names: list[str]) -> list[tuple[str, Typed]]:
    return [(names[i] if i < len(names) else n, typed) for i, (n, typed) in enumerate(cols)]


def all_relations(scope: Scope) -> list[Relation]:
    out: list[Relation] = []
    s: Scope | None = scope
    while s is not None:
        out.extend(s.relations)
        s = s.parent
    return out


def row_type_columns(catalog: Catalog, pgtype: PgType | None) -> tuple[tuple[str, PgType], ...] | None:
    """The fields of a table's row type or of a composite type (`RETURNS SETOF events`, `(f).*`)."""
    if pgtype is None or pgtype.is_array:
        return None
    table = catalog.tables.get(pgtype.name)
    if table is not None:
        return tuple((c.name, c.type) for c in table.columns)
    composite = catalog.composites.get(pgtype.name)
    return composite.attributes if composite is not None else None
