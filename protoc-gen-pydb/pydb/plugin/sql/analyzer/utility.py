"""Statements other than SELECT/INSERT/UPDATE/DELETE (and MERGE), analysed on PostgreSQL's own
parse tree (the grammar check's): CALL, TRUNCATE, NOTIFY/LISTEN/UNLISTEN, REFRESH MATERIALIZED
VIEW, LOCK, SHOW, EXPLAIN, DO, DDL, VACUUM/ANALYZE, SET/RESET, COMMENT, GRANT, ...

What PostgreSQL checks when it prepares them is little: a utility statement gets no parse
analysis until it runs. What is checked here is what would fail at run time and is easy to know
offline: CALL resolves its procedure by PostgreSQL's overload rules (its `@params` typed by the
resolution; OUT/INOUT parameters make the one row it returns), and the relations TRUNCATE, LOCK
and REFRESH name exist and are of the right kind; the query inside CREATE TABLE AS, SELECT INTO
and EXPLAIN is analysed by the statement analyzer. The bodies of DO blocks and of other DDL are
not analysed. Statements that cannot run where a generated handler runs them (in the RPC's own
transaction: VACUUM, COMMIT, COPY FROM STDIN, ...) are errors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pglast import ast
from pglast.enums import ObjectType

from ...diagnostics import Problem, SqlSpan
from ..catalog import types as t
from ..catalog.builtins import load_builtins
from ..catalog.model import Catalog, RelationKind
from ..catalog.signatures import FunctionSig
from ..catalog.types import PgType
from ..rules.coercion import ResolveError, display
from ..rules.resolution import FunctionResolution, resolve_function
from ..syntax.grammar import GrammarCheck
from ..syntax.pgparse import scan
from .result import Analysis, Param, ResultColumn

__all__ = ["analyze_utility"]

#: Statements whose `$n` PostgreSQL types in parse analysis (those with a query inside that
#: `inner_query` does not find).
_TYPED_PARAMETERS = (ast.DeclareCursorStmt,)
_TABLES: frozenset[RelationKind] = frozenset({"table", "partitioned_table"})
#: The settings pg_settings does not spell in lower case (PostgreSQL 15): SHOW's column names.
_MIXED_CASE_SETTINGS = {name.lower(): name for name in ("DateStyle", "IntervalStyle", "TimeZone")}
_LOCKABLE: frozenset[RelationKind] = frozenset({"table", "partitioned_table", "view", "foreign_table"})


#: The statement analyzer (`analyzer.analyze`), handed in by it: the queries inside a utility
#: statement (CREATE TABLE AS, EXPLAIN, an expression argument of CALL) are analysed by it.
StatementAnalyzer = Callable[[str, Catalog], tuple[Analysis | None, list[Problem]]]


def analyze_utility(sql: str, grammar: GrammarCheck, catalog: Catalog, analyze: StatementAnalyzer) -> Analysis:
    """The analysis of one statement PostgreSQL's grammar read as neither a query nor
    INSERT/UPDATE/DELETE/MERGE (`grammar.kind == "other"`)."""
    return _Utility(sql, grammar, catalog, analyze).analyze()


class _Utility:
    def __init__(self, sql: str, grammar: GrammarCheck, catalog: Catalog, analyze: StatementAnalyzer) -> None:
        self.sql = sql
        self.grammar = grammar
        self.catalog = catalog
        self.analyze_statement = analyze
        self.problems: list[Problem] = []

    def error(self, message: str, span: SqlSpan | None) -> None:
        self.problems.append(Problem(message, span))

    def analyze(self) -> Analysis:
        node = self.grammar.tree
        assert node is not None  # the grammar check accepted exactly one statement
        if isinstance(node, ast.CallStmt):
            return self.call(node)
        verb = self.verb()
        columns: tuple[ResultColumn, ...] | None = None
        params: tuple[Param, ...] = ()
        inner = self.inner_query(node)
        if (
            self.grammar.parameters
            and isinstance(node, ast.CreateTableAsStmt)
            and node.objtype == ObjectType.OBJECT_MATVIEW
        ):
            self.error("materialized views may not be defined using bound parameters", self.grammar.parameters[0].span)
        elif inner is not None:
            params = self.analyse_inner(inner)
        elif self.grammar.parameters:
            self.parameters_refused(node, verb)
        not_in_transaction = _outside_transaction(node)
        if not_in_transaction is not None:
            self.error(
                f"{not_in_transaction} cannot run inside a transaction block, and a generated handler runs its "
                "statement in the RPC's transaction",
                self.verb_span(),
            )
        elif isinstance(node, ast.TransactionStmt):
            self.error(
                f"{verb}: a generated handler runs each RPC in a transaction of its own, committed when the "
                "handler returns; transaction control belongs to the server, not to the statement",
                self.verb_span(),
            )
        elif isinstance(node, ast.CopyStmt):
            self.error(
                "COPY ... FROM STDIN takes its rows from a client stream: rpc Load(stream Row) returns (Summary) "
                "with COPY table (columns) FROM STDIN; a unary RPC carries no COPY data",
                self.verb_span(),
            )
        elif isinstance(node, (ast.ExecuteStmt, ast.FetchStmt)):
            self.error(f"pydb cannot tell what {verb} returns; write the statement itself", self.verb_span())
        elif isinstance(node, ast.TruncateStmt):
            for rv in node.relations or ():
                self.relation(rv, _TABLES, "is not a table")
        elif isinstance(node, ast.LockStmt):
            for rv in node.relations or ():
                self.relation(rv, _LOCKABLE, None)
        elif isinstance(node, ast.RefreshMatViewStmt):
            self.refresh(node)
        elif isinstance(node, ast.VariableShowStmt):
            # SHOW x returns one text row, its column named after the setting as pg_settings
            # spells it; SHOW ALL a row per setting. (Whether x exists is not known offline.)
            if node.name == "all":
                columns = tuple(ResultColumn(n, t.TEXT, False, None) for n in ("name", "setting", "description"))
            else:
                name = str(node.name)
                columns = (ResultColumn(_MIXED_CASE_SETTINGS.get(name, name), t.TEXT, False, None),)
        elif isinstance(node, ast.ExplainStmt):
            formats = [str(o.arg.sval).lower() for o in node.options or () if o.defname == "format"]
            plan = {"json": PgType("json"), "xml": PgType("xml")}.get(formats[-1] if formats else "", t.TEXT)
            columns = (ResultColumn("QUERY PLAN", plan, False, None),)
        return Analysis("utility", params, columns, None, None, False, tuple(self.problems))

    # -- CALL ------------------------------------------------------------------------------
    def call(self, node: ast.CallStmt) -> Analysis:
        """CALL proc(args): the procedure chosen as PostgreSQL chooses it (since PostgreSQL 14
        CALL passes OUT parameters too, usually as NULL, and resolution matches every
        parameter); each `@param` given as a whole argument takes the type resolution coerces
        it to; OUT and INOUT parameters are the columns of the one row CALL returns."""
        funccall = node.funccall
        assert funccall is not None  # the grammar's CALL always calls
        names = [str(part.sval) for part in funccall.funcname or () if isinstance(part, ast.String)]
        schema, name = (names[0], names[-1]) if len(names) > 1 else (None, names[-1])
        args = list(funccall.args or ())
        extents = self.argument_extents(funccall)
        arg_types: list[PgType] = []
        is_param: list[bool] = []
        param_types: dict[str, PgType | None] = {}
        for arg, extent in zip(args, extents, strict=True):
            value = _value(arg)
            param = self.whole_parameter(value)
            is_param.append(param is not None)
            if param is not None or _untyped_literal(value):
                arg_types.append(t.UNKNOWN)
                continue
            typed = self.expression_type(extent, param_types)
            if typed is None:
                return self.call_analysis([], None)
            arg_types.append(typed)
        arg_names = [a.name if isinstance(a, ast.NamedArgExpr) else None for a in args]
        builtin = load_builtins().functions(name) if schema in (None, "pg_catalog") else ()
        candidates = [_as_called(sig) for sig in (*builtin, *self.catalog.functions(schema, name))]
        span = self.name_span(funccall, names)
        try:
            resolution = resolve_function(
                name,
                candidates,
                arg_types,
                arg_names=arg_names if any(arg_names) else None,
                variadic_call=bool(funccall.func_variadic),
                params=is_param,
                env=load_builtins(),
            )
        except ResolveError as err:
            message = err.message.replace("function ", "procedure ", 1) if err.sqlstate == "42883" else err.message
            self.error(message + (f" ({err.note})" if err.note else ""), span)
            return self.call_analysis([], None)
        if resolution.sig.kind != "p":
            shown = ", ".join(display(a) for a in arg_types)
            self.error(f"{name}({shown}) is not a procedure; to call a function, use SELECT", span)
            return self.call_analysis([], None)
        for arg, coerced in zip(args, resolution.arg_types, strict=True):
            param = self.whole_parameter(_value(arg))
            if param is not None:
                param_types.setdefault(param, coerced)
        return self.call_analysis([param_types.get(p) for p in self.grammar.parameter_spans], resolution)

    def call_analysis(self, types: list[PgType | None], resolution: FunctionResolution | None) -> Analysis:
        spans = self.grammar.parameter_spans
        params = tuple(
            Param(name, ptype, tuple(spans[name]))
            for name, ptype in zip(spans, types or [None] * len(spans), strict=True)
        )
        if resolution is not None:
            for param in params:
                if param.type is None:
                    self.error(
                        f"cannot infer the type of parameter @{param.name}; add a cast, e.g. @{param.name}::text",
                        param.spans[0],
                    )
        columns = None
        if resolution is not None and resolution.out_columns:
            # A procedure's OUT values are whatever its body assigned: NULL when it assigned none.
            columns = tuple(ResultColumn(n, ptype, True, None) for n, ptype in resolution.out_columns)
        return Analysis("call", params, columns, None, None, False, tuple(self.problems))

    def whole_parameter(self, value: ast.Node | None) -> str | None:
        """The `@name` an argument is, when it is one and nothing else."""
        if not isinstance(value, ast.ParamRef):
            return None
        return next(p.name for p in self.grammar.parameters if p.number == value.number)

    def argument_extents(self, funccall: ast.FuncCall) -> list[SqlSpan]:
        """Where each argument's value stands in the annotation (a named argument's value,
        after `name =>`), split at the call's top-level commas by PostgreSQL's lexer."""
        positional = self.grammar.positional
        tokens = [tok for tok in scan(positional) if tok.start >= (funccall.location or 0)]
        extents: list[SqlSpan] = []
        depth = 0
        start: int | None = None
        last = 0
        for tok in tokens:
            text = positional[tok.start : tok.end + 1]
            if text in ("(", "["):
                depth += 1
                if depth == 1:
                    start = None
                    continue
            elif text in (")", "]"):
                depth -= 1
                if depth == 0:
                    if start is not None:
                        extents.append(self.original(start, last))
                    break
            elif depth == 1 and text == ",":
                if start is not None:
                    extents.append(self.original(start, last))
                start = None
                continue
            elif depth == 1 and tok.name == "EQUALS_GREATER":
                start = None  # `name => value`: the value follows
                continue
            if depth >= 1:
                start = tok.start if start is None else start
                last = tok.end
        return extents

    def original(self, start: int, end: int) -> SqlSpan:
        return SqlSpan(self.grammar.original_offset(start), self.grammar._rewrite.to_original_end(end))

    def expression_type(self, extent: SqlSpan, param_types: dict[str, PgType | None]) -> PgType | None:
        """The type of an argument that is an expression, by the statement analyzer: the
        argument alone as `SELECT <expr>`, laid out at the same offsets (the rest blanked), so
        its diagnostics point into the annotation as written. Parameters inside it are typed
        by it."""
        text = "SELECT" + " " * (extent.start - len("SELECT")) + self.sql[extent.start : extent.end + 1]
        analysis, problems = self.analyze_statement(text, self.catalog)
        self.problems.extend(problems)
        if analysis is None or problems or not analysis.columns:
            return None
        for param in analysis.params:
            param_types.setdefault(param.name, param.type)
        return analysis.columns[0].type

    # -- a query inside: CREATE TABLE AS, SELECT INTO, EXPLAIN ------------------------------
    def inner_query(self, node: ast.Node) -> list[SqlSpan] | None:
        """Where the query of `CREATE TABLE t AS query`, `SELECT ... INTO t ...` (without its
        INTO clause) or `EXPLAIN query` stands, as the spans of the annotation that make it up;
        None for other statements. PostgreSQL analyses these queries, parameters included."""
        positional = self.grammar.positional
        tokens = [tok for tok in scan(positional) if tok.name not in ("C_COMMENT", "SQL_COMMENT")]
        words = [positional[tok.start : tok.end + 1].upper() for tok in tokens]
        depths: list[int] = []
        depth = 0
        for word in words:
            depth -= word in (")", "]")
            depths.append(depth)
            depth += word in ("(", "[")
        last = len(positional) - 1
        if isinstance(node, ast.SelectStmt) and node.intoClause is not None and node.intoClause.rel is not None:
            at = node.intoClause.rel.location or 0
            into = max(i for i, tok in enumerate(tokens) if words[i] == "INTO" and tok.start < at)
            name_end = next(i for i, tok in enumerate(tokens) if tok.start >= at)
            while name_end + 2 < len(tokens) and words[name_end + 1] == ".":
                name_end += 2
            return [self.original(0, tokens[into].start - 1), self.original(tokens[name_end].end + 1, last)]
        if isinstance(node, ast.CreateTableAsStmt):
            as_ = next(i for i, word in enumerate(words) if word == "AS" and depths[i] == 0)
            end = next(
                (
                    tokens[i].start - 1
                    for i in range(as_ + 1, len(tokens) - 1)
                    if depths[i] == 0 and words[i] == "WITH" and words[i + 1] in ("DATA", "NO")
                ),
                last,
            )
            return [self.original(tokens[as_].end + 1, end)]
        if isinstance(node, ast.ExplainStmt):
            i = 1
            if i < len(words) and words[i] == "(":
                i = next(k for k in range(i + 1, len(words)) if depths[k] == 0 and words[k] == ")") + 1
            while i < len(words) and words[i] in ("ANALYZE", "ANALYSE", "VERBOSE"):
                i += 1
            return [self.original(tokens[i].start, last)] if i < len(tokens) else None
        return None

    def analyse_inner(self, spans: list[SqlSpan]) -> tuple[Param, ...]:
        """The inner query by the statement analyzer, laid out at its offsets (the rest
        blanked): its problems, and its parameters typed."""
        text = [" "] * len(self.sql)
        for span in spans:
            text[span.start : span.end + 1] = self.sql[span.start : span.end + 1]
        analysis, problems = self.analyze_statement("".join(text), self.catalog)
        self.problems.extend(problems)
        return analysis.params if analysis is not None else ()

    # -- relations -----------------------------------------------------------------------------
    def relation(self, rv: ast.RangeVar, kinds: frozenset[RelationKind], wrong_kind: str | None) -> None:
        """`rv` exists (through the search path) and is one of `kinds`; PostgreSQL's messages."""
        schema = str(rv.schemaname) if rv.schemaname else None
        written = f"{schema}.{rv.relname}" if schema else str(rv.relname)
        span = self.written_span(rv.location, written)
        table = self.catalog.table(schema, str(rv.relname))
        if table is None:
            hint = self.catalog.suggest_table(str(rv.relname))
            self.error(f'relation "{written}" does not exist' + (f"; did you mean {hint}?" if hint else ""), span)
        elif table.kind not in kinds:
            self.error(f'"{rv.relname}" {wrong_kind}' if wrong_kind else f'cannot lock relation "{rv.relname}"', span)

    def refresh(self, node: ast.RefreshMatViewStmt) -> None:
        rv = node.relation
        assert rv is not None  # REFRESH names its view
        self.relation(rv, frozenset({"materialized_view"}), "is not a materialized view")
        schema = str(rv.schemaname) if rv.schemaname else None
        view = self.catalog.table(schema, str(rv.relname))
        if not node.concurrent or view is None or view.kind != "materialized_view":
            return
        if not any(ix.table == view.qualified and ix.unique and not ix.partial for ix in self.catalog.indexes.values()):
            self.error(
                f'cannot refresh materialized view "{view.qualified}" concurrently: create a unique index with no '
                "WHERE clause on one or more columns of the materialized view",
                self.written_span(rv.location, str(rv.relname)),
            )

    # -- parameters ----------------------------------------------------------------------------
    def parameters_refused(self, node: ast.Node, verb: str) -> None:
        first = self.grammar.parameters[0]
        if isinstance(node, ast.VariableSetStmt):
            # libpg_query's grammar takes `SET x = $1` (for query normalisation); PostgreSQL's does not.
            self.error(f'syntax error at or near "@{first.name}"', first.span)
            return
        if isinstance(node, _TYPED_PARAMETERS):
            # PostgreSQL would type them; pydb does not analyse the statement inside.
            self.error(f"pydb does not type parameters inside {verb}; @{first.name} cannot be checked", first.span)
            return
        self.error(
            f"{verb} takes no parameters: PostgreSQL prepares it without parse analysis, so @{first.name} is no "
            "parameter there (at run time: bind message supplies 1 parameters, but prepared statement requires 0)",
            first.span,
        )

    # -- places ----------------------------------------------------------------------------------
    def verb(self) -> str:
        """The statement's leading keyword(s) as written, upper-cased: `TRUNCATE`, `CREATE TABLE`."""
        words: list[str] = []
        for tok in scan(self.grammar.positional):
            if tok.kind == "NO_KEYWORD" or len(words) == 2:
                break
            words.append(self.grammar.positional[tok.start : tok.end + 1].upper())
        return " ".join(words) or "this statement"

    def verb_span(self) -> SqlSpan | None:
        tokens = scan(self.grammar.positional)
        return self.original(tokens[0].start, tokens[0].end) if tokens else None

    def written_span(self, location: int | None, written: str) -> SqlSpan | None:
        if location is None or location < 0:
            return None
        start = self.grammar.original_offset(location)
        return SqlSpan(start, start + len(written) - 1)

    def name_span(self, funccall: ast.FuncCall, names: list[str]) -> SqlSpan | None:
        return self.written_span(funccall.location, ".".join(names))


def _as_called(sig: FunctionSig) -> FunctionSig:
    """A procedure as CALL matches it: against every parameter, OUT ones included."""
    if sig.kind != "p" or not sig.call_args:
        return sig
    return replace(
        sig,
        arg_types=tuple(ptype for _, ptype in sig.call_args),
        arg_names=tuple(name for name, _ in sig.call_args),
    )


def _value(arg: ast.Node) -> ast.Node | None:
    """An argument's value: a named argument's (`name => value`), else the argument."""
    return arg.arg if isinstance(arg, ast.NamedArgExpr) else arg


def _untyped_literal(value: ast.Node | None) -> bool:
    """A string literal or NULL: `unknown` until its context types it."""
    return isinstance(value, ast.A_Const) and (bool(value.isnull) or isinstance(value.val, ast.String))


def _outside_transaction(node: ast.Node) -> str | None:
    """What PostgreSQL refuses to run inside a transaction block (error 25001), by name."""
    if isinstance(node, ast.VacuumStmt):
        return "VACUUM" if node.is_vacuumcmd else None
    if isinstance(node, ast.IndexStmt) and node.concurrent:
        return "CREATE INDEX CONCURRENTLY"
    if isinstance(node, ast.ReindexStmt) and any(
        isinstance(p, ast.DefElem) and p.defname == "concurrently" for p in node.params or ()
    ):
        return "REINDEX CONCURRENTLY"
    if isinstance(node, ast.DropStmt) and node.concurrent:
        return "DROP INDEX CONCURRENTLY"
    if isinstance(node, (ast.CreatedbStmt, ast.DropdbStmt)):
        return "CREATE DATABASE" if isinstance(node, ast.CreatedbStmt) else "DROP DATABASE"
    if isinstance(node, ast.AlterSystemStmt):
        return "ALTER SYSTEM"
    if isinstance(node, (ast.CreateTableSpaceStmt, ast.DropTableSpaceStmt)):
        return "CREATE TABLESPACE" if isinstance(node, ast.CreateTableSpaceStmt) else "DROP TABLESPACE"
    return None
