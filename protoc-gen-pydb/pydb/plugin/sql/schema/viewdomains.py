"""A view's column that is a bare reference to a column of a domain type has the domain type, as
pg_attribute holds it (parse_target.c keeps the Var's type; only the wire, printtup.c, reduces a
domain to its base type, which is what the statement analyzer reports for a query's results).

Resolved here from the query's text, without a second analysis: a target `c` or `t.c` (and `*`,
`t.*`) against the tables and views named in FROM (joins included), or a cast to a domain. Anything less plain — a
recursive WITH, a set operation, a subquery or function in FROM beside an unqualified name, a
name two relations have — keeps the analyzer's type. A WITH query's outputs are known by name
(never of a domain type).
"""

from __future__ import annotations

from dataclasses import replace

from pglast import ast
from pglast.enums import SetOperation

from ..catalog.builtins import infoschema_domains, load_builtins
from ..catalog.identifiers import split_name
from ..catalog.model import Column, Table
from ..catalog.types import PgType
from .state import PgNode, State


def _cte(query: PgNode) -> Table | None:
    """A WITH query as a relation of its output names (no types: none is a domain's); None when
    a name is not plain to see (a star, an expression without an alias)."""
    if not isinstance(query, ast.SelectStmt) or query.op not in (None, SetOperation.SETOP_NONE):
        return None
    names = []
    for target in query.targetList or ():
        ref = target.val
        if target.name:
            names.append(str(target.name))
        elif isinstance(ref, ast.ColumnRef) and ref.fields and isinstance(ref.fields[-1], ast.String):
            names.append(str(ref.fields[-1].sval))
        else:
            return None
    return Table("", "", tuple(Column(n, PgType("unknown"), False, False) for n in names))


def _from_items(state: State, node: PgNode, out: list[tuple[str, Table | None]], ctes: dict[str, Table | None]) -> None:
    if isinstance(node, ast.JoinExpr):
        _from_items(state, node.larg, out, ctes)
        _from_items(state, node.rarg, out, ctes)
    elif isinstance(node, ast.RangeVar):
        alias = str(node.alias.aliasname if node.alias is not None else node.relname)
        if node.schemaname is None and node.relname in ctes:
            out.append((alias, ctes[node.relname]))
            return
        key = state.relation_key(node)
        if key is None and node.schemaname == "information_schema":
            out.append((alias, _information_schema_view(str(node.relname))))
            return
        out.append((alias, state.tables.get(key) if key is not None else None))
    else:
        other = getattr(getattr(node, "alias", None), "aliasname", None)
        out.append((str(other or ""), None))


def _information_schema_view(name: str) -> Table | None:
    """A view of information_schema with its columns' domains (sql_identifier, cardinal_number, ...)."""
    relation = load_builtins().relation("information_schema", name)
    if relation is None:
        return None
    domains = infoschema_domains()
    columns = []
    for col, pgtype, not_null in relation.columns:
        domain = domains.get((name, col))
        columns.append(
            Column(col, replace(pgtype, domain=f"information_schema.{domain}") if domain else pgtype, not_null, False)
        )
    return Table("information_schema", name, tuple(columns))


def _referenced(state: State, target: PgNode, items: list[tuple[str, Table | None]]) -> list[Column | None] | None:
    """The columns a target stands for (None where unknown); None when alignment is lost. A cast
    to a domain stands for a column of it."""
    ref = target.val
    if isinstance(ref, ast.TypeCast) and ref.typeName is not None and not ref.typeName.arrayBounds:
        names = [n.sval for n in ref.typeName.names or ()]
        if state.find_key(*split_name(names), state.domains) is None:
            return [None]
        return [Column("", state.resolve_type(ref.typeName), False, False)]
    if not isinstance(ref, ast.ColumnRef):
        return [None]
    fields = list(ref.fields or ())
    star = isinstance(fields[-1], ast.A_Star)
    names = [f.sval if isinstance(f, ast.String) else None for f in fields[:-1]]
    if len(fields) == 1:
        if star:
            if any(table is None for _, table in items):
                return None
            return [c for _, table in items if table is not None for c in table.columns]
        name = fields[0].sval
        if any(table is None for _, table in items):
            return [None]
        found = [table.column(name) for _, table in items if table is not None and table.column(name) is not None]
        return [found[0] if len(found) == 1 else None]
    if len(fields) != 2 or names[0] is None:
        return None if star else [None]
    tables = [table for alias, table in items if alias == names[0]]
    if len(tables) != 1 or tables[0] is None:
        return None if star else [None]
    if star:
        return list(tables[0].columns)
    return [tables[0].column(fields[1].sval)]


def keep_domains(state: State, query: PgNode, columns: tuple[Column, ...]) -> tuple[Column, ...]:
    if not isinstance(query, ast.SelectStmt) or not query.targetList:
        return columns
    ctes: dict[str, Table | None] = {}
    if query.withClause is not None:
        if query.withClause.recursive:
            return columns
        for cte in query.withClause.ctes or ():
            ctes[str(cte.ctename)] = None if cte.aliascolnames else _cte(cte.ctequery)
    if query.op not in (None, SetOperation.SETOP_NONE):
        return columns
    items: list[tuple[str, Table | None]] = []
    for node in query.fromClause or ():
        _from_items(state, node, items, ctes)
    sources: list[Column | None] = []
    for target in query.targetList:
        found = _referenced(state, target, items)
        if found is None:
            return columns
        sources.extend(found)
    if len(sources) != len(columns):
        return columns
    out = []
    for col, src in zip(columns, sources, strict=True):
        same = src is not None and src.type.domain is not None and src.type == col.type
        out.append(replace(col, type=src.type) if same and src is not None else col)
    return tuple(out)
