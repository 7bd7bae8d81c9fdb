"""Text as Python source: every value the templates interpolate into a string literal, a
docstring or a comment goes through one of these, so any RPC comment, enum label, identifier
or SQL text yields a valid module."""

from __future__ import annotations

import json


def py_str(text: str) -> str:
    """`text` as a double-quoted Python string literal (JSON's escapes are Python's)."""
    return json.dumps(text, ensure_ascii=False)


def py_block(text: str) -> str:
    """`text` as the body of a triple-quoted literal: backslashes (and NULs) escaped, no run of
    three quotes, no quote last (it would run into the closing quotes)."""
    body, last = (text[:-1], '\\"') if text.endswith('"') else (text, "")
    return body.replace("\\", "\\\\").replace("\x00", "\\x00").replace('"""', '""\\"') + last


def py_comment(text: str) -> str:
    """`text` on one line, for a `#` comment."""
    return " ".join(text.splitlines()) if ("\n" in text or "\r" in text) else text
