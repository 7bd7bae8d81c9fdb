"""Diagnostics: what the plugin reports, and how it prints them compiler-style."""

from __future__ import annotations

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

    def format(self) -> str:
        """`path:line:col: error: message`, then the SQL line with a caret under the fragment."""
        head = f"{self.path}:{self.line}:{self.col}: {self.severity}: {self.message}"
        if self.sql is None or self.span is None:
            return head
        start = min(max(self.span.start, 0), max(len(self.sql) - 1, 0))
        end = min(max(self.span.end, start), max(len(self.sql) - 1, 0))
        line_start = self.sql.rfind("\n", 0, start) + 1
        line_end = self.sql.find("\n", start)
        if line_end == -1:
            line_end = len(self.sql)
        sql_line_no = self.sql.count("\n", 0, start) + 1
        sql_col = start - line_start + 1
        text = self.sql[line_start:line_end]
        width = max(1, min(end, line_end - 1) - start + 1)
        caret = " " * (start - line_start) + "^" * width
        return f"{head}\n    {text}\n    {caret}\n    (SQL line {sql_line_no}, column {sql_col})"

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.line, self.col, self.message)


def format_all(diagnostics: list[Diagnostic]) -> str:
    """Errors first, each group in file order; one block per diagnostic."""
    ordered = sorted(
        diagnostics, key=lambda d: (d.severity != "error", *d.sort_key())
    )
    return "\n".join(d.format() for d in ordered)
