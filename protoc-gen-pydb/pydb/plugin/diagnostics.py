"""Diagnostics: what the plugin reports, and how it prints them compiler-style."""

from __future__ import annotations

import itertools
import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

import sqlglot
from sqlglot.tokenizer_core import TokenType

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class SqlSpan:
    """A range of characters in a SQL statement: 0-based offsets, `end` inclusive."""

    start: int
    end: int


@dataclass(frozen=True)
class Problem:
    """A problem found in one statement or schema, before it is placed in a file."""

    message: str
    span: SqlSpan | None = None
    severity: Severity = "error"


@dataclass(frozen=True)
class Diagnostic:
    """A problem at `path:line:col` (1-based), with the SQL it concerns when there is one."""

    path: str
    line: int
    col: int
    message: str
    severity: Severity = "error"
    sql: str | None = None
    span: SqlSpan | None = None

    def format(self) -> str:
        """`path:line:col: error: message`, then the SQL line with a caret under the fragment."""
        head = f"{self.path}:{self.line}:{self.col}: {self.severity}: {self.message}"
        if self.sql is None or self.span is None:
            return head
        # A span may start just past the last character ("syntax error at end of input").
        last = len(self.sql.rstrip())
        start = min(max(self.span.start, 0), last)
        end = min(max(self.span.end, start), max(last - 1, start))
        line_start = self.sql.rfind("\n", 0, start) + 1
        line_end = self.sql.find("\n", start)
        if line_end == -1:
            line_end = len(self.sql)
        sql_line_no = self.sql.count("\n", 0, start) + 1
        sql_col = start - line_start + 1
        text = self.sql[line_start:line_end]
        marked = self.sql[start : min(end, line_end - 1) + 1]
        caret = _blank(self.sql[line_start:start]) + "^" * max(1, _width(marked))
        return f"{head}\n    {text}\n    {caret}\n    (SQL line {sql_line_no}, column {sql_col})"

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.line, self.col, self.message)


def _width(text: str) -> int:
    """Terminal columns of `text`: wide (East Asian) characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in text)


def _blank(text: str) -> str:
    """Blanks as wide as `text` on a terminal, tabs kept, so a caret lines up under it."""
    return "".join(c if c == "\t" else " " * _width(c) for c in text)


def format_all(diagnostics: list[Diagnostic]) -> str:
    """Errors first, each group in file order; one block per diagnostic."""
    ordered = sorted(diagnostics, key=lambda d: (d.severity != "error", *d.sort_key()))
    return "\n".join(d.format() for d in ordered)


def syntax_problem(sql: str, err: Exception) -> Problem:
    """A sqlglot ParseError/TokenError as a Problem spanning the offending token.

    sqlglot reports the 1-based line and the column of the token's *last* character, plus
    the token text (`highlight`); the span starts `len(highlight) - 1` characters earlier."""
    errors = getattr(err, "errors", None) or []
    if not errors:
        # TokenError carries no structure; its message names the line ("Line 3: ...") at best.
        text = str(err).split("\n")[0]
        return Problem(f"syntax error: {text}")
    first = errors[0]
    desc = str(first.get("description") or "syntax error").split(". Line")[0].split(" <Token")[0]
    line = int(first.get("line") or 1)
    col = int(first.get("col") or 1)
    end = min(_offset(sql, line, col), max(len(sql) - 1, 0))
    highlight = str(first.get("highlight") or "")
    start = max(end - len(highlight) + 1, 0) if highlight else end
    return Problem(_syntax_message(desc, highlight, end >= len(sql.rstrip()) - 1), SqlSpan(start, max(end, start)))


def _syntax_message(description: str, token: str, at_end: bool) -> str:
    """Postgres' wording (`syntax error at or near "x"`) plus what sqlglot expected, when it
    says so in words a user knows (not "Required keyword: 'this' missing for <class ...>")."""
    where = "at end of input" if at_end and not token.strip() else f'at or near "{token}"' if token else ""
    detail = ""
    if description.startswith("Expecting ") or description.startswith("Expected "):
        detail = description[0].lower() + description[1:]
    elif description.startswith("Invalid expression") or description.startswith("Required keyword"):
        detail = ""
    elif description and description != "syntax error":
        detail = description
    text = f"syntax error {where}".rstrip()
    return f"{text}: {detail}" if detail else text


def _offset(sql: str, line: int, col: int) -> int:
    """0-based offset of 1-based (line, col)."""
    lines = sql.split("\n")
    return sum(len(x) + 1 for x in lines[: line - 1]) + max(col - 1, 0)


def unterminated_at(sql: str) -> SqlSpan | None:
    """Where a string, quoted identifier, dollar-quoted body or block comment opens and never
    closes: sqlglot's TokenError does not say. None when everything is closed."""
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if sql.startswith("--", i):
            nl = sql.find("\n", i)
            i = n if nl == -1 else nl + 1
            continue
        if sql.startswith("/*", i):
            close = sql.find("*/", i + 2)
            if close == -1:
                return SqlSpan(i, i + 1)
            i = close + 2
            continue
        if ch in ("'", '"'):
            j = i + 1
            while True:
                j = sql.find(ch, j)
                if j == -1:
                    return SqlSpan(i, i)
                if sql.startswith(ch * 2, j):  # a doubled quote is an escaped quote
                    j += 2
                    continue
                break
            i = j + 1
            continue
        if ch == "$":
            m = _DOLLAR_TAG.match(sql, i)
            if m is not None:
                close = sql.find(m.group(0), m.end())
                if close == -1:
                    return SqlSpan(i, m.end() - 1)
                i = close + len(m.group(0))
                continue
        i += 1
    return None


_DOLLAR_TAG = re.compile(r"\$([A-Za-z_][A-Za-z_0-9]*)?\$")


def stray_comma(sql: str) -> Problem | None:
    """A syntax error sqlglot forgives but Postgres does not: an empty list item, as in
    `a,, b`, `(a,)`, `(, a)` or `SELECT a, FROM`. Reported at the token after the comma (or
    the comma after `(`), as Postgres does. Call after sqlglot tokenized `sql` without error."""
    ends_list = {
        TokenType.COMMA,
        TokenType.R_PAREN,
        TokenType.SEMICOLON,
        TokenType.FROM,
        TokenType.WHERE,
        TokenType.GROUP_BY,
        TokenType.ORDER_BY,
        TokenType.HAVING,
        TokenType.LIMIT,
        TokenType.RETURNING,
    }
    tokens = sqlglot.tokenize(sql, read="postgres")
    for before, tok in itertools.pairwise(tokens):
        if (before.token_type == TokenType.COMMA and tok.token_type in ends_list) or (
            before.token_type == TokenType.L_PAREN and tok.token_type == TokenType.COMMA
        ):
            text = sql[tok.start : tok.end + 1]
            return Problem(f'syntax error at or near "{text}"', SqlSpan(tok.start, tok.end))
    if tokens and tokens[-1].token_type == TokenType.COMMA:
        last = tokens[-1]
        return Problem("syntax error at end of input", SqlSpan(last.start, last.end))
    return None
