"""What statement analysis hands to the binder: the typed parameters and result columns of one
statement, plus the rewrites that make its SQL explicit. Pure data; knows nothing of protobuf."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pglast import ast

from ...diagnostics import Problem, SqlSpan
from ..catalog.model import Table
from ..catalog.types import PgType

#: "call": CALL of a procedure (rows only from its OUT parameters); "utility": any other statement
#: PostgreSQL runs without rows (TRUNCATE, NOTIFY, LISTEN, REFRESH, LOCK, DO, DDL, ...).
StatementKind = Literal["select", "insert", "update", "delete", "call", "utility"]


@dataclass(frozen=True)
class Param:
    """A `@name` in the statement; `type` is None only when an error was reported for it."""

    name: str
    type: PgType | None
    spans: tuple[SqlSpan, ...]


@dataclass(frozen=True)
class ResultColumn:
    """One output column, named and typed the way PostgreSQL names and types it."""

    name: str
    type: PgType | None
    nullable: bool
    span: SqlSpan | None
    #: Set when the column is a whole-row reference to a FROM item (`SELECT o.*, c FROM orders o
    #: JOIN customers c ...`): the row's own columns, in table order. `nullable` then says whether
    #: the row may be absent (the far side of an outer join).
    embedded: tuple[ResultColumn, ...] | None = None


@dataclass(frozen=True)
class Expansion:
    """A rewrite of the statement text: `span` (a top-level `*`, `t.*` or whole-row reference in
    the select list or RETURNING) is replaced by `text`, an explicit, quoted column list in the
    order PostgreSQL would produce them, so rows never depend on the live table's column order."""

    span: SqlSpan
    text: str


@dataclass(frozen=True)
class Analysis:
    kind: StatementKind
    params: tuple[Param, ...]
    #: The rows' columns; None when the statement returns no rows.
    columns: tuple[ResultColumn, ...] | None
    #: The table an INSERT/UPDATE/DELETE writes.
    target: Table | None
    #: The parameter compared by equality with the target's single-column primary key in the
    #: top-level WHERE: lets a handler tell "no such row" from "row not in the needed state".
    key_param: str | None
    #: INSERT ... ON CONFLICT DO NOTHING: no row back means the row already existed.
    conflict_do_nothing: bool
    problems: tuple[Problem, ...]
    #: Rewrites to apply to the statement text (non-overlapping, sorted by position).
    expansions: tuple[Expansion, ...] = ()
    #: Whether the statement only reads (no data-modifying CTE, no FOR UPDATE/SHARE, no volatile
    #: function): a replica could serve it.
    read_only: bool = False
    #: PostgreSQL's own parse of the statement, the grammar check's (pglast; each `@name` is
    #: `$n`, `positional_names[n - 1]` its name): reused by bind/ rather than parsed again.
    tree: ast.Node | None = field(default=None, compare=False, repr=False)
    positional_names: tuple[str, ...] = ()
