"""The `@name` parameters of one statement: the type each takes from its uses (PostgreSQL types a
parameter at its first use and holds the later ones to it), their order, and where they stand."""

from __future__ import annotations

import re

from sqlglot import exp

from ...diagnostics import Problem, SqlSpan
from ..catalog import types as t
from ..catalog.types import PgType
from ..rules.casts import cast_name, is_untyped, same_family

#: What follows `@p` in `@p IS [NOT] NULL`.
_IS_AFTER = re.compile(r"[\s)]*IS\b", re.IGNORECASE)


class Parameters:
    """The parameters' types as the analysis finds them (`bind`), in the order first met."""

    def __init__(
        self, sql: str, spans: dict[str, list[SqlSpan]], nullable: frozenset[str], problems: list[Problem]
    ) -> None:
        self.sql = sql
        #: Where each parameter is written, found by PostgreSQL's lexer.
        self.spans = spans
        #: The parameters the request may leave unset (optional fields).
        self.nullable = nullable
        self.problems = problems
        self.types: dict[str, PgType | None] = {}
        self.order: list[str] = []
        #: Parameters a use left untyped (`@p IS NULL`) before any use typed them: PostgreSQL
        #: keeps that use's parameter unknown, so a later type for it is its error.
        self.untyped_uses: dict[str, SqlSpan | None] = {}

    def first_span(self, name: str) -> SqlSpan | None:
        spans = self.spans.get(name)
        return spans[0] if spans else None

    def number(self, name: str) -> int:
        """`@name`'s number as PREPARE sees it (`$1`, ...): parameters numbered in text order."""
        return list(self.spans).index(name) + 1 if name in self.spans else 0

    def is_null_use(self, name: str) -> SqlSpan | None:
        """Where `@name IS [NOT] NULL` writes `@name`, when the parameter is used more than once
        (sqlglot places no parameter): the first of its uses that `IS` follows."""
        for span in self.spans.get(name, []):
            if _IS_AFTER.match(self.sql, span.end + 1):
                return span
        return None

    def see(self, name: str) -> None:
        if name not in self.types:
            self.types[name] = None
            self.order.append(name)

    def untyped(self, node: exp.Expr) -> bool:
        """Whether `node` takes its type from the context: a string literal, NULL, or a
        parameter no earlier use has typed (PostgreSQL gives the later uses that type)."""
        if isinstance(node, exp.Parameter) and self.types.get(node.name) is not None:
            return False
        return is_untyped(node)

    def bind(self, param: exp.Parameter, pgtype: PgType | None) -> None:
        name = param.name
        self.see(name)
        if pgtype is None or pgtype in (t.UNKNOWN, t.NULL):
            return
        current = self.types[name]
        if current is None and name in self.untyped_uses:
            # PostgreSQL's message, with what it leaves out: the request field, and the fix.
            self.problems.append(
                Problem(
                    f"could not determine data type of parameter ${self.number(name)} (request field {name}):"
                    f" PostgreSQL types a parameter at its first use, and `@{name} IS NULL` gives it none;"
                    f" cast it there: `@{name}::{cast_name(pgtype)} IS NULL`",
                    self.untyped_uses[name],
                )
            )
            self.untyped_uses.pop(name)
        if current is None:
            self.types[name] = pgtype
        elif current != pgtype and not same_family(current, pgtype):
            self.problems.append(
                Problem(f"parameter @{name} is used both as {current} and as {pgtype}", self.first_span(name))
            )
