"""Generated lines over the width are wrapped as a formatter would (`py_fit`, `py_para`), and the
wrapping never changes what the code means: the wrapped line parses to the same tree, a string
literal is never split and a `#` or a parenthesis inside one is not taken for code."""

from __future__ import annotations

import ast

import pytest
from pydb.plugin.pygen.text import DOC_WIDTH, py_fit, py_para

#: Each line as it stands in a generated module (its indentation apart), longer than the width.
LINES = [
    "claim_expires_at=None if row[14] is None else rt.timestamp_value(row[14]),  # claim_expires_at timestamptz",
    '"created_before": rt.timestamp_param(request.created_before, "created_before")'
    ' if request.HasField("created_before") else None,',
    '"reserved_token_amount": request.reserved_token_amount if request.HasField("reserved_token_amount") else None,',
    "return task_pb2.ListPeriodicTasksResponse(periodic_tasks=[_periodic_task_from_row(row) for row in rows])",
    'return await self.db.run(context, "SetToolRetryPolicy", set_tool_retry_policy, request, replica=False)',
    'return pb2.R(note="a  # not a comment (nor a paren", other="x) y", and_more=[1, 2, 3], and_even_more=None)',
    'x = f(\'it\\\'s  # here\', "still ( open") + g("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k")',
]


def _as_module(line: str, indent: int) -> str:
    """The line inside the constructs it stands in, so that it parses on its own."""
    body = "\n".join(" " * indent + part for part in line.split("\n"))
    if line.startswith('"'):
        return "async def f():\n    params = {\n" + body + "\n    }\n"
    if "=" in line.split("(")[0] and not line.startswith(("return", "x =")):
        return "async def f():\n    return R(\n" + body + "\n    )\n"
    return "async def f():\n    if 1:\n" + body + "\n"


@pytest.mark.parametrize("line", LINES)
def test_a_wrapped_line_means_what_the_line_meant(line: str) -> None:
    indent = 8
    wrapped = py_fit(line, indent)
    assert ast.dump(ast.parse(_as_module(wrapped, indent))) == ast.dump(ast.parse(_as_module(line, indent)))
    assert "\n" in wrapped
    assert all(len(part) <= DOC_WIDTH for part in (" " * indent + wrapped).split("\n")) or "  # " in line


def test_a_short_line_is_left_alone() -> None:
    assert py_fit('return R(a="  # x")', 8) == 'return R(a="  # x")'


def test_a_comment_inside_a_string_stays_in_it() -> None:
    line = 'return pb2.R(note="a  # not a comment (nor a paren", other="x) y", and_more=[1, 2, 3], z=None)'
    assert py_fit(line, 8).splitlines()[0] == "return pb2.R("


def test_a_docstring_paragraph_is_filled_at_the_width() -> None:
    text = "Exactly one row, into `task`. No row: NOT_FOUND when the app.tasks row does not exist, else FAILED_PRECONDITION."
    lines = (" " * 4 + py_para(text, 4)).split("\n")
    assert len(lines) == 2 and all(len(x) <= DOC_WIDTH for x in lines)
    assert " ".join(x.strip() for x in lines) == text
