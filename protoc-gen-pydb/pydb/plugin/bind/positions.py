"""Where each character of a `(pydb.v1.sql)` query is in the .proto's own text.

protoc's SourceCodeInfo places the option as a whole (`option (pydb.v1.sql) = { ... };`). To put
a diagnostic on the offending SQL token, the option's text is read again: the string literal(s)
after `query:` (text format, inside `{ ... }`) or `query =` (`option (pydb.v1.sql).query = ...`),
adjacent literals concatenated as protoc does, escapes decoded (`\\"`, `\\n`, `\\\\`, octal, hex,
`\\u`/`\\U`). The result maps each character of the decoded query to its 0-based (line, column)
in the file, columns counted in characters. When the text does not decode to the very query
protoc read (a stale file, a proto found under another root), there is no map and the caller
keeps the option's location.
"""

from __future__ import annotations

import re

Position = tuple[int, int]  # 0-based line, 0-based column (characters)

_SIMPLE_ESCAPES = {
    "a": 7,
    "b": 8,
    "f": 12,
    "n": 10,
    "r": 13,
    "t": 9,
    "v": 11,
    "\\": 92,
    "?": 63,
    "'": 39,
    '"': 34,
}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class _Scanner:
    """protoc's tokenizer, only as far as needed: comments, identifiers, strings, symbols."""

    def __init__(self, text: str, offset: int, end: int) -> None:
        self.text = text
        self.pos = offset
        self.end = end

    def skip_blanks(self) -> None:
        text = self.text
        while self.pos < self.end:
            c = text[self.pos]
            if c.isspace():
                self.pos += 1
            elif text.startswith("//", self.pos) or c == "#":
                nl = text.find("\n", self.pos)
                self.pos = self.end if nl == -1 else nl + 1
            elif text.startswith("/*", self.pos):
                close = text.find("*/", self.pos + 2)
                self.pos = self.end if close == -1 else close + 2
            else:
                return

    def next_token(self) -> tuple[str, int] | None:
        """(token text, start offset); a string token is returned whole, quotes included."""
        self.skip_blanks()
        if self.pos >= self.end:
            return None
        start = self.pos
        c = self.text[start]
        m = _IDENT.match(self.text, start)
        if m is not None:
            self.pos = m.end()
        elif c in "\"'":
            i = start + 1
            while i < self.end and self.text[i] != c and self.text[i] != "\n":
                i += 2 if self.text[i] == "\\" else 1
            self.pos = min(i + 1, self.end)
        else:
            self.pos = start + 1
        return self.text[start : self.pos], start


def _decode(literal: str, start: int) -> list[tuple[int, int]] | None:
    """The bytes a string literal stands for, each with the offset of the source character that
    produced it; None if the literal is malformed (protoc would have refused it anyway)."""
    quote = literal[0]
    if len(literal) < 2 or literal[-1] != quote:
        return None
    out: list[tuple[int, int]] = []
    i, end = 1, len(literal) - 1
    while i < end:
        c = literal[i]
        at = start + i
        if c != "\\":
            out += [(b, at) for b in c.encode("utf-8")]
            i += 1
            continue
        if i + 1 >= end:
            return None
        e = literal[i + 1]
        if e in _SIMPLE_ESCAPES:
            out.append((_SIMPLE_ESCAPES[e], at))
            i += 2
        elif e in "01234567":
            octal = re.match(r"[0-7]{1,3}", literal[i + 1 : end])
            assert octal is not None
            out.append((int(octal[0], 8) & 0xFF, at))
            i += 1 + len(octal[0])
        elif e in "xX":
            hexes = re.match(r"[0-9A-Fa-f]{1,2}", literal[i + 2 : end])
            if hexes is None:
                return None
            out.append((int(hexes[0], 16), at))
            i += 2 + len(hexes[0])
        elif e in "uU":
            width = 4 if e == "u" else 8
            code = literal[i + 2 : i + 2 + width]
            if len(code) != width or not all(ch in "0123456789abcdefABCDEF" for ch in code):
                return None
            out += [(b, at) for b in chr(int(code, 16)).encode("utf-8", "surrogatepass")]
            i += 2 + width
        else:
            return None
    return out


def _chars(decoded: list[tuple[int, int]]) -> tuple[str, list[int]] | None:
    """UTF-8 bytes -> the text, and per character the source offset of its first byte."""
    data = bytes(b for b, _ in decoded)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    offsets: list[int] = []
    i = 0
    for ch in text:
        offsets.append(decoded[i][1])
        i += len(ch.encode("utf-8"))
    return text, offsets


def query_literals(text: str, start: int, end: int) -> tuple[str, list[int]] | None:
    """The query the option statement between offsets `start` and `end` carries, and per
    character its offset in `text`, plus one more: the closing quote's."""
    scanner = _Scanner(text, start, end)
    previous: list[str] = []
    while (token := scanner.next_token()) is not None:
        word, _ = token
        if word in (":", "=") and previous[-1:] == ["query"]:
            break
        previous.append(word)
    else:
        return None
    decoded: list[tuple[int, int]] = []
    closing = None
    while True:
        mark = scanner.pos
        token = scanner.next_token()
        if token is None or token[0][:1] not in ("'", '"'):
            scanner.pos = mark
            break
        part = _decode(token[0], token[1])
        if part is None:
            return None
        decoded += part
        closing = token[1] + len(token[0]) - 1
    chars = _chars(decoded)
    if chars is None or closing is None:
        return None
    return chars[0], [*chars[1], closing]


def query_offsets(text: str, start: int, end: int, query: str) -> list[int] | None:
    """`query_literals`' offsets, if the text says `query` (else the text is not what protoc read)."""
    found = query_literals(text, start, end)
    return found[1] if found is not None and found[0] == query else None


class SourceMap:
    """A .proto's text, with offsets <-> (line, column) conversions."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def offset(self, line: int, protoc_col: int) -> int:
        """The offset of protoc's 0-based (line, column): protoc counts a tab to the next multiple
        of 8 and every UTF-8 byte as a column."""
        if line >= len(self.line_starts):
            return len(self.text)
        i = self.line_starts[line]
        col = 0
        while col < protoc_col and i < len(self.text) and self.text[i] != "\n":
            c = self.text[i]
            col += 8 - col % 8 if c == "\t" else len(c.encode("utf-8"))
            i += 1
        return i

    def position(self, offset: int) -> Position:
        lo, hi = 0, len(self.line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo, offset - self.line_starts[lo]

    def query_positions(self, span: list[int], query: str) -> list[Position] | None:
        """Per character of `query` (and one past its end) its (line, column), from the option's
        SourceCodeInfo span [start line, start col, (end line,) end col]; None when unknown."""
        if len(span) not in (3, 4):
            return None
        end_line = span[2] if len(span) == 4 else span[0]
        start = self.offset(span[0], span[1])
        end = self.offset(end_line, span[-1])
        offsets = query_offsets(self.text, start, end, query)
        return None if offsets is None else [self.position(o) for o in offsets]
