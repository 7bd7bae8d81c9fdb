"""Function calls: the built-in signatures the analyzer knows and how a call is typed against
them (aggregates, window functions, COALESCE/GREATEST/LEAST/NULLIF, make_interval, sum/avg)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pglast import ast
from sqlglot import exp

from . import types as t
from .coercion import describe, is_untyped
from .context import AnalyzerCore
from .funcnames import function_name
from .resolve import ResolveError, resolve_function
from .scope import Scope, Typed
from .types import PgType, span_of


@dataclass(frozen=True)
class Signature:
    returns: PgType | str | None
    args: tuple[PgType | None, ...] = ()
    variadic: bool = False
    aggregate: bool = False
    nullable: bool = False


BUILTINS: dict[str, Signature] = {
    "now": Signature(t.TIMESTAMPTZ),
    "current_timestamp": Signature(t.TIMESTAMPTZ),
    "clock_timestamp": Signature(t.TIMESTAMPTZ),
    "statement_timestamp": Signature(t.TIMESTAMPTZ),
    "transaction_timestamp": Signature(t.TIMESTAMPTZ),
    "current_date": Signature(PgType("date")),
    "gen_random_uuid": Signature(t.UUID),
    "make_interval": Signature(t.INTERVAL, (t.INT4, t.INT4, t.INT4, t.INT4, t.INT4, t.INT4, t.FLOAT8)),
    "date_trunc": Signature("arg1", (t.TEXT, None)),
    "extract": Signature(t.NUMERIC_T, (None, None)),
    "lower": Signature(t.TEXT, (t.TEXT,)),
    "upper": Signature(t.TEXT, (t.TEXT,)),
    "length": Signature(t.INT4, (t.TEXT,)),
    "trim": Signature(t.TEXT, (t.TEXT,)),
    "concat": Signature(t.TEXT, (None,), variadic=True),
    "substring": Signature(t.TEXT, (t.TEXT, t.INT4, t.INT4)),
    "replace": Signature(t.TEXT, (t.TEXT, t.TEXT, t.TEXT)),
    "abs": Signature("arg0", (None,)),
    "round": Signature("arg0", (None, t.INT4)),
    "floor": Signature("arg0", (None,)),
    "ceil": Signature("arg0", (None,)),
    "array_length": Signature(t.INT4, (None, t.INT4), nullable=True),
    "cardinality": Signature(t.INT4, (None,)),
    "jsonb_build_object": Signature(t.JSONB, (None,), variadic=True),
    "json_build_object": Signature(PgType("json"), (None,), variadic=True),
    "jsonb_agg": Signature(t.JSONB, (None,), aggregate=True),
    "to_jsonb": Signature(t.JSONB, (None,)),
    "jsonb_typeof": Signature(t.TEXT, (t.JSONB,)),
    "jsonb_set": Signature(t.JSONB, (t.JSONB, PgType("text", True), t.JSONB, t.BOOL)),
    "count": Signature(t.INT8, (None,), aggregate=True),
    "sum": Signature("arg0", (None,), aggregate=True),
    "avg": Signature(t.NUMERIC_T, (None,), aggregate=True),
    "min": Signature("arg0", (None,), aggregate=True),
    "max": Signature("arg0", (None,), aggregate=True),
    "array_agg": Signature("arg0[]", (None,), aggregate=True),
    "string_agg": Signature(t.TEXT, (t.TEXT, t.TEXT), aggregate=True),
    "bool_and": Signature(t.BOOL, (t.BOOL,), aggregate=True),
    "bool_or": Signature(t.BOOL, (t.BOOL,), aggregate=True),
    "row_number": Signature(t.INT8),
    "rank": Signature(t.INT8),
    "dense_rank": Signature(t.INT8),
    "lag": Signature("arg0", (None, t.INT4), nullable=True),
    "lead": Signature("arg0", (None, t.INT4), nullable=True),
    "random": Signature(t.FLOAT8),
    "pg_notify": Signature(PgType("void"), (t.TEXT, t.TEXT)),
    "pg_advisory_xact_lock": Signature(PgType("void"), (t.INT8,)),
    "localtimestamp": Signature(PgType("timestamp")),
    "age": Signature(t.INTERVAL, (None, None)),
    "to_char": Signature(t.TEXT, (None, t.TEXT)),
    "to_timestamp": Signature(t.TIMESTAMPTZ, (t.FLOAT8,)),
    "to_date": Signature(PgType("date"), (t.TEXT, t.TEXT)),
    "to_number": Signature(t.NUMERIC_T, (t.TEXT, t.TEXT)),
    "date": Signature(PgType("date"), (None,)),
    "isfinite": Signature(t.BOOL, (None,)),
    "strpos": Signature(t.INT4, (t.TEXT, t.TEXT)),
    "split_part": Signature(t.TEXT, (t.TEXT, t.TEXT, t.INT4)),
    "left": Signature(t.TEXT, (t.TEXT, t.INT4)),
    "right": Signature(t.TEXT, (t.TEXT, t.INT4)),
    "lpad": Signature(t.TEXT, (t.TEXT, t.INT4, t.TEXT)),
    "md5": Signature(t.TEXT, (t.TEXT,)),
    "initcap": Signature(t.TEXT, (t.TEXT,)),
    "reverse": Signature(t.TEXT, (t.TEXT,)),
    "repeat": Signature(t.TEXT, (t.TEXT, t.INT4)),
    "translate": Signature(t.TEXT, (t.TEXT, t.TEXT, t.TEXT)),
    "regexp_replace": Signature(t.TEXT, (t.TEXT, t.TEXT, t.TEXT, t.TEXT)),
    "starts_with": Signature(t.BOOL, (t.TEXT, t.TEXT)),
    "format": Signature(t.TEXT, (t.TEXT, None), variadic=True),
    "concat_ws": Signature(t.TEXT, (t.TEXT, None), variadic=True),
    "octet_length": Signature(t.INT4, (None,)),
    "encode": Signature(t.TEXT, (PgType("bytea"), t.TEXT)),
    "decode": Signature(PgType("bytea"), (t.TEXT, t.TEXT)),
    "sha256": Signature(PgType("bytea"), (PgType("bytea"),)),
    "power": Signature(t.FLOAT8, (t.FLOAT8, t.FLOAT8)),
    "sqrt": Signature(t.FLOAT8, (t.FLOAT8,)),
    "ln": Signature(t.FLOAT8, (t.FLOAT8,)),
    "sign": Signature("arg0", (None,)),
    "trunc": Signature("arg0", (None, t.INT4)),
    "array_position": Signature(t.INT4, (None, None), nullable=True),
    "array_remove": Signature("arg0", (None, None)),
    "array_append": Signature("arg0", (None, None)),
    "array_cat": Signature("arg0", (None, None)),
    "array_upper": Signature(t.INT4, (None, t.INT4), nullable=True),
    "array_lower": Signature(t.INT4, (None, t.INT4), nullable=True),
    "array_to_string": Signature(t.TEXT, (None, t.TEXT)),
    "string_to_array": Signature(t.TEXT.array(), (t.TEXT, t.TEXT)),
    "unnest": Signature("elem0", (None,)),
    "generate_series": Signature("arg0", (None, None, None)),
    "jsonb_array_length": Signature(t.INT4, (t.JSONB,)),
    "jsonb_array_elements": Signature(t.JSONB, (t.JSONB,)),
    "jsonb_array_elements_text": Signature(t.TEXT, (t.JSONB,)),
    "jsonb_strip_nulls": Signature(t.JSONB, (t.JSONB,)),
    "jsonb_build_array": Signature(t.JSONB, (None,), variadic=True),
    "jsonb_insert": Signature(t.JSONB, (t.JSONB, t.TEXT.array(), t.JSONB, t.BOOL)),
    "jsonb_object_agg": Signature(t.JSONB, (None, None), aggregate=True),
    "json_agg": Signature(PgType("json"), (None,), aggregate=True),
    "to_json": Signature(PgType("json"), (None,)),
    "row_to_json": Signature(PgType("json"), (None,)),
    "stddev": Signature(t.NUMERIC_T, (None,), aggregate=True),
    "variance": Signature(t.NUMERIC_T, (None,), aggregate=True),
    "every": Signature(t.BOOL, (t.BOOL,), aggregate=True),
    "ntile": Signature(t.INT4, (t.INT4,)),
    "percent_rank": Signature(t.FLOAT8),
    "cume_dist": Signature(t.FLOAT8),
    "first_value": Signature("arg0", (None,), nullable=True),
    "last_value": Signature("arg0", (None,), nullable=True),
    "nth_value": Signature("arg0", (None, t.INT4), nullable=True),
}


#: Functions that only exist as window functions (Postgres rejects them without OVER).
WINDOW_ONLY = frozenset(
    {
        "row_number",
        "rank",
        "dense_rank",
        "percent_rank",
        "cume_dist",
        "ntile",
        "lag",
        "lead",
        "first_value",
        "last_value",
        "nth_value",
    }
)


#: The types min() and max() take (besides arrays and enums): Postgres has no max(bool),
#: max(uuid), max(bytea) or max(jsonb).
_ORDERABLE = t.NUMERIC | t.TEXTUAL | t.TEMPORAL | {"interval"}


class FunctionCalls(AnalyzerCore):
    """Function calls."""

    def function(self, node: exp.Func, scope: Scope) -> Typed:
        name = function_name(node)
        args: list[exp.Expr] = [a for a in node.iter_expressions() if not isinstance(a, (exp.Order, exp.Var))]
        if isinstance(node, exp.Count):
            for a in args:
                if not isinstance(a, exp.Star):
                    self.infer(a, scope)
            return Typed(t.INT8, False)
        if isinstance(node, exp.CurrentTimestamp):
            return Typed(t.TIMESTAMPTZ, False)
        if isinstance(node, exp.Uuid):
            return Typed(t.UUID, False)
        if isinstance(node, (exp.Coalesce, exp.Greatest, exp.Least)):
            return self.common_type_call(node, args, scope)
        if isinstance(node, exp.Nullif):
            typed = self.common_type_call(node, [node.this, node.expression], scope)
            return Typed(typed.type, True)
        if isinstance(node, exp.MakeInterval):
            return self.make_interval(node, scope)
        if isinstance(node, (exp.TimestampTrunc, exp.DateTrunc)) and isinstance(node.args.get("unit"), exp.Var):
            # date_trunc('day', ts): sqlglot keeps the unit apart and the timestamp in `this`,
            # whose type is the result's.
            return self.infer(node.this, scope)
        if isinstance(node, exp.ArrayAgg) and isinstance(node.this, exp.Order):
            # array_agg(x ORDER BY y): sqlglot wraps the argument in its ORDER BY.
            for ordered in node.this.expressions:
                self.infer(ordered.this if isinstance(ordered, exp.Ordered) else ordered, scope)
            element = self.infer(node.this.this, scope)
            array = element.type.array() if element.type is not None else None
            return Typed(array, element.nullable if self.window_depth else True)
        if name in WINDOW_ONLY and not isinstance(node.parent, exp.Window):
            self.error(f"window function {name}() requires an OVER clause", node)
        if name in ("sum", "avg") and args:
            return self.sum_avg(name, args[0], scope)
        signature = BUILTINS.get(name)
        if signature is None:
            name = self.written_name(node, name)
            self.error(
                f"function {name}() does not exist (protoc-gen-pydb knows the built-ins listed in docs/diagnostics.md)",
                node,
            )
            for a in args:
                self.infer(a, scope)
            return Typed(None, True)
        return self.builtin_call(name, signature, args, scope)

    def resolved_call(self, node: exp.Expr, call: ast.FuncCall, scope: Scope) -> Typed | None:
        """A call typed by PostgreSQL's overload resolution over the built-in catalog: each
        argument's type (an untyped `@param` or literal is `unknown`), the chosen overload's
        result, and what each untyped argument is coerced to, which types the parameter. None
        when sqlglot's node does not show the call's arguments one for one."""
        names = [str(part.sval) for part in call.funcname or () if isinstance(part, ast.String)]
        name = names[-1]
        schema = names[0] if len(names) > 1 else None
        args = self.call_args(node, len(call.args or ()))
        if args is None:
            return None
        arg_names = [a.name if isinstance(a, ast.NamedArgExpr) else None for a in call.args or ()]
        types: list[PgType] = []
        known = True
        for arg in args:
            if isinstance(arg, exp.Parameter) and self.param_types.get(arg.name) is not None:
                types.append(self.param_types[arg.name] or t.UNKNOWN)
            elif is_untyped(arg):
                types.append(t.UNKNOWN)
            else:
                typed = self.infer(arg, scope)
                types.append(typed.type or t.UNKNOWN)
                known = known and typed.type is not None
        if not known:
            return Typed(None, True)  # an argument's error is reported already
        candidates = self.builtins.functions(name) if schema in (None, "pg_catalog") else ()
        try:
            resolution = resolve_function(
                name,
                candidates,
                types,
                arg_names=arg_names if any(arg_names) else None,
                variadic_call=bool(call.func_variadic),
                params=[isinstance(a, exp.Parameter) for a in args],
                env=self.builtins,
            )
        except ResolveError as err:
            self.error(err.message + (f" ({err.note})" if err.note else ""), node)
            return Typed(None, True)
        nullable = False
        for arg, coerced in zip(args, resolution.arg_types, strict=True):
            typed = self.expect(arg, coerced, scope) if is_untyped(arg) else self.infer(arg, scope)
            nullable = nullable or typed.nullable
        in_window = isinstance(node.parent, exp.Window) or call.over is not None
        if resolution.kind == "window" and not in_window:
            self.error(f"window function {name} requires an OVER clause", node)
        if resolution.kind == "aggregate" and not in_window:
            nullable = name != "count"  # over no rows every aggregate but count is NULL
        elif resolution.kind == "window":
            nullable = name not in _WINDOW_NOT_NULL
        elif name in _NEVER_NULL:
            nullable = False
        elif name in _NULL_FROM_VALUES:
            nullable = True
        if resolution.out_columns:
            self.row_columns[id(node)] = resolution.out_columns
        return Typed(resolution.result, nullable)

    def call_args(self, node: exp.Expr, count: int) -> list[exp.Expr] | None:
        """The arguments of a call as sqlglot holds them, in the written order: the node's own
        operands, or those of the one expression sqlglot rewrote the call into (`div(a, b)` is a
        cast of `a / b`). None when they do not match PostgreSQL's `count` arguments."""
        current: exp.Expr = node
        for _ in range(3):
            children = [c for c in current.iter_expressions() if not isinstance(c, (exp.DataType, exp.Order))]
            if any(isinstance(c, (exp.Var, exp.Star, exp.Kwarg)) for c in children):
                return None
            if len(children) == count:
                spans = [self.span(c) for c in children]
                starts = [s.start for s in spans if s is not None]
                if len(starts) == len(children):
                    return [c for _, c in sorted(zip(starts, children, strict=True), key=lambda pair: pair[0])]
                return children
            if len(children) != 1:
                return None
            current = children[0]
        return None

    def ordered_set_aggregate(self, node: exp.WithinGroup, scope: Scope) -> Typed:
        """`percentile_cont(f) WITHIN GROUP (ORDER BY x)` and its kin: the direct arguments are
        fractions, the ordering gives the sorted input. NULL over no rows, like any aggregate."""
        order = node.expression
        keys = (
            [o.this if isinstance(o, exp.Ordered) else o for o in order.expressions]
            if isinstance(order, exp.Order)
            else []
        )
        sorted_by = [self.infer(k, scope).type for k in keys]
        call = node.this
        name = function_name(call) if isinstance(call, exp.Func) else ""
        direct = (
            [a for a in call.iter_expressions() if not isinstance(a, exp.Order)] if isinstance(call, exp.Func) else []
        )
        fractions = [self.expect(a, t.FLOAT8, scope).type for a in direct] if name.startswith("percentile") else []
        for a in direct if not name.startswith("percentile") else []:
            self.infer(a, scope)
        many = any(f is not None and f.is_array for f in fractions)
        key = sorted_by[0] if len(sorted_by) == 1 else None
        result: PgType | None
        if name == "percentile_cont":
            result = t.INTERVAL if key == t.INTERVAL else t.FLOAT8
        elif name in ("percentile_disc", "mode"):
            result = key
        elif name in ("rank", "dense_rank"):
            return Typed(t.INT8, False)  # hypothetical-set aggregates: never NULL
        elif name in ("percent_rank", "cume_dist"):
            return Typed(t.FLOAT8, False)
        else:
            self.error(f"function {name}() is not an ordered-set aggregate (WITHIN GROUP)", node)
            return Typed(None, True)
        return Typed(result.array() if many and result is not None else result, True)

    def common_type_call(self, node: exp.Func, args: list[exp.Expr], scope: Scope) -> Typed:
        """COALESCE, GREATEST, LEAST, NULLIF: the arguments share the first typed one's type;
        parameters and string literals take it. COALESCE is NULL only if every argument is."""
        typed_args = [None if is_untyped(a) else self.infer(a, scope) for a in args]
        common = next((a.type for a in typed_args if a is not None and a.type not in (None, t.UNKNOWN, t.NULL)), None)
        if common is None and any(isinstance(a, exp.Literal) and a.is_string for a in args):
            common = t.TEXT  # Postgres resolves all-unknown arguments to text
        nullable_args: list[bool] = []
        for a, typed in zip(args, typed_args, strict=True):
            if typed is None:
                typed = self.expect(a, common, scope) if common is not None else self.infer(a, scope)
            elif common is not None and typed.type is not None:
                self.check_comparable(typed.type, common, a)
            nullable_args.append(typed.nullable)
        if isinstance(node, exp.Coalesce):
            return Typed(common, all(nullable_args))
        return Typed(common, any(nullable_args))

    def builtin_call(self, name: str, signature: Signature, args: list[exp.Expr], scope: Scope) -> Typed:
        """A call of a known built-in: arguments are checked against its signature."""
        typed_args: list[Typed] = []
        for i, a in enumerate(args):
            if isinstance(a, exp.Star):
                continue
            want = signature.args[i] if i < len(signature.args) else None
            if want is None and signature.variadic and signature.args:
                want = signature.args[-1]
            typed_args.append(self.expect(a, want, scope) if want is not None else self.infer(a, scope))
        if name in ("min", "max") and typed_args and typed_args[0].type is not None:
            arg = typed_args[0].type
            if not (arg.is_array or arg.is_enum or arg.name in _ORDERABLE or arg == t.UNKNOWN):
                self.error(f"function {name}({describe(arg)}) does not exist", args[0])
        result: PgType | None
        ret = signature.returns
        if isinstance(ret, str):
            # "argN": the N-th argument's type; "argN[]": an array of it; "elemN": its element type.
            m = re.fullmatch(r"(arg|elem)(\d+)(\[\])?", ret)
            assert m is not None, ret
            index = int(m.group(2))
            base = typed_args[index].type if index < len(typed_args) else None
            if base is None or base in (t.UNKNOWN, t.NULL):
                result = None
            elif m.group(1) == "elem":
                result = base.element if base.is_array else None
            else:
                result = base.array() if m.group(3) else base
        else:
            result = ret
        if signature.aggregate and not self.window_depth:
            nullable = name != "count"
        else:
            nullable = signature.nullable or any(a.nullable for a in typed_args)
        return Typed(result, nullable)

    def written_name(self, node: exp.Func, fallback: str) -> str:
        """A function's name as the statement spells it (sqlglot renames some it models)."""
        span = span_of(node)
        if span is not None:
            m = re.match(r"\s*([A-Za-z_][\w.]*)\s*\(", self.sql[span.start :])
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
                    self.error(
                        f"make_interval() has no argument {part} (it takes {', '.join(positional)})",
                        span=self.kwarg_span(value) or self.span(node),
                    )
                    self.infer(value, scope)
                    continue
            typed = self.expect(value, t.FLOAT8 if part == "secs" else t.INT4, scope)
            nullable = nullable or typed.nullable
        return Typed(t.INTERVAL, nullable)

    def sum_avg(self, name: str, arg: exp.Expr, scope: Scope) -> Typed:
        """sum() and avg() widen like Postgres: sum(int4) is int8, sum(int8) and avg(int) numeric."""
        typed = self.infer(arg, scope)
        arg_type = typed.type
        # NULL over no rows; over a window frame (which holds the current row) only if the argument is.
        nullable = typed.nullable if self.window_depth else True
        if arg_type is None or arg_type in (t.UNKNOWN, t.NULL):
            return Typed(None if arg_type is None else t.NUMERIC_T, True)
        if arg_type == t.INTERVAL:
            return Typed(t.INTERVAL, nullable)
        if arg_type.is_array or arg_type.name not in t.NUMERIC:
            self.error(f"function {name}({describe(arg_type)}) does not exist; it takes numbers or intervals", arg)
            return Typed(None, True)
        if arg_type.name in ("float4", "float8"):
            return Typed(arg_type if name == "sum" else t.FLOAT8, nullable)
        if name == "sum" and arg_type.name in ("int2", "int4"):
            return Typed(t.INT8, nullable)
        return Typed(t.NUMERIC_T, nullable)


#: Built-ins above that PostgreSQL marks volatile (pg_proc.provolatile = 'v'), and the
#: side-effecting ones a statement may call without the analyzer typing them.
_VOLATILE = frozenset(
    {
        "clock_timestamp",
        "gen_random_uuid",
        "random",
        "pg_notify",
        "pg_advisory_lock",
        "pg_advisory_xact_lock",
        "pg_advisory_lock_shared",
        "pg_try_advisory_lock",
        "pg_try_advisory_xact_lock",
        "pg_advisory_unlock",
        "nextval",
        "setval",
        "timeofday",
        "txid_current",
    }
)


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


def is_volatile(node: exp.Func) -> bool:
    """Whether the call may change data or give a different value each time it is evaluated."""
    return function_name(node) in _VOLATILE
