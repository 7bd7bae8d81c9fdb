"""Statement analysis: one SQL statement + the Catalog -> its parameters and result columns.

Walks sqlglot's AST with explicit scopes (FROM items, CTEs, outer queries for correlated
subqueries). Every `@name` gets a type from the context it is used in; every output column
gets a type and a nullability. Problems carry spans into the statement text.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Literal

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from . import pgtypes as t
from .catalog import Catalog, Table
from .diagnostics import Problem, SqlSpan
from .pgtypes import PgType, UnknownType

StatementKind = Literal["select", "insert", "update", "delete"]


@dataclass(frozen=True)
class Param:
    """A `@name` in the statement; `type` is None only when an error was reported for it."""

    name: str
    type: PgType | None
    spans: tuple[SqlSpan, ...]


@dataclass(frozen=True)
class ResultColumn:
    name: str
    type: PgType | None
    nullable: bool
    span: SqlSpan | None


@dataclass(frozen=True)
class Analysis:
    kind: StatementKind
    params: tuple[Param, ...]
    #: The rows' columns; None when the statement returns no rows.
    columns: tuple[ResultColumn, ...] | None
    #: The table an INSERT/UPDATE/DELETE writes.
    target: Table | None
    #: The parameter compared by equality with the target's single-column primary key in the
    #: top-level WHERE: lets a handler tell "no such row" from "row not in the needed state".
    key_param: str | None
    #: INSERT ... ON CONFLICT DO NOTHING: no row back means the row already existed.
    conflict_do_nothing: bool
    problems: tuple[Problem, ...]


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

    def cte(self, name: str) -> Relation | None:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.ctes:
                return scope.ctes[name]
            scope = scope.parent
        return None


_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.NullSafeEQ, exp.NullSafeNEQ)
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)


def span_of(node: exp.Expression) -> SqlSpan | None:
    """The smallest range covering every token of `node` that sqlglot placed."""
    starts: list[int] = []
    ends: list[int] = []
    for sub in node.walk():
        meta = sub.meta
        if "start" in meta and "end" in meta:
            starts.append(int(meta["start"]))
            ends.append(int(meta["end"]))
    if not starts:
        return None
    return SqlSpan(min(starts), max(ends))


def parameter_spans(sql: str) -> dict[str, list[SqlSpan]]:
    """Where each `@name` stands in `sql`, from the tokenizer (not a regex: `@` inside a
    string literal or comment is no parameter)."""
    spans: dict[str, list[SqlSpan]] = {}
    tokens = sqlglot.tokenize(sql, read="postgres")
    for tok, nxt in zip(tokens, tokens[1:]):
        if tok.token_type == TokenType.PARAMETER and nxt.start == tok.end + 1:
            spans.setdefault(nxt.text, []).append(SqlSpan(tok.start, nxt.end))
    return spans


def _suggest(name: str, candidates: list[str]) -> str:
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def _lit_display(lit: exp.Literal) -> str:
    return f"'{lit.this}'" if lit.is_string else str(lit.this)


class Analyzer:
    def __init__(self, sql: str, catalog: Catalog, nullable_params: frozenset[str] = frozenset()):
        self.sql = sql
        self.catalog = catalog
        self.nullable_params = nullable_params
        self.problems: list[Problem] = []
        self.param_types: dict[str, PgType | None] = {}
        self.param_spans = parameter_spans(sql)
        self._param_order: list[str] = []

    # -- reporting -------------------------------------------------------------------------
    def error(self, message: str, node: exp.Expression | None = None, span: SqlSpan | None = None) -> None:
        if span is None and node is not None:
            span = span_of(node)
        self.problems.append(Problem(message, span))

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
        except (ParseError, TokenError) as err:
            self.problems.append(_syntax_problem(self.sql, err))
            return None
        statements = [s for s in statements if s is not None]
        if len(statements) != 1:
            self.error(f"expected exactly one SQL statement, found {len(statements)}")
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
            self.error(f"unsupported statement {type(stmt).__name__.upper()}: expected SELECT, INSERT, UPDATE or DELETE", stmt)
            return None
        for name in self.param_spans:
            self._see_param(name)
        params = []
        for name in self._param_order:
            ptype = self.param_types[name]
            if ptype is None:
                self.error(
                    f"cannot infer the type of parameter @{name}; add a cast, e.g. @{name}::text",
                    span=self._param_span(name),
                )
            params.append(Param(name, ptype, tuple(self.param_spans.get(name, ()))))
        result = None
        if columns is not None:
            result = tuple(ResultColumn(n, typed.type, typed.nullable, span) for n, typed, span in columns)
            self._check_duplicate_columns(result)
        return Analysis(kind, tuple(params), result, target, key_param, conflict_do_nothing, tuple(self.problems))

    def _check_duplicate_columns(self, columns: tuple[ResultColumn, ...]) -> None:
        seen: set[str] = set()
        for col in columns:
            if col.name in seen:
                self.error(f"result column {col.name} appears more than once; give it an alias", span=col.span)
            seen.add(col.name)

    # -- queries ---------------------------------------------------------------------------
    def with_ctes(self, node: exp.Expression, scope: Scope) -> Scope:
        with_ = node.args.get("with_") or node.args.get("with")
        if not isinstance(with_, exp.With):
            return scope
        inner = Scope(parent=scope)
        for cte in with_.expressions:
            name = cte.alias_or_name
            body = cte.this
            cols = self.statement_rows(body, inner)
            alias_cols = [c.name for c in cte.args["alias"].columns] if cte.args.get("alias") and cte.args["alias"].columns else None
            rel_cols = [(n, typed) for n, typed, _ in (cols or [])]
            if alias_cols:
                rel_cols = [(alias_cols[i] if i < len(alias_cols) else n, typed) for i, (n, typed) in enumerate(rel_cols)]
            inner.ctes[name] = Relation(name, (name,), rel_cols)
        return inner

    def statement_rows(self, body: exp.Expression, scope: Scope) -> list[tuple[str, Typed, SqlSpan | None]] | None:
        """Rows of a statement that may stand in a CTE: a query or data-modifying statement."""
        if isinstance(body, exp.Insert):
            return self.insert(body, scope)[1]
        if isinstance(body, exp.Update):
            return self.update(body, scope)[1]
        if isinstance(body, exp.Delete):
            return self.delete(body, scope)[1]
        return self.query(body, scope)

    def query(self, node: exp.Expression, scope: Scope) -> list[tuple[str, Typed, SqlSpan | None]]:
        if isinstance(node, exp.Subquery):
            return self.query(node.this, scope)
        if isinstance(node, (exp.Union, exp.Intersect, exp.Except)):
            scope = self.with_ctes(node, scope)
            left = self.query(node.this, scope)
            right = self.query(node.expression, scope)
            if len(left) != len(right):
                self.error(f"each side of {type(node).__name__.upper()} must have the same number of columns ({len(left)} vs {len(right)})", node)
            merged = []
            for i, (name, typed, span) in enumerate(left):
                other = right[i][1] if i < len(right) else typed
                merged.append((name, Typed(typed.type or other.type, typed.nullable or other.nullable), span))
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
            for g in group.expressions:
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
                self.infer(o.this if isinstance(o, exp.Ordered) else o, local, allow_output=True)
        for key in ("limit", "offset"):
            clause = node.args.get(key)
            if clause is not None:
                value = clause.args.get("expression") if key == "limit" else clause.args.get("expression") or clause.this
                if isinstance(value, exp.Expression):
                    self.expect(value, t.INT8, local)
        return outputs

    def values_rows(self, node: exp.Values, scope: Scope) -> list[tuple[str, Typed, SqlSpan | None]]:
        rows = node.expressions
        if not rows:
            return []
        first = rows[0].expressions if isinstance(rows[0], exp.Tuple) else [rows[0]]
        out = []
        for i, e in enumerate(first):
            out.append((f"column{i + 1}", self.infer(e, scope), span_of(e)))
        return out

    def projections(self, items: list[exp.Expression], scope: Scope) -> list[tuple[str, Typed, SqlSpan | None]]:
        out: list[tuple[str, Typed, SqlSpan | None]] = []
        for item in items:
            if isinstance(item, exp.Star):
                for rel in scope.relations:
                    out.extend((n, typed, span_of(item)) for n, typed in rel.columns)
                if not scope.relations:
                    self.error("SELECT * with no FROM", item)
                continue
            if isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
                rel = self.find_relation(item.table, scope, item)
                if rel is not None:
                    out.extend((n, typed, span_of(item)) for n, typed in rel.columns)
                continue
            typed = self.infer(item, scope)
            out.append((_output_name(item), typed, span_of(item)))
        return out

    # -- FROM ------------------------------------------------------------------------------
    def from_clause(self, node: exp.Expression, scope: Scope) -> None:
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
            if not any(rel.column(name) for rel in scope.relations[:before]) or scope.relations[-1].column(name) is None:
                self.error(f"column {name} named in USING is not on both sides of the join", ident)

    def add_source(self, source: exp.Expression, scope: Scope, nullable: bool) -> None:
        rel = self.relation_of(source, scope)
        if rel is None:
            return
        if nullable:
            rel.columns = [(n, Typed(typed.type, True)) for n, typed in rel.columns]
        for existing in scope.relations:
            if existing.alias == rel.alias:
                self.error(f"table name {rel.alias} is specified more than once; give one an alias", source)
        scope.relations.append(rel)

    def relation_of(self, source: exp.Expression, scope: Scope) -> Relation | None:
        alias = source.args.get("alias")
        alias_name = alias.name if isinstance(alias, exp.TableAlias) and alias.name else None
        col_aliases = [c.name for c in alias.columns] if isinstance(alias, exp.TableAlias) else []
        if isinstance(source, exp.Table) and isinstance(source.this, exp.Identifier):
            name = t.qualified_name(source.this)
            if not source.args.get("db"):
                cte = scope.cte(name)
                if cte is not None:
                    return Relation(alias_name or name, (alias_name or name,), list(cte.columns))
            table = self.table(source)
            if table is None:
                return None
            names = (alias_name,) if alias_name else (table.name, table.qualified)
            cols = [(c.name, Typed(c.type, not c.not_null)) for c in table.columns]
            return Relation(alias_name or table.name, names, cols, table)
        if isinstance(source, exp.Subquery):
            rows = self.query(source.this, Scope(parent=scope))
            cols = [(n, typed) for n, typed, _ in rows]
            cols = _rename(cols, col_aliases)
            name = alias_name or "?subquery?"
            return Relation(name, (name,), cols)
        if isinstance(source, exp.Table) and isinstance(source.this, (exp.Unnest, exp.Anonymous, exp.Func)):
            return self.function_source(source.this, alias_name, col_aliases, scope)
        if isinstance(source, (exp.Unnest, exp.Func)):
            return self.function_source(source, alias_name, col_aliases, scope)
        if isinstance(source, exp.Values):
            rows = self.values_rows(source, scope)
            cols = _rename([(n, typed) for n, typed, _ in rows], col_aliases)
            name = alias_name or "*VALUES*"
            return Relation(name, (name,), cols)
        self.error(f"unsupported FROM item {type(source).__name__}", source)
        return None

    def function_source(self, func: exp.Expression, alias: str | None, col_aliases: list[str], scope: Scope) -> Relation:
        if isinstance(func, exp.Unnest):
            cols: list[tuple[str, Typed]] = []
            for i, arg in enumerate(func.expressions):
                typed = self.infer(arg, scope)
                elem = typed.type.element if typed.type is not None and typed.type.is_array else None
                if typed.type is not None and not typed.type.is_array and typed.type != t.UNKNOWN:
                    self.error(f"unnest() takes arrays; argument {i + 1} is {typed.type}", arg)
                cols.append((f"unnest{i + 1}" if len(func.expressions) > 1 else "unnest", Typed(elem, True)))
            if len(col_aliases) > len(cols):
                self.error(f"unnest() yields {len(cols)} columns but {len(col_aliases)} names were given", func)
            cols = _rename(cols, col_aliases)
            name = alias or "unnest"
            return Relation(name, (name,), cols)
        typed = self.infer(func, scope)
        name = alias or func.sql_name().lower()
        return Relation(name, (name,), [(col_aliases[0] if col_aliases else name, typed)])

    def table(self, node: exp.Table) -> Table | None:
        name = t.qualified_name(node)
        table = self.catalog.table(name)
        if table is None:
            schema = name.split(".")[0] if "." in name else None
            if schema is not None and schema not in self.catalog.schemas:
                self.error(f"schema {schema} does not exist{_suggest(schema, sorted(self.catalog.schemas))}", node)
            else:
                self.error(f"table {name} does not exist{_suggest(name, self.catalog.table_names())}", node)
        return table

    def find_relation(self, qualifier: str, scope: Scope, node: exp.Expression) -> Relation | None:
        s: Scope | None = scope
        while s is not None:
            for rel in s.relations:
                if qualifier in rel.names:
                    return rel
            s = s.parent
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
            s = s.parent
        visible = sorted({n for rel in _all_relations(scope) for n, _ in rel.columns})
        self.error(f"column {name} does not exist{_suggest(name, visible)}", col)
        return Typed(None, True)

    # -- typing ----------------------------------------------------------------------------
    def expect(self, node: exp.Expression, want: PgType, scope: Scope) -> Typed:
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
        if isinstance(node, (exp.Coalesce, exp.Nullif)):
            args = [node.this, *node.expressions] if isinstance(node, exp.Coalesce) else [node.this, node.expression]
            typed_args = [self.expect(a, want, scope) for a in args if isinstance(a, exp.Expression)]
            if isinstance(node, exp.Coalesce):
                return Typed(want, all(a.nullable for a in typed_args))
            return Typed(want, True)
        typed = self.infer(node, scope)
        if typed.type is not None and not assignable(typed.type, want):
            self.error(f"expected {_describe(want)}, got {_describe(typed.type)}", node)
        return typed

    def check_literal(self, lit: exp.Literal, want: PgType) -> None:
        if want.is_array:
            return
        value = str(lit.this)
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
            elif want.name == "uuid":
                if not _is_uuid(value):
                    self.error(f"invalid input syntax for type uuid: '{value}'", lit)
            elif want.name == "bool":
                if value.strip().lower() not in {"t", "f", "true", "false", "yes", "no", "on", "off", "1", "0", "y", "n"}:
                    self.error(f"invalid input syntax for type boolean: '{value}'", lit)
            return
        # A number literal.
        if want.name in t.NUMERIC:
            if want.name in t.INTEGER and not _is_int(value):
                self.error(f"{value} is not an integer, but {want.name} is expected", lit)
            return
        self.error(f"a number ({value}) cannot be used as {_describe(want)}", lit)

    def case(self, node: exp.Case, scope: Scope, want: PgType | None) -> Typed:
        subject = node.this
        subject_type = self.infer(subject, scope).type if isinstance(subject, exp.Expression) else None
        result: PgType | None = want
        nullable = node.args.get("default") is None
        branches: list[exp.Expression] = []
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

    def infer(self, node: exp.Expression, scope: Scope, allow_output: bool = False) -> Typed:
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
                if isinstance(bound, exp.Expression):
                    if subject.type is not None:
                        self.expect(bound, subject.type, scope)
                    else:
                        self.infer(bound, scope)
            return Typed(t.BOOL, subject.nullable)
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
            a = self.infer(node.this, scope)
            b = self.infer(node.expression, scope)
            for side in (node.this, node.expression):
                if isinstance(side, exp.Parameter):
                    self.bind(side, t.TEXT)
            return Typed(t.TEXT, a.nullable or b.nullable)
        if isinstance(node, exp.Window):
            return self.infer(node.this, scope)
        if isinstance(node, exp.Bracket):
            base = self.infer(node.this, scope)
            for e in node.expressions:
                self.expect(e, t.INT4, scope)
            return Typed(base.type.element if base.type is not None and base.type.is_array else None, True)
        if isinstance(node, exp.Array):
            elems = [self.infer(e, scope) for e in node.expressions]
            first = next((e.type for e in elems if e.type not in (None, t.UNKNOWN, t.NULL)), None)
            return Typed(first.array() if first is not None else None, False)
        if isinstance(node, (exp.JSONExtract, exp.JSONBExtract)):
            self.infer(node.this, scope)
            return Typed(t.JSONB, True)
        if isinstance(node, (exp.JSONExtractScalar, exp.JSONBExtractScalar)):
            self.infer(node.this, scope)
            return Typed(t.TEXT, True)
        if isinstance(node, exp.Func):
            return self.function(node, scope)
        for child in node.iter_expressions():
            self.infer(child, scope)
        return Typed(None, True)

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
            return Typed(target, False)
        typed = self.infer(inner, scope)
        return Typed(target, typed.nullable)

    def comparison(self, node: exp.Expression, scope: Scope) -> Typed:
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
            return Typed(t.BOOL, True)
        lt = self.infer(left, scope) if not _is_untyped(left) else Typed(None, False)
        rt = self.infer(right, scope) if not _is_untyped(right) else Typed(None, False)
        if _is_untyped(left) and rt.type is not None:
            lt = self.expect(left, rt.type, scope)
        elif _is_untyped(right) and lt.type is not None:
            rt = self.expect(right, lt.type, scope)
        elif lt.type is not None and rt.type is not None:
            self._check_comparable(lt.type, rt.type, node)
        elif _is_untyped(left) and _is_untyped(right):
            for side in (left, right):
                if isinstance(side, exp.Parameter):
                    self._see_param(side.name)
        return Typed(t.BOOL, lt.nullable or rt.nullable)

    def _check_comparable(self, a: PgType, b: PgType, node: exp.Expression) -> None:
        if t.UNKNOWN in (a, b) or t.NULL in (a, b):
            return
        if not (assignable(a, b) or assignable(b, a)):
            op = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}.get(type(node), "compare")
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
        for e in node.expressions:
            if subject.type is not None:
                self.expect(e, subject.type, scope)
            else:
                self.infer(e, scope)
        return Typed(t.BOOL, subject.nullable)

    def arithmetic(self, node: exp.Expression, scope: Scope) -> Typed:
        left, right = node.this, node.expression
        lt = self.infer(left, scope)
        rt = self.infer(right, scope)
        nullable = lt.nullable or rt.nullable
        a, b = lt.type, rt.type
        # A parameter takes the other operand's type, except next to an interval, where it
        # is a number (n * INTERVAL '1 second') or an interval (ts + @delay).
        for side, other in ((left, b), (right, a)):
            if isinstance(side, exp.Parameter) and other is not None:
                if other == t.INTERVAL and isinstance(node, (exp.Mul, exp.Div)):
                    self.bind(side, t.FLOAT8)
                elif other.name in t.TEMPORAL:
                    self.bind(side, t.INTERVAL)
                else:
                    self.bind(side, other)
        a = lt.type if not isinstance(left, exp.Parameter) else self.param_types.get(left.name)
        b = rt.type if not isinstance(right, exp.Parameter) else self.param_types.get(right.name)
        if a is None or b is None:
            return Typed(a or b if isinstance(node, (exp.Add, exp.Sub)) and (a or b) and (a or b) != t.INTERVAL else None, nullable)
        if a.name in t.TEMPORAL and b == t.INTERVAL or a == t.INTERVAL and b.name in t.TEMPORAL:
            return Typed(a if a.name in t.TEMPORAL else b, nullable)
        if a.name in t.TEMPORAL and b.name in t.TEMPORAL and isinstance(node, exp.Sub):
            return Typed(t.INTERVAL, nullable)
        if t.INTERVAL in (a, b) and isinstance(node, (exp.Mul, exp.Div)):
            return Typed(t.INTERVAL, nullable)
        if a == t.INTERVAL and b == t.INTERVAL:
            return Typed(t.INTERVAL, nullable)
        if a.name in t.NUMERIC and b.name in t.NUMERIC:
            return Typed(_wider(a, b), nullable)
        if t.UNKNOWN in (a, b):
            return Typed(b if a == t.UNKNOWN else a, nullable)
        self.error(f"operator does not exist: {_describe(a)} {_op(node)} {_describe(b)}", node)
        return Typed(None, nullable)

    def function(self, node: exp.Func, scope: Scope) -> Typed:
        name = _function_name(node)
        args = [a for a in node.iter_expressions() if not isinstance(a, (exp.Order, exp.Var))]
        if isinstance(node, exp.Count):
            for a in args:
                if not isinstance(a, exp.Star):
                    self.infer(a, scope)
            return Typed(t.INT8, False)
        if isinstance(node, (exp.CurrentTimestamp,)):
            return Typed(t.TIMESTAMPTZ, False)
        if isinstance(node, exp.Uuid):
            return Typed(t.UUID, False)
        if isinstance(node, exp.Coalesce):
            typed_args = [self.infer(a, scope) if not _is_untyped(a) else None for a in args]
            first = next((a.type for a in typed_args if a is not None and a.type not in (None, t.UNKNOWN, t.NULL)), None)
            if first is None:
                first = t.TEXT if any(isinstance(a, exp.Literal) and a.is_string for a in args) else None
            if first is not None:
                for a in args:
                    if _is_untyped(a):
                        self.expect(a, first, scope)
            nullable = all(ta.nullable if ta is not None else isinstance(a, exp.Parameter) and a.name in self.nullable_params for ta, a in zip(typed_args, args))
            return Typed(first, nullable)
        if isinstance(node, exp.Nullif):
            a, b = node.this, node.expression
            at = self.infer(a, scope) if not _is_untyped(a) else None
            bt = self.infer(b, scope) if not _is_untyped(b) else None
            typ = at.type if at is not None else (bt.type if bt is not None else None)
            if typ is not None:
                for side in (a, b):
                    if _is_untyped(side):
                        self.expect(side, typ, scope)
            return Typed(typ, True)
        if isinstance(node, (exp.Greatest, exp.Least)):
            typed_args = [self.infer(a, scope) for a in args if not _is_untyped(a)]
            typ = next((a.type for a in typed_args if a.type is not None), None)
            if typ is not None:
                for a in args:
                    if _is_untyped(a):
                        self.expect(a, typ, scope)
            return Typed(typ, any(a.nullable for a in typed_args))
        signature = BUILTINS.get(name)
        if signature is None:
            self.error(f"function {name}() does not exist (protoc-gen-pydb knows the built-ins listed in docs/diagnostics.md)", node)
            for a in args:
                self.infer(a, scope)
            return Typed(None, True)
        arg_types = signature.args
        typed_args = []
        for i, a in enumerate(args):
            want = arg_types[i] if i < len(arg_types) else (arg_types[-1] if signature.variadic and arg_types else None)
            if isinstance(a, exp.Star):
                continue
            if want is not None:
                typed_args.append(self.expect(a, want, scope))
            else:
                typed_args.append(self.infer(a, scope))
        ret = signature.returns
        if ret == "arg0":
            result = typed_args[0].type if typed_args else None
        elif ret == "arg0[]":
            result = typed_args[0].type.array() if typed_args and typed_args[0].type is not None else None
        elif ret == "elem0":
            result = typed_args[0].type.element if typed_args and typed_args[0].type is not None else None
        else:
            result = ret
        if signature.aggregate:
            nullable = name != "count"
        else:
            nullable = signature.nullable or any(a.nullable for a in typed_args)
        return Typed(result, nullable)

    # -- DML -------------------------------------------------------------------------------
    def insert(self, node: exp.Insert, scope: Scope) -> tuple[Table | None, list[tuple[str, Typed, SqlSpan | None]] | None, bool]:
        scope = self.with_ctes(node, scope)
        target_node = node.this
        col_nodes: list[exp.Expression] = []
        if isinstance(target_node, exp.Schema):
            col_nodes = list(target_node.expressions)
            target_node = target_node.this
        alias_name = target_node.alias if isinstance(target_node, exp.Table) and target_node.alias else None
        table = self.table(target_node) if isinstance(target_node, exp.Table) else None
        if table is None:
            return None, self.returning(node, Scope(parent=scope)), False
        columns = []
        for c in col_nodes:
            cname = c.name
            col = table.column(cname)
            if col is None:
                self.error(f"column {cname} of table {table.qualified} does not exist{_suggest(cname, [x.name for x in table.columns])}", c)
            columns.append((cname, col))
        if not col_nodes:
            columns = [(c.name, c) for c in table.columns]
        named = {n for n, _ in columns}
        for col in table.columns:
            if col.not_null and not col.has_default and col.name not in named:
                self.error(f"column {col.name} of {table.qualified} is NOT NULL and has no default, but the INSERT does not set it", target_node)
        source = node.expression
        if isinstance(source, exp.Values):
            for row in source.expressions:
                values = row.expressions if isinstance(row, exp.Tuple) else [row]
                if len(values) != len(columns):
                    more = "more" if len(values) > len(columns) else "fewer"
                    self.error(f"INSERT has {more} expressions ({len(values)}) than target columns ({len(columns)})", row)
                for (cname, col), value in zip(columns, values):
                    if col is None:
                        self.infer(value, scope)
                    elif not isinstance(value, exp.Var) or value.name.upper() != "DEFAULT":
                        typed = self.expect(value, col.type, scope)
                        if col.not_null and isinstance(value, exp.Null):
                            self.error(f"column {cname} is NOT NULL, but NULL is inserted", value)
                        del typed
        elif isinstance(source, exp.Expression):
            rows = self.query(source, Scope(parent=scope))
            if len(rows) != len(columns):
                self.error(f"INSERT has {len(rows)} expressions but {len(columns)} target columns", source)
            for (cname, col), (_, typed, span) in zip(columns, rows):
                if col is not None and typed.type is not None and not assignable(typed.type, col.type):
                    self.error(f"column {cname} is {_describe(col.type)} but the SELECT gives {_describe(typed.type)}", span=span)
        rel = Relation(alias_name or table.name, (alias_name,) if alias_name else (table.name, table.qualified),
                       [(c.name, Typed(c.type, not c.not_null)) for c in table.columns], table)
        conflict = node.args.get("conflict")
        do_nothing = False
        if isinstance(conflict, exp.OnConflict):
            keys = [k.this if isinstance(k, exp.Ordered) else k for k in conflict.args.get("conflict_keys") or []]
            key_names = []
            for k in keys:
                kname = k.name
                key_names.append(kname)
                if table.column(kname) is None:
                    self.error(f"ON CONFLICT column {kname} does not exist in {table.qualified}", k)
            if key_names and tuple(key_names) not in table.unique_keys and set(key_names) not in [set(u) for u in table.unique_keys]:
                self.error(f"there is no unique or exclusion constraint matching the ON CONFLICT specification ({', '.join(key_names)})", conflict)
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

    def assignments(self, items: list[exp.Expression], table: Table, scope: Scope) -> None:
        for item in items:
            if not isinstance(item, exp.EQ) or not isinstance(item.this, exp.Column):
                self.error("expected column = value", item)
                continue
            cname = item.this.name
            col = table.column(cname)
            if col is None:
                self.error(f"column {cname} of table {table.qualified} does not exist{_suggest(cname, [c.name for c in table.columns])}", item.this)
                self.infer(item.expression, scope)
                continue
            value = item.expression
            if col.not_null and isinstance(value, exp.Null):
                self.error(f"column {cname} is NOT NULL, but is set to NULL", value)
            self.expect(value, col.type, scope)

    def update(self, node: exp.Update, scope: Scope) -> tuple[Table | None, list[tuple[str, Typed, SqlSpan | None]] | None, str | None]:
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
        key = _key_param(where.this if where is not None else None, table, rel)
        return table, self.returning(node, local), key

    def delete(self, node: exp.Delete, scope: Scope) -> tuple[Table | None, list[tuple[str, Typed, SqlSpan | None]] | None, str | None]:
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
        key = _key_param(where.this if where is not None else None, table, rel)
        return table, self.returning(node, local), key

    def returning(self, node: exp.Expression, scope: Scope) -> list[tuple[str, Typed, SqlSpan | None]] | None:
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
}

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
}


def _function_name(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    key = type(node).__name__.lower()
    return _FUNC_ALIASES.get(key, node.sql_name().lower())


# ---------------------------------------------------------------------------------------------


def assignable(value: PgType, target: PgType) -> bool:
    """Whether a value of type `value` may be stored in, or compared with, `target` without
    an explicit cast (Postgres' implicit and assignment casts, simplified)."""
    if value in (t.UNKNOWN, t.NULL) or value == target:
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


def _same_family(a: PgType, b: PgType) -> bool:
    return assignable(a, b) and assignable(b, a)


def _wider(a: PgType, b: PgType) -> PgType:
    order = ["int2", "int4", "int8", "numeric", "float4", "float8"]
    return a if order.index(a.name) >= order.index(b.name) else b


def _describe(p: PgType) -> str:
    if p.is_enum:
        return f"enum {p.name}" + ("[]" if p.is_array else "")
    return str(p)


def _op(node: exp.Expression) -> str:
    return {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%"}.get(type(node), "?")


def _is_untyped(node: exp.Expression | None) -> bool:
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


def _is_uuid(value: str) -> bool:
    import uuid

    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def _output_name(item: exp.Expression) -> str:
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


def _rename(cols: list[tuple[str, Typed]], names: list[str]) -> list[tuple[str, Typed]]:
    return [(names[i] if i < len(names) else n, typed) for i, (n, typed) in enumerate(cols)]


def _all_relations(scope: Scope) -> list[Relation]:
    out: list[Relation] = []
    s: Scope | None = scope
    while s is not None:
        out.extend(s.relations)
        s = s.parent
    return out


def _key_param(where: exp.Expression | None, table: Table | None, rel: Relation | None) -> str | None:
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
            if isinstance(col, exp.Column) and isinstance(param, exp.Parameter) and col.name == pk and (not col.table or col.table in rel.names):
                return param.name
    return None


def _syntax_problem(sql: str, err: ParseError | TokenError) -> Problem:
    errors = getattr(err, "errors", None) or []
    if not errors:
        return Problem(f"syntax error: {err}")
    first = errors[0]
    desc = str(first.get("description", "syntax error")).split(". Line")[0]
    desc = desc.split(" <Token")[0]
    line = int(first.get("line") or 1)
    col = int(first.get("col") or 1)
    offset = _offset(sql, line, col)
    highlight = str(first.get("highlight") or "")
    start = max(offset - len(highlight) + 1, 0) if highlight else offset
    return Problem(f"syntax error: {desc}", SqlSpan(start, max(offset, start)))


def _offset(sql: str, line: int, col: int) -> int:
    lines = sql.split("\n")
    return sum(len(x) + 1 for x in lines[: line - 1]) + max(col - 1, 0)


def analyze(sql: str, catalog: Catalog, nullable_params: frozenset[str] = frozenset()) -> tuple[Analysis | None, list[Problem]]:
    analyzer = Analyzer(sql, catalog, nullable_params)
    result = analyzer.analyze()
    return result, analyzer.problems
