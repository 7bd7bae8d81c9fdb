"""DROP, RENAME and SET SCHEMA of every object kind the catalog holds, applied as PostgreSQL
applies them (dependents dropped with CASCADE, ALTERs passed down to inheritors)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pglast import ast
from pglast.enums import DropBehavior, ObjectType

from ..catalog.identifiers import did_you_mean, split_name
from ..catalog.types import PgType
from .inherit import dropped_index
from .state import PgNode, State, qualified

_RELATION_KINDS = {
    ObjectType.OBJECT_TABLE: ("table", "partitioned_table"),
    ObjectType.OBJECT_VIEW: ("view",),
    ObjectType.OBJECT_MATVIEW: ("materialized_view",),
    ObjectType.OBJECT_FOREIGN_TABLE: ("foreign_table",),
}


# -- DROP -----------------------------------------------------------------------------------
def drop(state: State, node: PgNode) -> None:
    kind = node.removeType
    cascade = node.behavior == DropBehavior.DROP_CASCADE
    for obj in node.objects or ():
        if kind in _RELATION_KINDS:
            _drop_relation(state, [s.sval for s in obj], _RELATION_KINDS[kind], bool(node.missing_ok), cascade)
        elif kind == ObjectType.OBJECT_INDEX:
            key = _dropped(state, [s.sval for s in obj], state.indexes, "index", bool(node.missing_ok))
            if key is None:
                continue
            if key in state.index_parent and state.index_parent[key] in state.indexes:
                parent = state.index_parent[key].split(".", 1)[1]
                state.error(f"cannot drop index {key.split('.', 1)[1]} because index {parent} requires it")
                continue
            index = state.indexes.pop(key)
            dropped_index(state, key)
            table = state.tables.get(index.table)
            if table is not None and index.unique and not index.partial and index.columns in table.unique_keys:
                keys = list(table.unique_keys)
                keys.remove(index.columns)
                state.tables[index.table] = replace(table, unique_keys=tuple(keys))
        elif kind == ObjectType.OBJECT_SEQUENCE:
            key = _dropped(state, [s.sval for s in obj], state.sequences, "sequence", bool(node.missing_ok))
            if key is None:
                continue
            del state.sequences[key]
        elif kind in (ObjectType.OBJECT_TYPE, ObjectType.OBJECT_DOMAIN):
            domain_only = kind == ObjectType.OBJECT_DOMAIN
            _drop_type(state, [s.sval for s in obj.names], bool(node.missing_ok), cascade, domain_only)
        elif kind in (ObjectType.OBJECT_FUNCTION, ObjectType.OBJECT_PROCEDURE, ObjectType.OBJECT_ROUTINE):
            _drop_function(state, obj, bool(node.missing_ok))
        elif kind == ObjectType.OBJECT_SCHEMA:
            _drop_schema(state, obj.sval, bool(node.missing_ok), cascade)
        elif kind == ObjectType.OBJECT_EXTENSION:
            if state.extensions.pop(obj.sval, None) is None and not node.missing_ok:
                state.error(f"extension {obj.sval} does not exist")
        elif kind in (ObjectType.OBJECT_TRIGGER, ObjectType.OBJECT_POLICY, ObjectType.OBJECT_RULE):
            parts = [s.sval for s in obj][:-1]
            if state.find_key(*split_name(parts), state.tables) is None and not node.missing_ok:
                state.error(f"relation {'.'.join(parts)} does not exist")
        # casts, operators, aggregates, roles, text search objects, ...: not in the catalog


def _dropped(state: State, parts: list[str], objects: Mapping[str, object], what: str, missing_ok: bool) -> str | None:
    """The key of the `what` (index, sequence) a DROP names; None after PostgreSQL's error when
    there is none (none under IF EXISTS)."""
    key = state.find_key(*split_name(parts), objects)
    if key is None and not missing_ok:
        state.error(f"{what} {'.'.join(parts)} does not exist")
    return key


def drop_relation(state: State, key: str, cascade: bool) -> None:
    """DROP VIEW / MATERIALIZED VIEW of a dependent relation (`schema.name`), as CASCADE does."""
    _drop_relation(state, key.split(".", 1), ("view", "materialized_view"), True, cascade)


def _drop_relation(state: State, parts: list[str], kinds: tuple[str, ...], missing_ok: bool, cascade: bool) -> None:
    key = state.find_key(*split_name(parts), state.tables, relation=True)
    if key is None:
        if not missing_ok:
            state.error(f"{kinds[0].replace('_', ' ')} {'.'.join(parts)} does not exist")
        return
    if state.tables[key].kind not in kinds:
        state.error(f"{'.'.join(parts)} is not a {kinds[0].replace('_', ' ')}")
        return
    views = sorted(v for v, deps in state.view_deps.items() if key in deps and v != key)
    foreign_keys = sorted(
        (table, name)
        for table, constraints in state.constraints.items()
        for name, info in constraints.items()
        if info.references == key and table != key
    )
    if (views or foreign_keys) and not cascade:
        dependents = [*(f"view {v}" for v in views), *(f"constraint {n} on table {t}" for t, n in foreign_keys)]
        what = state.tables[key].kind.replace("partitioned_", "").replace("_", " ")
        state.error(
            f"cannot drop {what} {key.split('.', 1)[1]} because other objects depend on it "
            f"({', '.join(dependents)}); use CASCADE"
        )
        return
    for table, name in foreign_keys:
        del state.constraints[table][name]
    for view in views:
        if view in state.tables:
            _drop_relation(state, view.split(".", 1), ("view", "materialized_view"), True, True)
    for deps in (state.view_deps, state.view_types, state.view_columns):
        deps.pop(key, None)
    del state.tables[key]
    state.types.pop(key, None)
    state.constraints.pop(key, None)
    state.generated_reads.pop(key, None)
    for ikey in [k for k, i in state.indexes.items() if i.table == key]:
        del state.indexes[ikey]
        state.index_reads.pop(ikey, None)
        state.index_parent.pop(ikey, None)
    for link in [link for link in state.constraint_parent if link[0] == key]:
        del state.constraint_parent[link]
    for skey in [k for k, s in state.sequences.items() if s.owned_by and s.owned_by[0] == key]:
        del state.sequences[skey]


def _drop_type(state: State, parts: list[str], missing_ok: bool, cascade: bool, domain_only: bool) -> None:
    key = state.type_key(*split_name(parts))
    if key is None or key in state.tables:
        if not missing_ok:
            state.error(f"type {'.'.join(parts)} does not exist")
        return
    if domain_only and key not in state.domains:
        state.error(f"{'.'.join(parts)} is not a domain")
        return
    # What PostgreSQL's dependencies hold on the type: the domains over it (transitively), and
    # the columns and composite attributes of any of those types or arrays over them (a domain
    # column's type is its base type naming the domain, so both names are looked at).
    dropped = {key}
    grew = True
    while grew:
        grew = False
        for dkey, domain in state.domains.items():
            if dkey not in dropped and (domain.base.name in dropped or domain.base.domain in dropped):
                dropped.add(dkey)
                grew = True

    def uses(t: PgType) -> bool:
        return t.name in dropped or t.domain in dropped

    relations = [tkey for tkey, t in state.tables.items() if any(uses(c.type) for c in t.columns)]
    tables = [tkey for tkey in relations if tkey not in state.view_deps]
    # A view goes with the type when a column of it has the type, its query names the type (a
    # cast), or it refers to a table column of the type.
    gone_columns = {(tkey, c.name) for tkey in tables for c in state.tables[tkey].columns if uses(c.type)}
    views = sorted(
        view
        for view, reads in state.view_deps.items()
        if view in relations
        or state.view_types.get(view, set()) & dropped
        or any(
            table in reads and ({column, "*"} & state.view_columns.get(view, set())) for table, column in gone_columns
        )
    )
    composites = [
        ckey for ckey, c in state.composites.items() if ckey not in dropped and any(uses(a) for _, a in c.attributes)
    ]
    routines = {
        rkey: [
            sig
            for sig in sigs
            if any(uses(a) for a in (*sig.arg_types, sig.return_type, *(t for _, t in sig.out_columns)))
        ]
        for rkey, sigs in state.routines.items()
    }
    routines = {rkey: sigs for rkey, sigs in routines.items() if sigs}
    dependents = [
        *(f"type {d}" for d in sorted(dropped - {key})),
        *(f"columns of {state.tables[t].qualified}" for t in tables),
        *(f"view {v}" for v in views),
        *(f"attributes of composite type {c}" for c in composites),
        *(f"function {r}" for r in sorted(routines)),
    ]
    if dependents and not cascade:
        state.error(f"cannot drop type {key} because other objects depend on it ({', '.join(dependents)}); use CASCADE")
        return
    # CASCADE: PostgreSQL drops those views, columns and attributes, and the dependent domains.
    for view in views:
        if view in state.tables:  # not gone already with a view it read
            _drop_relation(state, view.split(".", 1), ("view", "materialized_view"), True, True)
    for tkey in tables:
        table = state.tables[tkey]
        state.tables[tkey] = replace(table, columns=tuple(c for c in table.columns if not uses(c.type)))
    for ckey in composites:
        comp = state.composites[ckey]
        state.composites[ckey] = replace(comp, attributes=tuple((n, a) for n, a in comp.attributes if not uses(a)))
    for rkey, sigs in routines.items():
        state.routines[rkey] = [sig for sig in state.routines[rkey] if sig not in sigs]
    for gone in dropped:
        for objects in (state.types, state.enums, state.domains, state.composites, state.ranges):
            objects.pop(gone, None)


def _drop_function(state: State, obj: PgNode, missing_ok: bool) -> None:
    parts = [s.sval for s in obj.objname]
    key = state.find_key(*split_name(parts), state.routines)
    sigs = state.routines.get(key, []) if key else []
    if obj.args_unspecified:
        if len(sigs) > 1:
            state.error(f"function name {'.'.join(parts)} is not unique (name its argument types)")
            return
        matches = list(sigs)
    else:
        args = tuple(state.resolve_type(tn) for tn in obj.objargs or ())
        matches = [s for s in sigs if s.arg_types == args]
    if not matches:
        if not missing_ok:
            state.error(f"function {'.'.join(parts)} does not exist")
        return
    assert key is not None
    state.routines[key] = [s for s in sigs if s not in matches]


def _drop_schema(state: State, name: str, missing_ok: bool, cascade: bool) -> None:
    if name not in state.schemas:
        if not missing_ok:
            state.error(f"schema {name} does not exist")
        return
    prefix = f"{name}."
    dicts: list[dict[str, Any]] = [
        state.tables,
        state.types,
        state.enums,
        state.domains,
        state.composites,
        state.ranges,
        state.sequences,
        state.indexes,
        state.routines,
        state.constraints,
    ]
    contents = [k for d in dicts for k in d if k.startswith(prefix)]
    if contents and not cascade:
        state.error(f"cannot drop schema {name} because other objects depend on it")
        return
    for d in dicts:
        for k in [k for k in d if k.startswith(prefix)]:
            del d[k]
    state.schemas.discard(name)


# -- RENAME and SET SCHEMA ------------------------------------------------------------------
def rename(state: State, node: PgNode) -> None:
    kind = node.renameType
    if kind in (*_RELATION_KINDS, ObjectType.OBJECT_SEQUENCE, ObjectType.OBJECT_INDEX):
        _move_relation(state, node.relation, node.relation.schemaname, node.newname, bool(node.missing_ok))
    elif kind in (ObjectType.OBJECT_COLUMN, ObjectType.OBJECT_ATTRIBUTE):
        _rename_column(state, node)
    elif kind == ObjectType.OBJECT_TABCONSTRAINT:
        key = state.relation_key(node.relation)
        if key is None:
            if not node.missing_ok:
                state.missing_relation(node.relation)
            return
        info = state.constraints.get(key, {}).pop(node.subname or "", None)
        if info is not None:
            state.constraints[key][node.newname] = info
            schema = key.split(".", 1)[0]
            index = state.indexes.pop(f"{schema}.{node.subname}", None)
            if index is not None:
                state.indexes[f"{schema}.{node.newname}"] = replace(index, name=f"{schema}.{node.newname}")
    elif kind in (ObjectType.OBJECT_TYPE, ObjectType.OBJECT_DOMAIN):
        parts = [s.sval for s in node.object]
        key = state.type_key(*split_name(parts))
        if key is None:
            state.error(f"type {'.'.join(parts)} does not exist")
            return
        _move_type(state, key, f"{key.split('.', 1)[0]}.{node.newname}")
    elif kind == ObjectType.OBJECT_SCHEMA:
        _rename_schema(state, node.subname or "", node.newname)
    elif kind in (ObjectType.OBJECT_FUNCTION, ObjectType.OBJECT_PROCEDURE, ObjectType.OBJECT_ROUTINE):
        parts = [s.sval for s in node.object.objname]
        key = state.find_key(*split_name(parts), state.routines)
        if key is None:
            state.error(f"function {'.'.join(parts)} does not exist")
            return
        schema = key.split(".", 1)[0]
        moved = [replace(s, name=node.newname) for s in state.routines.pop(key)]
        state.routines.setdefault(f"{schema}.{node.newname}", []).extend(moved)


def _move_relation(state: State, rv: PgNode, schema: str | None, new_name: str, missing_ok: bool) -> None:
    """ALTER TABLE/VIEW/INDEX/SEQUENCE ... RENAME TO / SET SCHEMA."""
    for objects in (state.tables, state.indexes, state.sequences):
        key = state.find_key(rv.schemaname, rv.relname, objects)
        if key is not None:
            break
    else:
        if not missing_ok:
            state.missing_relation(rv)
        return
    new_key = f"{schema or key.split('.', 1)[0]}.{new_name}"
    if state.relation_taken(new_key, rv):  # PostgreSQL's "relation ... already exists"
        return
    if key in state.indexes:
        state.indexes[new_key] = replace(state.indexes.pop(key), name=new_key)
        state.index_reads[new_key] = state.index_reads.pop(key, set())
        return
    if key in state.sequences:
        state.sequences[new_key] = replace(state.sequences.pop(key), name=qualified(new_key))
        return
    table = state.tables.pop(key)
    new_schema, _, name = new_key.partition(".")
    state.tables[new_key] = replace(table, schema=new_schema, name=name)
    state.types.pop(key, None)
    state.types[new_key] = PgType(new_key)
    state.constraints[new_key] = state.constraints.pop(key, {})
    state.generated_reads[new_key] = state.generated_reads.pop(key, {})
    for info in (i for constraints in state.constraints.values() for i in constraints.values()):
        if info.references == key:
            info.references = new_key
    for deps_by_view in (state.view_deps, state.view_types, state.view_columns):
        if key in deps_by_view:
            deps_by_view[new_key] = deps_by_view.pop(key)
    for deps in state.view_deps.values():
        if key in deps:
            deps.discard(key)
            deps.add(new_key)

    def moved(object_key: str) -> str:
        """SET SCHEMA takes the table's indexes and owned sequences along."""
        return f"{new_schema}.{object_key.split('.', 1)[1]}"

    for ikey, index in list(state.indexes.items()):
        if index.table == key:
            del state.indexes[ikey]
            state.indexes[moved(ikey)] = replace(index, name=moved(ikey), table=new_key)
            state.index_reads[moved(ikey)] = state.index_reads.pop(ikey, set())
    for skey, seq in list(state.sequences.items()):
        if seq.owned_by and seq.owned_by[0] == key:
            del state.sequences[skey]
            state.sequences[moved(skey)] = replace(
                seq, name=qualified(moved(skey)), owned_by=(new_key, seq.owned_by[1])
            )
    state.retype(key, PgType(new_key))


def _rename_column(state: State, node: PgNode) -> None:
    old, new = node.subname or "", node.newname
    if node.relationType == ObjectType.OBJECT_TYPE:
        key = state.find_key(node.relation.schemaname, node.relation.relname, state.composites)
        if key is None:
            state.error(f"type {node.relation.relname} is not a composite type")
            return
        comp = state.composites[key]
        state.composites[key] = replace(comp, attributes=tuple((new if n == old else n, t) for n, t in comp.attributes))
        return
    key = state.relation_key(node.relation)
    if key is None:
        if not node.missing_ok:
            state.missing_relation(node.relation)
        return
    for child in state.descendants(key) if node.relation.inh else ():
        _rename_in(state, child, old, new, recursing=True)
    _rename_in(state, key, old, new)


def _rename_in(state: State, key: str, old: str, new: str, recursing: bool = False) -> None:
    """RENAME COLUMN in one table (`recursing`: an inheriting table, renamed along)."""
    table = state.tables[key]
    names = [c.name for c in table.columns]
    if recursing and old not in names:
        return
    if old not in names:
        state.error(f"column {old} does not exist in {table.qualified}{did_you_mean(old, names)}", word=old)
        return
    if new in names:
        state.error(f"column {new} of relation {table.qualified} already exists", word=new)
        return

    def swap(cols: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(new if c == old else c for c in cols)

    state.tables[key] = replace(
        table,
        columns=tuple(replace(c, name=new) if c.name == old else c for c in table.columns),
        primary_key=swap(table.primary_key),
        unique_keys=tuple(swap(u) for u in table.unique_keys),
        partition_key=(
            replace(table.partition_key, columns=tuple(new if c == old else c for c in table.partition_key.columns))
            if table.partition_key is not None
            else None
        ),
    )
    for ikey, index in list(state.indexes.items()):
        if index.table == key:
            state.indexes[ikey] = replace(index, columns=swap(index.columns))
    for info in state.constraints.get(key, {}).values():
        info.columns = swap(info.columns)
    for info in (i for constraints in state.constraints.values() for i in constraints.values()):
        if info.references == key:
            info.ref_columns = swap(info.ref_columns)
    for ikey, index in state.indexes.items():
        if index.table == key and old in state.index_reads.get(ikey, set()):
            state.index_reads[ikey] = {new if c == old else c for c in state.index_reads[ikey]}
    generated = state.generated_reads.get(key, {})
    state.generated_reads[key] = {
        new if column == old else column: {new if c == old else c for c in reads} for column, reads in generated.items()
    }


def _move_type(state: State, key: str, new_key: str) -> None:
    if new_key in state.types:
        state.error(f"type {new_key} already exists")
        return
    if key in state.enums:
        labels = state.enums.pop(key)
        state.enums[new_key] = labels
        state.types[new_key] = PgType(new_key, labels=labels)
    elif key in state.domains:
        state.domains[new_key] = replace(state.domains.pop(key), name=qualified(new_key))
        state.types[new_key] = replace(state.types[key], domain=new_key)
        for tkey, table in list(state.tables.items()):
            cols = tuple(
                replace(c, type=replace(c.type, domain=new_key)) if c.type.domain == key else c for c in table.columns
            )
            state.tables[tkey] = replace(table, columns=cols)
    elif key in state.composites:
        state.composites[new_key] = replace(state.composites.pop(key), name=qualified(new_key))
        state.types[new_key] = PgType(new_key)
    elif key in state.ranges:
        state.ranges[new_key] = replace(state.ranges.pop(key), name=qualified(new_key))
        state.types[new_key] = PgType(new_key)
    else:
        state.types[new_key] = PgType(new_key)
    del state.types[key]
    if key not in state.domains:
        state.retype(key, state.types[new_key])


def _rename_schema(state: State, old: str, new: str) -> None:
    if old not in state.schemas:
        state.error(f"schema {old} does not exist")
        return
    if new in state.schemas:
        state.error(f"schema {new} already exists")
        return
    state.schemas.discard(old)
    state.schemas.add(new)
    prefix = f"{old}."
    for key in [k for k in state.tables if k.startswith(prefix)]:
        table = state.tables[key]
        _move_relation(state, ast.RangeVar(schemaname=old, relname=table.name), new, table.name, False)
    for key in [k for k in state.types if k.startswith(prefix)]:
        _move_type(state, key, f"{new}.{key[len(prefix) :]}")
    movable: tuple[dict[str, Any], ...] = (state.indexes, state.sequences, state.routines)
    for objects in movable:
        for key in [k for k in objects if k.startswith(prefix)]:
            objects[f"{new}.{key[len(prefix) :]}"] = objects.pop(key)


def set_schema(state: State, node: PgNode) -> None:
    kind = node.objectType
    if node.missing_ok and kind in (*_RELATION_KINDS, ObjectType.OBJECT_SEQUENCE):
        rv = node.relation
        if state.find_key(rv.schemaname, rv.relname, [*state.tables, *state.sequences], relation=True) is None:
            return  # IF EXISTS: PostgreSQL looks for the relation before the schema
    if node.newschema not in state.schemas:
        state.error(f"schema {node.newschema} does not exist")
        return
    if kind in (*_RELATION_KINDS, ObjectType.OBJECT_SEQUENCE):
        _move_relation(state, node.relation, node.newschema, node.relation.relname, bool(node.missing_ok))
    elif kind in (ObjectType.OBJECT_TYPE, ObjectType.OBJECT_DOMAIN):
        parts = [s.sval for s in node.object]
        key = state.type_key(*split_name(parts))
        if key is None:
            if not node.missing_ok:
                state.error(f"type {'.'.join(parts)} does not exist")
            return
        _move_type(state, key, f"{node.newschema}.{parts[-1]}")
