"""Walking PostgreSQL's parse trees (pglast's AST): the one traversal every module of the front
end uses to find nodes of a kind in a statement or a schema object."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

from pglast import ast

_N = TypeVar("_N", bound=ast.Node)


def walk(tree: object) -> Iterator[ast.Node]:
    """Every node of a pglast tree (a node, a tuple of them, or None), depth first."""
    stack: list[object] = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, ast.Node):
            yield item
            stack.extend(getattr(item, name) for name in item)  # iterating a Node yields its slot names
        elif isinstance(item, tuple):
            stack.extend(item)


def nodes_of(tree: object, kind: type[_N]) -> Iterator[_N]:
    """The nodes of `tree` that are a `kind` (ast.TypeCast, ast.FuncCall, ...), as `walk` meets them."""
    return (node for node in walk(tree) if isinstance(node, kind))
