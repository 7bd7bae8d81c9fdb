"""PostgreSQL 15's grammar where pglast's is newer.

pglast 8 carries libpg_query for PostgreSQL 18, whose grammar takes what PostgreSQL 15 refuses.
The server pydb targets is 15, so `pgparse.parse` reads a text as 15 does:

- Words that are keywords only since 16 to 18 (`NEWER_KEYWORDS`: `json_object`, `json_table`,
  `system_user`, `merge_action`, `virtual`, `source`, ...) are plain identifiers in 15. The text is
  parsed with each such word replaced by a same-length identifier (`standins`), and the names put
  back into the tree afterwards (`restore`): `JSON_OBJECT('a' : 1)` is then a call of a function
  json_object refused at `:`, `a IS JSON` a syntax error at `JSON`, `SELECT system_user` a column
  reference, as in 15.
- Constructs made of older words (`RETURNING WITH (OLD AS o)`, MERGE ... RETURNING, `WHEN NOT
  MATCHED BY SOURCE`, `AT LOCAL`, `VACUUM ONLY`) and 16's numeric literals (`0x1F`, `0o17`,
  `0b101`, `1_000`) are found on the token stream (`token_refusals`).
- 16's alias-less subquery in FROM is found on the tree (`alias_refusals`).

Each refusal is PostgreSQL 15's message at its offset, with the offset at which 15's parser meets
it (`Refusal.reached`): the first met is the one reported, as the server reports the first error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from pglast import ast, parser

from .pgtree import walk

#: Keywords of pglast's grammar (PostgreSQL 18) that PostgreSQL 15 does not have (its
#: pg_get_keywords(); tests/sql/test_sql_pg15_grammar.py compares the two lists with the server).
NEWER_KEYWORDS = frozenset(
    {
        *("absent", "conditional", "empty", "enforced", "error", "format", "indent", "json", "json_array"),
        *("json_arrayagg", "json_exists", "json_object", "json_objectagg", "json_query", "json_scalar"),
        *("json_serialize", "json_table", "json_value", "keep", "keys", "merge_action", "nested", "objects"),
        *("omit", "path", "period", "plan", "quotes", "scalar", "source", "string", "system_user", "target"),
        *("unconditional", "virtual"),
    }
)

#: PostgreSQL 15's lexer: a number followed by identifier characters is "trailing junk" (16 reads
#: `0x1F`, `0o17`, `0b101` and `1_000` as numbers). Identifier characters: ASCII letters, `_`
#: (then digits, `$`) and every non-ASCII character, written `[^\x00-\x7f]` (a class of every
#: code point from 0x80 up compiles several times slower, in every process).
_JUNK = re.compile(
    r"(?>(?:\d*\.\d+|\d+\.\d*|\d+)(?:[Ee][-+]?\d+)?)(?:[A-Za-z_]|[^\x00-\x7f])(?:[A-Za-z_0-9$]|[^\x00-\x7f])*"
)
_NEWER_NUMBERS = re.compile(r"invalid (?:hexadecimal|octal|binary) integer at or near ")
_OPEN, _CLOSE, _SEMICOLON = "ASCII_40", "ASCII_41", "ASCII_59"
_NUMBERS = frozenset({"ICONST", "FCONST"})
#: What may stand between a FROM item's `(` and the first placed node of its subquery.
_SUBQUERY_OPENING = frozenset({_OPEN, "SELECT", "VALUES", "DISTINCT", "ALL", "ON", "WITH", "RECURSIVE", "TABLE"})


@dataclass(frozen=True)
class Refusal:
    """PostgreSQL 15's error: `message` at `offset` (None: at end of input), met when its parser
    reaches `reached`."""

    message: str
    offset: int | None
    reached: int


def junk_message(text: str, offset: int) -> str | None:
    """PostgreSQL 15's message for a numeric literal at `offset` followed by identifier characters."""
    found = _JUNK.match(text, offset)
    return f'trailing junk after numeric literal at or near "{found.group()}"' if found else None


def as_pg15_message(text: str, message: str, offset: int | None) -> str:
    """pglast's lexer error for a malformed 16-style literal (`0x`, `0b`) as PostgreSQL 15 words it."""
    if offset is not None and _NEWER_NUMBERS.match(message):
        return junk_message(text, offset) or message
    return message


def standins(text: str, tokens: Sequence[parser.Token]) -> tuple[str, dict[str, str]]:
    """`text` with every newer keyword written as a same-length identifier, and the identifiers
    used, each to the name PostgreSQL 15 reads (the word folded to lower case)."""
    words = [tok for tok in tokens if text[tok.start : tok.end + 1].lower() in NEWER_KEYWORDS]
    if not words:
        return text, {}
    chars = list(text)
    names: dict[str, str] = {}
    used = text.lower()
    for tok in words:
        word = text[tok.start : tok.end + 1].lower()
        standin = next(s for i in range(1, 10**6) if (s := _standin(len(word), i)) not in used and s not in names)
        names[standin] = word
        chars[tok.start : tok.end + 1] = standin
    return "".join(chars), names


def _standin(length: int, number: int) -> str:
    return "z" + str(number).rjust(length - 1, "0")


def restore(node: ast.Node, names: dict[str, str]) -> None:
    """Put the names `standins` replaced back into a tree parsed from its text."""
    if not names:
        return
    for item in walk(node):
        for slot in item:
            value = getattr(item, slot)
            if isinstance(value, str) and value in names:
                setattr(item, slot, names[value])


def token_refusals(text: str, tokens: Sequence[parser.Token]) -> Iterator[Refusal]:
    """What PostgreSQL 15's lexer and grammar refuse that pglast's takes, found on the tokens."""
    depth = 0
    merge_depths: list[int] = []  # depths at which a MERGE statement is being read
    statement_start = True
    vacuum = False
    for i, tok in enumerate(tokens):
        name = tok.name
        before = [t.name for t in tokens[max(0, i - 3) : i]]
        if name in _NUMBERS:
            message = junk_message(text, tok.start)
            if message is not None:
                yield Refusal(message, tok.start, tok.start)
        elif (
            (*before[-1:], name) in (("RETURNING", "WITH"), ("AT", "LOCAL"))  # RETURNING WITH (OLD AS o), AT LOCAL
            or (before == ["WHEN", "NOT", "MATCHED"] and name == "BY")  # WHEN NOT MATCHED BY SOURCE/TARGET
            or (name == "RETURNING" and merge_depths[-1:] == [depth])  # MERGE ... RETURNING
            or (name == "ONLY" and vacuum and depth == 0)  # VACUUM/ANALYZE ONLY t
        ):
            yield _syntax_error(text, tok)
        if statement_start and depth == 0:
            vacuum = name in ("VACUUM", "ANALYZE", "ANALYSE")
        statement_start = name == _SEMICOLON
        if name == "MERGE":
            merge_depths.append(depth)
        elif name == _OPEN:
            depth += 1
        elif name == _CLOSE:
            while merge_depths and merge_depths[-1] >= depth:
                merge_depths.pop()
            depth -= 1
        elif name == _SEMICOLON:
            merge_depths.clear()


def alias_refusals(text: str, tokens: Sequence[parser.Token], trees: Sequence[ast.Node]) -> Iterator[Refusal]:
    """PostgreSQL 15 refuses a subquery or VALUES list in FROM without an alias (16 takes it), at
    its opening parenthesis, once its parser has read past the closing one."""
    starts = {tok.start: i for i, tok in enumerate(tokens)}
    # A VALUES list of constants places no node (A_Const has no location): its `(`s in text order.
    unplaced = iter(i for i in range(len(tokens)) if _opens_values(tokens, i))
    for tree in trees:
        for item in walk(tree):
            if not isinstance(item, ast.RangeSubselect) or item.alias is not None or item.subquery is None:
                continue
            placed = [
                at for n in walk(item.subquery) if isinstance(at := getattr(n, "location", None), int) and at >= 0
            ]
            first = starts.get(min(placed, default=-1))
            opening = None if first is not None else next(unplaced, None)
            while first is not None and first > 0 and tokens[first - 1].name in _SUBQUERY_OPENING:
                first -= 1
                if tokens[first].name == _OPEN:
                    opening = first
            if opening is None:
                continue
            closing = _matching(tokens, opening)
            reached = tokens[closing + 1].start if closing + 1 < len(tokens) else len(text)
            kind = "VALUES" if isinstance(item.subquery, ast.SelectStmt) and item.subquery.valuesLists else "subquery"
            yield Refusal(f"{kind} in FROM must have an alias", tokens[opening].start, reached)


def _opens_values(tokens: Sequence[parser.Token], i: int) -> bool:
    """Whether token `i` is the `(` of a FROM item `(VALUES ...)` (or `((VALUES ...))`)."""
    if tokens[i].name != _OPEN or (i > 0 and tokens[i - 1].name == _OPEN):
        return False
    after = next((t.name for t in tokens[i:] if t.name != _OPEN), None)
    return after == "VALUES" and i > 0 and tokens[i - 1].name in ("FROM", "JOIN", "LATERAL", "ASCII_44")


def _matching(tokens: Sequence[parser.Token], opening: int) -> int:
    depth = 0
    for i in range(opening, len(tokens)):
        if tokens[i].name == _OPEN:
            depth += 1
        elif tokens[i].name == _CLOSE:
            depth -= 1
            if depth == 0:
                return i
    return len(tokens) - 1


def _syntax_error(text: str, tok: parser.Token) -> Refusal:
    return Refusal(f'syntax error at or near "{text[tok.start : tok.end + 1]}"', tok.start, tok.start)
