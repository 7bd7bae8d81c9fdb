"""Where the analyzer recurses: an expression holds subqueries, a FROM item holds expressions and
queries, a CTE holds a data-modifying statement. The parts below the one that types a kind of
node reach it through these three small interfaces; `Analyzer.__init__` connects each to its one
implementation (named in each docstring), so the part behind every call is known. Every other
call between parts goes to an attribute of the part's own class."""

from __future__ import annotations

from typing import Protocol

from sqlglot import exp

from ...diagnostics import SqlSpan
from ..catalog.types import PgType
from .scope import Scope, Typed

#: A query's rows: each output column's name, type and where it is written.
Rows = list[tuple[str, Typed, SqlSpan | None]]


class TypesExpressions(Protocol):
    """How a part types an expression it holds: `expressions.ExpressionTyping`."""

    def infer(self, node: exp.Expr, scope: Scope, allow_output: bool = False) -> Typed: ...

    def expect(self, node: exp.Expr, want: PgType, scope: Scope) -> Typed: ...


class TypesQueries(Protocol):
    """How a part types a query it holds (a subquery, a VALUES list): `statements.Statements`."""

    def query(self, node: exp.Expr, scope: Scope) -> Rows: ...

    def values_rows(self, node: exp.Values, scope: Scope) -> Rows: ...


class TypesStatements(Protocol):
    """How a CTE's statement is typed, a data-modifying one included: `writes.Writes`."""

    def statement_rows(self, body: exp.Expr, scope: Scope) -> Rows | None: ...
