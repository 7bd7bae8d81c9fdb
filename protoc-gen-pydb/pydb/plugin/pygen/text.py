"""Text as Python source: every value the templates interpolate into a string literal, a
docstring or a comment goes through one of these, so any RPC comment, enum label, identifier
or SQL text yields a valid module."""

from __future__ import annotations

import textwrap

#: Generated docstrings are wrapped to this width.
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
