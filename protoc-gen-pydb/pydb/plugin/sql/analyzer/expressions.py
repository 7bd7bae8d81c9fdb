"""Expression typing: the type and nullability of an expression from what it is (`infer`) or
where it is used (`expect`, `assign`), literal checks, casts, CASE, and output column names."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from sqlglot import exp

from ..bridge.call_standins import function_name
from ..bridge.operator_standins import GENERIC_OPERATORS, written_operator
from ..catalog import types as t
from ..catalog.types import PgType
from ..rules.casts import assignable, describe, is_untyped
from ..rules.coercion import ResolveError, common_type
from ..rules.literals import is_int, is_interval
from .calls import FunctionCalls
from .from_items import FromItems
from .grouping import aggregates
from .literal_casts import CastsAndLiterals
from .operators import ARITHMETIC, COMPARISONS, CONTAINMENT, KEY_TESTS, Operators
from .recursion import TypesQueries
from .scope import Scope, Typed
from .state import StatementState

_F = TypeVar("_F", bound=Callable[..., Typed])


#: How each kind of sqlglot node is typed: one method of `ExpressionTyping` per kind,
#: registered with `@infers(kind, ...)`. A node is typed by the handler of the most specific
#: class it is an instance of (its class's MRO), so the order of registration does not matter.
_Handler = Callable[[Any, Any, Scope, bool], Typed]
_HANDLERS: dict[type[exp.Expr], _Handler] = {}
_RESOLVED: dict[type[exp.Expr], _Handler | None] = {}


def infers(*kinds: type[exp.Expr]) -> Callable[[_F], _F]:
    """Register the decorated method as how nodes of these kinds are typed."""

    def register(method: _F) -> _F:
        for kind in kinds:
            assert kind not in _HANDLERS, f"two handlers for {kind.__name__}"
            _HANDLERS[kind] = method
        return method

    return register


def _handler(kind: type[exp.Expr]) -> _Handler | None:
    if kind not in _RESOLVED:
        _RESOLVED[kind] = next((_HANDLERS[k] for k in kind.__mro__ if k in _HANDLERS), None)
    return _RESOLVED[kind]


class ExpressionTyping:
    """Types and nullability of expressions, one handler per node kind (`@infers`). What an
    expression holds goes to the part owning it: column references to `self.from_items`,
    operators to `self.operators`, calls to `self.functions`, casts and literals to
    `self.casts`, subqueries to `self.queries`."""

    #: The subqueries' typing: `Statements` (connected by `Analyzer.__init__`).
    queries: TypesQueries

    def __init__(
        self,
        state: StatementState,
        casts: CastsAndLiterals,
        operators: Operators,
        functions: FunctionCalls,
        from_items: FromItems,
    ) -> None:
        self.state = state
        self.params = state.params
        self.casts = casts
        self.operators = operators
        self.functions = functions
        self.from_items = from_items

    def expect(self, node: exp.Expr, want: PgType, scope: Scope) -> Typed:
        """Type `node` where a value of type `want` is required: binds parameters, checks
        literals (enum labels, numbers, UUIDs) and rejects plainly incompatible types."""
        if isinstance(node, exp.Paren):
            return self.expect(node.this, want, scope)
        if isinstance(node, exp.Parameter):
            self.params.bind(node, want)
            return Typed(want, node.name in self.params.nullable)
        if isinstance(node, exp.Literal):
            self.casts.check_literal(node, want)
            return Typed(want, False)
        if isinstance(node, exp.Null):
            return Typed(want, True)
        # Anything else resolves its own type first, as PostgreSQL's parse analysis does bottom
        # up: CASE, COALESCE, NULLIF, GREATEST, LEAST and ARRAY[] take their arguments' common
        # type (all untyped: text), never the context's; only then is the result coerced.
        typed = self.infer(node, scope)
        if typed.type is not None and not assignable(typed.type, want, env=self.state.builtins):
            self.state.error(f"expected {describe(want)}, got {describe(typed.type)}", node)
        return typed

    def field(self, node: exp.Dot, name: exp.Identifier, scope: Scope) -> Typed:
        """`(composite).field`: the field's type, from the composite type (or the table whose
        row type it is). NULL when the composite value is, or the field in it."""
        base = self.infer(node.this, scope)
        if base.type is None or base.type.is_array or base.type.name == "record":
            return Typed(None, True)  # a whole-row reference's fields are not typed here
        schema, _, type_name = base.type.name.rpartition(".")
        composite = self.state.catalog.composite(schema or None, type_name)
        fields: tuple[tuple[str, PgType], ...] | None = composite.attributes if composite is not None else None
        if fields is None:
            table = self.state.catalog.tables.get(base.type.name)
            fields = tuple((c.name, c.type) for c in table.columns) if table is not None else None
        # PostgreSQL's format_type: a type visible on the search path by its bare name
        shown = type_name if schema in self.state.catalog.search_path else base.type.name
        if fields is None:
            shown = self.state.builtins.display(base.type) if not schema else shown
            self.state.error(
                f"column notation .{name.name} applied to type {shown}, which is not a composite type", node
            )
            return Typed(None, True)
        wanted = name.name if name.quoted else name.name.lower()
        found = next((ty for field, ty in fields if field == wanted), None)
        if found is None:
            self.state.error(f'column "{wanted}" not found in data type {shown}', node)
            return Typed(None, True)
        return Typed(found, True)

    def operator_written(self, node: exp.Binary) -> str:
        """The operator as the statement spells it (sqlglot may have read a stand-in)."""
        left, right = self.state.span(node.this), self.state.span(node.expression)
        # A parameter used more than once has no span of its own: the operator is then the
        # first word after the left operand, or the last before the right one.
        written = None
        if left is not None:
            written = written_operator(
                self.state.sql, left.end, right.start if right is not None else len(self.state.sql)
            )
        elif right is not None:
            before = self.state.sql[: right.start].replace("(", " ").split()
            written = before[-1] if before else None
        return written or _GENERIC_SYMBOLS[type(node)]

    def assign(self, value: exp.Expr, want: PgType, scope: Scope, column: str | None = None) -> Typed:
        """Type `value` stored into a column of type `want` (INSERT, SET): like `expect`, but
        with Postgres' assignment casts, under which any type may be stored in a text column.
        Only a bare parameter or literal takes the column's type (PostgreSQL's order)."""
        while isinstance(value, exp.Paren):
            value = value.this
        if not is_untyped(value) and want.name in t.TEXTUAL and not want.is_array:
            return self.infer(value, scope)
        if not is_untyped(value) and not isinstance(value, _CONTEXT_TYPED):
            # an extension's assignment cast (text to citext), as PostgreSQL applies it
            typed = self.infer(value, scope)
            if typed.type is not None and not assignable(typed.type, want, assignment=True, env=self.state.builtins):
                self.state.error(
                    f'column "{column}" is of type {describe(want)} but expression is of type {describe(typed.type)}'
                    if column is not None
                    else f"expected {describe(want)}, got {describe(typed.type)}",
                    value,
                )
            return typed
        return self.expect(value, want, scope)

    def case(self, node: exp.Case, scope: Scope) -> Typed:
        subject = node.this
        subject_type = self.infer(subject, scope).type if isinstance(subject, exp.Expr) else None
        result: PgType | None = None
        nullable = node.args.get("default") is None
        branches: list[exp.Expr] = []
        for if_ in node.args.get("ifs") or []:
            cond = if_.this
            if subject_type is not None:
                self.expect(cond, subject_type, scope)
            else:
                self.expect(cond, t.BOOL, scope)
            branches.append(if_.args["true"])
        if node.args.get("default") is not None:
            branches.append(node.args["default"])
        # A parameter an earlier use typed is of that type here too (as in COALESCE).
        inferred = {id(b): self.infer(b, scope) for b in branches if not self.params.untyped(b)}
        types = [typed.type for typed in inferred.values()]
        if inferred and all(ty is not None for ty in types):
            # PostgreSQL's select_common_type over the branches (the context never types them).
            try:
                result = common_type([ty for ty in types if ty is not None], "CASE", env=self.state.builtins)
            except ResolveError as err:
                self.state.error(err.message, node)
                result = None
        elif inferred:
            result = None  # a branch's error is reported already
        else:
            result = t.TEXT  # every branch untyped: select_common_type resolves unknown as text
        for b in branches:
            if id(b) in inferred:
                typed = inferred[id(b)]
            elif result is not None:
                typed = self.expect(b, result, scope)
            else:
                typed = self.infer(b, scope)
            nullable = nullable or typed.nullable
        return Typed(result, nullable)

    def window_spec(self, window: exp.Window, scope: Scope) -> None:
        """A window's own clauses (in OVER (...) or a WINDOW definition): PARTITION BY and ORDER BY
        name columns of the query. PostgreSQL types them last (transformWindowDefinitions), so an
        untyped use of a parameter here comes after any typing one."""
        self.state.window_depth += 1
        try:
            self.window_clauses(window, scope)
        finally:
            self.state.window_depth -= 1

    def window_clauses(self, window: exp.Window, scope: Scope) -> None:
        for part in window.args.get("partition_by") or []:
            self.infer(part, scope)
        window_order = window.args.get("order")
        if isinstance(window_order, exp.Order):
            for ordered in window_order.expressions:
                self.infer(ordered.this if isinstance(ordered, exp.Ordered) else ordered, scope)

    def infer(self, node: exp.Expr, scope: Scope, allow_output: bool = False) -> Typed:
        """The type of `node` in `scope` from what it is, not where it is used. A domain's value
        is its base type's here: PostgreSQL reduces a domain to its base type for operators,
        common types and function overloads; only where a value is stored or passed to a
        domain (`expect`/`assign` with a domain column's or argument's type, a cast) does a
        parameter take the domain."""
        typed = self.infer_node(node, scope, allow_output)
        if typed.type is not None and typed.type.domain is not None and not typed.type.is_array:
            return replace(typed, type=replace(typed.type, domain=None))
        return typed

    def infer_node(self, node: exp.Expr, scope: Scope, allow_output: bool = False) -> Typed:
        """The type of `node` by its kind: the handler registered (`@infers`) for the most
        specific class of the node, after a call written as PostgreSQL reads it (a FuncCall at
        the node's place) for the calls sqlglot models as its own nodes."""
        if isinstance(node, (exp.Func, exp.Cast)) and "start" in node.meta:
            call = self.state.calls.get(node.meta["start"])
            if call is not None and (not isinstance(node, _MODELED_CALLS) or not self.functions.call_exists(call)):
                # A name sqlglot rewrote into a call of its own (IFNULL/NVL read as COALESCE) is
                # resolved as written: PostgreSQL has no such function.
                resolved = self.functions.resolved_call(node, call, scope)
                if resolved is not None:
                    return resolved
        handler = _handler(type(node))
        if handler is not None:
            return handler(self, node, scope, allow_output)
        return self.children(node, scope)

    def children(self, node: exp.Expr, scope: Scope) -> Typed:
        """A node of no kind the analyzer knows: its operands typed, its own type unknown."""
        for child in node.iter_expressions():
            self.infer(child, scope)
        return Typed(None, True)

    @infers(exp.Paren)
    def paren(self, node: exp.Paren, scope: Scope, allow_output: bool) -> Typed:
        return self.infer(node.this, scope, allow_output)

    @infers(exp.Alias)
    def alias(self, node: exp.Alias, scope: Scope, allow_output: bool) -> Typed:
        return self.infer(node.this, scope)

    @infers(exp.Column)
    def column_ref(self, node: exp.Column, scope: Scope, allow_output: bool) -> Typed:
        if isinstance(node.this, exp.Star) and node.table and isinstance(node.parent, exp.Func):
            # `json_agg(t.*)`: as an argument, PostgreSQL reads `t.*` as the whole row of t
            whole_row = node.args["table"].copy()
            return self.from_items.column(exp.Column(this=whole_row), scope, allow_output)
        if isinstance(node.this, exp.Star):
            return Typed(None, False)
        return self.from_items.column(node, scope, allow_output)

    @infers(exp.Parameter)
    def parameter(self, node: exp.Parameter, scope: Scope, allow_output: bool) -> Typed:
        self.params.see(node.name)
        return Typed(self.params.types.get(node.name), node.name in self.params.nullable)

    @infers(exp.Literal)
    def literal(self, node: exp.Literal, scope: Scope, allow_output: bool) -> Typed:
        if node.is_string:
            return Typed(t.UNKNOWN, False)
        return Typed(t.INT4 if is_int(str(node.this)) else t.NUMERIC_T, False)

    @infers(exp.Null)
    def null(self, node: exp.Null, scope: Scope, allow_output: bool) -> Typed:
        return Typed(t.NULL, True)

    @infers(exp.Boolean)
    def boolean(self, node: exp.Boolean, scope: Scope, allow_output: bool) -> Typed:
        return Typed(t.BOOL, False)

    @infers(exp.Dot)
    def dot(self, node: exp.Dot, scope: Scope, allow_output: bool) -> Typed:
        if isinstance(node.expression, exp.Func):
            # `schema.fn(...)`: sqlglot places the name after the dot, PostgreSQL the schema.
            at = self.state.span(node.this)
            qualified = self.state.calls.get(at.start) if at is not None else None
            if qualified is not None:
                typed = self.functions.resolved_call(node.expression, qualified, scope)
                if typed is not None:
                    return typed
        if isinstance(node.expression, exp.Identifier):
            return self.field(node, node.expression, scope)
        return self.children(node, scope)

    @infers(exp.Cast)
    def cast_node(self, node: exp.Cast, scope: Scope, allow_output: bool) -> Typed:
        return self.casts.cast(node, scope)

    @infers(exp.Interval)
    def interval(self, node: exp.Interval, scope: Scope, allow_output: bool) -> Typed:
        # INTERVAL '2 minutes' (sqlglot splits off the unit) or INTERVAL '1' DAY.
        value, unit = node.this, node.args.get("unit")
        if isinstance(value, exp.Literal) and value.is_string:
            text = f"{value.this} {unit.name if isinstance(unit, exp.Expr) else ''}"
            if not is_interval(text):
                span = self.state.interval_span(text)
                written = self.state.sql[span.start : span.end + 1] if span else f"INTERVAL '{text.strip()}'"
                self.state.error(f"invalid input syntax for type interval: {written}", node, span=span)
        elif isinstance(value, exp.Expr):
            self.infer(value, scope)
        return Typed(t.INTERVAL, False)

    @infers(exp.Case)
    def case_node(self, node: exp.Case, scope: Scope, allow_output: bool) -> Typed:
        return self.case(node, scope)

    @infers(*COMPARISONS)
    def comparison_node(self, node: exp.Expr, scope: Scope, allow_output: bool) -> Typed:
        return self.operators.comparison(node, scope)

    @infers(exp.And, exp.Or)
    def and_or(self, node: exp.Connector, scope: Scope, allow_output: bool) -> Typed:
        a = self.expect(node.this, t.BOOL, scope)
        b = self.expect(node.expression, t.BOOL, scope)
        return Typed(t.BOOL, a.nullable or b.nullable)

    @infers(exp.Not)
    def not_(self, node: exp.Not, scope: Scope, allow_output: bool) -> Typed:
        a = self.expect(node.this, t.BOOL, scope)
        return Typed(t.BOOL, a.nullable)

    @infers(exp.Tuple)
    def row(self, node: exp.Tuple, scope: Scope, allow_output: bool) -> Typed:
        """A row constructor as a value: PostgreSQL's anonymous record."""
        for element in node.expressions:
            self.infer(element, scope)
        return Typed(PgType("record"), False)

    @infers(exp.Is)
    def is_(self, node: exp.Is, scope: Scope, allow_output: bool) -> Typed:
        subject = node.this.unnest() if isinstance(node.this, exp.Paren) else node.this
        if (
            isinstance(subject, exp.Parameter)
            and self.params.types.get(subject.name) is None
            and not self.state.window_depth
        ):
            self.params.untyped_uses.setdefault(
                subject.name, self.state.span(subject) or self.params.is_null_use(subject.name)
            )
        self.infer(node.this, scope)
        return Typed(t.BOOL, False)

    @infers(exp.In)
    def in_node(self, node: exp.In, scope: Scope, allow_output: bool) -> Typed:
        return self.operators.in_(node, scope)

    @infers(exp.Between)
    def between(self, node: exp.Between, scope: Scope, allow_output: bool) -> Typed:
        subject = self.infer(node.this, scope)
        for key in ("low", "high"):
            bound = node.args.get(key)
            if isinstance(bound, exp.Expr):
                if subject.type is not None:
                    self.expect(bound, subject.type, scope)
                else:
                    self.infer(bound, scope)
        return Typed(t.BOOL, subject.nullable)

    @infers(exp.RegexpLike, exp.RegexpILike, exp.SimilarTo)
    def pattern_match(self, node: exp.Expr, scope: Scope, allow_output: bool) -> Typed:
        """`~`, `~*`, SIMILAR TO."""
        a = self.expect(node.this, t.TEXT, scope)
        b = self.expect(node.expression, t.TEXT, scope)
        return Typed(t.BOOL, a.nullable or b.nullable)

    @infers(exp.AtTimeZone)
    def at_time_zone(self, node: exp.AtTimeZone, scope: Scope, allow_output: bool) -> Typed:
        # timestamptz AT TIME ZONE z is a timestamp, and the other way round.
        typed = self.infer(node.this, scope)
        zone = node.args.get("zone")
        if isinstance(zone, exp.Expr):
            self.expect(zone, t.TEXT, scope)
        swapped = {"timestamptz": PgType("timestamp"), "timestamp": t.TIMESTAMPTZ}
        return Typed(swapped.get(typed.type.name) if typed.type is not None else None, typed.nullable)

    @infers(exp.Like, exp.ILike)
    def like(self, node: exp.Expr, scope: Scope, allow_output: bool) -> Typed:
        a = self.expect(node.this, t.TEXT, scope)
        self.expect(node.expression, t.TEXT, scope)
        return Typed(t.BOOL, a.nullable)

    @infers(exp.Exists)
    def exists(self, node: exp.Exists, scope: Scope, allow_output: bool) -> Typed:
        self.queries.query(node.this, Scope(parent=scope))
        return Typed(t.BOOL, False)

    @infers(exp.Subquery)
    def scalar_subquery(self, node: exp.Subquery, scope: Scope, allow_output: bool) -> Typed:
        rows = self.queries.query(node.this, Scope(parent=scope))
        if len(rows) != 1:
            self.state.error(f"subquery must return only one column, not {len(rows)}", node)
            return Typed(None, True)
        # One aggregate row (no GROUP BY, HAVING or OFFSET) is always there: only its value
        # may be NULL. Any other subquery may return no row at all.
        return Typed(rows[0][1].type, rows[0][1].nullable if _one_row(node.this) else True)

    @infers(exp.Select, exp.Union)
    def query_value(self, node: exp.Expr, scope: Scope, allow_output: bool) -> Typed:
        rows = self.queries.query(node, Scope(parent=scope))
        return Typed(rows[0][1].type if len(rows) == 1 else None, True)

    @infers(*ARITHMETIC)
    def arithmetic_node(self, node: exp.Expr, scope: Scope, allow_output: bool) -> Typed:
        return self.operators.arithmetic(node, scope)

    @infers(exp.Neg)
    def negation(self, node: exp.Neg, scope: Scope, allow_output: bool) -> Typed:
        return self.infer(node.this, scope)

    @infers(exp.DPipe)
    def concat_node(self, node: exp.DPipe, scope: Scope, allow_output: bool) -> Typed:
        return self.operators.concat(node, scope)

    @infers(*CONTAINMENT)
    def containment_node(self, node: exp.Expr, scope: Scope, allow_output: bool) -> Typed:
        return self.operators.containment(node, scope)

    @infers(*KEY_TESTS)
    def key_test(self, node: exp.Expr, scope: Scope, allow_output: bool) -> Typed:
        subject = self.operators.expect_json(
            node.this, scope, "?" if isinstance(node, exp.JSONBContainsTopKey) else "?|"
        )
        key_type = t.TEXT if isinstance(node, exp.JSONBContainsTopKey) else t.TEXT.array()
        key_typed = self.expect(node.expression, key_type, scope)
        return Typed(t.BOOL, subject.nullable or key_typed.nullable)

    @infers(*GENERIC_OPERATORS)
    def generic_operator(self, node: exp.Binary, scope: Scope, allow_output: bool) -> Typed:
        return self.operators.operator(self.operator_written(node), node.this, node.expression, node, scope)

    @infers(exp.JSONBDeleteAtPath)
    def delete_at_path(self, node: exp.JSONBDeleteAtPath, scope: Scope, allow_output: bool) -> Typed:
        """jsonb `#-` text[]: an operator, as PostgreSQL resolves it."""
        return self.operators.operator("#-", node.this, node.expression, node, scope)

    @infers(exp.MatchAgainst)
    def text_match(self, node: exp.MatchAgainst, scope: Scope, allow_output: bool) -> Typed:
        if len(node.expressions) == 1:
            # `tsvector @@ tsquery` (sqlglot reads it as MySQL's MATCH ... AGAINST, reversed)
            return self.operators.operator("@@", node.expressions[0], node.this, node, scope)
        return self.functions.function(node, scope)

    @infers(exp.WithinGroup)
    def within_group(self, node: exp.WithinGroup, scope: Scope, allow_output: bool) -> Typed:
        return self.functions.ordered_set_aggregate(node, scope)

    @infers(exp.Filter)
    def filter_(self, node: exp.Filter, scope: Scope, allow_output: bool) -> Typed:
        """agg(...) FILTER (WHERE cond)."""
        typed = self.infer(node.this, scope)
        where = node.expression
        if isinstance(where, exp.Where):
            self.expect(where.this, t.BOOL, scope)
        return typed

    @infers(exp.Window)
    def window(self, node: exp.Window, scope: Scope, allow_output: bool) -> Typed:
        self.window_spec(node, scope)
        # An aggregate over a window frame that holds the current row is NULL only if
        # its argument can be: sum(priority) OVER w of a NOT NULL column is NOT NULL.
        self.state.window_depth += 1
        try:
            return self.infer(node.this, scope)
        finally:
            self.state.window_depth -= 1

    @infers(exp.Bracket)
    def subscript(self, node: exp.Bracket, scope: Scope, allow_output: bool) -> Typed:
        base = self.infer(node.this, scope)
        sliced = False
        for e in node.expressions:
            if isinstance(e, exp.Slice):  # a[2:], a[:n], a[i:j]: a slice of the array's type
                sliced = True
                for bound in (e.this, e.args.get("expression")):
                    if isinstance(bound, exp.Expr):
                        self.expect(bound, t.INT4, scope)
            else:
                self.expect(e, t.INT4, scope)
        if base.type is None or not base.type.is_array:
            return Typed(None, True)
        return Typed(base.type if sliced else base.type.element, True)

    @infers(exp.Array)
    def array(self, node: exp.Array, scope: Scope, allow_output: bool) -> Typed:
        if not node.expressions:
            return Typed(None, False)  # ARRAY[] has a type only from a cast
        # PostgreSQL's transformArrayExpr: the elements' common type (all untyped: text);
        # ARRAY[ARRAY[..], ..] is a multidimensional array of the inner arrays' type.
        element = self.functions.common_type_call(node, list(node.expressions), scope, construct="ARRAY").type
        if element is None or all(isinstance(e, exp.Array) for e in node.expressions):
            return Typed(element, False)
        return Typed(element.array(), False)

    @infers(exp.JSONExtract, exp.JSONBExtract, exp.JSONExtractScalar, exp.JSONBExtractScalar)
    def json_extract_node(self, node: exp.Expr, scope: Scope, allow_output: bool) -> Typed:
        return self.operators.json_extract(node, scope)

    @infers(exp.Func)
    def function_call(self, node: exp.Func, scope: Scope, allow_output: bool) -> Typed:
        return self.functions.function(node, scope)


def output_name(item: exp.Expr) -> str:
    """The column name Postgres gives a select-list item."""
    if isinstance(item, exp.Alias):
        return item.alias
    if isinstance(item, exp.Column):
        return item.name
    if isinstance(item, exp.Cast):
        return output_name(item.this) if isinstance(item.this, exp.Column) else "?column?"
    if isinstance(item, exp.Func):
        return function_name(item)
    if isinstance(item, exp.Window):
        return output_name(item.this)
    return "?column?"


def _one_row(query: exp.Expr) -> bool:
    """Whether a query always returns exactly one row: an aggregate without GROUP BY or HAVING
    (and no LIMIT or OFFSET that could drop it)."""
    if not isinstance(query, exp.Select) or any(query.args.get(k) for k in ("group", "having", "limit", "offset")):
        return False
    return any(next(aggregates(item), None) is not None for item in query.expressions)


_GENERIC_SYMBOLS: dict[type[exp.Expr], str] = {
    exp.Adjacent: "-|-",
    exp.ExtendsLeft: "&<",
    exp.ExtendsRight: "&>",
    exp.Distance: "<->",
    exp.BitwiseLeftShift: "<<",
    exp.BitwiseRightShift: ">>",
    exp.BitwiseAnd: "&",
    exp.BitwiseOr: "|",
    exp.BitwiseXor: "#",
}


#: What `expect` types from the type its context needs rather than from what it is.
_CONTEXT_TYPED = (exp.Literal,)


#: Calls sqlglot models with a meaning of their own that the analyzer types directly: COUNT(*),
#: the conditional expressions, make_interval's named parts, date_trunc/extract's unit keyword,
#: and array_agg(x ORDER BY y).
_MODELED_CALLS = (
    exp.Count,
    exp.Coalesce,
    exp.Greatest,
    exp.Least,
    exp.Nullif,
    exp.MakeInterval,
    exp.TimestampTrunc,
    exp.DateTrunc,
    exp.Extract,
    exp.ArrayAgg,
)
