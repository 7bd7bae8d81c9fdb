"""Statement analysis: one SQL statement + the Catalog -> its parameters and result columns.

Walks sqlglot's AST with explicit scopes (FROM items, CTEs, outer queries for correlated
subqueries). Every `@name` gets a type from the context it is used in; every output column
gets a type and a nullability. Problems carry spans into the statement text. The work is split
by concern into parts sharing one `StatementState` (state.py, parameters.py): from_items.py (FROM,
JOIN, CTEs and column references), expressions.py (expression typing by node kind, through
literal_casts.py, operators.py and calls.py), grouping.py, statements.py (queries and their
output columns) and writes.py (INSERT, UPDATE, DELETE).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import sqlglot
from pglast import ast
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from ...diagnostics import Problem, SqlSpan, sqlglot_limit
from ..bridge.call_standins import with_call_standins
from ..bridge.operator_standins import GENERIC_OPERATORS, sqlglot_text
from ..bridge.type_standins import (
    PositionedPostgres,
    resolve_type_name,
    type_names,
    unknown_type_message,
    with_type_standins,
)
from ..catalog import types as t
from ..catalog.identifiers import fold
from ..catalog.model import Catalog, Table
from ..syntax.grammar import GrammarCheck, check_statement
from .calls import FunctionCalls, is_volatile
from .expressions import ExpressionTyping
from .from_items import FromItems
from .grouping import Grouping
from .literal_casts import CastsAndLiterals
from .operators import Operators
from .result import Analysis, Param, ResultColumn, StatementKind
from .scope import Scope, Typed
from .state import StatementState
from .statements import Statements
from .writes import Writes

__all__ = ["Analyzer", "analyze"]


class Analyzer:
    """One statement's analysis: its parts made and connected, and the entry point. Each part
    owns one concern and shares the statement's state (`state.py`); a part calls another
    through an attribute naming it (`self.expr.infer`, `self.from_items.column`)."""

    def __init__(
        self, sql: str, catalog: Catalog, grammar: GrammarCheck, nullable_params: frozenset[str] = frozenset()
    ) -> None:
        self.state = state = StatementState(sql, catalog, grammar, nullable_params)
        self.grouping = Grouping(state)
        self.casts = CastsAndLiterals(state)
        self.operators = Operators(state, self.casts)
        self.functions = FunctionCalls(state, self.operators)
        self.from_items = FromItems(state, self.functions)
        self.expr = ExpressionTyping(state, self.casts, self.operators, self.functions, self.from_items)
        self.queries = Statements(state, self.expr, self.from_items, self.grouping)
        self.writes = Writes(state, self.queries, self.expr, self.from_items, self.grouping)
        # The recursion (recursion.py): the parts below expression and query typing reach them.
        self.casts.expr = self.operators.expr = self.functions.expr = self.from_items.expr = self.expr
        self.operators.queries = self.from_items.queries = self.expr.queries = self.queries
        self.from_items.writes = self.writes

    def analyze(self) -> Analysis | None:
        tree = self.state.grammar.tree
        if self.state.grammar.kind == "other" or (isinstance(tree, ast.SelectStmt) and tree.intoClause is not None):
            # CALL, TRUNCATE, NOTIFY, DDL (whose type names are its own: serial, a type it drops),
            # SELECT INTO (a CREATE TABLE AS): PostgreSQL's tree, not sqlglot's.
            from .utility import analyze_utility  # utility statements only: not imported by every run

            utility = analyze_utility(self.state.sql, self.state.grammar, self.state.catalog, analyze)
            self.state.problems.extend(utility.problems)
            return utility
        if not self.type_names_exist():
            return None
        try:
            statements = [s for s in sqlglot.parse(self.sqlglot_text(), read=PositionedPostgres) if s is not None]
        except (TokenError, ParseError) as err:
            # analyze() ran PostgreSQL's grammar first: the SQL is valid, sqlglot cannot read it.
            self.state.problems.append(sqlglot_limit(self.state.sql, err))
            return None
        if len(statements) != 1:  # PostgreSQL's grammar found exactly one
            self.state.problems.append(Problem(f"pydb cannot analyse this statement (sqlglot reads {len(statements)})"))
            return None
        stmt = statements[0]
        assert stmt is not None
        _as_postgres_reads(stmt)
        self.state.top_level = {id(node) for node in _result_lists(stmt)}
        scope = Scope()
        key_param: str | None = None
        target: Table | None = None
        conflict_do_nothing = False
        columns: list[tuple[str, Typed, SqlSpan | None]] | None
        if isinstance(stmt, (exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Values)):
            kind: StatementKind = "select"
            columns = self.queries.query(stmt, scope)
        elif isinstance(stmt, exp.Insert):
            kind = "insert"
            target, columns, conflict_do_nothing = self.writes.insert(stmt, scope)
        elif isinstance(stmt, exp.Update):
            kind = "update"
            target, columns, key_param = self.writes.update(stmt, scope)
        elif isinstance(stmt, exp.Delete):
            kind = "delete"
            target, columns, key_param = self.writes.delete(stmt, scope)
        else:
            first_word = self.state.sql.split()[0].upper() if self.state.sql.split() else "?"
            start = len(self.state.sql) - len(self.state.sql.lstrip())
            self.state.error(
                f"unsupported statement {first_word}: expected SELECT, INSERT, UPDATE or DELETE",
                span=SqlSpan(start, start + len(first_word) - 1),
            )
            return None
        for name in self.state.param_spans:
            self.state.params.see(name)
        params = []
        # After another error a parameter's context may be what failed: do not pile on.
        report_untyped = not self.state.problems
        for name in self.state.params.order:
            ptype = self.state.params.types[name]
            if ptype is None and report_untyped:
                self.state.error(
                    f"cannot infer the type of parameter @{name}; add a cast, e.g. @{name}::text",
                    span=self.state.params.first_span(name),
                )
            params.append(Param(name, ptype, tuple(self.state.param_spans.get(name, ()))))
        result = None
        if columns is not None:
            # Postgres resolves an untyped literal in the output to text.
            result = tuple(_result_column(n, typed, span) for n, typed, span in columns)
            self._check_duplicate_columns(result)
            if not self.state.problems:
                for col in result:
                    if col.type is None or col.type == t.NULL:
                        self.state.error(
                            f"cannot tell the type of result column {col.name}; add a cast, e.g. (...)::text AS {col.name}",
                            span=col.span,
                        )
        return Analysis(
            kind,
            tuple(params),
            result,
            target,
            key_param,
            conflict_do_nothing,
            tuple(self.state.problems),
            expansions=tuple(sorted(self.state.expansions, key=lambda e: e.span.start)),
            read_only=kind == "select" and _reads_only(stmt, self.state.catalog),
        )

    def sqlglot_text(self) -> str:
        """The statement as sqlglot is given it: with stand-ins of the same length for the
        operators, type names and function names sqlglot cannot read or reads as other
        constructs (every offset is the statement's)."""
        return with_call_standins(
            with_type_standins(sqlglot_text(self.state.grammar), self.state.grammar), self.state.calls
        )

    def type_names_exist(self) -> bool:
        """Every type the statement names exists (sqlglot would read other dialects' names such
        as STRING or INT64 as text or bigint): a built-in (the grammar qualifies its own
        spellings such as `int` or `double precision` with pg_catalog), a type the schema made,
        or a table's row type, found along the search_path."""
        ok = True
        for type_name in type_names(self.state.grammar.tree):
            if resolve_type_name(type_name, self.state.catalog) is None:
                where = self.state.grammar.original_offset(type_name.location or 0)
                written = ".".join(str(part.sval) for part in type_name.names or () if isinstance(part, ast.String))
                message = unknown_type_message(type_name, self.state.catalog)
                self.state.error(message, span=SqlSpan(where, where + len(written) - 1))
                ok = False
        return ok

    def _check_duplicate_columns(self, columns: tuple[ResultColumn, ...]) -> None:
        seen: set[str] = set()
        for col in columns:
            if col.name in seen:
                self.state.error(f"result column {col.name} appears more than once; give it an alias", span=col.span)
            seen.add(col.name)


def analyze(
    sql: str, catalog: Catalog, nullable_params: frozenset[str] = frozenset()
) -> tuple[Analysis | None, list[Problem]]:
    # PostgreSQL's grammar first: sqlglot never sees text PostgreSQL rejects.
    grammar = check_statement(sql, frozenset(op.name for op in catalog.operators))
    if grammar.problems:
        return None, list(grammar.problems)
    analyzer = Analyzer(sql, catalog, grammar, nullable_params)
    result = analyzer.analyze()
    if result is not None:
        numbers = {p.number: p.name for p in grammar.parameters}
        names = tuple(numbers.get(n, "") for n in range(1, max(numbers, default=0) + 1))
        result = replace(result, tree=grammar.tree, positional_names=names)
    return result, [*analyzer.state.problems, *analyzer.state.warnings]


def _result_column(name: str, typed: Typed, span: SqlSpan | None) -> ResultColumn:
    # Postgres resolves an untyped literal in the output to text.
    pgtype = t.TEXT if typed.type == t.UNKNOWN else typed.type
    embedded = None
    if typed.embedded is not None:
        embedded = tuple(_result_column(n, inner, None) for n, inner in typed.embedded)
    return ResultColumn(name, pgtype, typed.nullable, span, embedded)


def _result_lists(stmt: exp.Expr) -> Iterator[exp.Expr]:
    """The nodes whose select list or RETURNING list makes the statement's rows: the statement
    itself, or every branch of a set operation."""
    if isinstance(stmt, exp.SetOperation):
        yield from _result_lists(stmt.this)
        yield from _result_lists(stmt.expression)
    elif isinstance(stmt, exp.Subquery):
        yield from _result_lists(stmt.this)
    else:
        yield stmt


def _reads_only(stmt: exp.Expr, catalog: Catalog) -> bool:
    """No row lock (FOR UPDATE/SHARE), no data-modifying WITH, no volatile function: a
    read-only transaction (a replica) could run it."""
    for node in stmt.walk():
        if isinstance(node, (exp.Lock, exp.Insert, exp.Update, exp.Delete, exp.Merge)):
            return False
        if isinstance(node, exp.Func) and is_volatile(node, catalog):
            return False
    return True


def _as_postgres_reads(stmt: exp.Expr) -> None:
    """sqlglot's tree of the statement made PostgreSQL's reading of it, in one walk: the nodes
    each rewrite below looks at, collected first (none of them makes or removes a node another
    looks for, except that a ROW(...) call replaced is no ALL(...) call)."""
    identifiers: list[exp.Identifier] = []
    parens: list[exp.Paren] = []
    calls: list[exp.Anonymous] = []
    lambdas: list[exp.Lambda] = []
    for node in stmt.walk():
        if isinstance(node, exp.Identifier):
            identifiers.append(node)
        elif isinstance(node, exp.Paren):
            parens.append(node)
        elif isinstance(node, exp.Anonymous):
            calls.append(node)
        elif isinstance(node, exp.Lambda):
            lambdas.append(node)
    _fold_identifiers(identifiers)
    _unwrap_parameters(parens)
    _row_constructors(calls)
    _quantified_all(calls)
    _arrow_operators(lambdas)


def _fold_identifiers(identifiers: list[exp.Identifier]) -> None:
    """Every name in the statement as PostgreSQL reads it: unquoted identifiers folded to lower
    case (`SELECT F FROM T` reads column f of table t; `AS MaxDate` names maxdate), quoted
    ones kept. Parameters are Vars, not Identifiers: `@userId` keeps its spelling."""
    for ident in identifiers:
        if not ident.quoted:
            ident.set("this", fold(str(ident.this)))


def _row_constructors(calls: list[exp.Anonymous]) -> None:
    """`ROW(a, b)` as PostgreSQL's tree has it: the row constructor `(a, b)` (sqlglot reads a
    call of a function row, which a keyword cannot name unquoted)."""
    for call in calls:
        if str(call.this).lower() == "row" and call.parent is not None:
            call.replace(exp.Tuple(expressions=list(call.expressions)))


def _quantified_all(calls: list[exp.Anonymous]) -> None:
    """`x op ALL(array)` as PostgreSQL's tree has it: a quantified comparison (sqlglot reads a
    call of a function all, which the reserved word cannot name unquoted)."""
    for call in calls:
        if str(call.this).upper() == "ALL" and len(call.expressions) == 1 and isinstance(call.parent, exp.Binary):
            call.replace(exp.All(this=call.expressions[0]))


#: Operators PostgreSQL binds more loosely than `->` (any other operator binds as tightly, and
#: groups to the left): the left operand of each of these is where a misread `->` belongs.
_LOOSER_THAN_ARROW = (
    exp.JSONExtract,
    exp.JSONExtractScalar,
    exp.JSONBExtract,
    exp.JSONBExtractScalar,
    exp.JSONBDeleteAtPath,
    exp.DPipe,
    exp.Predicate,
    exp.Connector,
    exp.Is,
    exp.Between,
    exp.In,
    *GENERIC_OPERATORS,
)


def _arrow_operators(lambdas: list[exp.Lambda]) -> None:
    """`f(doc->'a'->>'b')` as PostgreSQL's tree has it: `(doc -> 'a') ->> 'b'`. In a call's
    arguments sqlglot reads `doc -> ...` as a lambda of parameter doc (PostgreSQL has none):
    the operand of the lambda's leftmost looser operator is the key of `doc -> key`."""
    for lam in lambdas:
        params = lam.expressions
        if len(params) != 1 or not isinstance(params[0], exp.Identifier) or lam.parent is None:
            continue
        name = params[0]
        body = lam.this
        for ident in list(body.find_all(exp.Identifier)):
            # sqlglot made the lambda's own parameter of each column reference of that name
            if ident.this == name.this and not isinstance(ident.parent, (exp.Column, exp.Dot, exp.Table)):
                ident.replace(exp.Column(this=ident.copy()))
        node = body
        while isinstance(node, _LOOSER_THAN_ARROW) and isinstance(node.this, exp.Expr):
            node = node.this
        arrow = exp.JSONExtract(this=exp.Column(this=name), expression=node.copy(), only_json_types=True)
        if node is body:
            lam.replace(arrow)
        else:
            node.replace(arrow)
            lam.replace(body)


def _unwrap_parameters(parens: list[exp.Paren]) -> None:
    """`(@p)` as PostgreSQL's tree has it: the parameter itself, untyped wherever it stands
    (`(@tag) = ANY(tags)`, `timeout + (@extra)`). A parameter's span comes from the tokens."""
    for paren in parens:
        inner = paren.unnest()
        if isinstance(inner, exp.Parameter) and paren.parent is not None:
            paren.replace(inner)
