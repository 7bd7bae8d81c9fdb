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

from . import pg15


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
    """Every statement of `text` (empty ones dropped), or PgSyntaxError for the first error, as
    PostgreSQL 15 reads it (pglast's grammar is newer: `pg15.py`)."""
    _reject_nul(text)
    try:
        tokens: list[parser.Token] | None = list(parser.scan(_ascii(text)))
    except parser.ParseError:
        tokens = None  # parsing reports the lexer's error
    readable, names = pg15.standins(text, tokens) if tokens is not None else (text, {})
    refusals = list(pg15.token_refusals(text, tokens)) if tokens is not None else []
    try:
        statements = _parse_newer(readable, text)
    except PgSyntaxError as err:
        refusals.append(pg15.Refusal(err.message, err.offset, len(text) if err.offset is None else err.offset))
        statements = []
    if tokens is not None:
        refusals += pg15.alias_refusals(text, tokens, [stmt.node for stmt in statements])
    if refusals:
        first = min(refusals, key=lambda r: r.reached)
        raise PgSyntaxError(first.message, first.offset)
    for stmt in statements:
        pg15.restore(stmt.node, names)
    return statements


def _parse_newer(readable: str, text: str) -> list[RawStatement]:
    """pglast's parse of `readable` (`text` with same-length edits; errors quote `text`)."""
    try:
        raw = parser.parse_sql(readable)
    except parser.ParseError as err:
        plain = _ascii(readable)
        if plain is readable:
            raise _syntax_error(text, readable, err) from None
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
    offset = err.args[1] if len(err.args) > 1 and isinstance(err.args[1], int) else None
    message = pg15.as_pg15_message(text, str(err.args[0]) if err.args else str(err), offset)
    if offset is not None and message.endswith('"') and _NEAR in message:
        # The quoted token is `plain`'s; put the caller's characters back (same length).
        head, _, near = message[:-1].rpartition(_NEAR)
        if plain.startswith(near, offset):
            message = f'{head}{_NEAR}{text[offset : offset + len(near)]}"'
    return PgSyntaxError(message, offset)
