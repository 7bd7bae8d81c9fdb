"""Whatever an RPC comment, a name or a statement holds, the generated module is valid Python
and says it verbatim (it used to be a SyntaxError for a comment with triple quotes, and the
plugin reported success)."""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

import pytest
from goldens.harness import generate
from pydb.plugin.pygen.text import py_block, py_comment, py_str, py_tuple

GOLDENS = Path(__file__).resolve().parents[1] / "goldens"
PIECES = ['"', "'", "\\", '"""', "'''", "\n", "\r", "\t", "\x00", "{", "}", "%", "é", "\u2028", "a"]


@pytest.mark.parametrize("length", [1, 2, 3, 4])
def test_every_text_round_trips_through_the_escapes(length: int) -> None:
    for combo in itertools.product(PIECES, repeat=length):
        text = "".join(combo)
        assert ast.literal_eval(py_str(text)) == text
        assert ast.literal_eval('"""' + py_block(text) + '"""') == text
        comment = py_comment(text)
        assert "\n" not in comment and "\r" not in comment


def docstrings(source: str) -> dict[str, str | None]:
    tree = ast.parse(source)
    return {
        node.name: ast.get_docstring(node, clean=False)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def test_rpc_comments_and_sql_with_quotes_and_backslashes() -> None:
    outcome = generate(GOLDENS / "comments", "goldens_comments.proto")
    assert outcome.error == ""
    source = outcome.files["goldens_comments_pydb.py"]
    docs = docstrings(source)  # parses: the module is valid Python
    get_quote = docs["get_quote"]
    watch = docs["Watch"]
    assert get_quote is not None and watch is not None
    assert get_quote.startswith(
        'GetQuote: Returns the quote: """as is""", with C:\\path\\ and \\n kept, 100% "quoted"\n'
    )
    assert watch.startswith('Watch: Streams "pings" \\o/ """\n')
    sql = next(
        node.value.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id == "GET_QUOTE_SQL"
        and isinstance(node.value, ast.Constant)
    )
    assert sql == "SELECT id, body FROM quotes\nWHERE id = %(id)s AND body NOT LIKE '%%\"\"\"%%' AND body <> E'\\\\'\n"


TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


def test_every_value_in_a_template_comment_goes_through_py_comment() -> None:
    """A `#` line holding a name (a .proto path, a PostgreSQL type, which may be a quoted
    identifier with a newline) must stay one line: the value goes through py_comment. Only
    the plugin's own version is written as is."""
    unescaped = [
        f"{template.name}:{number}: {value.strip()}"
        for template in sorted(TEMPLATES.glob("*.j2"))
        for number, line in enumerate(template.read_text().splitlines(), 1)
        if line.lstrip().startswith("#")
        for value in re.findall(r"{{(.*?)}}", line)
        if "py_comment" not in value and value.strip() != "file.version"
    ]
    assert unescaped == []


@pytest.mark.parametrize("items", [(), ("uuid",), ("uuid", 'a "b'), ("x\n",)])
def test_py_tuple_is_the_tuple(items: tuple[str, ...]) -> None:
    assert ast.literal_eval(py_tuple(items)) == items
