"""Output column names exactly as PostgreSQL gives them: its FigureColname rules applied to its
own raw parse tree (libpg_query through pgparse), not to sqlglot's, which renames and rewrites
calls (`ceiling` → `ceil`, `div(a, b)` → a cast).

A name is a function's (`div`, `ceiling`, `count`), a cast's type (`@x::text` → `text`,
`1::int` → `int4`), `exists`, `case`, `array`, `row`, `coalesce`, `greatest`, `least`,
`nullif`, a scalar subquery's own column name, or `?column?` where PostgreSQL says so
(operators, literals, parameters)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pglast import ast
from pglast.enums.parsenodes import A_Expr_Kind
from pglast.enums.primnodes import MinMaxOp, SQLValueFunctionOp, SubLinkType, XmlExprOp

from .pgtree import preorder

UNNAMED = "?column?"

_SQL_VALUE_FUNCTIONS = {
    SQLValueFunctionOp.SVFOP_CURRENT_DATE: "current_date",
    SQLValueFunctionOp.SVFOP_CURRENT_TIME: "current_time",
    SQLValueFunctionOp.SVFOP_CURRENT_TIME_N: "current_time",
    SQLValueFunctionOp.SVFOP_CURRENT_TIMESTAMP: "current_timestamp",
    SQLValueFunctionOp.SVFOP_CURRENT_TIMESTAMP_N: "current_timestamp",
    SQLValueFunctionOp.SVFOP_LOCALTIME: "localtime",
    SQLValueFunctionOp.SVFOP_LOCALTIME_N: "localtime",
    SQLValueFunctionOp.SVFOP_LOCALTIMESTAMP: "localtimestamp",
    SQLValueFunctionOp.SVFOP_LOCALTIMESTAMP_N: "localtimestamp",
    SQLValueFunctionOp.SVFOP_CURRENT_ROLE: "current_role",
    SQLValueFunctionOp.SVFOP_CURRENT_USER: "current_user",
    SQLValueFunctionOp.SVFOP_USER: "user",
    SQLValueFunctionOp.SVFOP_SESSION_USER: "session_user",
    SQLValueFunctionOp.SVFOP_CURRENT_CATALOG: "current_catalog",
    SQLValueFunctionOp.SVFOP_CURRENT_SCHEMA: "current_schema",
}

_XML_FUNCTIONS = {
    XmlExprOp.IS_XMLCONCAT: "xmlconcat",
    XmlExprOp.IS_XMLELEMENT: "xmlelement",
    XmlExprOp.IS_XMLFOREST: "xmlforest",
    XmlExprOp.IS_XMLPARSE: "xmlparse",
    XmlExprOp.IS_XMLPI: "xmlpi",
    XmlExprOp.IS_XMLROOT: "xmlroot",
    XmlExprOp.IS_XMLSERIALIZE: "xmlserialize",
    XmlExprOp.IS_DOCUMENT: "xmlexists",
}


def _last_string(items: tuple[ast.Node, ...] | None) -> str | None:
    found = None
    for item in items or ():
        if isinstance(item, ast.String):
            found = item.sval
    return found


def figure_index_colname(node: ast.Node | None) -> str | None:
    """PostgreSQL's FigureIndexColname: the name an index expression gives the index's name
    (`lower(email)` -> `lower`), None where PostgreSQL then says `expr`."""
    return _figure(node)[1]


def _figure(node: ast.Node | None) -> tuple[int, str | None]:
    """PostgreSQL's FigureColnameInternal: (strength, name). Strength 2 is a name proper, 1 a
    fallback (a cast's type, `case`) that a stronger name inside wins over, 0 none."""
    if isinstance(node, ast.ColumnRef):
        name = _last_string(node.fields)
        return (2, name) if name is not None else (0, None)
    if isinstance(node, ast.A_Indirection):
        name = _last_string(node.indirection)
        return (2, name) if name is not None else _figure(node.arg)
    if isinstance(node, ast.FuncCall):
        return 2, _last_string(node.funcname)
    if isinstance(node, ast.A_Expr) and node.kind == A_Expr_Kind.AEXPR_NULLIF:
        return 2, "nullif"
    if isinstance(node, ast.TypeCast):
        strength, name = _figure(node.arg)
        if strength <= 1 and node.typeName is not None:
            return 1, _last_string(node.typeName.names)
        return strength, name
    if isinstance(node, ast.CollateClause):
        return _figure(node.arg)
    if isinstance(node, ast.GroupingFunc):
        return 2, "grouping"
    if isinstance(node, ast.SubLink):
        if node.subLinkType == SubLinkType.EXISTS_SUBLINK:
            return 2, "exists"
        if node.subLinkType == SubLinkType.ARRAY_SUBLINK:
            return 2, "array"
        if node.subLinkType == SubLinkType.EXPR_SUBLINK:
            return 2, _first_column_name(node.subselect)
        return 0, None
    if isinstance(node, ast.CaseExpr):
        strength, name = _figure(node.defresult)
        return (1, "case") if strength <= 1 else (strength, name)
    if isinstance(node, ast.A_ArrayExpr):
        return 2, "array"
    if isinstance(node, ast.RowExpr):
        return 2, "row"
    if isinstance(node, ast.CoalesceExpr):
        return 2, "coalesce"
    if isinstance(node, ast.MinMaxExpr):
        return 2, "greatest" if node.op == MinMaxOp.IS_GREATEST else "least"
    if isinstance(node, ast.SQLValueFunction):
        return 2, _SQL_VALUE_FUNCTIONS.get(SQLValueFunctionOp(node.op or 0))
    if isinstance(node, ast.XmlExpr):
        return (2, _XML_FUNCTIONS[XmlExprOp(node.op)]) if node.op is not None else (0, None)
    if isinstance(node, ast.XmlSerialize):
        return 2, "xmlserialize"
    return 0, None


def _target_name(target: ast.ResTarget) -> str:
    if target.name:
        return target.name
    _, name = _figure(target.val)
    return name or UNNAMED


def _first_column_name(select: ast.Node | None) -> str:
    """The name of a scalar subquery's one column: its first target's, the leftmost branch's
    for a set operation, `column1` for VALUES."""
    while isinstance(select, ast.SelectStmt) and select.larg is not None:
        select = select.larg
    if isinstance(select, ast.SelectStmt) and select.targetList:
        first = select.targetList[0]
        return _target_name(first) if isinstance(first, ast.ResTarget) else UNNAMED
    if isinstance(select, ast.SelectStmt) and select.valuesLists:
        return "column1"
    return UNNAMED


@dataclass(frozen=True)
class TargetList:
    """One select list or RETURNING list: where each item starts, and its name."""

    starts: tuple[int, ...]
    names: tuple[str, ...]


def _target_lists(tree: object) -> Iterator[TargetList]:
    """Every select list and RETURNING list in the tree, nested ones included (outer first)."""
    for node in preorder(tree):
        targets = None
        if isinstance(node, ast.SelectStmt):
            targets = node.targetList
        elif isinstance(node, ast.ReturningClause):  # INSERT/UPDATE/DELETE ... RETURNING
            targets = node.exprs
        if targets:
            items = [t for t in targets if isinstance(t, ast.ResTarget)]
            yield TargetList(tuple(t.location or 0 for t in items), tuple(_target_name(t) for t in items))


class OutputNames:
    """The output names of every select and RETURNING list of one statement (PostgreSQL's parse
    tree), found by where the items stand in the text."""

    def __init__(self, tree: ast.Node | None, original_offset: Callable[[int], int]) -> None:
        self.lists = [
            TargetList(tuple(original_offset(start) for start in found.starts), found.names)
            for found in _target_lists(tree)
        ]
        self.taken: set[int] = set()
        self.matched: dict[tuple[int | None, ...], tuple[str, ...] | None] = {}

    def names(self, starts: list[int | None]) -> tuple[str, ...] | None:
        """The names of the list whose items start at `starts` (None where not known): of the
        lists not yet taken of that length each known start falls in the right item of, the
        innermost. Nested lists are matched first, so an item that starts inside one (sqlglot
        does not place `EXISTS (`) still finds its own list."""
        key = tuple(starts)
        if key in self.matched:  # the same list analysed again (a subquery typed twice)
            return self.matched[key]
        best: int | None = None
        for index, candidate in enumerate(self.lists):
            if index in self.taken or len(candidate.starts) != len(starts):
                continue
            bounds = [*candidate.starts[1:], None]
            if all(
                start is None or (begin <= start and (end is None or start < end))
                for start, begin, end in zip(starts, candidate.starts, bounds, strict=True)
            ) and (best is None or candidate.starts > self.lists[best].starts):
                best = index
        if best is None:
            return None
        self.taken.add(best)
        self.matched[key] = self.lists[best].names
        return self.lists[best].names
