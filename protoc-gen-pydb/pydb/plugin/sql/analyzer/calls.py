"""Function calls: the built-in signatures the analyzer knows and how a call is typed against
them (aggregates, window functions, COALESCE/GREATEST/LEAST/NULLIF, make_interval, sum/avg)."""

from __future__ import annotations

import re

from pglast import ast
from sqlglot import exp

from ..bridge.call_standins import function_name
from ..catalog import types as t
from ..catalog.builtins import load_builtins
from ..catalog.model import Catalog
from ..catalog.signatures import FunctionSig
from ..catalog.types import PgType, span_of
from ..rules.casts import is_untyped
from ..rules.coercion import common_type
from ..rules.resolution import ResolveError, resolve_function
from .operators import Operators
from .recursion import TypesExpressions
from .scope import Scope, Typed
from .state import StatementState


class FunctionCalls:
    """Function calls resolved against the catalog's and the built-ins' signatures. Types
    arguments through `self.expr`; NULLIF (PostgreSQL's `a = b`) by `self.operators`."""

    #: The operands' typing: `ExpressionTyping` (connected by `Analyzer.__init__`).
    expr: TypesExpressions

    def __init__(self, state: StatementState, operators: Operators) -> None:
        self.state = state
        self.params = state.params
        self.operators = operators

    def function(self, node: exp.Func, scope: Scope) -> Typed:
        name = function_name(node)
        operands: list[exp.Expr] = list(node.iter_expressions())
        if not isinstance(node, (exp.ArrayAgg, exp.GroupConcat)) and any(isinstance(a, exp.Order) for a in operands):
            # agg(x ORDER BY y) that sqlglot models (json_agg): the argument is x, y is typed here.
            for order in operands:
                if isinstance(order, exp.Order):
                    for ordered in order.expressions:
                        self.expr.infer(ordered.this if isinstance(ordered, exp.Ordered) else ordered, scope)
            operands = [a.this if isinstance(a, exp.Order) and isinstance(a.this, exp.Expr) else a for a in operands]
        # agg(DISTINCT x): the argument is x.
        args: list[exp.Expr] = [
            a.expressions[0] if isinstance(a, exp.Distinct) and len(a.expressions) == 1 else a
            for a in operands
            if not isinstance(a, (exp.Order, exp.Var))
        ]
        if isinstance(node, exp.Count):
            for a in args:
                if not isinstance(a, exp.Star):
                    self.expr.infer(a, scope)
            return Typed(t.INT8, False)
        if isinstance(node, exp.CurrentTimestamp):
            return Typed(t.TIMESTAMPTZ, False)
        if isinstance(node, exp.Uuid):
            return Typed(t.UUID, False)
        if isinstance(node, (exp.Coalesce, exp.Greatest, exp.Least)):
            return self.common_type_call(node, args, scope)
        if isinstance(node, exp.Nullif):
            # PostgreSQL makes NULLIF(a, b) the operator `a = b` (resolved as any `=`, untyped
            # sides take its operand types) whose value is `a` coerced to the left operand type.
            return Typed(
                self.operators.operator("=", node.this, node.expression, node, scope, value_of_left=True).type, True
            )
        if isinstance(node, exp.MakeInterval):
            return self.make_interval(node, scope)
        if isinstance(node, (exp.TimestampTrunc, exp.DateTrunc)) and isinstance(node.args.get("unit"), exp.Expr):
            # date_trunc('day', ts) or date_trunc(@unit, ts [, zone]): sqlglot keeps the unit
            # apart; resolved in PostgreSQL's argument order (a date is truncated as a
            # timestamptz, PostgreSQL's preferred type).
            unit = node.args["unit"]
            if isinstance(unit, exp.Var):
                unit = exp.Literal.string(str(unit.name).lower())
            zone = node.args.get("zone")
            return self.call(node, "date_trunc", None, [unit, node.this, *([zone] if zone else [])], scope)
        if isinstance(node, exp.ArrayAgg) and isinstance(node.this, exp.Order):
            # array_agg(x ORDER BY y): sqlglot wraps the argument in its ORDER BY.
            for ordered in node.this.expressions:
                self.expr.infer(ordered.this if isinstance(ordered, exp.Ordered) else ordered, scope)
            value = node.this.this
            if isinstance(value, exp.Distinct) and len(value.expressions) == 1:
                value = value.expressions[0]
            element = self.expr.infer(value, scope)
            array = element.type.array() if element.type is not None else None
            return Typed(array, element.nullable if self.state.window_depth else True)
        if isinstance(node, exp.Extract):  # extract(field FROM source): numeric
            return Typed(t.NUMERIC_T, self.expr.infer(node.expression, scope).nullable)
        if isinstance(node, exp.GroupConcat):  # string_agg(x, sep [ORDER BY ...])
            value = node.this
            if isinstance(value, exp.Order):
                for ordered in value.expressions:
                    self.expr.infer(ordered.this if isinstance(ordered, exp.Ordered) else ordered, scope)
                value = value.this
            typed = self.expr.expect(value, t.TEXT, scope) if is_untyped(value) else self.expr.infer(value, scope)
            separator = node.args.get("separator")
            # string_agg(text, text) or (bytea, bytea): a varchar value is coerced to text
            bytea = typed.type == PgType("bytea")
            if isinstance(separator, exp.Expr):
                self.expr.expect(separator, PgType("bytea") if bytea else t.TEXT, scope)
            return Typed(PgType("bytea") if bytea else t.TEXT, True)
        if isinstance(node, exp.Trim):  # trim([BOTH|LEADING|TRAILING] [chars] FROM s): btrim/ltrim/rtrim
            position = str(node.args.get("position") or "BOTH").upper()
            name = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(position, "btrim")
            chars = node.args.get("expression")
            trim_args = [node.this, *([chars] if isinstance(chars, exp.Expr) else [])]
            return self.call(node, name, None, trim_args, scope)
        keyword = _SQL_VALUE_FUNCTIONS.get(type(node))
        if keyword is not None:  # CURRENT_DATE, LOCALTIMESTAMP, ...: no call in PostgreSQL's tree
            return Typed(keyword, False)
        # A call sqlglot models in a way of its own: resolved by its PostgreSQL name, with the
        # operands sqlglot keeps.
        variadic = any(isinstance(a, exp.Variadic) for a in args)
        args = [a.this if isinstance(a, exp.Variadic) else a for a in args]
        schema, _, written = self.written_name(node, name).rpartition(".")  # `util.f(x)`: in schema util
        return self.call(node, written, schema or None, args, scope, variadic=variadic)

    def resolved_call(self, node: exp.Expr, call: ast.FuncCall, scope: Scope) -> Typed | None:
        """A call PostgreSQL's parse tree shows, typed by PostgreSQL's overload resolution.
        None when sqlglot's node does not show the call's arguments one for one."""
        names = [str(part.sval) for part in call.funcname or () if isinstance(part, ast.String)]
        args = self.call_args(node, len(call.args or ()))
        if args is None:
            return None
        arg_names = [a.name if isinstance(a, ast.NamedArgExpr) else None for a in call.args or ()]
        for order in node.iter_expressions():
            if isinstance(order, exp.Order):  # the aggregate's ORDER BY keys
                for ordered in order.expressions:
                    self.expr.infer(ordered.this if isinstance(ordered, exp.Ordered) else ordered, scope)
        return self.call(
            node,
            names[-1],
            names[0] if len(names) > 1 else None,
            args,
            scope,
            arg_names=arg_names if any(arg_names) else None,
            variadic=bool(call.func_variadic),
            over=call.over is not None,
        )

    def core_functions(self, name: str) -> tuple[FunctionSig, ...]:
        """pg_catalog's functions named `name`: an extension's are the catalog's, in the schema
        CREATE EXTENSION installed them in."""
        return tuple(sig for sig in self.state.builtins.functions(name) if not sig.extension)

    def call_exists(self, call: ast.FuncCall) -> bool:
        """Whether PostgreSQL has a function of the name written (any overload)."""
        names = [str(part.sval) for part in call.funcname or () if isinstance(part, ast.String)]
        schema = names[0] if len(names) > 1 else None
        builtin = self.core_functions(names[-1]) if schema in (None, "pg_catalog") else ()
        return bool(builtin or self.state.catalog.functions(schema, names[-1]))

    def call(
        self,
        node: exp.Expr,
        name: str,
        schema: str | None,
        args: list[exp.Expr],
        scope: Scope,
        *,
        arg_names: list[str | None] | None = None,
        variadic: bool = False,
        over: bool = False,
    ) -> Typed:
        """`name(args)` typed by PostgreSQL's overload resolution over the built-in catalog: each
        argument's type (an untyped `@param` or literal is `unknown`), the chosen overload's
        result, and what each untyped argument is coerced to, which types the parameter."""
        types: list[PgType] = []
        inferred: dict[int, Typed] = {}  # each typed argument inferred once: its errors once
        known = True
        for arg in args:
            if isinstance(arg, exp.Parameter) and self.params.types.get(arg.name) is not None:
                types.append(self.params.types[arg.name] or t.UNKNOWN)
            elif is_untyped(arg):
                types.append(t.UNKNOWN)
            else:
                typed = inferred[id(arg)] = self.expr.infer(arg, scope)
                types.append(typed.type or t.UNKNOWN)
                known = known and typed.type is not None
        if not known:
            return Typed(None, True)  # an argument's error is reported already
        if schema is not None and schema != "pg_catalog" and schema not in self.state.catalog.schemas:
            self.state.error(f'schema "{schema}" does not exist', node)
            return Typed(None, True)
        builtin = self.core_functions(name) if schema in (None, "pg_catalog") else ()
        candidates = (*builtin, *self.state.catalog.functions(schema, name))
        try:
            resolution = resolve_function(
                name,
                candidates,
                types,
                arg_names=arg_names,
                variadic_call=variadic,
                params=[isinstance(a, exp.Parameter) for a in args],
                env=self.state.builtins,
                schema=schema,
            )
        except ResolveError as err:
            self.state.error(err.message + (f" ({err.note})" if err.note else ""), node)
            return Typed(None, True)
        nullable = False
        for arg, coerced in zip(args, resolution.arg_types, strict=True):
            typed = inferred[id(arg)] if id(arg) in inferred else self.expr.expect(arg, coerced, scope)
            nullable = nullable or typed.nullable
        in_window = over or isinstance(node.parent, exp.Window)
        if resolution.kind == "window" and not in_window:
            self.state.error(f"window function {name} requires an OVER clause", node)
        if resolution.kind == "aggregate" and not in_window:
            nullable = name != "count"  # over no rows every aggregate but count is NULL
        elif resolution.kind == "window":
            nullable = name not in _WINDOW_NOT_NULL
        elif resolution.sig.schema != "pg_catalog" and not resolution.sig.extension:
            nullable = True  # the schema's own function: its body may return NULL for any arguments
        elif name in _NEVER_NULL:
            nullable = False
        elif name in _NULL_FROM_VALUES:
            nullable = True
        if resolution.out_columns:
            self.state.row_columns[id(node)] = resolution.out_columns
        elif resolution.sig.out_name:  # one OUT parameter: in FROM its column has its name
            self.state.out_names[id(node)] = resolution.sig.out_name
        return Typed(resolution.result, nullable)

    def call_args(self, node: exp.Expr, count: int) -> list[exp.Expr] | None:
        """The arguments of a call as sqlglot holds them, in the written order: the node's own
        operands, or those of the one expression sqlglot rewrote the call into (`div(a, b)` is a
        cast of `a / b`). None when they do not match PostgreSQL's `count` arguments."""
        current: exp.Expr = node
        for _ in range(3):
            # `agg(x ORDER BY y)`: sqlglot wraps the last argument in its ORDER BY (typed by the caller).
            children = [
                c.this if isinstance(c, exp.Order) and isinstance(c.this, exp.Expr) else c
                for c in current.iter_expressions()
            ]
            children = [c for c in children if not isinstance(c, (exp.DataType, exp.Order))]
            # `name => value` and `VARIADIC arr`: the value (PostgreSQL's tree has the name, the flag).
            children = [c.expression if isinstance(c, exp.Kwarg) else c for c in children]
            children = [c.this if isinstance(c, exp.Variadic) else c for c in children]
            # agg(DISTINCT x): the argument is x.
            children = [
                c.expressions[0] if isinstance(c, exp.Distinct) and len(c.expressions) == 1 else c for c in children
            ]
            if any(isinstance(c, (exp.Var, exp.Star)) for c in children):
                return None
            if len(children) == count:
                spans = [self.state.span(c) for c in children]
                starts = [s.start for s in spans if s is not None]
                if len(starts) == len(children):
                    return [c for _, c in sorted(zip(starts, children, strict=True), key=lambda pair: pair[0])]
                return children
            if len(children) != 1:
                return None
            current = children[0]
        return None

    def ordered_set_aggregate(self, node: exp.WithinGroup, scope: Scope) -> Typed:
        """`percentile_cont(f) WITHIN GROUP (ORDER BY x)` and its kin: resolved as PostgreSQL
        does, over the direct arguments followed by the sorted ones. NULL over no rows, like any
        aggregate; a hypothetical-set one (`rank(3) WITHIN GROUP (...)`) never is."""
        order = node.expression
        keys = (
            [o.this if isinstance(o, exp.Ordered) else o for o in order.expressions]
            if isinstance(order, exp.Order)
            else []
        )
        call = node.this
        if not isinstance(call, exp.Func):
            return Typed(None, True)
        direct = [a for a in call.iter_expressions() if not isinstance(a, exp.Order)]
        name = self.written_name(call, function_name(call))
        typed = self.call(node, name, None, [*direct, *keys], scope)
        hypothetical = any(sig.hypothetical for sig in self.state.builtins.functions(name))
        return Typed(typed.type, typed.type is None or not hypothetical)

    def common_type_call(
        self, node: exp.Expr, args: list[exp.Expr], scope: Scope, construct: str | None = None
    ) -> Typed:
        """COALESCE, GREATEST, LEAST, ARRAY[]: the arguments' common type, as PostgreSQL resolves
        it (before any context sees it); parameters and string literals take it. COALESCE is
        NULL only if every argument is."""
        typed_args = [None if is_untyped(a) else self.expr.infer(a, scope) for a in args]
        common: PgType | None = None
        if all(a is None or a.type is not None for a in typed_args):
            # PostgreSQL's select_common_type; parameters count as unknown unless typed already.
            types = [
                (a.type or t.UNKNOWN)
                if a is not None
                else self.params.types.get(arg.name) or t.UNKNOWN
                if isinstance(arg, exp.Parameter)
                else t.UNKNOWN
                for arg, a in zip(args, typed_args, strict=True)
            ]
            try:
                common = common_type(types, construct or type(node).__name__.upper(), env=self.state.builtins)
            except ResolveError as err:
                self.state.error(err.message, node)
        nullable_args: list[bool] = []
        for a, typed in zip(args, typed_args, strict=True):
            if typed is None:
                typed = self.expr.expect(a, common, scope) if common is not None else self.expr.infer(a, scope)
            nullable_args.append(typed.nullable)
        if isinstance(node, exp.Coalesce):
            return Typed(common, all(nullable_args))
        return Typed(common, any(nullable_args))

    def written_name(self, node: exp.Func, fallback: str) -> str:
        """A function's name as the statement spells it (sqlglot renames some it models)."""
        span = span_of(node)
        if span is not None and "start" in node.meta:
            m = re.match(r"\s*([A-Za-z_][\w.]*)\s*\(", self.state.sql[span.start :])
            if m is not None:
                return m.group(1).lower()
        elif span is not None:
            # sqlglot placed the call's operands only (`decode(NULLIF(a, ''), 'hex')`): the
            # name is the word before the `(` that opens the first of them.
            m = re.search(r"([A-Za-z_][\w.]*)\s*\((?:\s|\()*$", self.state.sql[: span.start])
            if m is not None:
                return m.group(1).lower()
        return fallback

    def make_interval(self, node: exp.MakeInterval, scope: Scope) -> Typed:
        """make_interval(years, months, weeks, days, hours, mins, secs), positional or named
        (`secs => @n`): every part is an integer but secs, a double."""
        positional = ("years", "months", "weeks", "days", "hours", "mins", "secs")
        nullable = False
        for i, arg in enumerate(node.iter_expressions()):
            part, value = positional[min(i, len(positional) - 1)], arg
            if isinstance(arg, exp.Kwarg):
                part, value = str(arg.this.name).lower(), arg.expression
                if part not in positional:
                    self.state.error(
                        f"make_interval() has no argument {part} (it takes {', '.join(positional)})",
                        span=self.state.kwarg_span(value) or self.state.span(node),
                    )
                    self.expr.infer(value, scope)
                    continue
            typed = self.expr.expect(value, t.FLOAT8 if part == "secs" else t.INT4, scope)
            nullable = nullable or typed.nullable
        return Typed(t.INTERVAL, nullable)


#: SQL's keyword "functions" (no call in PostgreSQL's parse tree: SQLValueFunction nodes).
_SQL_VALUE_FUNCTIONS: dict[type[exp.Expr], PgType] = {
    exp.CurrentDate: PgType("date"),
    exp.CurrentTime: PgType("timetz"),
    exp.CurrentTimestamp: t.TIMESTAMPTZ,
    exp.Localtime: PgType("time"),
    exp.Localtimestamp: PgType("timestamp"),
    exp.CurrentUser: PgType("name"),
    exp.SessionUser: PgType("name"),
    exp.CurrentRole: PgType("name"),
    exp.CurrentCatalog: PgType("name"),
}


#: Window functions that always have a value (the others read a row that may not exist).
_WINDOW_NOT_NULL = frozenset({"row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile"})

#: Functions that may return NULL from non-NULL arguments (no such element, no match).
_NULL_FROM_VALUES = frozenset(
    {
        "array_length",
        "array_lower",
        "array_upper",
        "array_position",
        "array_ndims",
        "array_dims",
        "regexp_match",
        "regexp_substr",
        "jsonb_extract_path",
        "jsonb_extract_path_text",
        "json_extract_path",
        "json_extract_path_text",
        "jsonb_path_query_first",
        "nullif",
        "current_schema",  # no schema of the search_path exists
    }
)

#: Functions that are not strict yet never return NULL (they skip or print NULL arguments).
_NEVER_NULL = frozenset(
    {
        "concat",
        "concat_ws",
        "format",
        "jsonb_build_object",
        "json_build_object",
        "jsonb_build_array",
        "json_build_array",
        "now",
        "pi",
        "random",
        "gen_random_uuid",
        "clock_timestamp",
        "statement_timestamp",
        "transaction_timestamp",
        "pg_advisory_lock",
        "pg_advisory_xact_lock",
        "pg_notify",
    }
)


def function_kinds(name: str) -> set[str]:
    """What the built-ins named `name` are (pg_proc.prokind: f, a, w, p); empty if none."""
    return {sig.kind for sig in load_builtins().functions(name)}


def is_volatile(node: exp.Func, catalog: Catalog) -> bool:
    """Whether the call may change data or give a different value each time it is evaluated:
    a volatile built-in, or a function the schema declares VOLATILE (its default)."""
    name = function_name(node)
    signatures = (*load_builtins().functions(name), *catalog.functions(None, name))
    return any(sig.volatility == "v" for sig in signatures)
