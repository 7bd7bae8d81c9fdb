"""PostgreSQL's own parser (libpg_query, through pglast): the syntax authority.

libpg_query reports statement locations in UTF-8 bytes (and error positions inconsistently for
multi-byte text). Every non-ASCII character can only stand inside an identifier, a string or a
comment, where one ASCII letter parses the same way; the text is parsed with each replaced by
`x`, so every offset here is a character offset into the caller's text.
"""

from __future__ import annotations

from dataclasses import dataclass

from pglast import ast, parser


class PgSyntaxError(Exception):
    """PostgreSQL's grammar rejects the text: its message, at a 0-based character offset."""

    def __init__(self, message: str, offset: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


@dataclass(frozen=True)
class RawStatement:
    """One statement of a multi-statement text: `text[start:end]` is its source."""

    start: int
    end: int
    node: ast.Node


def _ascii(text: str) -> str:
    return text if text.isascii() else "".join(c if c.isascii() else "x" for c in text)


def parse(text: str) -> list[RawStatement]:
    """Every statement of `text` (empty ones dropped), or PgSyntaxError for the first error."""
    plain = _ascii(text)
    try:
        raw = parser.parse_sql(plain)
    except parser.ParseError as err:
        message = str(err.args[0]) if err.args else str(err)
        offset = err.args[1] if len(err.args) > 1 and isinstance(err.args[1], int) else None
        raise PgSyntaxError(message, offset) from None
    out: list[RawStatement] = []
    for stmt in raw:
        start = stmt.stmt_location or 0
        end = start + stmt.stmt_len if stmt.stmt_len else len(plain)
        # stmt_location points at the whitespace or comment after the previous `;`.
        while start < end and plain[start].isspace():
            start += 1
        if stmt.stmt is not None:
            out.append(RawStatement(start, end, stmt.stmt))
    return out


def scan(text: str) -> list[parser.Token]:
    """PostgreSQL's lexer over `text` (character offsets; `end` inclusive)."""
    return list(parser.scan(_ascii(text)))
