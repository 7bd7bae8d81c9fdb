"""The state of one statement's analysis, shared by every part of the analyzer: the statement
text and its grammar, the catalog, the problems found, the `@name` parameters (`Parameters`),
what the statement's walk has recorded so far, and where nodes stand in the text (`span` and
its kin: sqlglot places identifiers and literals only)."""

from __future__ import annotations

import re

from sqlglot import exp

from ...diagnostics import Problem, SqlSpan
from ..bridge.call_standins import function_calls
from ..bridge.type_standins import type_names_by_offset
from ..catalog.builtins import load_builtins
from ..catalog.model import Catalog
from ..catalog.types import PgType, span_of
from ..syntax.colnames import OutputNames
from ..syntax.grammar import GrammarCheck
from .parameters import Parameters
from .result import Expansion

#: What follows `x` in `x::type`: the type name, its modifiers and array brackets.
_CAST_SUFFIX = re.compile(
    r"\s*::\s*[\w.\"]+(?:\s+(?:with|without)\s+time\s+zone)?(?:\s*\([\d\s,]*\))?(?:\s*\[\s*\])*", re.I
)


class StatementState:
    """One statement's analysis state, the one object every part of the analyzer shares
    (`Analyzer` makes it and hands it to each part)."""

    def __init__(
        self, sql: str, catalog: Catalog, grammar: GrammarCheck, nullable_params: frozenset[str] = frozenset()
    ):
        self.sql = sql
        self.catalog = catalog
        self.grammar = grammar
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []
        self.param_spans = grammar.parameter_spans  # found by PostgreSQL's lexer
        #: The `@name` parameters: their types as the statement's uses give them.
        self.params = Parameters(sql, self.param_spans, nullable_params, self.problems)
        #: Inside a window's PARTITION BY or ORDER BY (typed last by PostgreSQL) when above 0.
        self.window_depth = 0
        #: The nodes whose select list or RETURNING list is the statement's result (the
        #: statement itself, or each branch of a set operation): their `*`s are expanded.
        self.top_level: set[int] = set()
        #: The SELECTs whose untyped outputs the enclosing statement types (a set operation's
        #: branches, INSERT's source); any other SELECT makes an untyped parameter output text.
        self.unresolved_outputs: set[int] = set()
        self.expansions: list[Expansion] = []
        self.output_names = OutputNames(grammar.tree, grammar.original_offset)
        self.calls = function_calls(grammar.tree, grammar.original_offset)
        #: PostgreSQL's TypeNames by where they start in the text: what a cast's type is.
        self.type_names_at = type_names_by_offset(grammar)
        #: The built-ins as the schema's database sees them: with its extensions' types, casts
        #: and operators (their functions are the catalog's, in the schema they are installed in).
        self.builtins = load_builtins().with_extensions(catalog.extensions)
        #: The OUT/TABLE columns of record-returning calls (by id of the node): a FROM item's columns.
        self.row_columns: dict[int, tuple[tuple[str, PgType], ...]] = {}
        #: A call of a function with one named OUT parameter, by id: that name.
        self.out_names: dict[int, str] = {}

    def error(self, message: str, node: exp.Expr | None = None, span: SqlSpan | None = None) -> None:
        if span is None and node is not None:
            span = self.span(node)
        self.problems.append(Problem(message, span))

    def warn(self, message: str, node: exp.Expr | None = None) -> None:
        """What PostgreSQL prepares but may fail when run: reported apart from `problems`, so
        no check that waits for an error-free statement is held back by it."""
        self.warnings.append(Problem(message, self.span(node) if node is not None else None, "warning"))

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

    def item_start(self, node: exp.Expr) -> int | None:
        """Where a select-list item starts, with what sqlglot places no node on: the `(` it
        opens with, and the words of a subquery item (`EXISTS (SELECT`, `ARRAY(SELECT`, `NOT`).
        An item is preceded by its list's SELECT, DISTINCT or a comma, never by a `(` of its own
        list; a SELECT preceded by `(` is a subquery's."""
        span = self.span(node)
        if span is None:
            return None
        start = span.start
        # Only an item that starts with a subquery starts with words sqlglot does not place.
        subquery_first = any((span_of(sub) or span).start == start for sub in node.find_all(exp.Select))
        while True:
            back = start - 1
            while back >= 0 and self.sql[back].isspace():
                back -= 1
            if back >= 0 and self.sql[back] == "(":
                start = back
                continue
            word_start = back
            while word_start >= 0 and (self.sql[word_start].isalnum() or self.sql[word_start] == "_"):
                word_start -= 1
            word = self.sql[word_start + 1 : back + 1].upper()
            before = word_start
            while before >= 0 and self.sql[before].isspace():
                before -= 1
            if subquery_first and (
                word in ("EXISTS", "ARRAY", "NOT") or (word == "SELECT" and before >= 0 and self.sql[before] == "(")
            ):
                start = word_start + 1
                continue
            return start

    def keyword_after(self, anchor: SqlSpan | None, keyword: str) -> SqlSpan | None:
        """The next `keyword` (e.g. NULL, which sqlglot does not place) after `anchor`."""
        if anchor is None:
            return None
        m = re.compile(rf"\b{keyword}\b", re.IGNORECASE).search(self.sql, anchor.end + 1)
        return SqlSpan(m.start(), m.end() - 1) if m else None

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
