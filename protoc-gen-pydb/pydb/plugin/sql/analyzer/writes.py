"""Writes: INSERT (incl. ON CONFLICT and its arbiter indexes), UPDATE and DELETE, their SET
lists and targets, the key parameter of `WHERE pk = @param`, and their RETURNING lists."""

from __future__ import annotations

from pglast import ast
from pglast.enums import BoolExprType
from pglast.stream import RawStream
from sqlglot import exp

from ...diagnostics import SqlSpan
from ..catalog import types as t
from ..catalog.identifiers import did_you_mean
from ..catalog.model import Column, Table
from ..rules.casts import assignable, describe, is_untyped
from ..syntax.pgtree import nodes_of
from .expressions import ExpressionTyping
from .from_items import FromItems
from .grouping import Grouping
from .scope import Relation, Scope, Typed, system_columns
from .state import StatementState
from .statements import Statements


class Writes:
    """INSERT, UPDATE, DELETE and RETURNING. Their queries (INSERT ... SELECT, RETURNING
    lists) go to `self.queries`, targets and scopes to `self.from_items`, values to `self.expr`."""

    def __init__(
        self,
        state: StatementState,
        queries: Statements,
        expr: ExpressionTyping,
        from_items: FromItems,
        grouping: Grouping,
    ) -> None:
        self.state = state
        self.params = state.params
        self.queries = queries
        self.expr = expr
        self.from_items = from_items
        self.grouping = grouping

    def statement_rows(self, body: exp.Expr, scope: Scope) -> list[tuple[str, Typed, SqlSpan | None]] | None:
        """Rows of a statement that may stand in a CTE: a query or data-modifying statement."""
        if isinstance(body, exp.Insert):
            return self.insert(body, scope)[1]
        if isinstance(body, exp.Update):
            return self.update(body, scope)[1]
        if isinstance(body, exp.Delete):
            return self.delete(body, scope)[1]
        return self.queries.query(body, scope)

    def insert(
        self, node: exp.Insert, scope: Scope
    ) -> tuple[Table | None, list[tuple[str, Typed, SqlSpan | None]] | None, bool]:
        scope = self.from_items.with_ctes(node, scope)
        target_node = node.this
        col_nodes: list[exp.Expr] = []
        if isinstance(target_node, exp.Schema):
            col_nodes = list(target_node.expressions)
            target_node = target_node.this
        alias_name = target_node.alias if isinstance(target_node, exp.Table) and target_node.alias else None
        table = self.from_items.table(target_node, scope) if isinstance(target_node, exp.Table) else None
        if table is None:
            self.query_sources_only(node.expression, scope)
            return None, self.returning(node, Scope(parent=scope, broken=True)), False
        columns: list[tuple[str, Column | None]] = []
        for c in col_nodes:
            cname = c.name
            col = table.column(cname)
            if col is None:
                self.state.error(
                    f"column {cname} of table {table.qualified} does not exist{did_you_mean(cname, [x.name for x in table.columns])}",
                    c,
                )
            elif any(name == cname for name, _ in columns):
                self.state.error(f"column {cname} specified more than once", c)
            columns.append((cname, col))
        if not col_nodes:
            columns = [(c.name, c) for c in table.columns]
        named = {n for n, _ in columns}
        for col in table.columns:
            if col.not_null and not col.has_default and col.name not in named:
                # PostgreSQL prepares it: a BEFORE INSERT trigger may set the column.
                self.state.warn(
                    f"column {col.name} of {table.qualified} is NOT NULL and has no default, but the INSERT does not "
                    "set it: it fails when run unless a trigger sets it",
                    target_node,
                )
        source = node.expression
        if isinstance(source, exp.Values):
            for row in source.expressions:
                values = row.expressions if isinstance(row, exp.Tuple) else [row]
                if len(values) != len(columns):
                    more = "more" if len(values) > len(columns) else "fewer"
                    self.state.error(
                        f"INSERT has {more} expressions ({len(values)}) than target columns ({len(columns)})", row
                    )
                for (cname, col), value in zip(columns, values, strict=False):
                    if col is None:
                        self.expr.infer(value, scope)
                    elif not isinstance(value, exp.Var) or value.name.upper() != "DEFAULT":
                        typed = self.expr.assign(value, col.type, scope, column=cname)
                        if col.not_null and isinstance(value, exp.Null):
                            self.state.error(
                                f"column {cname} is NOT NULL, but NULL is inserted",
                                span=self.state.keyword_after(
                                    SqlSpan(0, (self.state.span(row) or SqlSpan(0, 0)).start - 1), "NULL"
                                ),
                            )
                        del typed
        elif isinstance(source, exp.Expr):
            self.state.unresolved_outputs.add(id(source))  # INSERT ... SELECT @p: the column's type
            rows = self.queries.query(source, Scope(parent=scope))
            if len(rows) != len(columns):
                self.state.error(f"INSERT has {len(rows)} expressions but {len(columns)} target columns", source)
            if isinstance(source, exp.Select):
                # INSERT ... SELECT @p: the parameter takes the target column's type.
                for (_, col), item in zip(columns, source.expressions, strict=False):
                    value = item.this if isinstance(item, exp.Alias) else item
                    if col is not None and is_untyped(value):
                        self.expr.expect(value, col.type, scope)
                rows = [
                    (
                        n,
                        Typed(self.params.types.get(v.name), typed.nullable) if isinstance(v, exp.Parameter) else typed,
                        sp,
                    )
                    for (n, typed, sp), v in zip(
                        rows, [e.this if isinstance(e, exp.Alias) else e for e in source.expressions], strict=False
                    )
                ]
            for (cname, col), (_, typed, span) in zip(columns, rows, strict=False):
                if col is not None and typed.type is not None and not assignable(typed.type, col.type, assignment=True):
                    self.state.error(
                        f"column {cname} is {describe(col.type)} but the SELECT gives {describe(typed.type)}",
                        span=span,
                    )
        rel = Relation(
            alias_name or table.name,
            (alias_name,) if alias_name else (table.name, table.qualified),
            [(c.name, Typed(c.type, not c.not_null)) for c in table.columns],
            table,
            system=system_columns(),
        )
        conflict = node.args.get("conflict")
        do_nothing = False
        if isinstance(conflict, exp.OnConflict):
            keys = [k.this if isinstance(k, exp.Ordered) else k for k in conflict.args.get("conflict_keys") or []]
            key_names = []
            unknown_key = False
            written = self.inference_keys(conflict)
            for position, k in enumerate(keys):
                if not isinstance(k, exp.Column) and position < len(written):
                    # ON CONFLICT (lower(email)): an expression key, matched against a unique
                    # index's expression as the catalog deparses it.
                    key_scope = Scope(parent=scope)
                    key_scope.add_relation(rel)
                    errors_before = len(self.state.problems)
                    self.expr.infer(k, key_scope)
                    unknown_key = unknown_key or len(self.state.problems) > errors_before
                    key_names.append(written[position])
                    continue
                kname = k.name
                key_names.append(kname)
                if table.column(kname) is None:
                    unknown_key = True
                    self.state.error(
                        f"ON CONFLICT column {kname} does not exist in {table.qualified}"
                        f"{did_you_mean(kname, [c.name for c in table.columns])}",
                        k,
                    )
            arbiters = [set(u) for u in table.unique_keys] + [
                set(index.columns)
                for index in self.state.catalog.indexes.values()
                if index.unique
                and index.table == table.qualified
                and (not index.partial or index.predicate in conflict_conjuncts(self.state.grammar.tree))
            ]
            if key_names and not unknown_key and set(key_names) not in arbiters:
                self.state.error(
                    f"there is no unique or exclusion constraint matching the ON CONFLICT specification ({', '.join(key_names)})",
                    conflict,
                )
            action = str(conflict.args.get("action") or "").upper()
            do_nothing = "NOTHING" in action
            if not do_nothing and not key_names and conflict.args.get("constraint") is None:
                self.state.error("ON CONFLICT DO UPDATE requires inference specification or constraint name", conflict)
            if conflict.expressions:
                excluded = Relation("excluded", ("excluded", "EXCLUDED"), list(rel.columns), table)
                upd_scope = Scope(parent=scope)
                upd_scope.add_relation(rel)
                upd_scope.add_relation(excluded)
                self.assignments(conflict.expressions, table, upd_scope)
                where = conflict.args.get("where")
                if where is not None:
                    self.expr.expect(where.this, t.BOOL, upd_scope)
        ret_scope = Scope(parent=scope)
        ret_scope.add_relation(rel)
        return table, self.returning(node, ret_scope), do_nothing

    def inference_keys(self, conflict: exp.OnConflict) -> list[str]:
        """The keys of the ON CONFLICT (...) that `conflict` is, from PostgreSQL's tree: the
        inference clause written nearest to it."""
        span = self.state.span(conflict)
        clauses = [c for c in nodes_of(self.state.grammar.tree, ast.InferClause) if c.location is not None]
        if not clauses:
            return []
        start = span.start if span is not None else 0
        clause = min(clauses, key=lambda c: abs(self.state.grammar.original_offset(c.location or 0) - start))
        return [inference_key(e) for e in clause.indexElems or () if isinstance(e, ast.IndexElem)]

    def assignments(self, items: list[exp.Expr], table: Table, scope: Scope) -> None:
        """SET col = v, SET (a, b) = (v, w), = ROW(v, w) or = (SELECT ...), SET arr[i] = v."""
        assigned: set[str] = set()
        for item in items:
            if not isinstance(item, exp.EQ):
                self.state.error("expected column = value", item)
                continue
            if isinstance(item.this, exp.Tuple):
                self.assign_row(list(item.this.expressions), item, table, scope, assigned)
            elif isinstance(item.this, exp.Paren):  # SET (a) = ROW(v) or = (SELECT v)
                self.assign_row([item.this.this], item, table, scope, assigned)
            else:
                self.assign_target(item.this, item.expression, table, scope, assigned)

    def assign_row(self, targets: list[exp.Expr], item: exp.EQ, table: Table, scope: Scope, assigned: set[str]) -> None:
        """SET (a, b) = ...: PostgreSQL takes a ROW(...) or a parenthesized list of two or more
        values, each typed as its column (parameters included), or a sub-SELECT whose columns are
        typed on their own and then assigned to the columns in order."""
        source = item.expression
        if isinstance(source, exp.Tuple) or (isinstance(source, exp.Anonymous) and source.name.upper() == "ROW"):
            values = list(source.expressions)
            if len(values) != len(targets):
                self.state.error(
                    f"number of columns does not match number of values ({len(targets)} vs {len(values)})", item
                )
            for target, value in zip(targets, values, strict=False):
                self.assign_target(target, value, table, scope, assigned)
            return
        inner = source.this if isinstance(source, exp.Subquery) else None
        if not isinstance(inner, exp.Query):  # (a) = (v), (a, b) = col: not a row
            self.state.error(
                "source for a multiple-column UPDATE item must be a sub-SELECT or ROW() expression", source
            )
            self.expr.infer(source, scope)
            return
        rows = self.queries.query(inner, Scope(parent=scope))
        if len(rows) != len(targets):
            self.state.error(f"number of columns does not match number of values ({len(targets)} vs {len(rows)})", item)
        for target, (_, typed, span) in zip(targets, rows, strict=False):
            col = self.assign_target(target, None, table, scope, assigned)
            if col is not None and typed.type is not None and not assignable(typed.type, col.type, True):
                self.state.error(
                    f"column {col.name} is {describe(col.type)} but the SELECT gives {describe(typed.type)}",
                    span=span,
                )

    def assign_target(
        self, target: exp.Expr, value: exp.Expr | None, table: Table, scope: Scope, assigned: set[str]
    ) -> Column | None:
        """One SET target (a column, or an element `arr[i]` of an array column) and its value."""
        subscripts: list[exp.Expr] = []
        if isinstance(target, exp.Bracket):
            subscripts = list(target.expressions)
            target = target.this
        if not isinstance(target, exp.Column):
            self.state.error("expected column = value", target)
            return None
        cname = target.name
        if cname in assigned and not subscripts:
            self.state.error(f"multiple assignments to same column {cname}", target)
        assigned.add(cname)
        col = table.column(cname)
        if col is None:
            self.state.error(
                f"column {cname} of table {table.qualified} does not exist{did_you_mean(cname, [c.name for c in table.columns])}",
                target,
            )
            if value is not None:
                self.expr.infer(value, scope)
            return None
        want = col.type
        if subscripts:
            if not want.is_array:
                self.state.error(
                    f"cannot subscript type {describe(want)} because it does not support subscripting", target
                )
                return col
            for subscript in subscripts:
                bounds = subscript.expressions if isinstance(subscript, exp.Slice) else [subscript]
                for bound in bounds:
                    if isinstance(bound, exp.Expr):
                        self.expr.expect(bound, t.INT4, scope)
            if not any(isinstance(x, exp.Slice) for x in subscripts):
                want = want.element
        if value is None:
            return col
        if col.not_null and isinstance(value, exp.Null) and not subscripts:
            self.state.error(
                f"column {cname} is NOT NULL, but is set to NULL",
                span=self.state.keyword_after(self.state.span(target), "NULL"),
            )
        self.expr.assign(value, want, scope, column=cname)
        return col

    def target_scope(self, node: exp.Update | exp.Delete, scope: Scope) -> tuple[Scope, Relation | None, Table | None]:
        """The scope an UPDATE or DELETE sees: its CTEs, then the target table (and its alias)."""
        scope = self.from_items.with_ctes(node, scope)
        local = Scope(parent=scope)
        target_node = node.this
        rel = self.from_items.relation_of(target_node, local) if isinstance(target_node, exp.Table) else None
        if rel is not None:
            local.add_relation(rel)
        return local, rel, rel.table if rel is not None else None

    def update(
        self, node: exp.Update, scope: Scope
    ) -> tuple[Table | None, list[tuple[str, Typed, SqlSpan | None]] | None, str | None]:
        local, rel, table = self.target_scope(node, scope)
        from_ = node.args.get("from_") or node.args.get("from")
        if isinstance(from_, exp.From):
            self.from_items.add_source(from_.this, local, nullable=False)
            for join in from_.this.args.get("joins") or []:  # UPDATE ... FROM a JOIN b ON ...
                self.from_items.join(join, local)
        for join in node.args.get("joins") or []:
            self.from_items.join(join, local)
        # PostgreSQL's transformUpdateStmt types WHERE, then RETURNING, then SET; the parameters
        # are still listed SET's first, as they are written.
        for item in node.expressions:
            self.queries.list_params(item)
        where = node.args.get("where")
        if where is not None:
            self.expr.expect(where.this, t.BOOL, local)
            self.grouping.check_per_row(where.this, "WHERE")
        key = _key_param(where.this if where is not None else None, table, rel)
        returning = self.returning(node, local)
        if table is not None:
            self.assignments(node.expressions, table, local)
        return table, returning, key

    def delete(
        self, node: exp.Delete, scope: Scope
    ) -> tuple[Table | None, list[tuple[str, Typed, SqlSpan | None]] | None, str | None]:
        local, rel, table = self.target_scope(node, scope)
        using = node.args.get("using")
        for u in using or []:
            self.from_items.add_source(u, local, nullable=False)
            for join in u.args.get("joins") or []:  # DELETE ... USING a JOIN b ON ...
                self.from_items.join(join, local)
        where = node.args.get("where")
        if where is not None:
            self.expr.expect(where.this, t.BOOL, local)
            self.grouping.check_per_row(where.this, "WHERE")
        key = _key_param(where.this if where is not None else None, table, rel)
        return table, self.returning(node, local), key

    def query_sources_only(self, source: exp.Expr | None, scope: Scope) -> None:
        """The VALUES or query of an INSERT into an unknown table: still bind what it can."""
        if isinstance(source, exp.Values):
            for row in source.expressions:
                for value in row.expressions if isinstance(row, exp.Tuple) else [row]:
                    self.expr.infer(value, scope)
        elif isinstance(source, exp.Expr):
            self.queries.query(source, Scope(parent=scope, broken=True))

    def returning(self, node: exp.Expr, scope: Scope) -> list[tuple[str, Typed, SqlSpan | None]] | None:
        ret = node.args.get("returning")
        if not isinstance(ret, exp.Returning):
            return None
        if not scope.relations:
            return []
        outputs = self.queries.projections(node, ret.expressions, scope)
        return self.queries.untyped_outputs_as_text(ret.expressions, outputs, scope)


def _key_param(where: exp.Expr | None, table: Table | None, rel: Relation | None) -> str | None:
    """The parameter in `pk = @param`, a top-level conjunct of WHERE, if the target has a
    single-column primary key."""
    if where is None or table is None or rel is None or len(table.primary_key) != 1:
        return None
    pk = table.primary_key[0]
    conjuncts = list(where.flatten()) if isinstance(where, exp.And) else [where]
    for c in conjuncts:
        if isinstance(c, exp.Paren):
            c = c.this
        if not isinstance(c, exp.EQ):
            continue
        for col, param in ((c.this, c.expression), (c.expression, c.this)):
            if isinstance(param, exp.Cast):
                param = param.this
            if (
                isinstance(col, exp.Column)
                and isinstance(param, exp.Parameter)
                and col.name == pk
                and (not col.table or col.table in rel.names)
            ):
                return param.name
    return None


def inference_key(elem: ast.IndexElem) -> str:
    """An ON CONFLICT key as the catalog writes an index key: a column's name, an expression
    deparsed in parentheses."""
    if elem.name or elem.expr is None:
        return str(elem.name or "")
    return f"({RawStream()(elem.expr)})"


def conflict_conjuncts(tree: ast.Node | None) -> set[str]:
    """`ON CONFLICT (...) WHERE p AND q`: p AND q, p and q, deparsed as the catalog deparses an
    index predicate. A partial unique index is an arbiter when its predicate is one of them
    (PostgreSQL proves the implication more generally; this is the form it is written in)."""
    found: set[str] = set()
    for clause in nodes_of(tree, ast.InferClause):
        where = clause.whereClause
        if where is None:
            continue
        found.add(str(RawStream()(where)))
        if isinstance(where, ast.BoolExpr) and where.boolop == BoolExprType.AND_EXPR:
            found.update(str(RawStream()(arg)) for arg in where.args or ())
    return found
