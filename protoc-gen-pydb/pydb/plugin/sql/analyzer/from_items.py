"""FROM items, joins, CTEs and column references: how the scopes of `scope.py` are built from
a statement and how column references resolve in them."""

from __future__ import annotations

from pglast import ast
from sqlglot import exp

from ...diagnostics import SqlSpan
from ..bridge.call_standins import SQL_VALUE_KEYWORDS, function_name
from ..bridge.type_standins import resolve_type_name
from ..catalog import types as t
from ..catalog.builtins import BUILTIN_RELATION_SCHEMAS
from ..catalog.identifiers import closest, did_you_mean, quote_ident
from ..catalog.model import Catalog, Table
from ..catalog.types import PgType
from ..rules.casts import describe
from ..rules.coercion import ResolveError, common_type
from .calls import FunctionCalls
from .recursion import TypesExpressions, TypesQueries, TypesStatements
from .scope import Relation, Scope, StarColumn, Typed, all_relations, rename, row_type_columns, system_columns
from .state import StatementState


def _suggest_table(schema: str | None, name: str, catalog: Catalog) -> str:
    """Did-you-mean for a table: compared with the tables of the schema it was looked for in
    (the first of the search_path when unqualified), so a shared schema does not make every
    table look alike; then with every qualified name."""
    where = schema or catalog.search_path[0]
    same_schema = [table.name for table in catalog.tables.values() if table.schema == where]
    close = closest(name, same_schema)
    if close:
        return f"; did you mean {schema + '.' if schema else ''}{close}?"
    written = f"{schema}.{name}" if schema else name
    return "" if same_schema else did_you_mean(written, catalog.table_names())


class FromItems:
    """FROM items, joins, CTEs and column references: builds the `Scope` of a query and
    resolves names in it. Types ON conditions and function arguments through `self.expr`, a
    schema-qualified function in FROM by `self.functions`, subqueries and VALUES through
    `self.queries`, a CTE's statement through `self.writes`."""

    #: The operands' typing: `ExpressionTyping` (connected by `Analyzer.__init__`).
    expr: TypesExpressions
    #: The subqueries' typing: `Statements` (connected by `Analyzer.__init__`).
    queries: TypesQueries
    #: A data-modifying CTE's typing: `Writes` (connected by `Analyzer.__init__`).
    writes: TypesStatements

    def __init__(self, state: StatementState, functions: FunctionCalls) -> None:
        self.state = state
        self.functions = functions

    def with_ctes(self, node: exp.Expr, scope: Scope) -> Scope:
        with_ = node.args.get("with_") or node.args.get("with")
        if not isinstance(with_, exp.With):
            return scope
        inner = Scope(parent=scope)
        for cte in with_.expressions:
            name = cte.alias_or_name
            body = cte.this
            alias = cte.args.get("alias")
            alias_cols = [c.name for c in alias.columns] if isinstance(alias, exp.TableAlias) else []
            errors_before = len(self.state.problems)
            if with_.args.get("recursive") and isinstance(body, exp.Union):
                # WITH RECURSIVE: the non-recursive term gives the columns the recursive
                # term (which names the CTE itself) sees.
                # An untyped seed (NULL, 'x') is text, and the recursive term must fit that type.
                seed = [
                    (n, Typed(t.TEXT, True) if ty.type in (t.UNKNOWN, t.NULL) else ty, span)
                    for n, ty, span in self.queries.query(body.this, inner)
                ]
                inner.ctes[name] = Relation(name, (name,), rename([(n, ty) for n, ty, _ in seed], alias_cols))
                step = self.queries.query(body.expression, inner)
                if len(seed) != len(step):
                    self.state.error(
                        f"each side of UNION must have the same number of columns ({len(seed)} vs {len(step)})", body
                    )
                for i, ((_, first, span), (_, later, _)) in enumerate(zip(seed, step, strict=False)):
                    overall = _recursive_type(first.type, later.type)
                    if overall is not None and first.type is not None and overall != first.type:
                        self.state.error(
                            f'recursive query "{name}" column {i + 1} has type {describe(first.type)} in '
                            f"non-recursive term but type {describe(overall)} overall",
                            span=span,
                        )
                seed = [
                    (n, Typed(ty.type, ty.nullable or later.nullable), span)
                    for (n, ty, span), (_, later, _) in zip(seed, [*step, *seed[len(step) :]], strict=False)
                ]
                cols: list[tuple[str, Typed, SqlSpan | None]] | None = seed
            else:
                cols = self.writes.statement_rows(body, inner)
            incomplete = len(self.state.problems) > errors_before
            rel_cols = rename([(n, typed) for n, typed, _ in (cols or [])], alias_cols)
            inner.ctes[name] = Relation(name, (name,), rel_cols, incomplete=incomplete)
        return inner

    def from_clause(self, node: exp.Expr, scope: Scope) -> None:
        from_ = node.args.get("from_") or node.args.get("from")
        if isinstance(from_, exp.From):
            self.add_source(from_.this, scope, nullable=False)
        for join in node.args.get("joins") or []:
            self.join(join, scope)

    def join(self, join: exp.Join, scope: Scope) -> None:
        side = (join.side or "").upper()
        before = len(scope.relations)
        left_star = list(scope.star)
        self.add_source(join.this, scope, nullable=side in ("LEFT", "FULL"))
        if side in ("RIGHT", "FULL"):
            for rel in scope.relations[:before]:
                rel.make_optional()
            left_star = [StarColumn(c.name, Typed(c.typed.type, True, c.typed.embedded), c.sql) for c in left_star]
        right_star = scope.star[len(left_star) :]
        on = join.args.get("on")
        if on is not None:
            self.expr.expect(on, t.BOOL, scope)
        using = [ident.name for ident in join.args.get("using") or []]
        if str(join.args.get("method") or "").upper() == "NATURAL":
            right_names = {c.name for c in right_star}
            using = [c.name for c in left_star if c.name in right_names]
        for ident, name in zip(join.args.get("using") or [], using, strict=False):
            if not any(c.name == name for c in left_star) or not any(c.name == name for c in right_star):
                self.state.error(f"column {name} named in USING is not on both sides of the join", ident)
                return
        if not using or len(scope.relations) == before:
            scope.star = left_star + right_star
            return
        merged: list[StarColumn] = []
        for name in using:
            left = next(c for c in left_star if c.name == name)
            right = next(c for c in right_star if c.name == name)
            if side == "FULL":
                typed = Typed(left.typed.type, left.typed.nullable and right.typed.nullable)
                merged.append(StarColumn(name, typed, f"COALESCE({left.sql}, {right.sql}) AS {quote_ident(name)}"))
            elif side == "RIGHT":
                merged.append(right)
            elif side == "LEFT":
                merged.append(left)
            else:  # an inner join matched the two by equality: neither is NULL
                merged.append(StarColumn(name, Typed(left.typed.type, False), left.sql))
            scope.merged[name] = merged[-1].typed
            if side != "FULL":
                scope.merged_as[name] = (right if side == "RIGHT" else left).sql
        scope.star = [
            *merged,
            *(c for c in left_star if c.name not in using),
            *(c for c in right_star if c.name not in using),
        ]

    def add_source(self, source: exp.Expr, scope: Scope, nullable: bool) -> None:
        if isinstance(source, exp.Subquery) and isinstance(source.this, exp.Table) and source.this.args.get("joins"):
            self.nested_join(source, scope, nullable)
            return
        rel = self.relation_of(source, scope)
        if rel is None:
            return
        if nullable:
            rel.make_optional()
        for existing in scope.relations:
            if existing.alias == rel.alias:
                self.state.error(f"table name {rel.alias} is specified more than once; give one an alias", source)
        scope.add_relation(rel)

    def nested_join(self, source: exp.Subquery, scope: Scope, nullable: bool) -> None:
        """`FROM (a JOIN b ON ...) JOIN c`: the parenthesised join tree is joined as a unit (on
        the far side of an outer join, all of it may be absent); with an alias, `(a JOIN b) AS j`,
        it is one relation whose columns are the join's."""
        inner = Scope(parent=scope)
        first = source.this.copy()
        first.set("joins", None)
        self.add_source(first, inner, nullable=False)
        for join in source.this.args["joins"]:
            self.join(join, inner)
        if source.alias:
            columns = [(c.name, c.typed) for c in inner.star]
            rels = [Relation(source.alias, (source.alias,), columns, incomplete=inner.lenient())]
        else:
            rels = inner.relations
            scope.merged.update(inner.merged)
            scope.merged_as.update(inner.merged_as)
        for rel in rels:
            if nullable:
                rel.make_optional()
            if any(existing.alias == rel.alias for existing in scope.relations):
                self.state.error(f"table name {rel.alias} is specified more than once; give one an alias", source)
            scope.relations.append(rel)
        star = [
            StarColumn(c.name, Typed(c.typed.type, True, c.typed.embedded), c.sql) if nullable else c
            for c in inner.star
        ]
        if source.alias:
            star = rels[0].star()
        scope.star.extend(star)
        scope.broken = scope.broken or inner.broken

    def relation_of(self, source: exp.Expr, scope: Scope) -> Relation | None:
        alias = source.args.get("alias")
        alias_name = alias.name if isinstance(alias, exp.TableAlias) and alias.name else None
        col_aliases = [c.name for c in alias.columns] if isinstance(alias, exp.TableAlias) else []
        if isinstance(source, exp.Table) and isinstance(source.this, exp.Identifier):
            name = source.name
            keyword = None if source.this.quoted or source.args.get("db") else SQL_VALUE_KEYWORDS.get(name)
            if keyword is not None:  # FROM current_date: a function, its one column named after it
                rel_name = alias_name or name
                return Relation(
                    rel_name,
                    (rel_name,),
                    [(col_aliases[0] if col_aliases else rel_name, Typed(keyword, name == "current_schema"))],
                )
            if not source.args.get("db"):
                cte = scope.cte(name)
                if cte is not None:
                    return Relation(
                        alias_name or name, (alias_name or name,), list(cte.columns), incomplete=cte.incomplete
                    )
            table = self.table(source, scope)
            if table is None:
                scope.broken = True
                return None
            names = (alias_name,) if alias_name else (table.name, table.qualified)
            cols = [(c.name, Typed(c.type, not c.not_null)) for c in table.columns]
            return Relation(alias_name or table.name, names, cols, table, system=system_columns())
        if isinstance(source, exp.Subquery):
            errors_before = len(self.state.problems)
            rows = self.queries.query(source.this, Scope(parent=scope))
            cols = [(n, typed) for n, typed, _ in rows]
            cols = rename(cols, col_aliases)
            name = alias_name or "?subquery?"
            return Relation(name, (name,), cols, incomplete=len(self.state.problems) > errors_before)
        definitions = self.column_definitions(alias)
        if isinstance(source, exp.Table) and isinstance(source.this, (exp.Unnest, exp.Anonymous, exp.Func)):
            db = source.args.get("db")
            at = self.state.span(db) if isinstance(db, exp.Expr) else None
            # `schema.fn(...)`: sqlglot places the name after the dot, PostgreSQL the schema.
            qualified = self.state.calls.get(at.start) if at is not None else None
            return self.function_source(
                source.this, alias_name, col_aliases, scope, qualified=qualified, definitions=definitions
            )
        if isinstance(source, (exp.Unnest, exp.Func)):
            return self.function_source(source, alias_name, col_aliases, scope, definitions=definitions)
        if isinstance(source, exp.Values):
            rows = self.queries.values_rows(source, scope)
            cols = rename([(n, typed) for n, typed, _ in rows], col_aliases)
            name = alias_name or "*VALUES*"
            return Relation(name, (name,), cols)
        if isinstance(source, exp.Lateral) and isinstance(source.this, exp.Expr):
            # LATERAL sees the FROM items before it: `scope` holds them.
            inner = source.this
            if isinstance(inner, exp.Subquery):
                errors_before = len(self.state.problems)
                rows = self.queries.query(inner.this, Scope(parent=scope))
                name = alias_name or "?subquery?"
                cols = rename([(n, typed) for n, typed, _ in rows], col_aliases)
                return Relation(name, (name,), cols, incomplete=len(self.state.problems) > errors_before)
            if isinstance(inner, (exp.Unnest, exp.Func)):
                return self.function_source(inner, alias_name, col_aliases, scope, definitions=definitions)
        self.state.error(f"unsupported FROM item {type(source).__name__}", source)
        return None

    def column_definitions(self, alias: exp.Expr | None) -> list[tuple[str, Typed]] | None:
        """A column definition list, `AS t(a int, b text)` (a function returning record): each
        column's name and the type PostgreSQL's TypeName at its place names."""
        if not isinstance(alias, exp.TableAlias):
            return None
        out = []
        for col in alias.columns:
            kind = col.args.get("kind") if isinstance(col, exp.ColumnDef) else None
            if not isinstance(kind, exp.DataType):
                return None
            start = kind.meta.get("start")
            type_name = (
                (self.state.type_names_at.get(start) or self.state.type_names_at.get(start - 1))
                if isinstance(start, int)
                else None
            )
            pgtype = resolve_type_name(type_name, self.state.catalog) if type_name is not None else None
            if pgtype is None:
                self.state.error(f"pydb cannot read the type {kind.sql(dialect='postgres')}", kind)
            out.append((col.name, Typed(pgtype, True)))
        return out or None

    def function_source(
        self,
        func: exp.Expr,
        alias: str | None,
        col_aliases: list[str],
        scope: Scope,
        *,
        qualified: ast.FuncCall | None = None,
        definitions: list[tuple[str, Typed]] | None = None,
    ) -> Relation:
        if isinstance(func, exp.Unnest):
            cols: list[tuple[str, Typed]] = []
            for i, arg in enumerate(func.expressions):
                typed = self.expr.infer(arg, scope)
                elem = typed.type.element if typed.type is not None and typed.type.is_array else None
                if typed.type is not None and not typed.type.is_array and typed.type != t.UNKNOWN:
                    self.state.error(f"unnest() takes arrays; argument {i + 1} is {typed.type}", arg)
                # A bound repeated field has no NULL elements; an array column may.
                bare = arg.this if isinstance(arg, exp.Cast) else arg
                elem_nullable = not isinstance(bare, exp.Parameter)
                cols.append((f"unnest{i + 1}" if len(func.expressions) > 1 else "unnest", Typed(elem, elem_nullable)))
            if len(col_aliases) > len(cols):
                self.state.error(
                    f"unnest() yields {len(cols)} column{'s' if len(cols) != 1 else ''} but {len(col_aliases)} names "
                    "were given",
                    func,
                )
            cols = rename(cols, col_aliases)
            ordinality = func.args.get("offset")
            if isinstance(ordinality, exp.Expr):  # WITH ORDINALITY: a row number, 1, 2, ...
                cols.append(
                    (ordinality.name if isinstance(ordinality, exp.Identifier) else "ordinality", Typed(t.INT8, False))
                )
            name = alias or "unnest"
            if alias and not col_aliases and len(cols) == 1 and not isinstance(ordinality, exp.Expr):
                # `unnest(a) AS u`: a function of one column, which the alias names too
                return Relation(name, (name,), [(name, cols[0][1])], scalar=True)
            return Relation(name, (name,), cols)
        errors_before = len(self.state.problems)
        typed = (
            self.functions.resolved_call(func, qualified, scope) if qualified is not None else None
        ) or self.expr.infer(func, scope)
        incomplete = len(self.state.problems) > errors_before  # its columns are not known: no follow-on errors
        name = alias or (function_name(func) if isinstance(func, exp.Func) else "function")
        if definitions is not None:  # jsonb_to_recordset(j) AS x(id int8, name text)
            return Relation(name, (name,), definitions, incomplete=incomplete)
        out = self.state.row_columns.get(id(func))
        row_type = None
        if out is None and typed.type is not None:
            out = row_type_columns(self.state.catalog, typed.type)
            row_type = typed.type if out is not None else None
        if out is not None:  # jsonb_each(j): key, value; a function's OUT or TABLE columns, or row type's
            cols = rename([(n, Typed(pgtype, True)) for n, pgtype in out], col_aliases)
            # one OUT column (jsonb_array_elements(j) AS e): the function returns that type, and
            # a reference to the alias is the value, as PostgreSQL reads `e->>'k'`
            scalar = row_type is None and len(cols) == 1
            return Relation(name, (name,), cols, row_type=row_type, scalar=scalar)
        out_name = self.state.out_names.get(id(func))
        if out_name:  # f(..., OUT id int): the column is id, NULL when the body assigns none
            typed = Typed(typed.type, True)
        column = col_aliases[0] if col_aliases else out_name or name
        return Relation(name, (name,), [(column, typed)], incomplete=incomplete, scalar=True)

    def table(self, node: exp.Table, scope: Scope | None = None) -> Table | None:
        """The table `node` names: a qualified name in its schema, an unqualified one along the
        search_path (names.lookup)."""
        schema = node.db or None
        table = self.state.catalog.table(schema, node.name)
        if table is None:
            written = f"{schema}.{node.name}" if schema else node.name
            if schema is not None and scope is not None and scope.cte(node.name) is not None:
                self.state.error(f"table {written} does not exist (a WITH query is named without a schema)", node)
                return None
            if (
                schema is not None
                and schema not in self.state.catalog.schemas
                and schema not in BUILTIN_RELATION_SCHEMAS
            ):
                self.state.error(
                    f"schema {schema} does not exist{did_you_mean(schema, sorted(self.state.catalog.schemas))}", node
                )
            else:
                self.state.error(
                    f"table {written} does not exist{_suggest_table(schema, node.name, self.state.catalog)}", node
                )
        return table

    def find_relation(self, qualifier: str, scope: Scope, node: exp.Expr) -> Relation | None:
        s: Scope | None = scope
        while s is not None:
            for rel in s.relations:
                if qualifier in rel.names:
                    return rel
            s = s.parent
        if not scope.lenient():
            visible = sorted({n for rel in all_relations(scope) for n in rel.names})
            self.state.error(f"missing FROM-clause entry for table {qualifier}{did_you_mean(qualifier, visible)}", node)
        return None

    def column(self, col: exp.Column, scope: Scope, allow_output: bool = False) -> Typed:
        name = col.name
        qualifier = col.table
        if qualifier:
            rel = self.find_relation(qualifier, scope, col)
            if rel is None:
                return Typed(None, True)
            typed = rel.column(name)
            if typed is None:
                if rel.incomplete:
                    return Typed(None, True)
                self.state.error(
                    f"column {name} does not exist in {rel.alias}{did_you_mean(name, [n for n, _ in rel.columns])}",
                    col,
                )
                return Typed(None, True)
            return typed
        keyword = SQL_VALUE_KEYWORDS.get(name) if isinstance(col.this, exp.Identifier) and not col.this.quoted else None
        if keyword is not None:  # SELECT user, current_role: reserved words, never a column
            return Typed(keyword, name == "current_schema")
        s: Scope | None = scope
        while s is not None:
            if name in s.merged:
                return s.merged[name]
            found = [(rel, rel.column(name)) for rel in s.relations if rel.column(name) is not None]
            if len(found) > 1:
                owners = ", ".join(rel.alias for rel, _ in found)
                self.state.error(f"column reference {name} is ambiguous (in {owners}); qualify it", col)
                return Typed(None, True)
            if found:
                typed = found[0][1]
                assert typed is not None
                return typed
            if allow_output and s is scope and name in s.output:
                return s.output[name]
            whole_row = next((rel for rel in s.relations if name in rel.names), None)
            if whole_row is not None and whole_row.scalar and whole_row.columns:
                return whole_row.columns[0][1]
            if whole_row is not None:  # a whole-row reference: to_jsonb(t), SELECT c FROM customers c
                # A table's (or view's) row is of its row type, as PostgreSQL describes it; any
                # other FROM item's (a subquery, a CTE, a function) is a record.
                table = whole_row.table
                row_type = (
                    PgType(f"{table.schema}.{table.name}")
                    if table is not None
                    else whole_row.row_type or PgType("record")
                )
                return Typed(row_type, whole_row.optional, tuple(whole_row.row_columns()))
            s = s.parent
        if scope.lenient():
            return Typed(None, True)
        visible = sorted({n for rel in all_relations(scope) for n, _ in rel.columns})
        self.state.error(f"column {name} does not exist{did_you_mean(name, visible)}", col)
        return Typed(None, True)


def _recursive_type(seed: PgType | None, step: PgType | None) -> PgType | None:
    """The type a recursive CTE's column takes over both terms (None: not known); PostgreSQL
    requires it to be the non-recursive term's."""
    if seed is None or step is None or step in (t.UNKNOWN, t.NULL) or seed == step:
        return seed
    try:  # PostgreSQL's select_common_type over both terms, as for UNION
        return common_type([seed, step], "UNION")
    except ResolveError:
        return step
