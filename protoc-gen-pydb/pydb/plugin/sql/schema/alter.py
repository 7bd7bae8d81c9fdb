"""ALTER TABLE (and ALTER TYPE of a composite), applied as PostgreSQL applies it: columns, constraints,
identity, partitions attached and detached, INHERIT, OF, renames done elsewhere (`rename.py`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pglast.enums import AlterTableType, ConstrType, DropBehavior, ObjectType

from ..catalog.identifiers import did_you_mean
from .depend import alter_type_allowed, drop_column, drop_constraint, null_default
from .exprcheck import check_functions
from .inherit import added_constraint, detached, inherit
from .partitions import partition_bound
from .state import PgNode, State
from .tables import add_constraint, column_def, identity_sequence


# -- ALTER TABLE ----------------------------------------------------------------------------
def alter_table(state: State, node: PgNode) -> None:
    if node.objtype == ObjectType.OBJECT_TYPE:
        _alter_composite(state, node)
        return
    if node.objtype in (ObjectType.OBJECT_INDEX, ObjectType.OBJECT_SEQUENCE):
        return  # owners, storage, ATTACH PARTITION of an index: no change to what queries see
    rv = node.relation
    key = state.relation_key(rv)
    if key is None:
        if state.find_key(rv.schemaname, rv.relname, [*state.sequences, *state.indexes]) is not None:
            return  # ALTER TABLE on a sequence or index (pg_dump's OWNER TO): no change to the tables
        if not node.missing_ok:
            state.missing_relation(rv)
        return
    for cmd in node.cmds or ():
        con = cmd.def_ if cmd.subtype == AlterTableType.AT_AddConstraint else None
        check = con is not None and con.contype == ConstrType.CONSTR_CHECK and not con.is_no_inherit
        if check and not rv.inh and state.children(key):
            state.error("constraint must be added to child tables too", cmd.def_.location)
            continue
        before = set(state.constraints.get(key, {}))
        _alter_cmd(state, key, cmd)
        if rv.inh and cmd.subtype in _RECURSING:
            for child in state.descendants(key):
                _alter_cmd(state, child, cmd, recursing=True)
        if rv.inh and cmd.subtype in _ADDING:  # a new column's constraints reach the children as any added
            for name in [n for n in state.constraints.get(key, {}) if n not in before]:
                added_constraint(state, key, name)


_ADDING = (AlterTableType.AT_AddConstraint, AlterTableType.AT_AddIndexConstraint, AlterTableType.AT_AddColumn)
#: ALTER TABLE actions PostgreSQL applies to inheriting tables and partitions too (without ONLY).
_RECURSING = frozenset(
    {
        AlterTableType.AT_AddColumn,
        AlterTableType.AT_DropColumn,
        AlterTableType.AT_AlterColumnType,
        AlterTableType.AT_SetNotNull,
        AlterTableType.AT_DropNotNull,
        AlterTableType.AT_ColumnDefault,
    }
)


def _alter_cmd(state: State, key: str, cmd: PgNode, recursing: bool = False) -> None:
    """One ALTER TABLE action on `key`; `recursing`: on an inheriting table, where a column
    already added or already gone is PostgreSQL's merge, not an error."""
    table = state.tables[key]
    sub = cmd.subtype
    columns = list(table.columns)
    idx = next((i for i, c in enumerate(columns) if c.name == cmd.name), None) if cmd.name else None
    needs_column = sub in (
        AlterTableType.AT_ColumnDefault,
        AlterTableType.AT_DropNotNull,
        AlterTableType.AT_SetNotNull,
        AlterTableType.AT_AlterColumnType,
        AlterTableType.AT_AddIdentity,
        AlterTableType.AT_SetIdentity,
        AlterTableType.AT_DropIdentity,
        AlterTableType.AT_DropExpression,
        AlterTableType.AT_SetExpression,
    )
    if needs_column and idx is None:
        if recursing:
            return
        state.error(
            f"column {cmd.name} of relation {table.qualified} does not exist{did_you_mean(cmd.name or '', [c.name for c in columns])}",
            word=cmd.name,
        )
        return
    if sub == AlterTableType.AT_AddColumn:
        cd = cmd.def_
        if any(c.name == cd.colname for c in columns):
            if not cmd.missing_ok and not recursing:
                state.error(
                    f"column {cd.colname} of relation {table.qualified} already exists", cd.location, len(cd.colname)
                )
            return
        col, constraints = column_def(state, cd, key)
        state.tables[key] = replace(table, columns=(*columns, col))
        for con, cols in constraints if not recursing else ():  # an inheriting table's come from the parent's
            add_constraint(state, key, con, cols)
    elif sub == AlterTableType.AT_DropColumn:
        if idx is None:
            if not cmd.missing_ok and not recursing:
                state.error(f"column {cmd.name} of relation {table.qualified} does not exist", word=cmd.name)
            return
        if table.partition_key is not None and cmd.name in table.partition_key.columns:
            state.error(
                f"cannot drop column {cmd.name} because it is part of the partition key of relation {table.name}",
                word=cmd.name,
            )
            return
        drop_column(state, key, columns[idx].name, cmd.behavior == DropBehavior.DROP_CASCADE)
    elif sub == AlterTableType.AT_ColumnDefault and idx is not None:
        if not check_functions(state, cmd.def_):
            return
        columns[idx] = replace(columns[idx], has_default=cmd.def_ is not None and not null_default(cmd.def_))
    elif sub == AlterTableType.AT_DropNotNull and idx is not None:
        if columns[idx].name in table.primary_key:
            state.error(f"column {cmd.name} is in a primary key (DROP NOT NULL)")
            return
        columns[idx] = replace(columns[idx], not_null=False)
    elif sub == AlterTableType.AT_SetNotNull and idx is not None:
        columns[idx] = replace(columns[idx], not_null=True)
    elif sub == AlterTableType.AT_AlterColumnType and idx is not None:
        if not alter_type_allowed(state, key, columns[idx].name):
            return
        columns[idx] = replace(columns[idx], type=state.resolve_type(cmd.def_.typeName, f"column {cmd.name}"))
    elif sub == AlterTableType.AT_AddIdentity and idx is not None:
        columns[idx] = replace(
            columns[idx], has_default=True, not_null=True, identity_always=cmd.def_.generated_when == "a"
        )
        identity_sequence(state, key, columns[idx], cmd.def_)
    elif sub == AlterTableType.AT_DropIdentity and idx is not None:
        state.identities.discard((key, columns[idx].name))
        columns[idx] = replace(columns[idx], has_default=False, identity_always=False)
    elif sub == AlterTableType.AT_DropExpression and idx is not None:
        columns[idx] = replace(columns[idx], generated=False, has_default=False)
    elif sub == AlterTableType.AT_AddConstraint or sub == AlterTableType.AT_AddIndexConstraint:
        add_constraint(state, key, cmd.def_)
        return
    elif sub == AlterTableType.AT_DropConstraint:
        drop_constraint(state, key, cmd.name or "", bool(cmd.missing_ok))
        return
    elif sub in (AlterTableType.AT_AttachPartition, AlterTableType.AT_DetachPartition):
        _link(state, key, cmd.def_.name, sub == AlterTableType.AT_AttachPartition, partition=True, bound=cmd.def_.bound)
        return
    elif sub in (AlterTableType.AT_AddInherit, AlterTableType.AT_DropInherit):
        parent_key = state.relation_key(cmd.def_)
        if parent_key is None:
            state.missing_relation(cmd.def_)
        else:
            _link(state, parent_key, None, sub == AlterTableType.AT_AddInherit, partition=False, child=key)
        return
    else:
        return  # owners, storage, statistics, triggers, RLS, options: no change to the shape
    if needs_column:
        state.tables[key] = replace(table, columns=tuple(columns))


def _link(
    state: State,
    parent: str,
    child_rv: PgNode,
    attach: bool,
    partition: bool,
    child: str | None = None,
    bound: PgNode = None,
) -> None:
    """ATTACH/DETACH PARTITION (with the partition's `bound`), INHERIT/NO INHERIT: the
    inheritance later ALTERs recurse along."""
    if child is None:
        child = state.relation_key(child_rv)
        if child is None:
            state.missing_relation(child_rv)
            return
    links = state.parents.setdefault(child, [])
    if attach:
        if not inherit(state, parent, child, partition, attach=True):
            return
        links.append((parent, partition))
        if partition:  # the partition gets the partitioned table's keys (its index partitions)
            table = state.tables[child]
            checked = partition_bound(state, state.tables[parent], bound, child) if bound is not None else None
            state.tables[child] = replace(
                table, unique_keys=(*table.unique_keys, *state.tables[parent].unique_keys), partition_bound=checked
            )
    else:
        detached(state, parent, child)
        state.parents[child] = [link for link in links if link[0] != parent]
        if partition:
            state.tables[child] = replace(state.tables[child], partition_bound=None)


def _alter_composite(state: State, node: PgNode) -> None:
    rv = node.relation
    key = state.find_key(rv.schemaname, rv.relname, state.composites)
    if key is None:
        state.error(f"type {rv.relname} is not a composite type", rv.location)
        return
    comp = state.composites[key]
    attrs = list(comp.attributes)
    for cmd in node.cmds or ():
        if cmd.subtype == AlterTableType.AT_AddColumn:
            attrs.append((cmd.def_.colname, state.resolve_type(cmd.def_.typeName, f"attribute {cmd.def_.colname}")))
        elif cmd.subtype == AlterTableType.AT_DropColumn:
            attrs = [(n, t) for n, t in attrs if n != cmd.name]
        elif cmd.subtype == AlterTableType.AT_AlterColumnType:
            new = state.resolve_type(cmd.def_.typeName, f"attribute {cmd.name}")
            attrs = [(n, new if n == cmd.name else t) for n, t in attrs]
    state.composites[key] = replace(comp, attributes=tuple(attrs))


HANDLERS: dict[str, Callable[[State, PgNode], None]] = {
    "AlterTableStmt": alter_table,
}
