"""Text as Python source: every value the templates interpolate into a string literal, a
docstring or a comment goes through one of these, so any RPC comment, enum label, identifier
or SQL text yields a valid module."""

from __future__ import annotations

import re
import textwrap

#: Generated docstrings and code are wrapped to this width.
DOC_WIDTH = 100


def py_str(text: str) -> str:
    """`text` as a Python string literal: double-quoted unless it holds a double quote (and no
    single one), as a formatter would write it; every escape is Python's own (`repr`)."""
    literal = repr(text)
    if literal[0] == "'" and "'" not in text and '"' not in text:
        return f'"{literal[1:-1]}"'
    return literal


def py_tuple(items: tuple[str, ...]) -> str:
    """`items` as a Python tuple of string literals (a 1-tuple keeps its comma)."""
    return "(" + ", ".join(map(py_str, items)) + ("," if len(items) == 1 else "") + ")"


def py_block(text: str) -> str:
    """`text` as the body of a triple-quoted literal: backslashes, NULs and carriage returns
    (which Python would read as newlines) escaped, no run of three quotes, no quote last (it
    would run into the closing quotes)."""
    body, last = (text[:-1], '\\"') if text.endswith('"') else (text, "")
    return body.replace("\\", "\\\\").replace("\x00", "\\x00").replace("\r", "\\r").replace('"""', '""\\"') + last


def py_comment(text: str) -> str:
    """`text` on one line, for a `#` comment."""
    return " ".join(text.splitlines()) if ("\n" in text or "\r" in text) else text


def py_doc(text: str, indent: int, lead: str) -> str:
    """A docstring's first paragraph, `lead: text` (or `lead` alone), as py_block, wrapped at
    DOC_WIDTH for a docstring opened at column `indent`: words are never broken, only the
    spaces between them become line breaks."""
    full = f"{lead}: {text}" if text else lead
    opening = " " * (indent + 3)  # the indentation and the opening quotes
    wrapped = textwrap.fill(
        full,
        width=DOC_WIDTH,
        initial_indent=opening,
        subsequent_indent=" " * indent,
        expand_tabs=False,
        replace_whitespace=False,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return py_block(wrapped[len(opening) :])


def py_para(text: str, indent: int) -> str:
    """A docstring paragraph (its parts already escaped by py_block) at column `indent`, wrapped
    at DOC_WIDTH; the template indents its first line."""
    return textwrap.fill(
        " ".join(text.split()),
        width=DOC_WIDTH,
        initial_indent=" " * indent,
        subsequent_indent=" " * indent,
        break_long_words=False,
        break_on_hyphens=False,
    )[indent:]


def py_fit(line: str, indent: int) -> str:
    """A line of code at column `indent`, as a formatter would write it over DOC_WIDTH: an
    end-of-line comment moves to the line above, a dict entry's value goes in parentheses on
    a line of its own, a call that ends the line has its arguments on a line of their own."""
    if indent + len(line) <= DOC_WIDTH:
        return line
    pad, inner_pad = "\n" + " " * indent, "\n" + " " * (indent + 4)
    code, comment = _split_comment(line)
    if comment is not None:
        return f"{comment}{pad}{py_fit(code, indent)}"
    body, comma = (code[:-1], ",") if code.endswith(",") else (code, "")
    entry = re.match(r"(\"[^\"\\]*\"|'[^'\\]*'): ", body)
    if entry is not None:
        value = body[entry.end() :]
        if indent + 4 + len(value) > DOC_WIDTH:
            value = inner_pad.join(_conditional(value))
        return f"{entry.group(0)}({inner_pad}{value}{pad}){comma}"
    opening = _opening_of_last_paren(body)
    if opening is None:
        return line
    return f"{body[: opening + 1]}{inner_pad}{body[opening + 1 : -1]}{pad}){comma}"


_STRING = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'")


def _in_string(code: str, at: int) -> bool:
    return any(m.start() <= at < m.end() for m in _STRING.finditer(code))


def _split_comment(line: str) -> tuple[str, str | None]:
    """`code  # comment`: the code and the comment (a `#` inside a string literal is none)."""
    for m in re.finditer(r"  # ", line):
        if not _in_string(line, m.start()):
            return line[: m.start()], line[m.start() + 2 :]
    return line, None


def _conditional(value: str) -> list[str]:
    """`a if b else c` as its three parts (`a`, `if b`, `else c`), split where no bracket or
    string literal is open; [value] when it is no conditional expression."""
    cuts: list[int] = []
    depth = 0
    for i, ch in enumerate(value):
        if ch in "([{" and not _in_string(value, i):
            depth += 1
        elif ch in ")]}" and not _in_string(value, i):
            depth -= 1
        elif depth == 0 and value.startswith((" if ", " else "), i) and not _in_string(value, i):
            cuts.append(i)
    if len(cuts) != 2 or not value.startswith(" if ", cuts[0]):
        return [value]
    return [value[: cuts[0]], value[cuts[0] + 1 : cuts[1]], value[cuts[1] + 1 :]]


def _opening_of_last_paren(code: str) -> int | None:
    """Where the `(` stands that the last character, a `)`, closes (outside string literals)."""
    if not code.endswith(")"):
        return None
    depth = 0
    for i in range(len(code) - 1, -1, -1):
        if code[i] in "()" and not _in_string(code, i):
            depth += 1 if code[i] == ")" else -1
            if depth == 0:
                return i
    return None
