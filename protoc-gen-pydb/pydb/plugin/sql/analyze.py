"""Statement analysis: one SQL statement + the Catalog -> its parameters and result columns.

Walks sqlglot's AST with explicit scopes (FROM items, CTEs, outer queries for correlated
subqueries). Every `@name` gets a type from the context it is used in; every output column
gets a type and a nullability. Problems carry spans into the statement text.
"""

from __future__ import annotations

import datetime
import difflib
import itertools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokenizer_core import TokenType

from ..diagnostics import Problem, SqlSpan, stray_comma, syntax_problem, unterminated_at
from . import types as t
from .analysis import Analysis, Param, ResultColumn, StatementKind
from .catalog import Catalog, Column, Table
from .grammar import check_statement
from .types import PgType, UnknownType, span_of


@dataclass(frozen=True)
class Typed:
    type: PgType | None  # None: not known (an error was reported, or beyond the analyzer)
    nullable: bool


@dataclass
class Relation:
    """A row source visible in a scope: a table, CTE, subquery or function in FROM."""

    alias: str
    names: tuple[str, ...]  # every name it can be qualified by
    columns: list[tuple[str, Typed]]
    table: Table | None = None
    #: Built from a query that had errors: its column list may be short, so a column not
    #: found in it is a consequence, not a new error.
    incomplete: bool = False

    def column(self, name: str) -> Typed | None:
        for cname, typed in self.columns:
            if cname == name:
                return typed
        return None


@dataclass
class Scope:
    relations: list[Relation] = field(default_factory=list)
    parent: Scope | None = None
    ctes: dict[str, Relation] = field(default_factory=dict)
    #: Output column aliases, visible to ORDER BY.
    output: dict[str, Typed] = field(default_factory=dict)
    #: A FROM item failed to resolve (unknown table, ...): columns it would have provided
    #: are missing, so unresolved names here are not reported again.
    broken: bool = False

    def lenient(self) -> bool:
        """Whether an error already reported makes a missing name here expected."""
        scope: Scope | None = self
        while scope is not None:
            if scope.broken or any(rel.incomplete for rel in scope.relations):
                return True
            scope = scope.parent
        return False

    def cte(self, name: str) -> Relation | None:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.ctes:
                return scope.ctes[name]
            scope = scope.parent
        return None


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
_CONTAINMENT = (exp.ArrayContainsAll, exp.ArrayContainedBy, exp.ArrayOverlaps)
_KEY_TESTS = (exp.JSONBContainsTopKey, exp.JSONBContainsAnyTopKeys, exp.JSONBContainsAllTopKeys)
_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.NullSafeEQ, exp.NullSafeNEQ)
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)


def parameter_spans(sql: str) -> dict[str, list[SqlSpan]]:
    """Where each `@name` stands in `sql`, from the tokenizer (not a regex: `@` inside a
    string literal or comment is no parameter)."""
    spans: dict[str, list[SqlSpan]] = {}
    try:
        tokens = sqlglot.tokenize(sql, read="postgres")
    except TokenError:
        return spans  # parsing reports it
    for tok, nxt in itertools.pairwise(tokens):
        if tok.token_type == TokenType.PARAMETER and nxt.start == tok.end + 1:
            spans.setdefault(nxt.text, []).append(SqlSpan(tok.start, nxt.end))
    return spans


def _suggest(name: str, candidates: list[str]) -> str:
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def _suggest_table(name: str, tables: list[str]) -> str:
    """Did-you-mean for `schema.table`: the table part is compared within the same schema, so
    the shared `schema.` prefix does not make every table look alike."""
    schema, _, bare = name.rpartition(".")
    schema = schema or "public"
    same_schema = [n.rpartition(".")[2] for n in tables if n.rpartition(".")[0] == schema]
    close = difflib.get_close_matches(bare, same_schema, n=1, cutoff=0.6)
    if close:
        return f"; did you mean {schema + '.' if '.' in name else ''}{close[0]}?"
    return "" if same_schema else _suggest(name, tables)


class Analyzer:
    def __init__(self, sql: str, catalog: Catalog, nullable_params: frozenset[str] = frozenset()):
        self.sql = sql
        self.catalog = catalog
        self.nullable_params = nullable_params
        self.problems: list[Problem] = []
        self.param_types: dict[str, PgType | None] = {}
        self.param_spans = parameter_spans(sql)
        self.window_depth = 0
        self._param_order: list[str] = []

    # -- reporting -------------------------------------------------------------------------
    def error(self, message: str, node: exp.Expr | None = None, span: SqlSpan | None = None) -> None:
        if span is None and node is not None:
            span = self.span(node)
        self.problems.append(Problem(message, span))

    def span(self, node: exp.Expr) -> SqlSpan | None:
        """Where `node` stands in the statement. sqlglot places identifiers and literals but
        not parameters, NULL or parentheses: those are added from the tokens."""
        span = span_of(node)
        for param in node.find_all(exp.Parameter):
            spans = self.param_spans.get(param.name, [])
            if len(spans) == 1:  # a parameter used once can only be here
                span = (
                    spans[0] if span is None else SqlSpan(min(span.start, spans[0].start), max(span.end, spans[0].end))
                )
        if span is None:
            return None
        if isinstance(node, exp.Tuple):
            before = self.sql[: span.start].rstrip()
            if before.endswith("("):
                span = SqlSpan(len(before) - 1, span.end)
        if isinstance(node, (exp.Func, exp.Paren, exp.Subquery, exp.Tuple)):
            span = _close_parens(self.sql, span)
        if isinstance(node, exp.Cast):
            # `x::type`: sqlglot places x but not the type written after it.
            written = _CAST_SUFFIX.match(self.sql, span.end + 1)
            if written is not None:
                span = SqlSpan(span.start, written.end() - 1)
        return span

    def keyword_after(self, anchor: SqlSpan | None, keyword: str) -> SqlSpan | None:
        """The next `keyword` (e.g. NULL, which sqlglot does not place) after `anchor`."""
        if anchor is None:
            return None
        m = re.compile(rf"\b{keyword}\b", re.IGNORECASE).search(self.sql, anchor.end + 1)
        return SqlSpan(m.start(), m.end() - 1) if m else None

    def _param_span(self, name: str) -> SqlSpan | None:
        spans = self.param_spans.get(name)
        return spans[0] if spans else None

    # -- parameters ------------------------------------------------------------------------
    def _see_param(self, name: str) -> None:
        if name not in self.param_types:
            self.param_types[name] = None
            self._param_order.append(name)

    def bind(self, param: exp.Parameter, pgtype: PgType | None) -> None:
        name = param.name
        self._see_param(name)
        if pgtype is None or pgtype in (t.UNKNOWN, t.NULL):
            return
        current = self.param_types[name]
        if current is None:
            self.param_types[name] = pgtype
        elif current != pgtype and not _same_family(current, pgtype):
            self.error(f"parameter @{name} is used both as {current} and as {pgtype}", span=self._param_span(name))

    # -- entry point -----------------------------------------------------------------------
    def analyze(self) -> Analysis | None:
        try:
            statements = sqlglot.parse(self.sql, read="postgres")
        except TokenError:
            self.error(
                "syntax error: unterminated string, quoted identifier or comment",
                span=unterminated_at(self.sql) or SqlSpan(0, max(len(self.sql) - 1, 0)),
            )
            return None
        except ParseError as err:
            self.problems.append(syntax_problem(self.sql, err))
            return None
        comma = stray_comma(self.sql)
        if comma is not None:
            self.problems.append(comma)
            return None
        statements = [s for s in statements if s is not None]
        if len(statements) != 1:
            # The second statement starts after the first `;` (the tokenizer found it).
            semicolon = next(
                (
                    tok.end
                    for tok in sqlglot.tokenize(self.sql, read="postgres")
                    if tok.token_type == TokenType.SEMICOLON
                ),
                None,
            )
            rest = self.sql[semicolon + 1 :] if semicolon is not None else ""
            start = len(self.sql) - len(rest.lstrip())
            line_end = self.sql.find("\n", start)
            end = (line_end if line_end != -1 else len(self.sql.rstrip())) - 1
            second = SqlSpan(start, end) if rest.strip() and end >= start else None
            self.error(f"expected exactly one SQL statement, found {len(statements)}", span=second)
            return None
        stmt = statements[0]
        scope = Scope()
        key_param: str | None = None
        target: Table | None = None
        conflict_do_nothing = False
        columns: list[tuple[str, Typed, SqlSpan | None]] | None
        if isinstance(stmt, (exp.Select, exp.Union, exp.Intersect, exp.Except)):
            kind: StatementKind = "select"
            columns = self.query(stmt, scope)
        elif isinstance(stmt, exp.Insert):
            kind = "insert"
            target, columns, conflict_do_nothing = self.insert(stmt, scope)
        elif isinstance(stmt, exp.Update):
            kind = "update"
            target, columns, key_param = self.update(stmt, scope)
        elif isinstance(stmt, exp.Delete):
            kind = "delete"
            target, columns, key_param = self.delete(stmt, scope)
        else:
            first_word = self.sql.split()[0].upper() if self.sql.split() else "?"
            start = len(self.sql) - len(self.sql.lstrip())
            self.error(
                f"unsupported statement {first_word}: expected SELECT, INSERT, UPDATE or DELETE",
                span=SqlSpan(start, start + len(first_word) - 1),
            )
            return None
        for name in self.param_spans:
            self._see_param(name)
        params = []
        # After another error a parameter's context may be what failed: do not pile on.
        report_untyped = not self.problems
        for name in self._param_order:
            ptype = self.param_types[name]
            if ptype is None and report_untyped:
                self.error(
                    f"cannot infer the type of parameter @{name}; add a cast, e.g. @{name}::text",
                    span=self._param_span(name),
                )
            params.append(Param(name, ptype, tuple(self.param_spans.get(name, ()))))
        result = None
        if columns is not None:
            # Postgres resolves an untyped literal in the output to text.
            result = tuple(
                ResultColumn(n, t.TEXT if typed.type == t.UNKNOWN else typed.type, typed.nullable, span)
                for n, typed, span in columns
            )
            self._check_duplicate_columns(result)
            if not self.problems:
                for col in result:
                    if col.type is None or col.type == t.NULL:
                        self.error(
                            f"cannot tell the type of result column {col.name}; add a cast, e.g. (...)::text AS {col.name}",
                            span=col.span,
                        )
        return Analysis(kind, tuple(params), result, target, key_param, conflict_do_nothing, tuple(self.problems))

    def _check_duplicate_columns(self, columns: tuple[ResultColumn, ...]) -> None:
        seen: set[str] = set()
        for col in columns:
            if col.name in seen:
                self.error(f"result column {col.name} appears more than once; give it an alias", span=col.span)
            seen.add(col.name)

    # -- queries ---------------------------------------------------------------------------
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
            errors_before = len(self.problems)
            if with_.args.get("recursive") and isinstance(body, exp.Union):
                # WITH RECURSIVE: the non-recursive term gives the columns the recursive
                # term (which names the CTE itself) sees.
                seed = self.query(body.this, inner)
                inner.ctes[name] = Relation(name, (name,), _rename([(n, ty) for n, ty, _ in seed], alias_cols))
                step = self.query(body.expression, inner)
                if len(seed) != len(step):
                    self.error(
                        f"each side of UNION must have the same number of columns ({len(seed)} vs {len(step)})", body
                    )
                cols: list[tuple[str, Typed, SqlSpan | None]] | None = seed
            else:
                cols = self.statement_rows(body, inner)
            incomplete = len(self.problems) > errors_before
            rel_cols = _rename([(n, typed) for n, typed, _ in (cols or [])], alias_cols)
            inner.ctes[name] = Relation(name, (name,), rel_cols, incomplete=incomplete)
        return inner

    def statement_rows(self, body: exp.Expr, scope: Scope) -> list[tuple[str, Typed, SqlSpan | None]] | None:
        """Rows of a statement that may stand in a CTE: a query or data-modifying statement."""
        if isinstance(body, exp.Insert):
            return self.insert(body, scope)[1]
        if isinstance(body, exp.Update):
            return self.update(body, scope)[1]
        if isinstance(body, exp.Delete):
            return self.delete(body, scope)[1]
        return self.query(body, scope)

    def query(self, node: exp.Expr, scope: Scope) -> list[tuple[str, Typed, SqlSpan | None]]:
        if isinstance(node, exp.Subquery):
            return self.query(node.this, scope)
        if isinstance(node, (exp.Union, exp.Intersect, exp.Except)):
            scope = self.with_ctes(node, scope)
            left = self.query(node.this, scope)
            right = self.query(node.expression, scope)
            if len(left) != len(right):
                self.error(
                    f"each side of {type(node).__name__.upper()} must have the same number of columns ({len(left)} vs {len(right)})",
                    node,
                )
            merged = []
            for i, (name, typed, span) in enumerate(left):
                other = right[i][1] if i < len(right) else typed
                a, b = typed.type, other.type
                if (
                    a is not None
                    and b is not None
                    and t.UNKNOWN not in (a, b)
                    and t.NULL not in (a, b)
                    and not (assignable(a, b) or assignable(b, a))
                ):
                    kind = type(node).__name__.upper()
                    self.error(f"{kind} types {_describe(a)} and {_describe(b)} cannot be matched", span=span)
                known = a if a not in (None, t.UNKNOWN, t.NULL) else b
                if known in (None, t.UNKNOWN) and t.UNKNOWN in (a, b):
                    known = t.TEXT  # Postgres resolves a column of untyped literals to text
                elif a is not None and b is not None and {a.name, b.name} <= t.NUMERIC and not a.is_array:
                    known = _wider(a, b)  # int4 UNION numeric is numeric
                merged.append((name, Typed(known, typed.nullable or other.nullable), span))
            return merged
        if isinstance(node, exp.Values):
            return self.values_rows(node, scope)
        if not isinstance(node, exp.Select):
            self.error(f"unsupported query {type(node).__name__}", node)
            return []
        scope = self.with_ctes(node, scope)
        local = Scope(parent=scope)
        self.from_clause(node, local)
        where = node.args.get("where")
        if where is not None:
            self.expect(where.this, t.BOOL, local)
        group = node.args.get("group")
        if group is not None:
            output_aliases = {e.alias for e in node.expressions if isinstance(e, exp.Alias)}
            for g in group.expressions:
                if (
                    isinstance(g, exp.Column)
                    and not g.table
                    and g.name in output_aliases
                    and g.name not in _local_column_names(local)
                ):
                    continue  # GROUP BY an output name: checked as that output
                self.infer(g, local)
        having = node.args.get("having")
        if having is not None:
            self.expect(having.this, t.BOOL, local)
        distinct = node.args.get("distinct")
        if isinstance(distinct, exp.Distinct) and distinct.args.get("on") is not None:
            on = distinct.args["on"]
            for e in on.expressions if isinstance(on, exp.Tuple) else [on]:
                self.infer(e, local)
        outputs = self.projections(node.expressions, local)
        local.output = {n: typed for n, typed, _ in outputs}
        order = node.args.get("order")
        if order is not None:
            for o in order.expressions:
                key = o.this if isinstance(o, exp.Ordered) else o
                if isinstance(key, exp.Literal) and not key.is_string and _is_int(str(key.this)):
                    if not 1 <= int(str(key.this)) <= len(outputs):
                        self.error(f"ORDER BY position {key.this} is not in select list", key)
                elif isinstance(key, (exp.Literal, exp.Boolean, exp.Null)):
                    self.error("non-integer constant in ORDER BY", key)
                else:
                    self.infer(key, local, allow_output=True)
            if isinstance(distinct, exp.Distinct) and distinct.args.get("on") is not None:
                self.check_distinct_on(distinct.args["on"], order)
        for key in ("limit", "offset"):
            clause = node.args.get(key)
            if clause is not None:
                value = (
                    clause.args.get("expression") if key == "limit" else clause.args.get("expression") or clause.this
                )
                if isinstance(value, exp.Expr):
                    self.expect(value, t.INT8, local)
        self.check_grouping(node, local)
        return outputs

    def check_per_row(self, clause: exp.Expr, where: str) -> bool:
        """No aggregate or window function in a clause evaluated per row (WHERE, ON, GROUP BY).
        False when one was reported."""
        found = next(_aggregates(clause), None)
        if found is not None:
            self.error(f"aggregate functions are not allowed in {where}", found)
            return False
        window = next((w for w in clause.find_all(exp.Window) if _same_query(w, clause)), None)
        if window is not None:
            self.error(f"window functions are not allowed in {where}", window)
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
            self.error("SELECT DISTINCT ON expressions must match initial ORDER BY expressions", on)

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
            for agg in _aggregates(item):
                for arg in agg.iter_expressions():
                    inner = next(_aggregates(arg), None)
                    if inner is not None:
                        self.error("aggregate function calls cannot be nested", inner)
                        return
        group = node.args.get("group")
        grouped_query = group is not None or having is not None or any(next(_aggregates(e), None) for e in results)
        if not grouped_query or scope.lenient():
            return
        grouped_sql: set[str] = set()
        grouped_cols: set[tuple[int, str]] = set()  # (id of the relation, column name)
        for g in group.expressions if group is not None else []:
            if isinstance(g, exp.Literal) and not g.is_string and _is_int(str(g.this)):
                position = int(str(g.this))
                if 1 <= position <= len(node.expressions):
                    g = node.expressions[position - 1]
            if isinstance(g, exp.Column) and not g.table and g.name not in _local_column_names(scope):
                # GROUP BY an output alias groups by that output's expression.
                g = next((e for e in node.expressions if isinstance(e, exp.Alias) and e.alias == g.name), g)
            g = g.this if isinstance(g, exp.Alias) else g
            grouped_sql.add(g.sql(dialect="postgres"))
            if isinstance(g, exp.Column):
                rel = _owner(g, scope)
                if rel is not None:
                    grouped_cols.add((id(rel), g.name))
        order = node.args.get("order")
        items = [*results, *([o for o in order.expressions] if order is not None else [])]
        for item in items:
            for col in _free_columns(item.this if isinstance(item, exp.Alias) else item, grouped_sql):
                rel = _owner(col, scope)
                if rel is None or (id(rel), col.name) in grouped_cols:
                    continue
                table = rel.table
                if (
                    table is not None
                    and table.primary_key
                    and all((id(rel), k) in grouped_cols for k in table.primary_key)
                ):
                    continue  # grouped by the primary key: every column is functionally dependent
                self.error(
                    f"column {rel.alias}.{col.name} must appear in the GROUP BY clause or be used in an aggregate function",
                    col,
                )
                return

    def values_rows(self, node: exp.Values, scope: Scope) -> list[tuple[str, Typed, SqlSpan | None]]:
        rows = [row.expressions if isinstance(row, exp.Tuple) else [row] for row in node.expressions]
        if not rows:
            return []
        for row, row_node in zip(rows[1:], node.expressions[1:], strict=True):
            if len(row) != len(rows[0]):
                self.error("VALUES lists must all be the same length", row_node)
                rows = rows[:1]  # type the first row only; its columns stay known
                break
        out: list[tuple[str, Typed, SqlSpan | None]] = []
        for i, first in enumerate(rows[0]):
            cells = [row[i] for row in rows]
            typed = [None if _is_untyped(c) else self.infer(c, scope) for c in cells]
            # A column's type is its first typed value's; all-untyped literals are text.
            known = next((x.type for x in typed if x is not None and x.type not in (None, t.UNKNOWN, t.NULL)), None)
            if known is None and any(isinstance(c, exp.Literal) and c.is_string for c in cells):
                known = t.TEXT
            for x in typed:  # (1), (2.5): numeric
                other = x.type if x is not None else None
                if known is not None and other is not None and {known.name, other.name} <= t.NUMERIC:
                    known = _wider(known, other) if not (known.is_array or other.is_array) else known
            nullable = False
            for cell, cell_type in zip(cells, typed, strict=True):
                if cell_type is None:
                    cell_type = self.expect(cell, known, scope) if known is not None else self.infer(cell, scope)
                elif known is not None and cell_type.type is not None:
                    self._check_comparable(cell_type.type, known, cell)
                nullable = nullable or cell_type.nullable
            out.append((f"column{i + 1}", Typed(known, nullable), span_of(first)))
        return out

    def projections(self, items: list[exp.Expr], scope: Scope) -> list[tuple[str, Typed, SqlSpan | None]]:
        out: list[tuple[str, Typed, SqlSpan | None]] = []
        for item in items:
            if isinstance(item, exp.Star):
                for rel in scope.relations:
                    out.extend((n, typed, span_of(item)) for n, typed in rel.columns)
                if not scope.relations and not scope.lenient():
                    self.error("SELECT * with no FROM", item)
                continue
            if isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
                star_rel = self.find_relation(item.table, scope, item)
                if star_rel is not None:
                    out.extend((n, typed, span_of(item)) for n, typed in star_rel.columns)
                continue
            typed = self.infer(item, scope)
            out.append((_output_name(item), typed, span_of(item)))
        return out

    # -- FROM ------------------------------------------------------------------------------
    def from_clause(self, node: exp.Expr, scope: Scope) -> None:
        from_ = node.args.get("from_") or node.args.get("from")
        if isinstance(from_, exp.From):
            self.add_source(from_.this, scope, nullable=False)
        for join in node.args.get("joins") or []:
            self.join(join, scope)

    def join(self, join: exp.Join, scope: Scope) -> None:
        side = (join.side or "").upper()
        before = len(scope.relations)
        self.add_source(join.this, scope, nullable=side in ("LEFT", "FULL"))
        if side in ("RIGHT", "FULL"):
            for rel in scope.relations[:before]:
                rel.columns = [(n, Typed(typed.type, True)) for n, typed in rel.columns]
        on = join.args.get("on")
        if on is not None:
            self.expect(on, t.BOOL, scope)
        for ident in join.args.get("using") or []:
            name = ident.name
            if (
                not any(rel.column(name) for rel in scope.relations[:before])
                or scope.relations[-1].column(name) is None
            ):
                self.error(f"column {name} named in USING is not on both sides of the join", ident)

    def add_source(self, source: exp.Expr, scope: Scope, nullable: bool) -> None:
        rel = self.relation_of(source, scope)
        if rel is None:
            return
        if nullable:
            rel.columns = [(n, Typed(typed.type, True)) for n, typed in rel.columns]
        for existing in scope.relations:
            if existing.alias == rel.alias:
                self.error(f"table name {rel.alias} is specified more than once; give one an alias", source)
        scope.relations.append(rel)

    def relation_of(self, source: exp.Expr, scope: Scope) -> Relation | None:
        alias = source.args.get("alias")
        alias_name = alias.name if isinstance(alias, exp.TableAlias) and alias.name else None
        col_aliases = [c.name for c in alias.columns] if isinstance(alias, exp.TableAlias) else []
        if isinstance(source, exp.Table) and isinstance(source.this, exp.Identifier):
            name = t.qualified_name(source.this)
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
            return Relation(alias_name or table.name, names, cols, table)
        if isinstance(source, exp.Subquery):
            errors_before = len(self.problems)
            rows = self.query(source.this, Scope(parent=scope))
            cols = [(n, typed) for n, typed, _ in rows]
            cols = _rename(cols, col_aliases)
            name = alias_name or "?subquery?"
            return Relation(name, (name,), cols, incomplete=len(self.problems) > errors_before)
        if isinstance(source, exp.Table) and isinstance(source.this, (exp.Unnest, exp.Anonymous, exp.Func)):
            return self.function_source(source.this, alias_name, col_aliases, scope)
        if isinstance(source, (exp.Unnest, exp.Func)):
            return self.function_source(source, alias_name, col_aliases, scope)
        if isinstance(source, exp.Values):
            rows = self.values_rows(source, scope)
            cols = _rename([(n, typed) for n, typed, _ in rows], col_aliases)
            name = alias_name or "*VALUES*"
            return Relation(name, (name,), cols)
        if isinstance(source, exp.Lateral) and isinstance(source.this, exp.Expr):
            # LATERAL sees the FROM items before it: `scope` holds them.
            inner = source.this
            if isinstance(inner, exp.Subquery):
                errors_before = len(self.problems)
                rows = self.query(inner.this, Scope(parent=scope))
                name = alias_name or "?subquery?"
                cols = _rename([(n, typed) for n, typed, _ in rows], col_aliases)
                return Relation(name, (name,), cols, incomplete=len(self.problems) > errors_before)
            if isinstance(inner, (exp.Unnest, exp.Func)):
                return self.function_source(inner, alias_name, col_aliases, scope)
        self.error(f"unsupported FROM item {type(source).__name__}", source)
        return None

    def function_source(self, func: exp.Expr, alias: str | None, col_aliases: list[str], scope: Scope) -> Relation:
        if isinstance(func, exp.Unnest):
            cols: list[tuple[str, Typed]] = []
            for i, arg in enumerate(func.expressions):
                typed = self.infer(arg, scope)
                elem = typed.type.element if typed.type is not None and typed.type.is_array else None
                if typed.type is not None and not typed.type.is_array and typed.type != t.UNKNOWN:
                    self.error(f"unnest() takes arrays; argument {i + 1} is {typed.type}", arg)
                # A bound repeated field has no NULL elements; an array column may.
                bare = arg.this if isinstance(arg, exp.Cast) else arg
                elem_nullable = not isinstance(bare, exp.Parameter)
                cols.append((f"unnest{i + 1}" if len(func.expressions) > 1 else "unnest", Typed(elem, elem_nullable)))
            if len(col_aliases) > len(cols):
                self.error(
                    f"unnest() yields {len(cols)} column{'s' if len(cols) != 1 else ''} but {len(col_aliases)} names "
                    "were given",
                    func,
                )
            cols = _rename(cols, col_aliases)
            name = alias or "unnest"
            return Relation(name, (name,), cols)
        typed = self.infer(func, scope)
        name = alias or (_function_name(func) if isinstance(func, exp.Func) else "function")
        return Relation(name, (name,), [(col_aliases[0] if col_aliases else name, typed)])

    def table(self, node: exp.Table, scope: Scope | None = None) -> Table | None:
        name = t.qualified_name(node)
        table = self.catalog.table(name)
        if table is None:
            if scope is not None and scope.cte(name.split(".")[-1]) is not None and "." in name:
                self.error(f"table {name} does not exist (a WITH query is named without a schema)", node)
                return None
            schema = name.split(".")[0] if "." in name else None
            if schema is not None and schema not in self.catalog.schemas:
                self.error(f"schema {schema} does not exist{_suggest(schema, sorted(self.catalog.schemas))}", node)
            else:
                self.error(f"table {name} does not exist{_suggest_table(name, self.catalog.table_names())}", node)
        return table

    def find_relation(self, qualifier: str, scope: Scope, node: exp.Expr) -> Relation | None:
        s: Scope | None = scope
        while s is not None:
            for rel in s.relations:
                if qualifier in rel.names:
                    return rel
            s = s.parent
        if not scope.lenient():
            visible = sorted({n for rel in _all_relations(scope) for n in rel.names})
            self.error(f"missing FROM-clause entry for table {qualifier}{_suggest(qualifier, visible)}", node)
        return None

    # -- columns ---------------------------------------------------------------------------
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
                self.error(
                    f"column {name} does not exist in {rel.alias}{_suggest(name, [n for n, _ in rel.columns])}",
                    col,
                )
                return Typed(None, True)
            return typed
        s: Scope | None = scope
        while s is not None:
            found = [(rel, rel.column(name)) for rel in s.relations if rel.column(name) is not None]
            if len(found) > 1:
                owners = ", ".join(rel.alias for rel, _ in found)
                self.error(f"column reference {name} is ambiguous (in {owners}); qualify it", col)
                return Typed(None, True)
            if found:
                typed = found[0][1]
                assert typed is not None
                return typed
            if allow_output and s is scope and name in s.output:
                return s.output[name]
            if not col.table and any(name in rel.names for rel in s.relations):
                return Typed(PgType("record"), False)  # a whole-row reference: to_jsonb(t)
            s = s.parent
        if scope.lenient():
            return Typed(None, True)
        visible = sorted({n for rel in _all_relations(scope) for n, _ in rel.columns})
        self.error(f"column {name} does not exist{_suggest(name, visible)}", col)
        return Typed(None, True)

    # -- typing ----------------------------------------------------------------------------
    def expect(self, node: exp.Expr, want: PgType, scope: Scope) -> Typed:
        """Type `node` where a value of type `want` is required: binds parameters, checks
        literals (enum labels, numbers, UUIDs) and rejects plainly incompatible types."""
        if isinstance(node, exp.Paren):
            return self.expect(node.this, want, scope)
        if isinstance(node, exp.Parameter):
            self.bind(node, want)
            return Typed(want, node.name in self.nullable_params)
        if isinstance(node, exp.Literal):
            self.check_literal(node, want)
            return Typed(want, False)
        if isinstance(node, exp.Null):
            return Typed(want, True)
        if isinstance(node, exp.Case):
            return self.case(node, scope, want)
        if isinstance(node, exp.Array) and want.is_array:
            for element in node.expressions:
                self.expect(element, want.element, scope)
            return Typed(want, False)
        if isinstance(node, (exp.Coalesce, exp.Nullif)):
            args = [node.this, *node.expressions] if isinstance(node, exp.Coalesce) else [node.this, node.expression]
            typed_args = [self.expect(a, want, scope) for a in args if isinstance(a, exp.Expr)]
            if isinstance(node, exp.Coalesce):
                return Typed(want, all(a.nullable for a in typed_args))
            return Typed(want, True)
        typed = self.infer(node, scope)
        if typed.type is not None and not assignable(typed.type, want):
            self.error(f"expected {_describe(want)}, got {_describe(typed.type)}", node)
        return typed

    def assign(self, value: exp.Expr, want: PgType, scope: Scope) -> Typed:
        """Type `value` stored into a column of type `want` (INSERT, SET): like `expect`, but
        with Postgres' assignment casts, under which any type may be stored in a text column."""
        if not _is_untyped(value) and want.name in t.TEXTUAL and not want.is_array:
            return self.infer(value, scope)
        return self.expect(value, want, scope)

    def check_literal(self, lit: exp.Literal, want: PgType) -> None:
        value = str(lit.this)
        if want.is_array:
            if lit.is_string and not value.lstrip().startswith(("{", "[")):
                self.error(f"malformed array literal: '{value}' (an array literal is written '{{a,b}}')", lit)
            return
        if lit.is_string:
            if want.is_enum:
                assert want.labels is not None
                if value not in want.labels:
                    self.error(
                        f"'{value}' is not a label of enum {want.name} ({', '.join(want.labels)}){_suggest(value, list(want.labels))}",
                        lit,
                    )
            elif want.name in t.INTEGER:
                if not _is_int(value):
                    self.error(f"invalid input syntax for type {want.name}: '{value}'", lit)
            elif want.name in t.NUMERIC:
                if not _is_number(value):
                    self.error(f"invalid input syntax for type {want.name}: '{value}'", lit)
            elif want.name in t.JSON:
                if not _is_json(value):
                    self.error(f"invalid input syntax for type {want.name}: '{value}' is not JSON", lit)
            elif want.name == "interval" and not _is_interval(value):
                self.error(f"invalid input syntax for type interval: '{value}'", lit)
            elif want.name in ("date", "timestamp", "timestamptz") and not _is_date_like(value):
                self.error(f"date/time field value out of range: '{value}'", lit)
            elif want.name == "uuid" and not _is_uuid(value):
                self.error(f"invalid input syntax for type uuid: '{value}'", lit)
            elif want.name == "bool" and value.strip().lower() not in _BOOLEAN_INPUTS:
                self.error(f"invalid input syntax for type boolean: '{value}'", lit)
            elif want.name in t.TEMPORAL and not _is_temporal(value):
                self.error(f"invalid input syntax for type {want.name}: '{value}'", lit)
            elif want.name == "interval" and not any(ch.isdigit() for ch in value):
                self.error(f"invalid input syntax for type interval: '{value}'", lit)
            return
        # A number literal.
        if want.name in t.NUMERIC:
            return  # Postgres compares 1.5 with an integer, and rounds it when assigned
        self.error(f"a number ({value}) cannot be used as {_describe(want)}", lit)

    def case(self, node: exp.Case, scope: Scope, want: PgType | None) -> Typed:
        subject = node.this
        subject_type = self.infer(subject, scope).type if isinstance(subject, exp.Expr) else None
        result: PgType | None = want
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
        if result is None:
            for b in branches:
                if _is_untyped(b):
                    continue
                typed = self.infer(b, scope)
                if typed.type is not None and typed.type != t.NULL:
                    result = typed.type
                    break
        for b in branches:
            if result is not None:
                typed = self.expect(b, result, scope)
            else:
                typed = self.infer(b, scope)
            nullable = nullable or typed.nullable
        if result is None and any(isinstance(b, exp.Literal) and b.is_string for b in branches):
            result = t.TEXT  # Postgres resolves a CASE of untyped literals to text
        return Typed(result, nullable)

    def infer(self, node: exp.Expr, scope: Scope, allow_output: bool = False) -> Typed:
        """The type of `node` in `scope` from what it is, not where it is used."""
        if isinstance(node, exp.Paren):
            return self.infer(node.this, scope, allow_output)
        if isinstance(node, exp.Alias):
            return self.infer(node.this, scope)
        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star):
                return Typed(None, False)
            return self.column(node, scope, allow_output)
        if isinstance(node, exp.Parameter):
            self._see_param(node.name)
            return Typed(self.param_types.get(node.name), node.name in self.nullable_params)
        if isinstance(node, exp.Literal):
            if node.is_string:
                return Typed(t.UNKNOWN, False)
            return Typed(t.INT4 if _is_int(str(node.this)) else t.NUMERIC_T, False)
        if isinstance(node, exp.Null):
            return Typed(t.NULL, True)
        if isinstance(node, exp.Boolean):
            return Typed(t.BOOL, False)
        if isinstance(node, exp.Cast):
            return self.cast(node, scope)
        if isinstance(node, exp.Interval):
            # INTERVAL '2 minutes' (sqlglot splits off the unit) or INTERVAL '1' DAY.
            value, unit = node.this, node.args.get("unit")
            if isinstance(value, exp.Literal) and value.is_string:
                text = f"{value.this} {unit.name if isinstance(unit, exp.Expr) else ''}"
                if not _is_interval(text):
                    span = self.interval_span(text)
                    written = self.sql[span.start : span.end + 1] if span else f"INTERVAL '{text.strip()}'"
                    self.error(f"invalid input syntax for type interval: {written}", node, span=span)
            elif isinstance(value, exp.Expr):
                self.infer(value, scope)
            return Typed(t.INTERVAL, False)
        if isinstance(node, exp.Case):
            return self.case(node, scope, None)
        if isinstance(node, _COMPARISONS):
            return self.comparison(node, scope)
        if isinstance(node, (exp.And, exp.Or)):
            a = self.expect(node.this, t.BOOL, scope)
            b = self.expect(node.expression, t.BOOL, scope)
            return Typed(t.BOOL, a.nullable or b.nullable)
        if isinstance(node, exp.Not):
            a = self.expect(node.this, t.BOOL, scope)
            return Typed(t.BOOL, a.nullable)
        if isinstance(node, exp.Is):
            self.infer(node.this, scope)
            return Typed(t.BOOL, False)
        if isinstance(node, exp.In):
            return self.in_(node, scope)
        if isinstance(node, exp.Between):
            subject = self.infer(node.this, scope)
            for key in ("low", "high"):
                bound = node.args.get(key)
                if isinstance(bound, exp.Expr):
                    if subject.type is not None:
                        self.expect(bound, subject.type, scope)
                    else:
                        self.infer(bound, scope)
            return Typed(t.BOOL, subject.nullable)
        if isinstance(node, (exp.RegexpLike, exp.RegexpILike, exp.SimilarTo)):  # ~, ~*, SIMILAR TO
            a = self.expect(node.this, t.TEXT, scope)
            b = self.expect(node.expression, t.TEXT, scope)
            return Typed(t.BOOL, a.nullable or b.nullable)
        if isinstance(node, exp.AtTimeZone):
            # timestamptz AT TIME ZONE z is a timestamp, and the other way round.
            typed = self.infer(node.this, scope)
            zone = node.args.get("zone")
            if isinstance(zone, exp.Expr):
                self.expect(zone, t.TEXT, scope)
            swapped = {"timestamptz": PgType("timestamp"), "timestamp": t.TIMESTAMPTZ}
            return Typed(swapped.get(typed.type.name) if typed.type is not None else None, typed.nullable)
        if isinstance(node, (exp.Like, exp.ILike)):
            a = self.expect(node.this, t.TEXT, scope)
            self.expect(node.expression, t.TEXT, scope)
            return Typed(t.BOOL, a.nullable)
        if isinstance(node, exp.Exists):
            self.query(node.this, Scope(parent=scope))
            return Typed(t.BOOL, False)
        if isinstance(node, exp.Subquery):
            rows = self.query(node.this, Scope(parent=scope))
            if len(rows) != 1:
                self.error(f"subquery must return only one column, not {len(rows)}", node)
                return Typed(None, True)
            return Typed(rows[0][1].type, True)
        if isinstance(node, (exp.Select, exp.Union)):
            rows = self.query(node, Scope(parent=scope))
            return Typed(rows[0][1].type if len(rows) == 1 else None, True)
        if isinstance(node, _ARITHMETIC):
            return self.arithmetic(node, scope)
        if isinstance(node, exp.Neg):
            return self.infer(node.this, scope)
        if isinstance(node, exp.DPipe):
            return self.concat(node, scope)
        if isinstance(node, _CONTAINMENT):
            return self.containment(node, scope)
        if isinstance(node, _KEY_TESTS):
            subject = self.expect_json(node.this, scope, "?" if isinstance(node, exp.JSONBContainsTopKey) else "?|")
            key_type = t.TEXT if isinstance(node, exp.JSONBContainsTopKey) else t.TEXT.array()
            key_typed = self.expect(node.expression, key_type, scope)
            return Typed(t.BOOL, subject.nullable or key_typed.nullable)
        if isinstance(node, exp.Filter):  # agg(...) FILTER (WHERE cond)
            typed = self.infer(node.this, scope)
            where = node.expression
            if isinstance(where, exp.Where):
                self.expect(where.this, t.BOOL, scope)
            return typed
        if isinstance(node, exp.Window):
            # The window's own clauses: PARTITION BY and ORDER BY name columns of the query.
            for part in node.args.get("partition_by") or []:
                self.infer(part, scope)
            window_order = node.args.get("order")
            if isinstance(window_order, exp.Order):
                for ordered in window_order.expressions:
                    self.infer(ordered.this if isinstance(ordered, exp.Ordered) else ordered, scope)
            # An aggregate over a window frame that holds the current row is NULL only if
            # its argument can be: sum(priority) OVER w of a NOT NULL column is NOT NULL.
            self.window_depth += 1
            try:
                return self.infer(node.this, scope)
            finally:
                self.window_depth -= 1
        if isinstance(node, exp.Bracket):
            base = self.infer(node.this, scope)
            for e in node.expressions:
                self.expect(e, t.INT4, scope)
            return Typed(base.type.element if base.type is not None and base.type.is_array else None, True)
        if isinstance(node, exp.Array):
            elems = [self.infer(e, scope) for e in node.expressions]
            first = next((e.type for e in elems if e.type not in (None, t.UNKNOWN, t.NULL)), None)
            return Typed(first.array() if first is not None else None, False)
        if isinstance(node, (exp.JSONExtract, exp.JSONBExtract, exp.JSONExtractScalar, exp.JSONBExtractScalar)):
            return self.json_extract(node, scope)
        if isinstance(node, exp.Func):
            return self.function(node, scope)
        for child in node.iter_expressions():
            self.infer(child, scope)
        return Typed(None, True)

    def expect_json(self, node: exp.Expr, scope: Scope, op: str) -> Typed:
        """The left side of a json operator: a json or jsonb value (a parameter becomes jsonb)."""
        if _is_untyped(node):
            return self.expect(node, t.JSONB, scope)
        typed = self.infer(node, scope)
        if typed.type is not None and typed.type.name not in t.JSON:
            self.error(f"operator does not exist: {_describe(typed.type)} {op} ...; it takes json or jsonb", node)
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
            self.bind(key, t.TEXT.array() if path_op else t.TEXT)
        elif isinstance(key, exp.Expr) and not isinstance(key, (exp.JSONPath, exp.Literal)):
            key_type = self.infer(key, scope).type
            # A key is text, an index an integer; a path (#>, #>>) is text[].
            fits = (
                (key_type == t.TEXT.array())
                if path_op
                else (key_type is not None and key_type.name in t.TEXTUAL | t.INTEGER and not key_type.is_array)
            )
            if key_type is not None and key_type not in (t.UNKNOWN, t.NULL) and not fits:
                self.error(
                    f"operator does not exist: {_describe(subject.type or t.JSONB)} {op} {_describe(key_type)}", node
                )
        if as_text:
            return Typed(t.TEXT, True)
        return Typed(subject.type if subject.type is not None else t.JSONB, True)

    def containment(self, node: exp.Expr, scope: Scope) -> Typed:
        """`@>`, `<@` (jsonb or arrays) and `&&` (arrays): both sides of one type."""
        op = _OPERATORS.get(type(node), "&&")
        left, right = node.this, node.expression
        lt = self.infer(left, scope) if not _is_untyped(left) else Typed(None, False)
        rt = self.infer(right, scope) if not _is_untyped(right) else Typed(None, False)
        known = lt.type if lt.type not in (None, t.UNKNOWN, t.NULL) else rt.type
        if known is None or known in (t.UNKNOWN, t.NULL):
            known = t.JSONB if op != "&&" else None
        if known is not None:
            if not known.is_array and (known.name not in t.JSON or op == "&&"):
                self.error(f"operator does not exist: {_describe(known)} {op} ...; it takes arrays or jsonb", node)
                return Typed(t.BOOL, True)
            for side, typed in ((left, lt), (right, rt)):
                if _is_untyped(side):
                    self.expect(side, known, scope)
                elif typed.type is not None and typed.type != known:
                    self._check_comparable(typed.type, known, node)
        return Typed(t.BOOL, lt.nullable or rt.nullable)

    def concat(self, node: exp.DPipe, scope: Scope) -> Typed:
        """`||`: jsonb || jsonb, array || array (or element), else text concatenation."""
        left, right = node.this, node.expression
        lt = self.infer(left, scope) if not _is_untyped(left) else Typed(None, False)
        rt = self.infer(right, scope) if not _is_untyped(right) else Typed(None, False)
        nullable = lt.nullable or rt.nullable
        for typed, other, other_typed in ((lt, right, rt), (rt, left, lt)):
            kind = typed.type
            if kind is not None and (kind.is_array or kind.name == "jsonb"):
                if _is_untyped(other):
                    self.expect(other, kind, scope)
                elif other_typed.type is not None and not (
                    assignable(other_typed.type, kind) or assignable(other_typed.type, kind.element)
                ):
                    self.error(
                        f"operator does not exist: {_describe(lt.type or kind)} || {_describe(rt.type or kind)}", node
                    )
                return Typed(kind, nullable)
        for side in (left, right):
            if _is_untyped(side):
                self.expect(side, t.TEXT, scope)
        return Typed(t.TEXT, nullable)

    def cast(self, node: exp.Cast, scope: Scope) -> Typed:
        to = node.args.get("to")
        target: PgType | None = None
        if isinstance(to, exp.DataType):
            try:
                target = t.resolve_datatype(to, self.catalog.enums)
            except UnknownType as err:
                self.error(f"type {err} does not exist", to)
        inner = node.this
        if isinstance(inner, exp.Parameter):
            self.bind(inner, target)
            return Typed(target, inner.name in self.nullable_params)
        if isinstance(inner, exp.Literal) and target is not None:
            if inner.is_string:
                self.check_literal(inner, target)
            else:
                number = t.INT4 if _is_int(str(inner.this)) else t.NUMERIC_T
                if not castable(number, target):
                    self.error(f"cannot cast type {_describe(number)} to {_describe(target)}", node)
            return Typed(target, False)
        if isinstance(inner, exp.Array) and target is not None and target.is_array:
            # ARRAY[@a, @b]::uuid[]: the elements take the element type.
            for element in inner.expressions:
                if _is_untyped(element):
                    self.expect(element, target.element, scope)
                else:
                    element_type = self.infer(element, scope).type
                    if element_type is not None and not castable(element_type, target.element):
                        self.error(
                            f"cannot cast type {_describe(element_type)} to {_describe(target.element)}", element
                        )
            return Typed(target, False)
        typed = self.infer(inner, scope)
        if typed.type is not None and target is not None and not castable(typed.type, target):
            self.error(f"cannot cast type {_describe(typed.type)} to {_describe(target)}", node)
        return Typed(target, typed.nullable)

    def comparison(self, node: exp.Expr, scope: Scope) -> Typed:
        left, right = node.this, node.expression
        if isinstance(right, (exp.Any, exp.All)):
            lt = self.infer(left, scope)
            inner = right.this
            if isinstance(inner, (exp.Subquery, exp.Select)):
                rows = self.query(inner.this if isinstance(inner, exp.Subquery) else inner, Scope(parent=scope))
                if lt.type is not None and rows and rows[0][1].type is not None:
                    self._check_comparable(lt.type, rows[0][1].type, node)
            elif lt.type is not None and lt.type not in (t.UNKNOWN, t.NULL):
                self.expect(inner, lt.type.array(), scope)
            else:
                at = self.infer(inner, scope)
                if at.type is not None and at.type.is_array and isinstance(left, exp.Parameter):
                    self.bind(left, at.type.element)
                elif at.type is not None and at.type.is_array and isinstance(left, exp.Literal) and left.is_string:
                    self.check_literal(left, at.type.element)
            return Typed(t.BOOL, True)
        return self.compare(left, right, node, scope)

    def compare(self, left: exp.Expr, right: exp.Expr, node: exp.Expr, scope: Scope) -> Typed:
        """`left op right`: an untyped side (parameter, string literal) takes the other's type;
        two typed sides must be comparable. Rows `(a, b) = (@x, @y)` compare element-wise."""
        if isinstance(left, exp.Tuple) and isinstance(right, exp.Tuple):
            if len(left.expressions) != len(right.expressions):
                self.error(
                    f"row comparison needs rows of the same length ({len(left.expressions)} vs "
                    f"{len(right.expressions)})",
                    node,
                )
            pairs = zip(left.expressions, right.expressions, strict=False)
            results = [self.compare(a, b, node, scope) for a, b in pairs]
            return Typed(t.BOOL, any(r.nullable for r in results))
        lt = self.infer(left, scope) if not _is_untyped(left) else Typed(None, False)
        rt = self.infer(right, scope) if not _is_untyped(right) else Typed(None, False)
        if _is_untyped(left) and rt.type is not None:
            lt = self.expect(left, rt.type, scope)
        elif _is_untyped(right) and lt.type is not None:
            rt = self.expect(right, lt.type, scope)
        elif lt.type is not None and rt.type is not None:
            self._check_comparable(lt.type, rt.type, node)
        elif _is_untyped(left) and _is_untyped(right):
            # unknown = unknown: Postgres compares as text (`@a = 'x'`, `@a = @b`).
            for side in (left, right):
                if isinstance(side, exp.Parameter):
                    self.bind(side, t.TEXT)
        if any(s.type is not None and s.type.name == "json" and not s.type.is_array for s in (lt, rt)):
            op = _OPERATORS.get(type(node), "compare")
            self.error(f"operator does not exist: json {op} json (json cannot be compared; use jsonb)", node)
        return Typed(t.BOOL, lt.nullable or rt.nullable)

    def _check_comparable(self, a: PgType, b: PgType, node: exp.Expr) -> None:
        if t.UNKNOWN in (a, b) or t.NULL in (a, b):
            return
        if not (assignable(a, b) or assignable(b, a)):
            op = _OPERATORS.get(type(node), "compare")
            self.error(f"operator does not exist: {_describe(a)} {op} {_describe(b)}", node)

    def in_(self, node: exp.In, scope: Scope) -> Typed:
        subject = self.infer(node.this, scope) if not _is_untyped(node.this) else Typed(None, False)
        query = node.args.get("query")
        if query is not None:
            rows = self.query(query.this if isinstance(query, exp.Subquery) else query, Scope(parent=scope))
            if len(rows) != 1:
                self.error(f"subquery in IN must return one column, not {len(rows)}", query)
            elif subject.type is not None and rows[0][1].type is not None:
                self._check_comparable(subject.type, rows[0][1].type, node)
            return Typed(t.BOOL, True)
        if isinstance(node.this, exp.Tuple):  # (a, b) IN ((@x, 1), (@y, 2))
            row_results = [self.compare(node.this, e, node, scope) for e in node.expressions]
            return Typed(t.BOOL, any(r.nullable for r in row_results))
        for e in node.expressions:
            if subject.type is not None:
                self.expect(e, subject.type, scope)
            else:
                self.infer(e, scope)
        return Typed(t.BOOL, subject.nullable)

    def arithmetic(self, node: exp.Expr, scope: Scope) -> Typed:
        left, right = node.this, node.expression
        lt = self.infer(left, scope)
        rt = self.infer(right, scope)
        nullable = lt.nullable or rt.nullable
        a, b = lt.type, rt.type
        # A parameter takes the other operand's type, except next to an interval, where it
        # is a number (n * INTERVAL '1 second') or an interval (ts + @delay).
        for side, other in ((left, b), (right, a)):
            if isinstance(side, exp.Parameter) and self.param_types.get(side.name) is not None:
                continue  # typed by an earlier use: `created_at > @t AND ... @t + INTERVAL '1 day'`
            if isinstance(side, exp.Parameter) and other is not None:
                if other == t.INTERVAL and isinstance(node, (exp.Mul, exp.Div)):
                    self.bind(side, t.FLOAT8)
                elif other.name in t.TEMPORAL:
                    self.bind(side, t.INTERVAL)
                else:
                    self.bind(side, other)
            elif isinstance(side, exp.Literal) and side.is_string and other is not None:
                # `now() + '5 seconds'`: the literal is read as what the operator needs.
                if (other.name in t.TEMPORAL and isinstance(node, exp.Add)) or (
                    other == t.INTERVAL and isinstance(node, (exp.Add, exp.Sub))
                ):
                    self.check_literal(side, t.INTERVAL)
                elif other.name in t.NUMERIC and not other.is_array:
                    self.check_literal(side, other)
        a = lt.type if not isinstance(left, exp.Parameter) else self.param_types.get(left.name)
        b = rt.type if not isinstance(right, exp.Parameter) else self.param_types.get(right.name)
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
            self.error(f"operator does not exist: {_describe(a)} {_op(node)} {_describe(b)}", node)
            return Typed(None, nullable)
        if a.name in t.TEMPORAL and b.name in t.TEMPORAL and isinstance(node, exp.Sub):
            return Typed(t.INTERVAL, nullable)
        if t.INTERVAL in (a, b) and isinstance(node, (exp.Mul, exp.Div)):
            # interval * n, n * interval and interval / n, n a number (or a literal read as one).
            other = b if a == t.INTERVAL else a
            number = other.name in t.NUMERIC or other == t.UNKNOWN
            if number and not (isinstance(node, exp.Div) and b == t.INTERVAL):
                return Typed(t.INTERVAL, nullable)
            self.error(f"operator does not exist: {_describe(a)} {_op(node)} {_describe(b)}", node)
            return Typed(None, nullable)
        if a == t.INTERVAL and b == t.INTERVAL:
            return Typed(t.INTERVAL, nullable)
        if a.name == "jsonb" and isinstance(node, exp.Sub) and (b.name in t.INTEGER or b.name in t.TEXTUAL):
            return Typed(a, nullable)  # jsonb - key, jsonb - index, jsonb - text[]
        if a.name in t.NUMERIC and b.name in t.NUMERIC:
            return Typed(_wider(a, b), nullable)
        if t.UNKNOWN in (a, b):
            known = b if a == t.UNKNOWN else a
            if known == t.UNKNOWN:
                self.error(f"operator is not unique: unknown {_op(node)} unknown (cast one side)", node)
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
        self.error(f"operator does not exist: {_describe(a)} {_op(node)} {_describe(b)}", node)
        return Typed(None, nullable)

    def function(self, node: exp.Func, scope: Scope) -> Typed:
        name = _function_name(node)
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
        if name in _WINDOW_ONLY and not isinstance(node.parent, exp.Window):
            self.error(f"window function {name}() requires an OVER clause", node)
        if name in ("sum", "avg") and args:
            return self.sum_avg(name, args[0], scope)
        signature = BUILTINS.get(name)
        if signature is None:
            name = self._written_name(node, name)
            self.error(
                f"function {name}() does not exist (protoc-gen-pydb knows the built-ins listed in docs/diagnostics.md)",
                node,
            )
            for a in args:
                self.infer(a, scope)
            return Typed(None, True)
        return self.builtin_call(name, signature, args, scope)

    def common_type_call(self, node: exp.Func, args: list[exp.Expr], scope: Scope) -> Typed:
        """COALESCE, GREATEST, LEAST, NULLIF: the arguments share the first typed one's type;
        parameters and string literals take it. COALESCE is NULL only if every argument is."""
        typed_args = [None if _is_untyped(a) else self.infer(a, scope) for a in args]
        common = next((a.type for a in typed_args if a is not None and a.type not in (None, t.UNKNOWN, t.NULL)), None)
        if common is None and any(isinstance(a, exp.Literal) and a.is_string for a in args):
            common = t.TEXT  # Postgres resolves all-unknown arguments to text
        nullable_args: list[bool] = []
        for a, typed in zip(args, typed_args, strict=True):
            if typed is None:
                typed = self.expect(a, common, scope) if common is not None else self.infer(a, scope)
            elif common is not None and typed.type is not None:
                self._check_comparable(typed.type, common, a)
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
                self.error(f"function {name}({_describe(arg)}) does not exist", args[0])
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

    def _written_name(self, node: exp.Func, fallback: str) -> str:
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

    def interval_span(self, text: str) -> SqlSpan | None:
        """Where `INTERVAL '...' [unit]` reading as `text` is written (sqlglot splits the
        literal, so its nodes do not place it)."""
        want = " ".join(text.lower().split())
        for m in re.finditer(r"INTERVAL\s*'([^']*)'(\s+[A-Za-z]+\b)?", self.sql, re.IGNORECASE):
            if " ".join(f"{m.group(1)} {m.group(2) or ''}".lower().split()) == want:
                return SqlSpan(m.start(), m.end() - 1)
            if " ".join(m.group(1).lower().split()) == want:
                return SqlSpan(m.start(), m.start(2) - 1 if m.group(2) else m.end() - 1)
        return None

    def kwarg_span(self, value: exp.Expr) -> SqlSpan | None:
        """`name => value`: sqlglot places only the value; take the name before it too."""
        span = self.span(value)
        if span is None:
            return None
        m = re.search(r"[A-Za-z_]\w*\s*=>\s*$", self.sql[: span.start])
        return SqlSpan(m.start(), span.end) if m else span

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
            self.error(f"function {name}({_describe(arg_type)}) does not exist; it takes numbers or intervals", arg)
            return Typed(None, True)
        if arg_type.name in ("float4", "float8"):
            return Typed(arg_type if name == "sum" else t.FLOAT8, nullable)
        if name == "sum" and arg_type.name in ("int2", "int4"):
            return Typed(t.INT8, nullable)
        return Typed(t.NUMERIC_T, nullable)

    # -- DML -------------------------------------------------------------------------------
    def insert(
        self, node: exp.Insert, scope: Scope
    ) -> tuple[Table | None, list[tuple[str, Typed, SqlSpan | None]] | None, bool]:
        scope = self.with_ctes(node, scope)
        target_node = node.this
        col_nodes: list[exp.Expr] = []
        if isinstance(target_node, exp.Schema):
            col_nodes = list(target_node.expressions)
            target_node = target_node.this
        alias_name = target_node.alias if isinstance(target_node, exp.Table) and target_node.alias else None
        table = self.table(target_node, scope) if isinstance(target_node, exp.Table) else None
        if table is None:
            self.query_sources_only(node.expression, scope)
            return None, self.returning(node, Scope(parent=scope, broken=True)), False
        columns: list[tuple[str, Column | None]] = []
        for c in col_nodes:
            cname = c.name
            col = table.column(cname)
            if col is None:
                self.error(
                    f"column {cname} of table {table.qualified} does not exist{_suggest(cname, [x.name for x in table.columns])}",
                    c,
                )
            elif any(name == cname for name, _ in columns):
                self.error(f"column {cname} specified more than once", c)
            columns.append((cname, col))
        if not col_nodes:
            columns = [(c.name, c) for c in table.columns]
        named = {n for n, _ in columns}
        for col in table.columns:
            if col.not_null and not col.has_default and col.name not in named:
                self.error(
                    f"column {col.name} of {table.qualified} is NOT NULL and has no default, but the INSERT does not set it",
                    target_node,
                )
        source = node.expression
        if isinstance(source, exp.Values):
            for row in source.expressions:
                values = row.expressions if isinstance(row, exp.Tuple) else [row]
                if len(values) != len(columns):
                    more = "more" if len(values) > len(columns) else "fewer"
                    self.error(
                        f"INSERT has {more} expressions ({len(values)}) than target columns ({len(columns)})", row
                    )
                for (cname, col), value in zip(columns, values, strict=False):
                    if col is None:
                        self.infer(value, scope)
                    elif not isinstance(value, exp.Var) or value.name.upper() != "DEFAULT":
                        typed = self.assign(value, col.type, scope)
                        if col.not_null and isinstance(value, exp.Null):
                            self.error(
                                f"column {cname} is NOT NULL, but NULL is inserted",
                                span=self.keyword_after(
                                    SqlSpan(0, (self.span(row) or SqlSpan(0, 0)).start - 1), "NULL"
                                ),
                            )
                        del typed
        elif isinstance(source, exp.Expr):
            rows = self.query(source, Scope(parent=scope))
            if len(rows) != len(columns):
                self.error(f"INSERT has {len(rows)} expressions but {len(columns)} target columns", source)
            if isinstance(source, exp.Select):
                # INSERT ... SELECT @p: the parameter takes the target column's type.
                for (_, col), item in zip(columns, source.expressions, strict=False):
                    value = item.this if isinstance(item, exp.Alias) else item
                    if col is not None and _is_untyped(value):
                        self.expect(value, col.type, scope)
                rows = [
                    (
                        n,
                        Typed(self.param_types.get(v.name), typed.nullable) if isinstance(v, exp.Parameter) else typed,
                        sp,
                    )
                    for (n, typed, sp), v in zip(
                        rows, [e.this if isinstance(e, exp.Alias) else e for e in source.expressions], strict=False
                    )
                ]
            for (cname, col), (_, typed, span) in zip(columns, rows, strict=False):
                if col is not None and typed.type is not None and not assignable(typed.type, col.type, assignment=True):
                    self.error(
                        f"column {cname} is {_describe(col.type)} but the SELECT gives {_describe(typed.type)}",
                        span=span,
                    )
        rel = Relation(
            alias_name or table.name,
            (alias_name,) if alias_name else (table.name, table.qualified),
            [(c.name, Typed(c.type, not c.not_null)) for c in table.columns],
            table,
        )
        conflict = node.args.get("conflict")
        do_nothing = False
        if isinstance(conflict, exp.OnConflict):
            keys = [k.this if isinstance(k, exp.Ordered) else k for k in conflict.args.get("conflict_keys") or []]
            key_names = []
            unknown_key = False
            for k in keys:
                kname = k.name
                key_names.append(kname)
                if table.column(kname) is None:
                    unknown_key = True
                    self.error(
                        f"ON CONFLICT column {kname} does not exist in {table.qualified}"
                        f"{_suggest(kname, [c.name for c in table.columns])}",
                        k,
                    )
            if (
                key_names
                and not unknown_key
                and tuple(key_names) not in table.unique_keys
                and set(key_names) not in [set(u) for u in table.unique_keys]
            ):
                self.error(
                    f"there is no unique or exclusion constraint matching the ON CONFLICT specification ({', '.join(key_names)})",
                    conflict,
                )
            action = str(conflict.args.get("action") or "").upper()
            do_nothing = "NOTHING" in action
            if conflict.expressions:
                excluded = Relation("excluded", ("excluded", "EXCLUDED"), list(rel.columns), table)
                upd_scope = Scope(relations=[rel, excluded], parent=scope)
                self.assignments(conflict.expressions, table, upd_scope)
                where = conflict.args.get("where")
                if where is not None:
                    self.expect(where.this, t.BOOL, upd_scope)
        ret_scope = Scope(relations=[rel], parent=scope)
        return table, self.returning(node, ret_scope), do_nothing

    def assignments(self, items: list[exp.Expr], table: Table, scope: Scope) -> None:
        assigned: set[str] = set()
        for item in items:
            if not isinstance(item, exp.EQ) or not isinstance(item.this, exp.Column):
                self.error("expected column = value", item)
                continue
            cname = item.this.name
            if cname in assigned:
                self.error(f"multiple assignments to same column {cname}", item.this)
            assigned.add(cname)
            col = table.column(cname)
            if col is None:
                self.error(
                    f"column {cname} of table {table.qualified} does not exist{_suggest(cname, [c.name for c in table.columns])}",
                    item.this,
                )
                self.infer(item.expression, scope)
                continue
            value = item.expression
            if col.not_null and isinstance(value, exp.Null):
                self.error(
                    f"column {cname} is NOT NULL, but is set to NULL",
                    span=self.keyword_after(self.span(item.this), "NULL"),
                )
            self.assign(value, col.type, scope)

    def update(
        self, node: exp.Update, scope: Scope
    ) -> tuple[Table | None, list[tuple[str, Typed, SqlSpan | None]] | None, str | None]:
        scope = self.with_ctes(node, scope)
        local = Scope(parent=scope)
        target_node = node.this
        rel = self.relation_of(target_node, local) if isinstance(target_node, exp.Table) else None
        table = rel.table if rel is not None else None
        if rel is not None:
            local.relations.append(rel)
        from_ = node.args.get("from_") or node.args.get("from")
        if isinstance(from_, exp.From):
            self.add_source(from_.this, local, nullable=False)
        for join in node.args.get("joins") or []:
            self.join(join, local)
        if table is not None:
            self.assignments(node.expressions, table, local)
        where = node.args.get("where")
        if where is not None:
            self.expect(where.this, t.BOOL, local)
            self.check_per_row(where.this, "WHERE")
        key = _key_param(where.this if where is not None else None, table, rel)
        return table, self.returning(node, local), key

    def delete(
        self, node: exp.Delete, scope: Scope
    ) -> tuple[Table | None, list[tuple[str, Typed, SqlSpan | None]] | None, str | None]:
        scope = self.with_ctes(node, scope)
        local = Scope(parent=scope)
        target_node = node.this
        rel = self.relation_of(target_node, local) if isinstance(target_node, exp.Table) else None
        table = rel.table if rel is not None else None
        if rel is not None:
            local.relations.append(rel)
        using = node.args.get("using")
        for u in using or []:
            self.add_source(u, local, nullable=False)
        where = node.args.get("where")
        if where is not None:
            self.expect(where.this, t.BOOL, local)
            self.check_per_row(where.this, "WHERE")
        key = _key_param(where.this if where is not None else None, table, rel)
        return table, self.returning(node, local), key

    def query_sources_only(self, source: exp.Expr | None, scope: Scope) -> None:
        """The VALUES or query of an INSERT into an unknown table: still bind what it can."""
        if isinstance(source, exp.Values):
            for row in source.expressions:
                for value in row.expressions if isinstance(row, exp.Tuple) else [row]:
                    self.infer(value, scope)
        elif isinstance(source, exp.Expr):
            self.query(source, Scope(parent=scope, broken=True))

    def returning(self, node: exp.Expr, scope: Scope) -> list[tuple[str, Typed, SqlSpan | None]] | None:
        ret = node.args.get("returning")
        if not isinstance(ret, exp.Returning):
            return None
        if not scope.relations:
            return []
        return self.projections(ret.expressions, scope)


# ---------------------------------------------------------------------------------------------
# Built-in functions the analyzer knows. `returns` is a type, or "arg0" (the first argument's
# type), "arg0[]" (an array of it) or "elem0" (its element type).


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
_WINDOW_ONLY = frozenset(
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

_FUNC_ALIASES = {
    "currenttimestamp": "now",
    "arrayagg": "array_agg",
    "groupconcat": "string_agg",
    "arraysize": "array_length",
    "logicaland": "bool_and",
    "logicalor": "bool_or",
    "rownumber": "row_number",
    "denserank": "dense_rank",
    "stddev": "stddev",
    "jsonbobjectagg": "jsonb_object_agg",
    "jsonobject": "json_build_object",
    "tojson": "to_jsonb",
    "lower": "lower",
    "upper": "upper",
    "trim": "trim",
    "substring": "substring",
    "datetrunc": "date_trunc",
    "timestamptrunc": "date_trunc",
    # sqlglot's names for Postgres functions it models.
    "timetostr": "to_char",
    "strposition": "strpos",
    "arrayconcat": "array_cat",
    "explode": "unnest",
    "unixtotime": "to_timestamp",
    "pad": "lpad",
    "jsonarrayagg": "json_agg",
    "sha2digest": "sha256",
    "rand": "random",
    "strtodate": "to_date",
    "explodinggenerateseries": "generate_series",
    "uuid": "gen_random_uuid",
    "pow": "power",
    "length": "length",
}


def _function_name(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    key = type(node).__name__.lower()
    return _FUNC_ALIASES.get(key, node.sql_name().lower())


# ---------------------------------------------------------------------------------------------


def assignable(value: PgType, target: PgType, assignment: bool = False) -> bool:
    """Whether a value of type `value` may be stored in, or compared with, `target` without
    an explicit cast (Postgres' implicit casts, simplified). With `assignment`, also the
    assignment casts of INSERT and UPDATE: anything may be stored in a text column."""
    if value in (t.UNKNOWN, t.NULL) or value == target:
        return True
    if assignment and target.name in t.TEXTUAL and not target.is_array:
        return True
    if value.is_array != target.is_array:
        return False
    if value.is_array:
        return assignable(value.element, target.element)
    if value.is_enum or target.is_enum:
        return value.name == target.name
    for family in (t.NUMERIC, t.TEXTUAL, t.JSON, frozenset({"timestamp", "timestamptz", "date"})):
        if value.name in family and target.name in family:
            return True
    return False


#: Explicit casts between families Postgres has besides the I/O casts to and from text:
#: (from, to) by type name.
_CASTS = {
    ("int4", "bool"),
    ("bool", "int4"),
    ("date", "timestamp"),
    ("date", "timestamptz"),
    ("timestamp", "date"),
    ("timestamptz", "date"),
    ("timestamp", "time"),
    ("timestamptz", "time"),
    ("timestamptz", "timetz"),
    ("time", "interval"),
    ("interval", "time"),
    ("time", "timetz"),
    ("timetz", "time"),
} | {("jsonb", name) for name in ("bool", "int2", "int4", "int8", "numeric", "float4", "float8")}


def castable(value: PgType, target: PgType) -> bool:
    """Whether `value::target` exists (Postgres' pg_cast, simplified): within a family,
    to or from a string type (I/O conversion), or one of _CASTS; arrays element-wise."""
    if value in (t.UNKNOWN, t.NULL) or assignable(value, target):
        return True
    if value.is_array or target.is_array:
        if value.is_array and target.is_array:
            return castable(value.element, target.element)
        return value.name in t.TEXTUAL and not value.is_array  # '{a,b}'::text::uuid[]
    if value.name in t.TEXTUAL or target.name in t.TEXTUAL:
        return True
    if value.name in t.NUMERIC and target.name in t.NUMERIC:
        return True
    return (value.name, target.name) in _CASTS


def _same_family(a: PgType, b: PgType) -> bool:
    return assignable(a, b) and assignable(b, a)


def _wider(a: PgType, b: PgType) -> PgType:
    order = ["int2", "int4", "int8", "numeric", "float4", "float8"]
    return a if order.index(a.name) >= order.index(b.name) else b


def _describe(p: PgType) -> str:
    if p.is_enum:
        return f"enum {p.name}" + ("[]" if p.is_array else "")
    return str(p)


def _op(node: exp.Expr) -> str:
    return _OPERATORS.get(type(node), "?")


def _is_untyped(node: exp.Expr | None) -> bool:
    """Parameters, string literals and NULL take their type from the context."""
    if isinstance(node, exp.Paren):
        return _is_untyped(node.this)
    return isinstance(node, (exp.Parameter, exp.Null)) or (isinstance(node, exp.Literal) and node.is_string)


def _is_int(value: str) -> bool:
    try:
        int(value.strip())
    except ValueError:
        return False
    return True


def _is_number(value: str) -> bool:
    try:
        float(value.strip())
    except ValueError:
        return False
    return True


#: What Postgres reads as a boolean (case-insensitively, any unique prefix of true/false/yes/no too).
_BOOLEAN_INPUTS = frozenset(
    {"t", "f", "true", "false", "yes", "no", "on", "off", "1", "0", "y", "n", "tr", "tru", "fa", "fal", "fals", "ye"}
)


_INTERVAL_WORDS = frozenset(
    (  # noqa: SIM905 (a word list)
        "microsecond microseconds us usec usecs millisecond milliseconds ms msec msecs second seconds s sec secs "
        "minute minutes m min mins hour hours h hr hrs day days d week weeks w month months mon mons year years y "
        "yr yrs decade decades century centuries millennium millennia ago"
    ).split()
)


def _is_interval(value: str) -> bool:
    """Whether Postgres reads `value` as an interval: `1 day 2 hours`, `-3 min ago`,
    `01:02:03`, `@ 1 year`, or ISO 8601 `P1DT2H`. Unit words are checked (`2 minuts` is not)."""
    text = value.strip().lower()
    if re.fullmatch(r"[+-]?p(\d+(\.\d+)?[ymwd])*(t(\d+(\.\d+)?[hms])*)?", text):
        return text not in ("p", "+p", "-p")
    tokens = re.findall(r"[+-]?\d+(?::\d+){0,2}(?:\.\d+)?|[a-z]+|@|,|\S", text)
    if not tokens:
        return False
    for tok in tokens:
        if tok.isalpha():
            if tok not in _INTERVAL_WORDS:
                return False
        elif tok not in ("@", ",") and not re.fullmatch(r"[+-]?\d+(?::\d+){0,2}(?:\.\d+)?", tok):
            return False
    return True


def _is_date_like(value: str) -> bool:
    """False only for what is plainly a bad date: `YYYY-MM-DD...` with an impossible day or
    month. Every other spelling (`now`, `Jan 1 2020`, ...) is left to Postgres."""
    m = re.match(r"\s*(\d{4})-(\d{1,2})-(\d{1,2})(?!\d)", value)
    if m is None:
        return True
    try:
        datetime.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return False
    return True


def _is_json(value: str) -> bool:
    try:
        json.loads(value)
    except ValueError:
        return False
    return True


def _is_uuid(value: str) -> bool:
    import uuid

    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def _output_name(item: exp.Expr) -> str:
    """The column name Postgres gives a select-list item."""
    if isinstance(item, exp.Alias):
        return item.alias
    if isinstance(item, exp.Column):
        return item.name
    if isinstance(item, exp.Cast):
        return _output_name(item.this) if isinstance(item.this, exp.Column) else "?column?"
    if isinstance(item, exp.Func):
        return _function_name(item)
    if isinstance(item, exp.Window):
        return _output_name(item.this)
    return "?column?"


def _is_aggregate(node: exp.Expr) -> bool:
    """An aggregate call (not a window function: `sum(x) OVER ()` is computed per row)."""
    if isinstance(node, exp.Filter):  # count(x) FILTER (WHERE ...): the filter is per group too
        return _is_aggregate(node.this)
    if not isinstance(node, exp.Func) or isinstance(node.parent, exp.Window):
        return False
    name = _function_name(node)
    if name in _WINDOW_ONLY:
        return False
    if isinstance(node, exp.AggFunc):
        return True
    signature = BUILTINS.get(name)
    return signature is not None and signature.aggregate


#: The types min() and max() take (besides arrays and enums): Postgres has no max(bool),
#: max(uuid), max(bytea) or max(jsonb).
_ORDERABLE = t.NUMERIC | t.TEXTUAL | t.TEMPORAL | {"interval"}

#: What follows `x` in `x::type`: the type name, its modifiers and array brackets.
_CAST_SUFFIX = re.compile(
    r"\s*::\s*[\w.\"]+(?:\s+(?:with|without)\s+time\s+zone)?(?:\s*\([\d\s,]*\))?(?:\s*\[\s*\])*", re.I
)

#: Date/time inputs Postgres takes that hold no digit.
_SPECIAL_TEMPORAL = frozenset({"now", "today", "tomorrow", "yesterday", "infinity", "-infinity", "epoch", "allballs"})


_MONTHS = re.compile(r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b|\d\s*(am|pm)\b")


def _is_temporal(value: str) -> bool:
    """Whether `value` may be date/time input. Postgres reads many formats ('2024-01-02',
    '1/2/2024', '10:00', 'Jan 2 2024', '20240102', 'today'); beyond the special words each
    has a digit and a separator (- / : .), a month name, am/pm, or is a run of digits. That is
    what this checks: it flags `'queued'`, `''` or `'1 day'`, never a real date."""
    text = value.strip().lower()
    if text in _SPECIAL_TEMPORAL:
        return True
    if not any(ch.isdigit() for ch in text):
        return False
    julian = text.startswith("j") and text[1:].isdigit()  # 'J2451187'
    return any(sep in text for sep in "-/:.") or _MONTHS.search(text) is not None or text.isdigit() or julian


def _same_query(node: exp.Expr, top: exp.Expr) -> bool:
    """Whether `node` (inside `top`) belongs to `top`'s query, not to a nested subquery."""
    parent = node.parent
    while parent is not None and parent is not top:
        if isinstance(parent, (exp.Subquery, exp.Select, exp.Exists)):
            return False
        parent = parent.parent
    return True


def _aggregates(node: exp.Expr) -> Iterator[exp.Func]:
    """Aggregate calls in `node` that belong to its query (not to a nested subquery)."""
    if isinstance(node, (exp.Subquery, exp.Select, exp.Exists)):
        return
    if isinstance(node, exp.Func) and _is_aggregate(node):
        yield node
    for child in node.iter_expressions():
        yield from _aggregates(child)


def _free_columns(node: exp.Expr, grouped_sql: set[str]) -> Iterator[exp.Column]:
    """Column references of a grouped query's output that are neither inside an aggregate
    nor part of a grouped expression (nor in a subquery or window, which are not checked)."""
    if node.sql(dialect="postgres") in grouped_sql:
        return
    if isinstance(node, exp.Column):
        if not isinstance(node.this, exp.Star):
            yield node
        return
    if isinstance(node, (exp.Subquery, exp.Select, exp.Exists, exp.Window)) or _is_aggregate(node):
        return
    for child in node.iter_expressions():
        yield from _free_columns(child, grouped_sql)


def _owner(col: exp.Column, scope: Scope) -> Relation | None:
    """The relation of this query's FROM that `col` belongs to (None: an outer query's)."""
    if col.table:
        return next((rel for rel in scope.relations if col.table in rel.names), None)
    owners = [rel for rel in scope.relations if rel.column(col.name) is not None]
    return owners[0] if len(owners) == 1 else None


def _local_column_names(scope: Scope) -> set[str]:
    return {name for rel in scope.relations for name, _ in rel.columns}


def _close_parens(sql: str, span: SqlSpan) -> SqlSpan:
    """Widen `span` over the `)` that close parentheses it opens: sqlglot places no node
    on a closing parenthesis, so `foo(name)` would otherwise be underlined as `foo(name`."""
    end = span.end
    depth = sql.count("(", span.start, end + 1) - sql.count(")", span.start, end + 1)
    if depth == 0:
        # `row_number()`: sqlglot placed only the name; take its argument list too.
        nxt = end + 1
        while nxt < len(sql) and sql[nxt].isspace():
            nxt += 1
        if nxt < len(sql) and sql[nxt] == "(" and (sql[end].isalnum() or sql[end] == "_"):
            end, depth = nxt, 1
            while depth > 0 and end + 1 < len(sql):
                end += 1
                depth += {"(": 1, ")": -1}.get(sql[end], 0)
            return SqlSpan(span.start, end)
    while depth > 0:
        nxt = end + 1
        while nxt < len(sql) and sql[nxt].isspace():
            nxt += 1
        if nxt >= len(sql) or sql[nxt] != ")":
            break
        end, depth = nxt, depth - 1
    return SqlSpan(span.start, end)


def _rename(cols: list[tuple[str, Typed]], names: list[str]) -> list[tuple[str, Typed]]:
    return [(names[i] if i < len(names) else n, typed) for i, (n, typed) in enumerate(cols)]


def _all_relations(scope: Scope) -> list[Relation]:
    out: list[Relation] = []
    s: Scope | None = scope
    while s is not None:
        out.extend(s.relations)
        s = s.parent
    return out


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


def analyze(
    sql: str, catalog: Catalog, nullable_params: frozenset[str] = frozenset()
) -> tuple[Analysis | None, list[Problem]]:
    # PostgreSQL's grammar first: sqlglot never sees text PostgreSQL rejects.
    grammar = check_statement(sql)
    if grammar.problems:
        return None, list(grammar.problems)
    analyzer = Analyzer(sql, catalog, nullable_params)
    analyzer.param_spans = grammar.parameter_spans  # found by PostgreSQL's lexer
    result = analyzer.analyze()
    return result, analyzer.problems
