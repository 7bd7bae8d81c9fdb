"""Diagnostics: what the plugin reports, and how it prints them compiler-style."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Literal

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
    #: Where the offending fragment ends (1-based, exclusive), when it is known: editors
    #: (the language server) underline line:col to end_line:end_col.
    end_line: int | None = None
    end_col: int | None = None

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


def sqlglot_limit(sql: str, err: Exception) -> Problem:
    """sqlglot (the analyzer's parser) cannot read a statement PostgreSQL's grammar accepted:
    a limit of pydb, said as one, at the token sqlglot stopped at.

    sqlglot reports the 1-based line and the column of the token's *last* character, plus
    the token text (`highlight`); the span starts `len(highlight) - 1` characters earlier."""
    advice = "PostgreSQL accepts it; please report it"
    errors = getattr(err, "errors", None) or []
    if not errors:  # a TokenError carries no position
        return Problem(f"pydb cannot analyse this statement ({advice})")
    first = errors[0]
    line = int(first.get("line") or 1)
    col = int(first.get("col") or 1)
    lines = sql.split("\n")
    end = min(sum(len(x) + 1 for x in lines[: line - 1]) + max(col - 1, 0), max(len(sql) - 1, 0))
    highlight = str(first.get("highlight") or "")
    start = max(end - len(highlight) + 1, 0) if highlight else end
    near = f' at or near "{highlight}"' if highlight.strip() else ""
    return Problem(f"pydb cannot analyse this statement{near} ({advice})", SqlSpan(start, max(end, start)))
