"""What depends on a column, as PostgreSQL's pg_depend records it, and what DROP COLUMN and
ALTER COLUMN ... TYPE do with those dependents.

PostgreSQL's two kinds of dependency on a column, and what DROP COLUMN does with each:

- automatic (deptype 'a'): the table's own constraints and indexes whose keys, expressions or
  predicate read the column, and a sequence OWNED BY it: they go with the column, even without
  CASCADE (a two-column UNIQUE goes whole);
- normal (deptype 'n'): a view reading the column (or `*` of its table), a generated column
  computed from it, another table's foreign key referencing it: RESTRICT (the default) refuses
  with "cannot drop column c of table t because other objects depend on it"; CASCADE drops them
  (the view, the generated column, the foreign key constraint; never the other table).
"""

from __future__ import annotations

from dataclasses import replace

from pglast import ast

from . import inherit
from .rename import drop_relation
from .state import PgNode, State


def column_refs(node: PgNode) -> list[str]:
    """The column names an expression reads (an index key or predicate, a CHECK, a generated
    column), in order of first appearance."""
    if node is None:
        return []
    out: list[str] = []

    def visit(value: object) -> None:
        if isinstance(value, ast.ColumnRef):
            last: PgNode = value.fields[-1] if value.fields else None
            if isinstance(last, ast.String) and str(last.sval) not in out:
                out.append(str(last.sval))
        elif isinstance(value, ast.Node):
            for attr in value:
                visit(getattr(value, attr))
        elif isinstance(value, tuple):
            for item in value:
                visit(item)

    visit(node)
    return out


def null_default(node: PgNode) -> bool:
    """`DEFAULT NULL` (or `NULL::type`): PostgreSQL stores no default for it (StoreAttrDefault
    skips a null constant), so the column has none."""
    while isinstance(node, ast.TypeCast):
        node = node.arg
    return isinstance(node, ast.A_Const) and bool(node.isnull)


def _views_reading(state: State, key: str, column: str) -> list[str]:
    """The views that certainly read the column: the catalog records the column names a view's
    query names, not which table each comes from, so a name counts when no other relation the
    view reads has a column of that name, and `*` when the view reads this table alone. (A
    dependency the catalog cannot be sure of is not enforced: refusing a schema PostgreSQL
    applies is the worse mistake.)"""
    out = []
    for view, reads in state.view_deps.items():
        if key not in reads or view == key:
            continue
        names = state.view_columns.get(view, set())
        others = [state.tables[r] for r in reads if r != key and r in state.tables]
        if (column in names and not any(t.column(column) is not None for t in others)) or (
            "*" in names and not others and len(reads) == 1
        ):
            out.append(view)
    return sorted(out)


def _normal_dependents(state: State, key: str, column: str) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    """(views, generated columns of the table, (table, constraint) foreign keys of other tables)."""
    generated = sorted(c for c, reads in state.generated_reads.get(key, {}).items() if column in reads and c != column)
    foreign_keys = sorted(
        (table, name)
        for table, constraints in state.constraints.items()
        if table != key
        for name, info in constraints.items()
        if info.kind == "f" and info.references == key and column in info.ref_columns
    )
    return _views_reading(state, key, column), generated, foreign_keys


def drop_column(state: State, key: str, column: str, cascade: bool) -> bool:
    """ALTER TABLE key DROP COLUMN column [CASCADE]; False when refused (reported)."""
    table = state.tables[key]
    views, generated, foreign_keys = _normal_dependents(state, key, column)
    if (views or generated or foreign_keys) and not cascade:
        dependents = [
            *(f"view {v}" for v in views),
            *(f"column {g} of table {table.name}" for g in generated),
            *(f"constraint {n} on table {t.split('.', 1)[1]}" for t, n in foreign_keys),
        ]
        state.error(
            f"cannot drop column {column} of table {table.name} because other objects depend on it "
            f"({', '.join(dependents)}); use CASCADE",
            word=column,
        )
        return False
    for view in views:
        if view in state.tables:  # not gone already with a view it read
            drop_relation(state, view, cascade=True)
    for other, name in foreign_keys:
        drop_constraint(state, other, name, missing_ok=True, recursing=True)
    for gone in generated:
        if state.tables[key].column(gone) is not None:
            drop_column(state, key, gone, cascade=True)
    for name, info in list(state.constraints.get(key, {}).items()):
        if column in info.columns or (info.references == key and column in info.ref_columns):
            drop_constraint(state, key, name, missing_ok=True, recursing=True)
    for ikey, index in list(state.indexes.items()):
        if index.table == key and column in (state.index_reads.get(ikey) or set(index.columns)):
            del state.indexes[ikey]
            state.index_reads.pop(ikey, None)
    for skey, seq in list(state.sequences.items()):
        if seq.owned_by == (key, column):
            del state.sequences[skey]
    state.generated_reads.get(key, {}).pop(column, None)
    table = state.tables[key]
    state.tables[key] = replace(
        table,
        columns=tuple(c for c in table.columns if c.name != column),
        primary_key=() if column in table.primary_key else table.primary_key,
        unique_keys=tuple(u for u in table.unique_keys if column not in u),
    )
    return True


def alter_type_allowed(state: State, key: str, column: str) -> bool:
    """ALTER COLUMN ... TYPE: PostgreSQL refuses it while a view or a generated column reads
    the column (it cannot rewrite them); indexes and constraints are rebuilt."""
    if _views_reading(state, key, column):
        state.error("cannot alter type of a column used by a view or rule", word=column)
        return False
    generated = [c for c, reads in state.generated_reads.get(key, {}).items() if column in reads and c != column]
    if generated:
        state.error("cannot alter type of a column used by a generated column", word=column)
        return False
    return True


def drop_constraint(state: State, key: str, name: str, missing_ok: bool, recursing: bool = False) -> None:
    table = state.tables[key]
    inherited = (key, name) in state.constraint_parent or f"{table.schema}.{name}" in state.index_parent
    if inherited and not recursing and name in state.constraints.get(key, {}):
        state.error(f"cannot drop inherited constraint {name} of relation {table.name}")
        return
    info = state.constraints.get(key, {}).pop(name, None)
    if info is None:
        if not missing_ok:
            # Implicit constraint names follow PostgreSQL's rules closely, not perfectly
            # (truncation of multibyte names): a miss is a warning, not a refused schema.
            state.warning(f"constraint {name} of relation {table.qualified} is not in the catalog (DROP CONSTRAINT)")
        return
    if info.kind in "pux":
        state.indexes.pop(f"{table.schema}.{name}", None)
        inherit.dropped_index(state, f"{table.schema}.{name}")
    else:
        inherit.dropped_constraint(state, key, name)
    if info.kind == "p":
        table = replace(table, primary_key=())
    if info.kind in ("p", "u"):
        keys = list(table.unique_keys)
        if info.columns in keys:
            keys.remove(info.columns)
        table = replace(table, unique_keys=tuple(keys))
    state.tables[key] = table


# -- CREATE INDEX ---------------------------------------------------------------------------
