"""Queries: SELECT (incl. set operations and VALUES), their select lists, `*` expansions, LIMIT
and OFFSET; the rows of any statement that may stand in a CTE (INSERT, UPDATE and DELETE
themselves are `writes.py`'s)."""

from __future__ import annotations

from sqlglot import exp

from ...diagnostics import SqlSpan
from ..catalog import types as t
from ..catalog.identifiers import quote_ident
from ..catalog.types import PgType, span_of
from ..rules.casts import assignable, describe, is_untyped
from ..rules.coercion import ResolveError, common_type, require_equality
from ..rules.literals import is_int
from .expressions import ExpressionTyping, output_name
from .from_items import FromItems
from .grouping import Grouping, grouping_items, sometimes_grouped
from .result import Expansion
from .scope import Relation, Scope, StarColumn, Typed, all_relations, local_column_names, row_type_columns
from .state import StatementState


class Statements:
    """SELECT, VALUES, set operations and their output columns. Scopes come from
    `self.from_items`, expressions are typed by `self.expr`, grouping checked by `self.grouping`."""

    def __init__(
        self, state: StatementState, expr: ExpressionTyping, from_items: FromItems, grouping: Grouping
    ) -> None:
        self.state = state
        self.params = state.params
        self.expr = expr
        self.from_items = from_items
        self.grouping = grouping

    def query(self, node: exp.Expr, scope: Scope) -> list[tuple[str, Typed, SqlSpan | None]]:
        if isinstance(node, exp.Subquery):
            return self.query(node.this, scope)
        if isinstance(node, (exp.Union, exp.Intersect, exp.Except)):
            scope = self.from_items.with_ctes(node, scope)
            # A branch that is a plain SELECT leaves its untyped outputs (`SELECT @u`, 'x', NULL)
            # unresolved: the set operation's common type is theirs (PostgreSQL's
            # transformSetOperationTree); a nested set operation or VALUES resolved its own.
            branches = [_unwrap_subquery(node.this), _unwrap_subquery(node.expression)]
            self.state.unresolved_outputs.update(id(b) for b in branches if isinstance(b, exp.Select))
            left = self.query(node.this, scope)
            right = self.query(node.expression, scope)
            if len(left) != len(right):
                self.state.error(
                    f"each side of {type(node).__name__.upper()} must have the same number of columns ({len(left)} vs {len(right)})",
                    node,
                )
            cells = [_untyped_outputs(b) for b in branches]
            equality_missing = False
            merged = []
            for i, (name, typed, span) in enumerate(left):
                other = right[i][1] if i < len(right) else typed
                untyped = [cell for side in cells if (cell := side.get(i)) is not None]
                types = [
                    t.UNKNOWN if i in side and x.type in (None, t.UNKNOWN, t.NULL) else x.type
                    for side, x in zip(cells, (typed, other), strict=True)
                ]
                known = types[1] if types[0] is None else types[0] if types[1] is None else None
                if None not in types:
                    known = self.common_type([x for x in types if x is not None], type(node).__name__.upper(), span)
                for cell in untyped:
                    if known is not None:
                        self.expr.expect(cell, known, scope)
                if node.args.get("distinct") and known is not None and not equality_missing:
                    try:  # without ALL the rows are compared: json, void cannot be
                        require_equality(known, env=self.state.builtins)
                    except ResolveError as err:
                        self.state.error(err.message, span=span)
                        equality_missing = True
                merged.append((name, Typed(known, typed.nullable or other.nullable), span))
            self.limit_offset(node, scope)  # (SELECT ...) UNION (SELECT ...) LIMIT @n OFFSET @m
            return merged
        if isinstance(node, exp.Values):
            return self.values_rows(node, scope)
        if not isinstance(node, exp.Select):
            self.state.error(f"unsupported query {type(node).__name__}", node)
            return []
        scope = self.from_items.with_ctes(node, scope)
        local = Scope(parent=scope)
        self.from_items.from_clause(node, local)
        # The parameters are listed WHERE's first, then GROUP BY's, then HAVING's, as before the
        # select list; they are typed in PostgreSQL's order below.
        self.list_params(node.args.get("where"))
        group = node.args.get("group")
        # Typed after ORDER BY (GROUP BY, DISTINCT ON) and LIMIT (WINDOW), as PostgreSQL's
        # transformSelectStmt does; listed here, in the order they always were.
        late_keys: list[exp.Expr] = []
        if group is not None:
            output_aliases = {e.alias for e in node.expressions if isinstance(e, exp.Alias)}
            for g in grouping_items(group):
                if (
                    isinstance(g, exp.Column)
                    and not g.table
                    and g.name in output_aliases
                    and g.name not in local_column_names(local)
                ):
                    continue  # GROUP BY an output name: checked as that output
                late_keys.append(g)
                self.list_params(g)
            # ROLLUP, CUBE, GROUPING SETS: in the rows of a set that leaves a column out, it is NULL.
            nulled = sometimes_grouped(group)
            for rel in local.relations:
                rel.columns = [
                    (n, Typed(typed.type, True, typed.embedded) if _grouped_sql(rel, n) & nulled else typed)
                    for n, typed in rel.columns
                ]
            local.merged = {n: Typed(ty.type, True) if n in nulled else ty for n, ty in local.merged.items()}
        self.list_params(node.args.get("having"))
        windows = node.args.get("windows") or []  # WINDOW w AS (PARTITION BY ... ORDER BY ...)
        for window in windows:
            self.list_params(window)
        distinct = node.args.get("distinct")
        if isinstance(distinct, exp.Distinct) and distinct.args.get("on") is not None:
            on = distinct.args["on"]
            for e in on.expressions if isinstance(on, exp.Tuple) else [on]:
                late_keys.append(e)
                self.list_params(e)
        outputs = self.projections(node, node.expressions, local)
        # PostgreSQL's transformSelectStmt types the select list before WHERE and HAVING: a
        # parameter's first typing use in that order fixes its type.
        for clause in ("where", "having"):
            condition = node.args.get(clause)
            if condition is not None:
                self.expr.expect(condition.this, t.BOOL, local)
        local.output = {n: typed for n, typed, _ in outputs}
        order = node.args.get("order")
        if order is not None:
            for o in order.expressions:
                key = o.this if isinstance(o, exp.Ordered) else o
                if isinstance(key, exp.Literal) and not key.is_string and is_int(str(key.this)):
                    if not 1 <= int(str(key.this)) <= len(outputs):
                        self.state.error(f"ORDER BY position {key.this} is not in select list", key)
                elif isinstance(key, (exp.Literal, exp.Boolean, exp.Null)):
                    self.state.error("non-integer constant in ORDER BY", key)
                elif isinstance(key, exp.Column) and not key.table and key.name in local.output:
                    pass  # a bare name is an output column first (SQL92), even one FROM has twice
                else:
                    self.grouping_key(key, local, allow_output=True)
            if isinstance(distinct, exp.Distinct) and distinct.args.get("on") is not None:
                self.grouping.check_distinct_on(distinct.args["on"], order)
        for key in late_keys:
            self.grouping_key(key, local)
        self.limit_offset(node, local)
        for window in windows:
            self.expr.window_spec(window, local)
        self.grouping.check_grouping(node, local)
        if id(node) not in self.state.unresolved_outputs:
            outputs = self.untyped_outputs_as_text(node.expressions, outputs, local)
        return outputs

    def untyped_outputs_as_text(
        self, items: list[exp.Expr], outputs: list[tuple[str, Typed, SqlSpan | None]], scope: Scope
    ) -> list[tuple[str, Typed, SqlSpan | None]]:
        """A parameter no context typed, as a SELECT's output, is text (PostgreSQL's
        resolveTargetListUnknowns): `SELECT @a`, `(SELECT @a)`, a CTE's or subquery's column,
        `RETURNING @a`; so is a string literal."""
        resolved = list(outputs)
        for position, cell in _untyped_items(items).items():
            if isinstance(cell, exp.Paren):
                cell = cell.unnest()
            name, typed, span = outputs[position]
            if isinstance(cell, exp.Parameter) and self.params.types.get(cell.name) is None:
                resolved[position] = (name, self.expr.expect(cell, t.TEXT, scope), span)
            elif isinstance(cell, exp.Parameter) and typed.type is None:
                # Untyped when the select list was read, typed by a later clause (WHERE id = @a):
                # PostgreSQL still makes this use text, a second type for one parameter.
                later = self.params.types.get(cell.name)
                if later is not None and later != t.TEXT:
                    self.state.error(f"inconsistent types deduced for parameter ${self.params.number(cell.name)}", cell)
                resolved[position] = (name, Typed(later, typed.nullable), span)
            elif typed.type == t.UNKNOWN:  # 'x': text (NULL stays untyped: the result check asks for a cast)
                resolved[position] = (name, Typed(t.TEXT, typed.nullable), span)
        return resolved

    def list_params(self, clause: exp.Expr | None) -> None:
        """List `clause`'s parameters, in the order they are written, without typing them."""
        for param in clause.find_all(exp.Parameter, bfs=False) if clause is not None else ():
            self.params.see(param.name)

    def grouping_key(self, node: exp.Expr, scope: Scope, allow_output: bool = False) -> Typed:
        """A GROUP BY, ORDER BY or DISTINCT ON expression: a parameter no context typed is text
        (PostgreSQL resolves an unknown sort or group key so)."""
        bare = node.unnest() if isinstance(node, exp.Paren) else node
        if isinstance(bare, exp.Parameter) and self.params.types.get(bare.name) is None:
            return self.expr.expect(bare, t.TEXT, scope)
        return self.expr.infer(node, scope, allow_output=allow_output)

    def common_type(self, types: list[PgType], construct: str, span: SqlSpan | None) -> PgType | None:
        """The type PostgreSQL resolves a UNION column, VALUES column, CASE or COALESCE to
        (untyped literals alone: text); an error when the types cannot be matched."""
        try:
            return common_type(types, construct, env=self.state.builtins)
        except ResolveError as err:
            self.state.error(err.message, span=span)
            return None

    def limit_offset(self, node: exp.Expr, scope: Scope) -> None:
        """LIMIT (FETCH FIRST) and OFFSET take a bigint: a bare parameter is one, anything else
        is typed first and then coerced (PostgreSQL's order: `LIMIT COALESCE(@n, 10)` is int4)."""
        for key in ("limit", "offset"):
            clause = node.args.get(key)
            if clause is None:
                continue
            if isinstance(clause, exp.Fetch):
                value = clause.args.get("count")
            elif key == "limit":
                value = clause.args.get("expression")
            else:
                value = clause.args.get("expression") or clause.this
            if not isinstance(value, exp.Expr):
                continue
            if is_untyped(value):
                self.expr.expect(value, t.INT8, scope)
                continue
            typed = self.expr.infer(value, scope)
            if typed.type is not None and not assignable(typed.type, t.INT8, env=self.state.builtins):
                self.state.error(
                    f"argument of {key.upper()} must be type bigint, not type {describe(typed.type)}", value
                )

    def values_rows(self, node: exp.Values, scope: Scope) -> list[tuple[str, Typed, SqlSpan | None]]:
        rows = [row.expressions if isinstance(row, exp.Tuple) else [row] for row in node.expressions]
        if not rows:
            return []
        for row, row_node in zip(rows[1:], node.expressions[1:], strict=True):
            if len(row) != len(rows[0]):
                self.state.error("VALUES lists must all be the same length", row_node)
                rows = rows[:1]  # type the first row only; its columns stay known
                break
        out: list[tuple[str, Typed, SqlSpan | None]] = []
        for i, first in enumerate(rows[0]):
            cells = [row[i] for row in rows]
            typed = [None if is_untyped(c) else self.expr.infer(c, scope) for c in cells]
            # PostgreSQL's common type of the column ((1), (2.5): numeric; untyped alone: text).
            known: PgType | None = None
            if all(x is None or x.type is not None for x in typed):
                types = [
                    x.type or t.UNKNOWN
                    if x is not None
                    else (self.params.types.get(c.name) if isinstance(c, exp.Parameter) else None) or t.UNKNOWN
                    for c, x in zip(cells, typed, strict=True)
                ]
                known = self.common_type(types, "VALUES", span_of(first))
            nullable = False
            for cell, cell_type in zip(cells, typed, strict=True):
                if cell_type is None:
                    cell_type = (
                        self.expr.expect(cell, known, scope) if known is not None else self.expr.infer(cell, scope)
                    )
                nullable = nullable or cell_type.nullable
            out.append((f"column{i + 1}", Typed(known, nullable), span_of(first)))
        return out

    def projections(
        self, owner: exp.Expr, items: list[exp.Expr], scope: Scope
    ) -> list[tuple[str, Typed, SqlSpan | None]]:
        """The output columns of a select list or RETURNING list (`owner` holds it). In the
        statement's own lists, each `*`, `t.*` and whole-row reference is also recorded as the
        explicit column list it stands for."""
        # Per item: its star columns, or its one typed value (named once the list is matched).
        typed_items: list[list[StarColumn] | Typed] = []
        top = id(owner) in self.state.top_level
        for item in items:
            star: list[StarColumn] | None = None
            if isinstance(item, exp.Star):
                star = scope.star
                if not scope.relations and not scope.lenient():
                    self.state.error("SELECT * with no FROM", item)
            elif isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
                star_rel = self.from_items.find_relation(item.table, scope, item)
                star = star_rel.star() if star_rel is not None else []
            elif isinstance(item, exp.Dot) and isinstance(item.expression, exp.Star):
                star = self.field_star(item, scope)
            if star is not None:
                typed_items.append(star)
                if top:
                    self.expand(item, star)
                continue
            typed = self.expr.infer(item, scope)
            typed_items.append(typed)
            if top and typed.embedded is not None and isinstance(item, exp.Column) and not item.table:
                row = next((rel for rel in all_relations(scope) if item.name in rel.names), None)
                if row is not None:
                    self.expand(item, row.star())
        # After the items: the lists nested in them have taken their own names first.
        names = self.state.output_names.names([self.state.item_start(item) for item in items])
        out: list[tuple[str, Typed, SqlSpan | None]] = []
        for position, (item, found) in enumerate(zip(items, typed_items, strict=True)):
            if isinstance(found, list):
                out.extend((c.name, c.typed, span_of(item)) for c in found)
            else:
                out.append((names[position] if names is not None else output_name(item), found, span_of(item)))
        return out

    def field_star(self, item: exp.Dot, scope: Scope) -> list[StarColumn]:
        """`(composite).*`: a column per field of the value's row type, each NULL when the value
        or the field is (`(f(x)).*`, `(t).*`)."""
        base = self.expr.infer(item.this, scope)
        fields = row_type_columns(self.state.catalog, base.type)
        if fields is None and base.embedded is not None:
            fields = tuple((n, typed.type) for n, typed in base.embedded if typed.type is not None)
        span = self.state.span(item.this)
        if fields is None or span is None:
            if base.type is not None:
                self.state.error(f"type {describe(base.type)} is not composite", item)
            return []
        value = self.state.sql[span.start : span.end + 1]
        if not value.startswith("("):
            value = f"({value})"
        return [StarColumn(n, Typed(ty, True), f"{value}.{quote_ident(n)}") for n, ty in fields]

    def expand(self, item: exp.Expr, star: list[StarColumn]) -> None:
        span = span_of(item)
        if span is not None and star:
            self.state.expansions.append(Expansion(span, ", ".join(c.sql for c in star)))


def _grouped_sql(rel: Relation, column: str) -> set[str]:
    """How a GROUP BY may spell a column of `rel`: bare or qualified."""
    return {column, *(f"{name}.{column}" for name in rel.names)}


def _unwrap_subquery(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Subquery) and not node.alias:
        node = node.this
    return node


def _untyped_outputs(branch: exp.Expr) -> dict[int, exp.Expr]:
    """A set operation's plain SELECT branch: its untyped outputs (parameters, string literals,
    NULL) by column position. None past a `*`, whose width is the relation's."""
    if not isinstance(branch, exp.Select):
        return {}
    return _untyped_items(branch.expressions)


def _untyped_items(items: list[exp.Expr]) -> dict[int, exp.Expr]:
    found: dict[int, exp.Expr] = {}
    for position, item in enumerate(items):
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
            break
        value = item.this if isinstance(item, exp.Alias) else item
        if is_untyped(value):
            found[position] = value
    return found
