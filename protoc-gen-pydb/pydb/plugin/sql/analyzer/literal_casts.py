"""Casts and literals: `x::type` (the type a cast names, PostgreSQL's TypeName at its place,
parameters and array elements taking it) and a string literal checked, as PostgreSQL reads it,
against the type it meets."""

from __future__ import annotations

from sqlglot import exp

from ..bridge.type_standins import parse_type_name, resolve_type_name, unknown_type_message
from ..catalog import types as t
from ..catalog.identifiers import did_you_mean
from ..catalog.types import PgType
from ..rules.casts import castable, describe, is_untyped
from ..rules.literals import BOOLEAN_INPUTS, is_date_like, is_int, is_interval, is_json, is_number, is_temporal, is_uuid
from .recursion import TypesExpressions
from .scope import Scope, Typed
from .state import StatementState


class CastsAndLiterals:
    """Casts and the literals they and other contexts type: `cast`, `check_literal`. Types a
    cast's operand through `self.expr`."""

    #: The operands' typing: `ExpressionTyping` (connected by `Analyzer.__init__`).
    expr: TypesExpressions

    def __init__(self, state: StatementState) -> None:
        self.state = state
        self.params = state.params

    def check_literal(self, lit: exp.Literal, want: PgType) -> None:
        value = str(lit.this)
        if want.is_array:
            if lit.is_string and not value.lstrip().startswith(("{", "[")):
                self.state.error(f"malformed array literal: '{value}' (an array literal is written '{{a,b}}')", lit)
            return
        if lit.is_string:
            if want.is_enum:
                assert want.labels is not None
                if value not in want.labels:
                    self.state.error(
                        f"'{value}' is not a label of enum {want.name} ({', '.join(want.labels)}){did_you_mean(value, list(want.labels))}",
                        lit,
                    )
            elif want.name in t.INTEGER:
                if not is_int(value):
                    self.state.error(f"invalid input syntax for type {want.name}: '{value}'", lit)
            elif want.name in t.NUMERIC:
                if not is_number(value):
                    self.state.error(f"invalid input syntax for type {want.name}: '{value}'", lit)
            elif want.name in t.JSON:
                if not is_json(value):
                    self.state.error(f"invalid input syntax for type {want.name}: '{value}' is not JSON", lit)
            elif want.name == "interval" and not is_interval(value):
                self.state.error(f"invalid input syntax for type interval: '{value}'", lit)
            elif want.name in ("date", "timestamp", "timestamptz") and not is_date_like(value):
                self.state.error(f"date/time field value out of range: '{value}'", lit)
            elif want.name == "uuid" and not is_uuid(value):
                self.state.error(f"invalid input syntax for type uuid: '{value}'", lit)
            elif want.name == "bool" and value.strip().lower() not in BOOLEAN_INPUTS:
                self.state.error(f"invalid input syntax for type boolean: '{value}'", lit)
            elif want.name in t.TEMPORAL and not is_temporal(value):
                self.state.error(f"invalid input syntax for type {want.name}: '{value}'", lit)
            elif want.name == "interval" and not any(ch.isdigit() for ch in value):
                self.state.error(f"invalid input syntax for type interval: '{value}'", lit)
            return
        # A number literal.
        if want.name in t.NUMERIC:
            return  # Postgres compares 1.5 with an integer, and rounds it when assigned
        self.state.error(f"a number ({value}) cannot be used as {describe(want)}", lit)

    def cast(self, node: exp.Cast, scope: Scope) -> Typed:
        to = node.args.get("to")
        target: PgType | None = None
        if isinstance(to, exp.DataType):
            target = self.cast_target(to)
        inner = node.this
        while isinstance(inner, exp.Paren):  # `(@p)::uuid[]`: PostgreSQL's tree has no parentheses
            inner = inner.this
        if isinstance(inner, exp.Parameter):
            current = self.params.types.get(inner.name)
            if current is not None and target is not None and current != target:
                # An earlier use typed the parameter (PostgreSQL types it once, at its first
                # use): this is a cast of that value, `@p::bigint ... @p::text` casts a bigint.
                if not castable(current, target):
                    self.state.error(f"cannot cast type {describe(current)} to {describe(target)}", node)
                return Typed(target, inner.name in self.params.nullable)
            self.params.bind(inner, target)
            return Typed(target, inner.name in self.params.nullable)
        if isinstance(inner, exp.Literal) and target is not None:
            if inner.is_string:
                self.check_literal(inner, target)
            else:
                number = t.INT4 if is_int(str(inner.this)) else t.NUMERIC_T
                if not castable(number, target):
                    self.state.error(f"cannot cast type {describe(number)} to {describe(target)}", node)
            return Typed(target, False)
        if isinstance(inner, exp.Array) and target is not None and target.is_array:
            # ARRAY[@a, @b]::uuid[]: the elements take the element type.
            for element in inner.expressions:
                if is_untyped(element):
                    self.expr.expect(element, target.element, scope)
                else:
                    element_type = self.expr.infer(element, scope).type
                    if element_type is not None and not castable(element_type, target.element):
                        self.state.error(
                            f"cannot cast type {describe(element_type)} to {describe(target.element)}", element
                        )
            return Typed(target, False)
        typed = self.expr.infer(inner, scope)
        if typed.type is not None and target is not None and not castable(typed.type, target):
            self.state.error(f"cannot cast type {describe(typed.type)} to {describe(target)}", node)
        return Typed(target, typed.nullable)

    def cast_target(self, to: exp.DataType) -> PgType | None:
        """The type a cast names: PostgreSQL's TypeName at the place sqlglot's DataType starts
        (sqlglot's own rendering is ambiguous: `character` and `"char"` differ only there), or,
        for a DataType sqlglot made up without a place in the text, its rendering read by
        PostgreSQL's grammar. Either way one resolution: `typenames.resolve_type_name`."""
        start = to.meta.get("start")
        type_name = (
            (self.state.type_names_at.get(start) or self.state.type_names_at.get(start - 1))
            if isinstance(start, int)
            else None
        )
        if type_name is None:
            type_name = parse_type_name(to.sql(dialect="postgres"))
        if type_name is None:
            self.state.error(f"pydb cannot read the type {to.sql(dialect='postgres')}", to)
            return None
        target = resolve_type_name(type_name, self.state.catalog)
        if target is None:
            self.state.error(unknown_type_message(type_name, self.state.catalog), to)
        return target
