"""CREATE INDEX, applied as PostgreSQL applies it: the columns and expressions it reads must
exist, its name is the one PostgreSQL chooses (ChooseIndexName), a unique index on plain columns
is a key ON CONFLICT may name."""

from __future__ import annotations

from dataclasses import replace

from pglast.stream import RawStream

from ..catalog.model import Index
from ..syntax.colnames import figure_index_colname
from .depend import column_refs
from .partitions import unique_includes_key
from .state import PgNode, State, choose_name, suggest


def deparse(node: PgNode) -> str:
    """An expression as SQL text (an index key, a predicate, a CHECK)."""
    return str(RawStream()(node))


def create_index(state: State, node: PgNode) -> None:
    rv = node.relation
    key = state.relation_key(rv)
    if key is None:
        state.missing_relation(rv)
        return
    table = state.tables[key]
    names = [c.name for c in table.columns]
    cols: list[str] = []
    naming: list[str] = []  # ChooseIndexColumnNames: a column's name, an expression's FigureIndexColname
    plain = True
    for elem in node.indexParams or ():
        naming.append(elem.indexcolname or elem.name or figure_index_colname(elem.expr) or "expr")
        if elem.name:
            if elem.name not in names:
                state.error(
                    f"column {elem.name} does not exist in {table.qualified}{suggest(elem.name, names)}", word=elem.name
                )
                return
            cols.append(elem.name)
        else:
            plain = False
            for ref in column_refs(elem.expr):
                if ref not in names:
                    state.error(f"column {ref} does not exist in {table.qualified}{suggest(ref, names)}", word=ref)
                    return
            cols.append(f"({deparse(elem.expr)})")
    name = node.idxname or choose_name(
        table.name,
        "_".join(naming),
        "idx",
        lambda n: state.relation_exists(f"{table.schema}.{n}"),
    )
    index_key = f"{table.schema}.{name}"
    if state.relation_exists(index_key):
        if not node.if_not_exists:
            state.error(f"relation {index_key} already exists", rv.location)
        return
    predicate = deparse(node.whereClause) if node.whereClause is not None else None
    for ref in column_refs(node.whereClause):
        if ref not in names:
            state.error(f"column {ref} does not exist in {table.qualified} (index predicate)", word=ref)
            return
    if node.unique and not unique_includes_key(state, table, tuple(cols), False, rv.location):
        return
    state.indexes[index_key] = Index(
        index_key, key, tuple(cols), bool(node.unique), predicate is not None, predicate, bool(node.nulls_not_distinct)
    )
    reads = [e.name or ref for e in node.indexParams or () for ref in ([e.name] if e.name else column_refs(e.expr))]
    state.index_reads[index_key] = {*reads, *(e.name for e in node.indexIncludingParams or () if e.name)}
    state.index_reads[index_key] |= set(column_refs(node.whereClause))
    if node.unique and predicate is None and plain:
        state.tables[key] = replace(table, unique_keys=(*table.unique_keys, tuple(cols)))
