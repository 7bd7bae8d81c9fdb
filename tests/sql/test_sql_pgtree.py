"""The pglast tree walks (plugin/sql/syntax/pgtree.py) visit what a walk over every slot visits,
in the same order: they look only into the slots whose C type can hold a node, so a slot
wrongly taken for a scalar would hide nodes from every check. Checked on the schema files and
the statements of the corpus, the example protos and a few of each statement kind."""

from __future__ import annotations

import re
from collections.abc import Iterator

from pglast import ast, parser
from pydb.plugin.sql.syntax.pgtree import nodes_of, preorder, walk
from support.pg import ROOT

STATEMENTS = [
    "WITH t AS (SELECT 1 AS a) SELECT a::int8, ROW(1, 'x')::text FROM t WHERE a = ANY(ARRAY[1, 2]) ORDER BY 1",
    "INSERT INTO t (a, b) SELECT * FROM unnest($1::int[], $2::text[]) ON CONFLICT (a) DO UPDATE SET b = EXCLUDED.b "
    "RETURNING a, (SELECT count(*) FROM u WHERE u.a = t.a) AS n",
    "UPDATE t SET b = s.b FROM (VALUES (1, 'x')) AS s (a, b) WHERE t.a = s.a RETURNING *",
    "DELETE FROM t USING u WHERE t.a = u.a AND u.b IS DISTINCT FROM $1 RETURNING t.a",
    "CREATE TABLE p (a int PRIMARY KEY, b text DEFAULT 'x' CHECK (b <> ''), c int REFERENCES q (id)) PARTITION BY RANGE (a)",
    "CREATE FOREIGN TABLE f (a int) SERVER s",
    "ALTER TABLE p ADD COLUMN d timestamptz NOT NULL DEFAULT now(), ALTER COLUMN b TYPE varchar(10)",
    "SELECT json_object('a': 1), xmlelement(name x, 'y'), CASE WHEN $1 THEN 1 ELSE 2 END, interval '1 day'",
    "CREATE VIEW v AS SELECT a, sum(b) OVER (PARTITION BY c ORDER BY d) FROM t GROUP BY ROLLUP (a, c)",
]


def every_slot(tree: object) -> Iterator[ast.Node]:
    """The reference walk: every slot of every node, last slot first (as `walk`)."""
    stack = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, ast.Node):
            yield item
            stack.extend(getattr(item, name) for name in item)
        elif isinstance(item, tuple):
            stack.extend(item)


def every_slot_in_order(node: object) -> Iterator[ast.Node]:
    """The reference recursive descent: every slot in slot order (as `preorder`)."""
    if isinstance(node, ast.Node):
        yield node
        for name in node:
            yield from every_slot_in_order(getattr(node, name))
    elif isinstance(node, (tuple, list)):
        for item in node:
            yield from every_slot_in_order(item)


def texts() -> Iterator[str]:
    yield from STATEMENTS
    for path in sorted((ROOT / "tests" / "corpus").rglob("*.sql")) + sorted((ROOT / "example_protos").rglob("*.sql")):
        yield path.read_text(errors="replace")
    for path in sorted((ROOT / "example_protos").rglob("*.proto")):
        yield from re.findall(r'query: "((?:[^"\\]|\\.)*)"', path.read_text())


def trees() -> list[ast.Node]:
    out = []
    for text in texts():
        try:
            out += [raw.stmt for raw in parser.parse_sql(text) if raw.stmt is not None]
        except parser.ParseError:
            continue
    return out


def test_walks_visit_every_node_in_order() -> None:
    found = trees()
    assert len(found) > 100  # the corpus and the protos were read
    visited = 0
    for tree in found:
        expected = [id(n) for n in every_slot(tree)]
        assert [id(n) for n in walk(tree)] == expected
        assert [id(n) for n in walk(tree)] == expected  # again: the kept node list
        assert [id(n) for n in preorder(tree)] == [id(n) for n in every_slot_in_order(tree)]
        visited += len(expected)
    assert visited > 5_000


def test_nodes_of_a_fresh_tree_are_its_own() -> None:
    """A tree parsed again from the same text is a new tree: its nodes, not the last one's."""
    first = parser.parse_sql("SELECT a::int FROM t")[0].stmt
    casts = list(nodes_of(first, ast.TypeCast))
    second = parser.parse_sql("SELECT a::int FROM t")[0].stmt
    again = list(nodes_of(second, ast.TypeCast))
    assert len(casts) == len(again) == 1 and casts[0] is not again[0]
    assert list(nodes_of((first, second), ast.TypeCast)) == [again[0], casts[0]]
