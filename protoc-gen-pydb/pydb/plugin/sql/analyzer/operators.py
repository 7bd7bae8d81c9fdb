"""Operator expressions: comparisons (incl. rows, ANY/ALL, IN), arithmetic (numbers, dates,
intervals), `||`, json/jsonb operators and containment."""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from ..catalog import types as t
from ..catalog.types import PgType
from ..rules.casts import assignable, describe, is_untyped, same_family, wider
from ..rules.ranges import range_operator
from ..rules.resolution import ResolveError, resolve_operator
from .literal_casts import CastsAndLiterals
from .recursion import TypesExpressions, TypesQueries
from .scope import Scope, Typed
from .state import StatementState

#: How operators are written, for messages.
_OPERATORS: dict[type[exp.Expr], str] = {
    exp.EQ: "=",
    exp.NEQ: "<>",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mul: "*",
    exp.Div: "/",
    exp.Mod: "%",
    exp.ArrayContainsAll: "@>",
    exp.ArrayContainedBy: "<@",
    exp.ArrayOverlaps: "&&",
}


CONTAINMENT = (exp.ArrayContainsAll, exp.ArrayContainedBy, exp.ArrayOverlaps)


KEY_TESTS = (exp.JSONBContainsTopKey, exp.JSONBContainsAnyTopKeys, exp.JSONBContainsAllTopKeys)


COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.NullSafeEQ, exp.NullSafeNEQ)


ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)


def _op(node: exp.Expr) -> str:
    return _OPERATORS.get(type(node), "?")


class Operators:
    """Operator expressions: comparison, IN/ANY, arithmetic, `||`, json, containment. Types
    operands through `self.expr`, subqueries through `self.queries`, literals by `self.casts`."""

    #: The operands' typing: `ExpressionTyping` (connected by `Analyzer.__init__`).
    expr: TypesExpressions
    #: The subqueries' typing: `Statements` (connected by `Analyzer.__init__`).
    queries: TypesQueries

    def __init__(self, state: StatementState, casts: CastsAndLiterals) -> None:
        self.state = state
        self.params = state.params
        self.casts = casts

    def operator(
        self, symbol: str, left: exp.Expr, right: exp.Expr, node: exp.Expr, scope: Scope, *, value_of_left: bool = False
    ) -> Typed:
        """`left symbol right` typed by PostgreSQL's operator resolution over the built-in
        catalog; an untyped side (`@param`, 'literal') takes the operand type it is coerced to.
        `value_of_left`: the type is the left operand's as the operator takes it (NULLIF)."""
        sides = []
        for side in (left, right):
            if isinstance(side, exp.Parameter) and self.params.types.get(side.name) is not None:
                sides.append(Typed(self.params.types[side.name], side.name in self.params.nullable))
            elif is_untyped(side):
                sides.append(Typed(t.UNKNOWN, False))
            else:
                sides.append(self.expr.infer(side, scope))
        if sides[0].type is None or sides[1].type is None:
            return Typed(None, True)
        ranges = {name: r.subtype for name, r in self.state.catalog.ranges.items()}
        on_range = range_operator(symbol, sides[0].type, sides[1].type, ranges)
        if on_range is not None:  # a range type the schema declares, under pg_catalog's anyrange operators
            result, left_type, right_type = on_range
            nullable = False
            for side, given, operand_type in ((left, sides[0], left_type), (right, sides[1], right_type)):
                operand = self.expr.expect(side, operand_type, scope) if is_untyped(side) else given
                nullable = nullable or operand.nullable
            return Typed(left_type if value_of_left else result, nullable)
        try:
            resolution = resolve_operator(
                symbol, self.state.builtins.operators(symbol), sides[0].type, sides[1].type, env=self.state.builtins
            )
        except ResolveError as err:
            self.state.error(err.message + (f" ({err.note})" if err.note else ""), node)
            return Typed(None, True)
        nullable = False
        for side, typed, coerced in ((left, sides[0], resolution.left), (right, sides[1], resolution.right)):
            if is_untyped(side) and coerced is not None:
                typed = self.expr.expect(side, coerced, scope)
            nullable = nullable or typed.nullable
        return Typed(resolution.left if value_of_left else resolution.result, nullable)

    def expect_json(self, node: exp.Expr, scope: Scope, op: str) -> Typed:
        """The left side of a json operator: a json or jsonb value (a parameter becomes jsonb)."""
        if is_untyped(node):
            return self.expr.expect(node, t.JSONB, scope)
        typed = self.expr.infer(node, scope)
        if typed.type is not None and typed.type.name not in t.JSON:
            self.state.error(f"operator does not exist: {describe(typed.type)} {op} ...; it takes json or jsonb", node)
            return Typed(None, typed.nullable)
        return typed

    def json_extract(self, node: exp.Expr, scope: Scope) -> Typed:
        """`->`/`->>` (a key or index) and `#>`/`#>>` (a text[] path)."""
        as_text = isinstance(node, (exp.JSONExtractScalar, exp.JSONBExtractScalar))
        path_op = isinstance(node, (exp.JSONBExtract, exp.JSONBExtractScalar))
        op = ("#>>" if as_text else "#>") if path_op else ("->>" if as_text else "->")
        subject = self.expect_json(node.this, scope, op)
        key = node.expression
        if isinstance(key, exp.Parameter):
            self.params.bind(key, t.TEXT.array() if path_op else t.TEXT)
        elif isinstance(key, exp.Expr) and not isinstance(key, (exp.JSONPath, exp.Literal)):
            key_type = self.expr.infer(key, scope).type
            # A key is text, an index an integer; a path (#>, #>>) is text[].
            fits = (
                (key_type == t.TEXT.array())
                if path_op
                else (key_type is not None and key_type.name in t.TEXTUAL | t.INTEGER and not key_type.is_array)
            )
            if key_type is not None and key_type not in (t.UNKNOWN, t.NULL) and not fits:
                self.state.error(
                    f"operator does not exist: {describe(subject.type or t.JSONB)} {op} {describe(key_type)}", node
                )
        if as_text:
            return Typed(t.TEXT, True)
        return Typed(subject.type if subject.type is not None else t.JSONB, True)

    def containment(self, node: exp.Expr, scope: Scope) -> Typed:
        """`@>`, `<@` (jsonb or arrays) and `&&` (arrays): both sides of one type."""
        op = _OPERATORS.get(type(node), "&&")
        left, right = node.this, node.expression
        lt = self.expr.infer(left, scope) if not is_untyped(left) else Typed(None, False)
        rt = self.expr.infer(right, scope) if not is_untyped(right) else Typed(None, False)
        known = lt.type if lt.type not in (None, t.UNKNOWN, t.NULL) else rt.type
        if known is None or known in (t.UNKNOWN, t.NULL):
            known = t.JSONB if op != "&&" else None
        if known is not None and not known.is_array and known.name not in t.JSON:
            # ranges and multiranges (`@>` an element, `&&`, `<@`), geometry, tsquery...:
            # PostgreSQL's operator resolution over the operators the database has.
            return self.operator(op, left, right, node, scope)
        if known is not None:
            if not known.is_array and (known.name not in t.JSON or op == "&&"):
                self.state.error(f"operator does not exist: {describe(known)} {op} ...; it takes arrays or jsonb", node)
                return Typed(t.BOOL, True)
            for side in (left, right):
                if is_untyped(side):
                    self.expr.expect(side, known, scope)
            if lt.type is not None and rt.type is not None and lt.type.is_array and rt.type.is_array:
                if lt.type != rt.type:  # anyarray on both sides: one array type, no coercion
                    self.state.error(f"operator does not exist: {describe(lt.type)} {op} {describe(rt.type)}", node)
            elif lt.type is not None and rt.type is not None and lt.type != rt.type:
                self.check_comparable(lt.type, rt.type, node)
        return Typed(t.BOOL, lt.nullable or rt.nullable)

    def concat(self, node: exp.DPipe, scope: Scope) -> Typed:
        """`||`: jsonb || jsonb, array || array (or element), else text concatenation."""
        left, right = node.this, node.expression
        lt = self.expr.infer(left, scope) if not is_untyped(left) else Typed(None, False)
        rt = self.expr.infer(right, scope) if not is_untyped(right) else Typed(None, False)
        nullable = lt.nullable or rt.nullable
        for typed, other, other_typed in ((lt, right, rt), (rt, left, lt)):
            kind = typed.type
            if kind is not None and (kind.is_array or kind.name == "jsonb"):
                if is_untyped(other):
                    self.expr.expect(other, kind, scope)
                elif other_typed.type is not None and not (
                    assignable(other_typed.type, kind) or assignable(other_typed.type, kind.element)
                ):
                    self.state.error(
                        f"operator does not exist: {describe(lt.type or kind)} || {describe(rt.type or kind)}", node
                    )
                return Typed(kind, nullable)
        for side in (left, right):
            if is_untyped(side):
                self.expr.expect(side, t.TEXT, scope)
        return Typed(t.TEXT, nullable)

    def comparison(self, node: exp.Expr, scope: Scope) -> Typed:
        left, right = node.this, node.expression
        if isinstance(right, (exp.Any, exp.All)):
            lt = self.expr.infer(left, scope)
            inner = right.this
            if isinstance(inner, (exp.Subquery, exp.Select)):
                rows = self.queries.query(inner.this if isinstance(inner, exp.Subquery) else inner, Scope(parent=scope))
                if lt.type is not None and rows and rows[0][1].type is not None:
                    self.check_comparable(lt.type, rows[0][1].type, node)
            elif lt.type is not None and lt.type not in (t.UNKNOWN, t.NULL) and is_untyped(inner):
                self.expr.expect(inner, lt.type.array(), scope)
            elif lt.type is not None and lt.type not in (t.UNKNOWN, t.NULL):
                # ARRAY[...] and other typed arrays resolve their own type first (ARRAY[@a] is
                # text[]); then the element must compare with the left side.
                at = self.expr.infer(inner, scope)
                if at.type is not None and at.type.is_array:
                    self.check_comparable(lt.type, at.type.element, node)
                elif at.type is not None:
                    self.expr.expect(inner, lt.type.array(), scope)
            else:
                at = self.expr.infer(inner, scope)
                if at.type is not None and at.type.is_array and isinstance(left, exp.Parameter):
                    # the scalar operator reduces an element domain to its base type
                    self.params.bind(left, replace(at.type.element, domain=None))
                elif at.type is not None and at.type.is_array and isinstance(left, exp.Literal) and left.is_string:
                    self.casts.check_literal(left, at.type.element)
            return Typed(t.BOOL, True)
        return self.compare(left, right, node, scope)

    def compare(self, left: exp.Expr, right: exp.Expr, node: exp.Expr, scope: Scope) -> Typed:
        """`left op right`: an untyped side (parameter, string literal) takes the other's type;
        two typed sides must be comparable. Rows `(a, b) = (@x, @y)` compare element-wise."""
        if isinstance(left, exp.Tuple) and isinstance(right, exp.Tuple):
            if len(left.expressions) != len(right.expressions):
                self.state.error(
                    f"row comparison needs rows of the same length ({len(left.expressions)} vs "
                    f"{len(right.expressions)})",
                    node,
                )
            pairs = zip(left.expressions, right.expressions, strict=False)
            results = [self.compare(a, b, node, scope) for a, b in pairs]
            return Typed(t.BOOL, any(r.nullable for r in results))
        untyped_left, untyped_right = self.params.untyped(left), self.params.untyped(right)
        lt = self.expr.infer(left, scope) if not untyped_left else Typed(None, False)
        rt = self.expr.infer(right, scope) if not untyped_right else Typed(None, False)
        # A parameter an earlier use typed, next to a type it cannot meet: reported as the
        # parameter's two types (PostgreSQL: operator does not exist: uuid = bigint).
        if isinstance(left, exp.Parameter) and _conflict(lt.type, rt.type):
            untyped_left, lt = True, Typed(None, False)
        elif isinstance(right, exp.Parameter) and _conflict(rt.type, lt.type):
            untyped_right, rt = True, Typed(None, False)
        if untyped_left and rt.type is not None:
            lt = self.expr.expect(left, self.operand_type(node, rt.type, known_left=False), scope)
        elif untyped_right and lt.type is not None:
            rt = self.expr.expect(right, self.operand_type(node, lt.type, known_left=True), scope)
        elif lt.type is not None and rt.type is not None:
            self.check_comparable(lt.type, rt.type, node)
        elif untyped_left and untyped_right:
            # unknown = unknown: Postgres compares as text (`@a = 'x'`, `@a = @b`).
            for side in (left, right):
                if isinstance(side, exp.Parameter):
                    self.params.bind(side, t.TEXT)
        if any(s.type is not None and s.type.name == "json" and not s.type.is_array for s in (lt, rt)):
            op = _OPERATORS.get(type(node), "compare")
            self.state.error(f"operator does not exist: json {op} json (json cannot be compared; use jsonb)", node)
        return Typed(t.BOOL, lt.nullable or rt.nullable)

    def operand_type(self, node: exp.Expr, known: PgType, known_left: bool) -> PgType:
        """The type an untyped operand (`@param`, 'literal') of a comparison takes: the one the
        operator PostgreSQL chooses gives it (`varchar_col = @p`: text), else the other side's."""
        op = _OPERATORS.get(type(node))
        if op is None or known in (t.UNKNOWN, t.NULL):
            return known
        left, right = (known, t.UNKNOWN) if known_left else (t.UNKNOWN, known)
        try:
            resolution = resolve_operator(op, self.state.builtins.operators(op), left, right, env=self.state.builtins)
        except ResolveError:
            return known
        found = resolution.right if known_left else resolution.left
        return found if found is not None and found.name not in ("anyenum", "anyarray", "anyelement") else known

    def check_comparable(self, a: PgType, b: PgType, node: exp.Expr) -> None:
        if t.UNKNOWN in (a, b) or t.NULL in (a, b):
            return
        if assignable(a, b) or assignable(b, a):
            return
        op = _OPERATORS.get(type(node), "=")
        try:  # an operator of its own, such as xid = integer (`xmax = 0`)
            resolve_operator(op, self.state.builtins.operators(op), a, b, env=self.state.builtins)
        except ResolveError:
            self.state.error(f"operator does not exist: {describe(a)} {op} {describe(b)}", node)

    def in_(self, node: exp.In, scope: Scope) -> Typed:
        subject = self.expr.infer(node.this, scope) if not is_untyped(node.this) else Typed(None, False)
        query = node.args.get("query")
        if query is not None:
            rows = self.queries.query(query.this if isinstance(query, exp.Subquery) else query, Scope(parent=scope))
            if isinstance(node.this, exp.Tuple):  # (a, b) IN (SELECT x, y ...): column by column
                subjects = node.this.expressions
                if len(rows) != len(subjects):
                    self.state.error(
                        f"subquery has too {'many' if len(rows) > len(subjects) else 'few'} columns", query
                    )
                for value, (_, row, _) in zip(subjects, rows, strict=False):
                    if is_untyped(value) and row.type is not None:
                        self.expr.expect(value, row.type, scope)
                        continue
                    typed = self.expr.infer(value, scope)
                    if typed.type is not None and row.type is not None:
                        self.check_comparable(typed.type, row.type, node)
                return Typed(t.BOOL, True)
            if len(rows) != 1:
                self.state.error(f"subquery has too {'many' if len(rows) > 1 else 'few'} columns", query)
            elif subject.type is not None and rows[0][1].type is not None:
                self.check_comparable(subject.type, rows[0][1].type, node)
            return Typed(t.BOOL, True)
        if isinstance(node.this, exp.Tuple):  # (a, b) IN ((@x, 1), (@y, 2))
            row_results = [self.compare(node.this, e, node, scope) for e in node.expressions]
            return Typed(t.BOOL, any(r.nullable for r in row_results))
        for e in node.expressions:
            if subject.type is not None:
                self.expr.expect(e, subject.type, scope)
            else:
                self.expr.infer(e, scope)
        return Typed(t.BOOL, subject.nullable)

    def arithmetic(self, node: exp.Expr, scope: Scope) -> Typed:
        left, right = node.this, node.expression
        lt = self.expr.infer(left, scope)
        rt = self.expr.infer(right, scope)
        if any(
            s.type is not None and not s.type.is_array and s.type.name in self.state.catalog.ranges for s in (lt, rt)
        ):
            return self.operator(_op(node), left, right, node, scope)  # union, intersection, difference
        nullable = lt.nullable or rt.nullable
        a, b = lt.type, rt.type
        # An untyped parameter next to a date, time or interval: PostgreSQL's operator
        # resolution decides (`ts - @t` is timestamp - timestamp, `ts + @d` takes an interval,
        # `current_date + @n` is ambiguous).
        for side, other in ((left, b), (right, a)):
            if (
                isinstance(side, exp.Parameter)
                and self.params.types.get(side.name) is None
                and other is not None
                and not other.is_array
                and (other.name in t.TEMPORAL or other == t.INTERVAL)
            ):
                return self.operator(_op(node), left, right, node, scope)
        # A parameter takes the other operand's type.
        for side, other in ((left, b), (right, a)):
            if isinstance(side, exp.Parameter) and self.params.types.get(side.name) is not None:
                continue  # typed by an earlier use: `created_at > @t AND ... @t + INTERVAL '1 day'`
            if isinstance(side, exp.Parameter) and other is not None:
                if other == t.INTERVAL and isinstance(node, (exp.Mul, exp.Div)):
                    self.params.bind(side, t.FLOAT8)
                elif other.name in t.TEMPORAL:
                    self.params.bind(side, t.INTERVAL)
                else:
                    self.params.bind(side, other)
            elif isinstance(side, exp.Literal) and side.is_string and other is not None:
                # `now() + '5 seconds'`: the literal is read as what the operator needs.
                if (other.name in t.TEMPORAL and isinstance(node, exp.Add)) or (
                    other == t.INTERVAL and isinstance(node, (exp.Add, exp.Sub))
                ):
                    self.casts.check_literal(side, t.INTERVAL)
                elif other.name in t.NUMERIC and not other.is_array:
                    self.casts.check_literal(side, other)
        a = lt.type if not isinstance(left, exp.Parameter) else self.params.types.get(left.name)
        b = rt.type if not isinstance(right, exp.Parameter) else self.params.types.get(right.name)
        if a is None or b is None:
            return Typed(
                a or b if isinstance(node, (exp.Add, exp.Sub)) and (a or b) and (a or b) != t.INTERVAL else None,
                nullable,
            )
        if t.NULL in (a, b):
            # `x + NULL` is NULL of x's type (NULL is untyped, like a literal).
            return Typed(b if a == t.NULL else a, True)
        # date +/- integer is a date (days); date - date is a number of days.
        if a.name == "date" and b.name in t.INTEGER and isinstance(node, (exp.Add, exp.Sub)):
            return Typed(a, nullable)
        if a.name in t.INTEGER and b.name == "date" and isinstance(node, exp.Add):
            return Typed(b, nullable)
        if a.name == "date" and b.name == "date" and isinstance(node, exp.Sub):
            return Typed(t.INT4, nullable)
        if (a.name in t.TEMPORAL and b == t.INTERVAL) or (a == t.INTERVAL and b.name in t.TEMPORAL):
            # ts + interval, interval + ts, ts - interval (a date becomes a timestamp).
            moment = a if a.name in t.TEMPORAL else b
            if isinstance(node, exp.Add) or (isinstance(node, exp.Sub) and moment is a):
                return Typed(PgType("timestamp") if moment.name == "date" else moment, nullable)
            self.state.error(f"operator does not exist: {describe(a)} {_op(node)} {describe(b)}", node)
            return Typed(None, nullable)
        if a.name in t.TEMPORAL and b.name in t.TEMPORAL and isinstance(node, exp.Sub):
            return Typed(t.INTERVAL, nullable)
        if t.INTERVAL in (a, b) and isinstance(node, (exp.Mul, exp.Div)):
            # interval * n, n * interval and interval / n, n a number (or a literal read as one).
            other = b if a == t.INTERVAL else a
            number = other.name in t.NUMERIC or other == t.UNKNOWN
            if number and not (isinstance(node, exp.Div) and b == t.INTERVAL):
                return Typed(t.INTERVAL, nullable)
            self.state.error(f"operator does not exist: {describe(a)} {_op(node)} {describe(b)}", node)
            return Typed(None, nullable)
        if a == t.INTERVAL and b == t.INTERVAL:
            return Typed(t.INTERVAL, nullable)
        if a.name == "jsonb" and isinstance(node, exp.Sub) and (b.name in t.INTEGER or b.name in t.TEXTUAL):
            return Typed(a, nullable)  # jsonb - key, jsonb - index, jsonb - text[]
        if a.name in t.NUMERIC and b.name in t.NUMERIC and not (a.is_array or b.is_array):
            try:  # PostgreSQL's operator for the pair (float4 + numeric is float8)
                symbol = _op(node)
                resolution = resolve_operator(
                    symbol, self.state.builtins.operators(symbol), a, b, env=self.state.builtins
                )
                return Typed(resolution.result, nullable)
            except ResolveError:
                return Typed(wider(a, b), nullable)
        if t.UNKNOWN in (a, b):
            known = b if a == t.UNKNOWN else a
            if known == t.UNKNOWN:
                self.state.error(f"operator is not unique: unknown {_op(node)} unknown (cast one side)", node)
                return Typed(None, nullable)
            if known.name in t.TEMPORAL and isinstance(node, exp.Sub) and a != t.UNKNOWN:
                return Typed(t.INTERVAL, nullable)  # ts - 'literal' is ts - ts, as Postgres reads it
            # The literal takes the type the operator needs; only these operators exist.
            add_sub = isinstance(node, (exp.Add, exp.Sub))
            if (
                (known.name in t.NUMERIC and not known.is_array)
                or (known.name in t.TEMPORAL and add_sub)
                or (known.name == "jsonb" and isinstance(node, exp.Sub) and a != t.UNKNOWN)
            ):
                return Typed(known, nullable)
        try:  # any other operator of the pair: the catalog's, an extension's (pg_trgm's text % text)
            symbol = _op(node)
            resolution = resolve_operator(symbol, self.state.builtins.operators(symbol), a, b, env=self.state.builtins)
            return Typed(resolution.result, nullable)
        except ResolveError:
            pass
        self.state.error(f"operator does not exist: {describe(a)} {_op(node)} {describe(b)}", node)
        return Typed(None, nullable)


def _conflict(param: PgType | None, other: PgType | None) -> bool:
    return (
        param is not None and other is not None and other not in (t.UNKNOWN, t.NULL) and not same_family(param, other)
    )
