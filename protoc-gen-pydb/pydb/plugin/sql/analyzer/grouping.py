"""Aggregates and grouping as PostgreSQL checks them: no aggregate or window function per row,
no nested aggregates, and in a grouped query every column grouped or aggregated."""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot import exp

from ..bridge.call_standins import function_name
from ..rules.literals import is_int
from .calls import function_kinds
from .scope import Scope, local_column_names, owner
from .state import StatementState


class Grouping:
    """Aggregate and GROUP BY checks, on the sqlglot tree alone (no typing)."""

    def __init__(self, state: StatementState) -> None:
        self.state = state

    def check_per_row(self, clause: exp.Expr, where: str) -> bool:
        """No aggregate or window function in a clause evaluated per row (WHERE, ON, GROUP BY).
        False when one was reported."""
        found = next(aggregates(clause), None)
        if found is not None:
            self.state.error(f"aggregate functions are not allowed in {where}", found)
            return False
        window = next((w for w in clause.find_all(exp.Window) if _same_query(w, clause)), None)
        if window is not None:
            self.state.error(f"window functions are not allowed in {where}", window)
            return False
        return True

    def check_distinct_on(self, on: exp.Expr, order: exp.Expr) -> None:
        """DISTINCT ON (a, b) needs ORDER BY to start with a and b (in any order)."""
        keys = [e.sql(dialect="postgres") for e in (on.expressions if isinstance(on, exp.Tuple) else [on])]
        leading = [(o.this if isinstance(o, exp.Ordered) else o).sql(dialect="postgres") for o in order.expressions][
            : len(keys)
        ]
        if any(k.isdigit() for k in [*keys, *leading]):
            return  # positional references: not compared
        if sorted(keys) != sorted(leading):
            self.state.error("SELECT DISTINCT ON expressions must match initial ORDER BY expressions", on)

    def check_grouping(self, node: exp.Select, scope: Scope) -> None:
        """Aggregate misuse Postgres would reject: aggregates in WHERE, JOIN ... ON or GROUP BY,
        nested aggregates, and, in a grouped query, columns neither grouped nor aggregated."""
        places = [("WHERE", node.args.get("where")), ("GROUP BY", node.args.get("group"))]
        places += [("JOIN conditions", join.args.get("on")) for join in node.args.get("joins") or []]
        for where, clause in places:
            if isinstance(clause, exp.Expr) and not self.check_per_row(clause, where):
                return
        having = node.args.get("having")
        results = [*node.expressions, *([having] if isinstance(having, exp.Expr) else [])]
        for item in results:
            for agg in aggregates(item):
                for arg in agg.iter_expressions():
                    inner = next(aggregates(arg), None)
                    if inner is not None:
                        self.state.error("aggregate function calls cannot be nested", inner)
                        return
        group = node.args.get("group")
        grouped_query = group is not None or having is not None or any(next(aggregates(e), None) for e in results)
        if not grouped_query or scope.lenient():
            return
        grouped_sql: set[str] = set()
        grouped_cols: set[tuple[int, str]] = set()  # (id of the relation, column name)
        for g in grouping_items(group):
            if isinstance(g, exp.Literal) and not g.is_string and is_int(str(g.this)):
                position = int(str(g.this))
                if 1 <= position <= len(node.expressions):
                    g = node.expressions[position - 1]
            if isinstance(g, exp.Column) and not g.table and g.name not in local_column_names(scope):
                # GROUP BY an output alias groups by that output's expression.
                g = next((e for e in node.expressions if isinstance(e, exp.Alias) and e.alias == g.name), g)
            g = g.this if isinstance(g, exp.Alias) else g
            grouped_sql.add(g.sql(dialect="postgres"))
            # JOIN ... USING (k) GROUP BY k groups t1.k too, and GROUP BY t1.k groups k.
            if isinstance(g, exp.Column) and not g.table and g.name in scope.merged_as:
                grouped_sql.add(scope.merged_as[g.name])
            grouped_sql.update(name for name, sql in scope.merged_as.items() if sql == g.sql(dialect="postgres"))
            if isinstance(g, exp.Column):
                rel = owner(g, scope)
                if rel is not None:
                    grouped_cols.add((id(rel), g.name))
        order = node.args.get("order")
        items = [*results, *(_input_order_keys(order, set(scope.output)) if order is not None else [])]
        for item in items:
            for col in _free_columns(item.this if isinstance(item, exp.Alias) else item, grouped_sql):
                if not col.table and col.name in scope.merged:  # a USING column: one side's, or a COALESCE
                    if scope.merged_as.get(col.name) not in grouped_sql:
                        self.state.error(
                            f"column {col.name} must appear in the GROUP BY clause or be used in an aggregate function",
                            col,
                        )
                        return
                    continue
                rel = owner(col, scope)
                if rel is None or (id(rel), col.name) in grouped_cols:
                    continue
                table = rel.table
                if (
                    table is not None
                    and table.primary_key
                    and all((id(rel), k) in grouped_cols for k in table.primary_key)
                ):
                    continue  # grouped by the primary key: every column is functionally dependent
                if isinstance(col.this, exp.Star) and all((id(rel), n) in grouped_cols for n, _ in rel.columns):
                    continue  # every column of t grouped
                name = col.name
                if isinstance(col.this, exp.Star):
                    if col is item:  # a select-list `t.*` is its columns: PostgreSQL names the first not grouped
                        name = next((n for n, _ in rel.columns if (id(rel), n) not in grouped_cols), name)
                    else:
                        name = "*"
                self.state.error(
                    f"column {rel.alias}.{name} must appear in the GROUP BY clause or be used in an aggregate function",
                    col,
                )
                return


def _input_order_keys(order: exp.Expr, outputs: set[str]) -> list[exp.Expr]:
    """The ORDER BY keys that are expressions over the input rows: PostgreSQL reads a bare
    name that an output column has as that output column (an alias wins over an input column
    of its name), and a number as an output position; those are checked as the outputs."""
    keys = []
    for o in order.expressions:
        key = o.this if isinstance(o, exp.Ordered) else o
        if isinstance(key, exp.Column) and not key.table and key.name in outputs:
            continue
        if isinstance(key, exp.Literal) and not key.is_string:
            continue
        keys.append(o)
    return keys


def is_aggregate(node: exp.Expr) -> bool:
    """An aggregate call (not a window function: `sum(x) OVER ()` is computed per row)."""
    if isinstance(node, (exp.Filter, exp.WithinGroup)):  # FILTER (WHERE ...) and WITHIN GROUP (ORDER BY ...)
        return is_aggregate(node.this) or isinstance(node, exp.WithinGroup)
    if not isinstance(node, exp.Func) or isinstance(node.parent, exp.Window):
        return False
    kinds = function_kinds(function_name(node))
    return "a" in kinds if kinds else isinstance(node, exp.AggFunc)


def _same_query(node: exp.Expr, top: exp.Expr) -> bool:
    """Whether `node` (inside `top`) belongs to `top`'s query, not to a nested subquery."""
    parent = node.parent
    while parent is not None and parent is not top:
        if isinstance(parent, (exp.Subquery, exp.Select, exp.Exists)):
            return False
        parent = parent.parent
    return True


def aggregates(node: exp.Expr) -> Iterator[exp.Func]:
    """Aggregate calls in `node` that belong to its query (not to a nested subquery)."""
    if isinstance(node, (exp.Subquery, exp.Select, exp.Exists)):
        return
    if isinstance(node, exp.Func) and is_aggregate(node):
        yield node
    for child in node.iter_expressions():
        yield from aggregates(child)


def _free_columns(node: exp.Expr, grouped_sql: set[str]) -> Iterator[exp.Column]:
    """Column references of a grouped query's output that are neither inside an aggregate
    nor part of a grouped expression (nor in a subquery, which is not checked). A window
    function is computed over the groups: its arguments and PARTITION BY are checked too."""
    if node.sql(dialect="postgres") in grouped_sql:
        return
    if isinstance(node, exp.Column):
        # `t.*` (in the select list, or `to_jsonb(t.*)`) is every column of t: grouped only by
        # t's primary key; a bare `*` is checked column by column by PostgreSQL, not here
        if not isinstance(node.this, exp.Star) or node.table:
            yield node
        return
    if isinstance(node, (exp.Subquery, exp.Select, exp.Exists)) or is_aggregate(node):
        return
    for child in node.iter_expressions():
        yield from _free_columns(child, grouped_sql)


_GROUPING_SETS = (exp.Rollup, exp.Cube, exp.GroupingSets)


def grouping_items(group: exp.Expr | None) -> list[exp.Expr]:
    """Every expression a GROUP BY groups by, out of ROLLUP, CUBE and GROUPING SETS too."""
    out: list[exp.Expr] = []
    for g in group.expressions if group is not None else []:
        if isinstance(g, _GROUPING_SETS):
            out.extend(grouping_items(g))
        elif isinstance(g, exp.Tuple) and isinstance(g.parent, _GROUPING_SETS):
            out.extend(g.expressions)  # one grouping set: (a, b), or () for the grand total
        elif isinstance(g, exp.Paren) and isinstance(g.parent, _GROUPING_SETS):
            out.append(g.this)
        else:
            out.append(g)
    return out


def _sets(g: exp.Expr) -> list[set[str]]:
    """The grouping sets one GROUP BY item stands for, each as the SQL of its expressions."""

    def sql(e: exp.Expr) -> str:
        return (e.this if isinstance(e, exp.Paren) else e).sql(dialect="postgres")

    def members(e: exp.Expr) -> set[str]:
        items = e.expressions if isinstance(e, exp.Tuple) else [e]
        return {sql(i) for i in items}

    if isinstance(g, exp.Rollup):  # ROLLUP (a, b): (a, b), (a), ()
        parts = [members(e) for e in g.expressions]
        return [set().union(*parts[:n]) for n in range(len(parts), -1, -1)]
    if isinstance(g, exp.Cube):  # CUBE (a, b): every subset
        parts = [members(e) for e in g.expressions]
        subsets: list[set[str]] = [set()]
        for part in parts:
            subsets = [*subsets, *(s | part for s in subsets)]
        return subsets
    if isinstance(g, exp.GroupingSets):
        return [grouped for e in g.expressions for grouped in _sets(e)]
    return [members(g)]


def sometimes_grouped(group: exp.Expr | None) -> set[str]:
    """The expressions (as SQL) that some grouping set leaves out: in those rows they are NULL."""
    if group is None:
        return set()
    combined: list[set[str]] = [set()]
    for g in group.expressions:  # GROUP BY a, ROLLUP (b): the cross product of the items' sets
        combined = [done | more for done in combined for more in _sets(g)]
    everywhere = set.intersection(*combined) if combined else set()
    return set().union(*combined) - everywhere
