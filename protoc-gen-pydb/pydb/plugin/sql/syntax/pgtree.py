"""Walking PostgreSQL's parse trees (pglast's AST): the one traversal every module of the front
end uses to find nodes of a kind in a statement or a schema object."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

from pglast import ast, enums

_N = TypeVar("_N", bound=ast.Node)

#: C types of pglast's slots that hold no node: numbers, flags, strings, offsets. Enums (whose
#: ctype is the enum's name) are recognised by `pglast.enums`. Every other slot (`Node*`,
#: `List*`, `TypeName*`, an embedded `CreateStmt`, ...) may hold a node or a tuple of them.
_SCALAR_CTYPES = frozenset(
    {"bool", "char", "char*", "int", "int16", "int32", "long", "ParseLoc", "Index", "AttrNumber", "Cost"}
    | {"Cardinality", "bits32", "SubTransactionId", "AclMode", "RelFileNumber", "Oid"}
)

#: The slots of each node class that may hold nodes, in slot order (filled as classes are met).
_CHILD_SLOTS: dict[type[ast.Node], tuple[str, ...]] = {}


def _child_slots(cls: type[ast.Node]) -> tuple[str, ...]:
    slots = getattr(cls, "__slots__", ())  # pglast: {name: ctype}; the base classes: a tuple
    ctypes: dict[str, object] = slots if isinstance(slots, dict) else {}
    found = tuple(
        name
        for name, ctype in ctypes.items()
        if not (isinstance(ctype, str) and (ctype in _SCALAR_CTYPES or hasattr(enums, ctype)))
    )
    _CHILD_SLOTS[cls] = found
    return found


#: The nodes of the trees walked last, by id (with the tree, so that the id stays its own): a
#: statement's tree is walked by several checks in turn (the grammar's, the stand-ins', the
#: analyzer's), which then share one traversal. pglast trees are not reshaped once parsed (only
#: pg15.restore writes names back, into the same nodes), so a tree's node list stays right.
_WALKED: dict[int, tuple[ast.Node, tuple[ast.Node, ...]]] = {}
_WALKED_MAX = 64


def walk(tree: object) -> Iterator[ast.Node]:
    """Every node of a pglast tree (a node, a tuple of them, or None), depth first."""
    if not isinstance(tree, ast.Node):
        return _walk(tree)
    hit = _WALKED.get(id(tree))
    if hit is not None and hit[0] is tree:
        return iter(hit[1])
    nodes = tuple(_walk(tree))
    if len(_WALKED) >= _WALKED_MAX:
        del _WALKED[next(iter(_WALKED))]
    _WALKED[id(tree)] = (tree, nodes)
    return iter(nodes)


def _walk(tree: object) -> Iterator[ast.Node]:
    """`walk` itself: depth first, the children of a node last slot first."""
    return _depth_first(tree, in_slot_order=False)


def preorder(tree: object) -> Iterator[ast.Node]:
    """Every node of a pglast tree in the order of a recursive descent: a node, then what each
    of its slots holds, in slot order (`walk` meets children last slot first)."""
    return _depth_first(tree, in_slot_order=True)


def _depth_first(tree: object, in_slot_order: bool) -> Iterator[ast.Node]:
    """Only the slots that can hold nodes are looked into (`_child_slots`): the order is that of
    visiting every slot, whose scalar values are no nodes."""
    containers = (tuple, list) if in_slot_order else tuple  # as each was written first
    stack: list[object] = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, ast.Node):
            yield item
            names = _CHILD_SLOTS.get(type(item))
            if names is None:
                names = _child_slots(type(item))
            children = [value for name in names if (value := getattr(item, name)) is not None]
            stack.extend(reversed(children) if in_slot_order else children)
        elif isinstance(item, containers):
            stack.extend(reversed(item) if in_slot_order else item)


def nodes_of(tree: object, kind: type[_N]) -> Iterator[_N]:
    """The nodes of `tree` that are a `kind` (ast.TypeCast, ast.FuncCall, ...), as `walk` meets them."""
    return (node for node in walk(tree) if isinstance(node, kind))
