"""PostgreSQL's grammar decides the syntax of an annotation.

`@name` is pydb's parameter syntax, not PostgreSQL's: every parameter is replaced by `$n` (one n
per name), the result is parsed by PostgreSQL's own parser (`pgparse`), and every offset is
mapped back to the annotation as written. Parameters are found with PostgreSQL's lexer, so an
`@` inside a string, a quoted identifier, a comment or a dollar-quoted body is no parameter.

Other dialects' syntax gets an error that teaches pydb's: `?`, `:name`, `%(name)s`, `%s` and
`$1` placeholders ("use @name"), MySQL's `LIMIT a, b` ("write LIMIT b OFFSET a") and `==`.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal

from pglast import ast, parser

from ...diagnostics import Problem, SqlSpan
from .pgparse import PgSyntaxError, RawStatement, parse, scan
from .pgtree import nodes_of, walk

#: PostgreSQL's built-in operators whose name ends in `@` (pg_operator), besides `@` itself
#: (absolute value; `@name` is pydb's): `x<@y` is an operator applied to y, while `x=@y` (`=@`
#: is no operator) compares x with the parameter @y.
_AT_OPERATORS = frozenset({"<@", "@-@", "^@"})
_COMMENTS = frozenset({"C_COMMENT", "SQL_COMMENT"})
_USE_AT_NAME = "use @name, named after the request field"

StatementKind = Literal["select", "insert", "update", "delete", "merge", "other"]


@dataclass(frozen=True)
class Parameter:
    """One `@name` in the annotation: `span` covers `@name`; it is `$number` for PostgreSQL."""

    name: str
    span: SqlSpan
    number: int


@dataclass(frozen=True)
class GrammarCheck:
    """What PostgreSQL's grammar says about one annotation."""

    sql: str
    #: The annotation with every `@name` as `$n`: the text PostgreSQL's parser was given.
    positional: str
    parameters: tuple[Parameter, ...]
    #: Syntax errors (PostgreSQL's messages) and teaching errors, in text order.
    problems: tuple[Problem, ...]
    #: The statement's parse tree (pglast; locations are offsets into `positional`), or None
    #: when PostgreSQL's grammar rejects the text or it is not exactly one statement.
    tree: ast.Node | None
    _rewrite: _Rewrite = field(repr=False, compare=False)

    @property
    def parameter_spans(self) -> dict[str, list[SqlSpan]]:
        """Where each `@name` stands, by name in order of first use."""
        spans: dict[str, list[SqlSpan]] = {}
        for param in self.parameters:
            spans.setdefault(param.name, []).append(param.span)
        return spans

    def original_offset(self, offset: int) -> int:
        """An offset into `positional` (e.g. a tree node's `location`) as one into `sql`."""
        return self._rewrite.to_original(offset)

    @property
    def kind(self) -> StatementKind | None:
        node = self.tree
        if node is None:
            return None
        if isinstance(node, ast.SelectStmt):
            return "select"
        if isinstance(node, ast.InsertStmt):
            return "insert"
        if isinstance(node, ast.UpdateStmt):
            return "update"
        if isinstance(node, ast.DeleteStmt):
            return "delete"
        if isinstance(node, ast.MergeStmt):
            return "merge"
        return "other"

    def function_calls(self) -> list[tuple[str, ...]]:
        """The (possibly qualified, as written) names of every function the statement calls, in
        text order."""
        if self.tree is None:
            return []
        calls = sorted(nodes_of(self.tree, ast.FuncCall), key=lambda c: c.location or 0)
        return [tuple(str(part.sval) for part in call.funcname or () if isinstance(part, ast.String)) for call in calls]

    def read_only(self, is_volatile: Callable[[tuple[str, ...]], bool] | None = None) -> bool:
        """Whether the statement only reads, as far as the grammar tells: a SELECT with no
        FOR UPDATE/SHARE anywhere and no data-modifying CTE. `is_volatile` is the hook for the
        function catalog (pg_proc's provolatile = 'v', plus the schema's own functions): a call
        of a volatile function (nextval, a function that writes) makes the statement a writer."""
        if self.kind != "select" or self.tree is None:
            return False
        for node in walk(self.tree):
            if isinstance(node, ast.SelectStmt) and node.lockingClause:
                return False
            if isinstance(node, ast.CommonTableExpr) and not isinstance(node.ctequery, ast.SelectStmt):
                return False
        return is_volatile is None or not any(is_volatile(name) for name in self.function_calls())


def check_statement(sql: str, declared_operators: frozenset[str] = frozenset()) -> GrammarCheck:
    """PostgreSQL's verdict on one annotation: exactly one statement its grammar accepts.

    `declared_operators` are the operator names the schema creates (CREATE OPERATOR): `==` is
    then one of them rather than a misspelt `=`, and `x<op>@y` an operator applied to y."""
    try:
        tokens = [tok for tok in scan(sql) if tok.name not in _COMMENTS]
    except PgSyntaxError as err:  # an unterminated string or comment: no tokens to look at
        unchanged = _Rewrite(sql, [])
        return GrammarCheck(sql, sql, (), (_problem(sql, err, unchanged),), None, unchanged)
    parameters = list(_parameters(sql, tokens, declared_operators))
    edits = [_Edit(p.span.start, p.span.end + 1, _placeholder(sql, p.span.start, p.number)) for p in parameters]
    rewrite = _Rewrite(sql, edits)
    problems = [_placeholder_problem(sql, tok) for tok in tokens if tok.name == "PARAM"]
    problems += [
        Problem("operator does not exist: ==; did you mean =?", SqlSpan(tok.start, tok.end))
        for tok in tokens
        if tok.name == "Op" and sql[tok.start : tok.end + 1] == "==" and "==" not in declared_operators
    ]
    try:
        statements = parse(rewrite.text)
    except PgSyntaxError as err:
        return _foreign_placeholders(sql, tokens, parameters, rewrite, err, problems)
    return _accepted(sql, parameters, rewrite, problems, statements)


def parameter_spans(sql: str) -> dict[str, list[SqlSpan]]:
    """Where each `@name` of `sql` stands (as PostgreSQL's lexer finds them)."""
    return check_statement(sql).parameter_spans


def positional(sql: str) -> str:
    """`sql` with every `@name` as `$n` (the same n for every use of a name), as PREPARE takes it."""
    return check_statement(sql).positional


def syntax_error_problem(text: str, err: PgSyntaxError, start: int = 0, end: int | None = None) -> Problem:
    """PostgreSQL's syntax error as a Problem whose span covers the token it names, in `text`.

    `err` comes from parsing `text[start:end]` (e.g. one statement of a schema file, as
    `split_statements` finds them): the span is an offset into `text`. "At end of input" points
    just past the statement's last non-blank character."""
    piece = text[start:end]
    return _problem(piece, err, _Rewrite(piece, []), shift=start)


def split_statements(text: str) -> tuple[list[SqlSpan], Problem | None]:
    """The statements of a multi-statement text (a schema file), each as the span of its text
    without the `;`, split where PostgreSQL's lexer finds a `;` (not in a string, a comment or a
    dollar-quoted body, nor between BEGIN ATOMIC and END of a SQL-standard function body), so
    each can be parsed on its own and one syntax error does not hide the rest. When the text
    does not lex (an unterminated string or comment), the statements before it and the error."""
    problem: Problem | None = None
    try:
        tokens = scan(text)
    except PgSyntaxError as err:
        problem = syntax_error_problem(text, err)
        tokens = _scan_before(text, err.offset)
    spans: list[SqlSpan] = []
    first: int | None = None
    last = 0
    atomic = 0
    for prev, tok in itertools.pairwise([None, *tokens]):
        if tok is None or tok.name in _COMMENTS:
            continue
        word = text[tok.start : tok.end + 1].upper()
        if word == "ATOMIC" and prev is not None and text[prev.start : prev.end + 1].upper() == "BEGIN":
            atomic += 1
        elif word == "CASE" and atomic:
            atomic += 1  # its END is not the body's
        elif word == "END" and atomic:
            atomic -= 1
        if word == ";" and not atomic:
            if first is not None:
                spans.append(SqlSpan(first, last))
            first = None
            continue
        if first is None:
            first = tok.start
        last = tok.end
    if first is not None and problem is None:
        spans.append(SqlSpan(first, last))
    return spans, problem


def _scan_before(text: str, offset: int | None) -> list[parser.Token]:
    """The tokens before a lexical error at `offset`. The error may stand inside a token
    (`E'\\u00'`): then the text before that token's error is tried, and so on."""
    while offset is not None and offset > 0:
        try:
            return scan(text[:offset])
        except PgSyntaxError as err:
            offset = err.offset if err.offset is not None and err.offset < offset else None
    return []


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column (in characters) of a 0-based offset into `text`."""
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, col


# -- parameters -----------------------------------------------------------------------------


def _is_word(sql: str, tok: parser.Token) -> bool:
    """An unquoted identifier or keyword: `@limit` is a parameter named limit."""
    return (tok.name == "IDENT" or tok.kind != "NO_KEYWORD") and sql[tok.start] != '"'


def _parameters(sql: str, tokens: list[parser.Token], declared: frozenset[str]) -> Iterator[Parameter]:
    """`@name`: an operator token ending in `@` immediately followed by a word. PostgreSQL's
    lexer reads `=@x` as the operator `=@`; unless that is an operator, it is `=` and `@x`."""
    numbers: dict[str, int] = {}
    for op, word in itertools.pairwise(tokens):
        if op.name != "Op" or sql[op.end] != "@" or word.start != op.end + 1 or not _is_word(sql, word):
            continue
        text = sql[op.start : op.end + 1]
        # A lone `@` glued to a word is always pydb's parameter, even where an extension (ltree)
        # declares an operator `@`: that operator is written with a space, `path @ query`.
        if text in _AT_OPERATORS or (text != "@" and text in declared):
            continue
        name = sql[word.start : word.end + 1]
        number = numbers.setdefault(name, len(numbers) + 1)
        yield Parameter(name, SqlSpan(op.end, word.end), number)


def _placeholder(sql: str, start: int, number: int) -> str:
    # `x@y` must not become the identifier `x$1`.
    before = sql[start - 1] if start else " "
    glue = " " if before.isalnum() or before in "_$" or not before.isascii() else ""
    return f"{glue}${number}"


# -- offsets --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Edit:
    """`sql[start:end]` replaced by `text`."""

    start: int
    end: int
    text: str


class _Rewrite:
    """A text with some ranges replaced, and the way back from its offsets to the original's."""

    def __init__(self, original: str, edits: list[_Edit]) -> None:
        self.original = original
        self.edits = sorted(edits, key=lambda e: e.start)
        parts: list[str] = []
        #: Per edit, where its replacement starts in the new text.
        self.starts: list[int] = []
        pos = 0
        length = 0
        for edit in self.edits:
            parts.append(original[pos : edit.start])
            length += edit.start - pos
            self.starts.append(length)
            parts.append(edit.text)
            length += len(edit.text)
            pos = edit.end
        parts.append(original[pos:])
        self.text = "".join(parts)

    def _edit_at(self, offset: int) -> int:
        """The index of the last edit starting at or before `offset` in the new text, or -1."""
        return bisect.bisect_right(self.starts, offset) - 1

    def to_original(self, offset: int) -> int:
        """The original offset of new-text `offset`; inside a replacement, its original start."""
        i = self._edit_at(offset)
        if i < 0:
            return offset
        edit, start = self.edits[i], self.starts[i]
        if offset < start + len(edit.text):
            return edit.start
        return edit.end + (offset - start - len(edit.text))

    def to_original_end(self, offset: int) -> int:
        """Like to_original for the last character of a range: a replacement maps to its end."""
        i = self._edit_at(offset)
        if i >= 0 and offset < self.starts[i] + len(self.edits[i].text):
            return self.edits[i].end - 1
        return self.to_original(offset)


# -- verdicts -------------------------------------------------------------------------------


def _accepted(
    sql: str,
    parameters: list[Parameter],
    rewrite: _Rewrite,
    problems: list[Problem],
    raws: list[RawStatement],
) -> GrammarCheck:
    tree = raws[0].node if len(raws) == 1 else None
    if tree is not None:
        problems = [
            *problems,
            *_prefix_question_marks(sql, tree, rewrite),
            *_typed_parameters(sql, tree, rewrite, parameters),
        ]
    if len(raws) != 1:
        span = None
        if len(raws) > 1:
            second = raws[1]
            start = rewrite.to_original(second.start)
            end = rewrite.to_original_end(max(second.end - 1, second.start))
            line_end = sql.find("\n", start)
            if line_end != -1:
                end = min(end, line_end - 1)
            span = SqlSpan(start, max(start, len(sql[: end + 1].rstrip()) - 1))
        problems = [*problems, Problem(f"expected exactly one SQL statement, found {len(raws)}", span)]
    ordered = sorted(problems, key=lambda p: p.span.start if p.span else -1)
    return GrammarCheck(sql, rewrite.text, tuple(parameters), tuple(ordered), tree, rewrite)


def _problem(sql: str, err: PgSyntaxError, rewrite: _Rewrite, shift: int = 0) -> Problem:
    """PostgreSQL's error on `rewrite.text`, placed in `sql` (the original)."""
    text = rewrite.text
    if err.offset is None:
        # "at end of input": PostgreSQL's position is one past the end.
        at = len(sql.rstrip())
        return Problem(err.message, SqlSpan(at + shift, at + shift))
    message = err.message
    near = 'at or near "'
    head, _, quoted = message[:-1].rpartition(near) if message.endswith('"') else ("", "", "")
    quoted = quoted if head and text.startswith(quoted, err.offset) else ""
    end = _token_end(text, err.offset, quoted)
    start, stop = rewrite.to_original(err.offset), rewrite.to_original_end(end)
    if quoted:
        # The token PostgreSQL quotes may be a `$n` standing for `@name`: quote what was written.
        written_end = rewrite.to_original_end(err.offset + len(quoted) - 1)
        written = sql[start : written_end + 1]
        # An unterminated string quotes the rest of the text: a diagnostic stays on one line.
        written = written.split("\n", 1)[0] + "..." if "\n" in written else written
        message = f'{head}{near}{written}"'
    if message == "LIMIT #,# syntax is not supported":
        message += _limit_hint(sql, start)
    if quoted[:1] == "$" and quoted[1:].isdigit():  # a parameter where the grammar takes none
        words = [tok for tok in scan(sql) if tok.name not in _COMMENTS]
        if words and sql[words[0].start : words[0].end + 1].upper() == "NOTIFY":
            message += "; NOTIFY takes no parameters: send with SELECT pg_notify(@channel, @payload)"
    return Problem(message, SqlSpan(start + shift, max(start, stop) + shift))


def _token_end(text: str, offset: int, quoted: str) -> int:
    """The last character of the token starting at `offset`. When the text does not lex there
    (an unterminated string, `123abc`), the end of what PostgreSQL quotes, on its first line."""
    try:
        tokens = scan(text)
    except PgSyntaxError:
        first_line = quoted.split("\n", 1)[0]
        return offset + max(len(first_line), 1) - 1
    return next((tok.end for tok in tokens if tok.start == offset), offset)


def _limit_hint(sql: str, at: int) -> str:
    """`LIMIT a, b` is MySQL's: PostgreSQL writes `LIMIT b OFFSET a`."""
    tokens = [tok for tok in scan(sql) if tok.name not in _COMMENTS and tok.start >= at]
    if not tokens or tokens[0].name != "LIMIT":
        return "; use separate LIMIT and OFFSET clauses"
    depth = 0
    comma: int | None = None
    stop = len(tokens)
    for i, tok in enumerate(tokens[1:], start=1):
        char = sql[tok.start : tok.end + 1]
        if char in ("(", "["):
            depth += 1
        elif char in (")", "]") or char == ";":
            if depth == 0:
                stop = i
                break
            depth -= 1
        elif depth == 0 and char == "," and comma is None:
            comma = i
        elif depth == 0 and comma is not None and tok.kind == "RESERVED_KEYWORD":
            stop = i
            break
    if comma is None or comma == 1 or stop <= comma + 1:
        return "; use separate LIMIT and OFFSET clauses"
    offset = sql[tokens[1].start : tokens[comma - 1].end + 1]
    count = sql[tokens[comma + 1].start : tokens[stop - 1].end + 1]
    return f"; write LIMIT {count} OFFSET {offset}"


# -- other dialects' placeholders ------------------------------------------------------------


@dataclass(frozen=True)
class _Foreign:
    """A placeholder of another dialect: `span` in the annotation, with the name it gives."""

    span: SqlSpan
    name: str | None


def _placeholder_problem(sql: str, tok: parser.Token) -> Problem:
    written = sql[tok.start : tok.end + 1]
    return Problem(f'"{written}" is not a pydb parameter; {_USE_AT_NAME}', SqlSpan(tok.start, tok.end))


def _foreign_candidates(sql: str, tokens: list[parser.Token]) -> Iterator[_Foreign]:
    """`?` (JDBC, sqlite), `:name` (SQLAlchemy, Oracle), `%(name)s` and `%s` (psycopg)."""
    for i, tok in enumerate(tokens):
        run = _adjacent(tokens, i)  # the tokens written right after `tok`, no space between
        words = [sql[a.start : a.end + 1] for a in run]
        if tok.name == "Op" and sql[tok.end] == "?" and sql[tok.start : tok.end + 1] != "@?":  # jsonpath's
            yield _Foreign(SqlSpan(tok.end, tok.end), None)
        elif tok.name == "ASCII_58" and run and _is_word(sql, run[0]):
            yield _Foreign(SqlSpan(tok.start, run[0].end), words[0])
        elif tok.name == "ASCII_37" and words[:1] == ["s"]:
            yield _Foreign(SqlSpan(tok.start, run[0].end), None)
        elif tok.name == "ASCII_37" and len(words) >= 4 and words[0] == "(" and words[2:4] == [")", "s"]:
            yield _Foreign(SqlSpan(tok.start, run[3].end), words[1])


def _adjacent(tokens: list[parser.Token], i: int, limit: int = 4) -> list[parser.Token]:
    run: list[parser.Token] = []
    end = tokens[i].end
    for tok in tokens[i + 1 : i + 1 + limit]:
        if tok.start != end + 1:
            break
        run.append(tok)
        end = tok.end
    return run


def _foreign_placeholders(
    sql: str,
    tokens: list[parser.Token],
    parameters: list[Parameter],
    rewrite: _Rewrite,
    err: PgSyntaxError,
    problems: list[Problem],
) -> GrammarCheck:
    """PostgreSQL rejects the text. Where another dialect's placeholder is the reason, say so:
    a candidate counts when writing a parameter in its place moves PostgreSQL's error further
    (or away), so `data ? 'key'` (jsonb's `?` operator) stays an operator."""
    number = len({p.name for p in parameters})
    current: _Rewrite = rewrite
    current_err: PgSyntaxError | None = err
    found: list[_Foreign] = []
    for candidate in _foreign_candidates(sql, tokens):
        number += 1
        edit = _Edit(candidate.span.start, candidate.span.end + 1, f" ${number} ")
        trial = _Rewrite(sql, [*current.edits, edit])
        try:
            parse(trial.text)
        except PgSyntaxError as trial_err:
            if current_err is not None and _error_offset(trial, trial_err) <= _error_offset(current, current_err):
                continue
            current, current_err = trial, trial_err
        else:
            found.append(candidate)
            current, current_err = trial, None
            break
        found.append(candidate)
    teaching = [
        Problem(
            f'"{sql[f.span.start : f.span.end + 1]}" is not a pydb parameter; '
            + (f"use @{f.name}" if f.name else _USE_AT_NAME),
            f.span,
        )
        for f in found
    ]
    rest = [_problem(sql, current_err, current)] if current_err is not None else []
    ordered = sorted([*problems, *teaching, *rest], key=lambda p: p.span.start if p.span else -1)
    return GrammarCheck(sql, rewrite.text, tuple(parameters), tuple(ordered), None, rewrite)


def _prefix_question_marks(sql: str, tree: ast.Node, rewrite: _Rewrite) -> Iterator[Problem]:
    """`a = ? + 1` parses: `?` as a prefix operator applied to `+1`. PostgreSQL has no prefix
    `?` (jsonb's `?` takes a left operand), so it is another dialect's placeholder."""
    for node in walk(tree):
        if (
            isinstance(node, ast.A_Expr)
            and node.lexpr is None
            and node.location is not None
            and [getattr(part, "sval", None) for part in node.name or ()] == ["?"]
        ):
            at = rewrite.to_original(node.location)
            yield Problem(f'"?" is not a pydb parameter; {_USE_AT_NAME}', SqlSpan(at, at))


def _typed_parameters(sql: str, tree: ast.Node, rewrite: _Rewrite, parameters: list[Parameter]) -> Iterator[Problem]:
    """`INTERVAL @d`, `date @d`: PostgreSQL's grammar takes only a string literal after a type
    name (the parser pglast wraps also takes `$1` there: a TypeCast without a `::` location)."""
    for node in walk(tree):
        if isinstance(node, ast.TypeCast) and node.location is None and isinstance(node.arg, ast.ParamRef):
            at = rewrite.to_original(node.arg.location or 0)
            span = next((p.span for p in parameters if p.span.start <= at <= p.span.end), SqlSpan(at, at))
            written = sql[span.start : span.end + 1]
            type_at = node.typeName.location if node.typeName is not None else None
            type_name = sql[rewrite.to_original(type_at or 0) : span.start].strip() if type_at is not None else "type"
            yield Problem(f'syntax error at or near "{written}"; write {written}::{type_name}', span)


def _error_offset(rewrite: _Rewrite, err: PgSyntaxError) -> int:
    return len(rewrite.original) + 1 if err.offset is None else rewrite.to_original(err.offset)
