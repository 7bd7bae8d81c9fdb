"""PostgreSQL's own parser (libpg_query, through pglast): the syntax authority.

pglast converts libpg_query's locations (UTF-8 bytes) to character offsets, in the tree too, but
not its error positions, which are inconsistent for multi-byte text. Statements are parsed as
written (the tree holds the real names). For errors and the lexer, every non-ASCII character
(which can only stand inside an identifier, a string or a comment, where one ASCII letter lexes
the same way) is replaced by `x`: every offset is a character offset into the caller's text, and
a message quoting the text (`syntax error at or near "..."`) quotes the caller's characters.
"""

from __future__ import annotations

from dataclasses import dataclass

from pglast import ast, parser


class PgSyntaxError(Exception):
    """PostgreSQL's grammar rejects the text: its message, at a 0-based character offset.

    `offset` is None where PostgreSQL reports no position of its own ("at end of input": the
    server's position is then one past the last character)."""

    def __init__(self, message: str, offset: int | None) -> None:
        super().__init__(message, offset)  # the shape of pglast's ParseError.args
        self.message = message
        self.offset = offset

    def __str__(self) -> str:
        return self.message


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
    _reject_nul(text)
    try:
        raw = parser.parse_sql(text)
    except parser.ParseError as err:
        plain = _ascii(text)
        if plain is text:
            raise _syntax_error(text, text, err) from None
        try:
            parser.parse_sql(plain)
        except parser.ParseError as plain_err:
            raise _syntax_error(text, plain, plain_err) from None
        raise PgSyntaxError(str(err.args[0]) if err.args else str(err), None) from None
    out: list[RawStatement] = []
    for stmt in raw:
        start = stmt.stmt_location or 0
        end = start + stmt.stmt_len if stmt.stmt_len else len(text)
        # stmt_location points at the whitespace or comment after the previous `;`.
        while start < end and text[start].isspace():
            start += 1
        if stmt.stmt is not None:
            out.append(RawStatement(start, end, stmt.stmt))
    return out


def scan(text: str) -> list[parser.Token]:
    """PostgreSQL's lexer over `text` (character offsets; `end` inclusive), comments included
    (`C_COMMENT`, `SQL_COMMENT`). An unterminated string, quoted identifier, dollar quote or
    comment is a PgSyntaxError, as in `parse`."""
    _reject_nul(text)
    plain = _ascii(text)
    try:
        return list(parser.scan(plain))
    except parser.ParseError as err:
        raise _syntax_error(text, plain, err) from None


_NEAR = 'at or near "'


def _reject_nul(text: str) -> None:
    """libpg_query reads a C string, which ends at a NUL; PostgreSQL refuses the byte."""
    if "\0" in text:
        raise PgSyntaxError('invalid byte sequence for encoding "UTF8": 0x00', text.index("\0"))


def _syntax_error(text: str, plain: str, err: parser.ParseError) -> PgSyntaxError:
    message = str(err.args[0]) if err.args else str(err)
    offset = err.args[1] if len(err.args) > 1 and isinstance(err.args[1], int) else None
    if offset is not None and message.endswith('"') and _NEAR in message:
        # The quoted token is `plain`'s; put the caller's characters back (same length).
        head, _, near = message[:-1].rpartition(_NEAR)
        if plain.startswith(near, offset):
            message = f'{head}{_NEAR}{text[offset : offset + len(near)]}"'
    return PgSyntaxError(message, offset)
