"""What a partition or an inheriting table takes from its parent, as PostgreSQL gives it.

- Every inheriting table (INHERITS, PARTITION OF, ATTACH PARTITION, INHERIT) gets the parent's
  CHECK constraints not marked NO INHERIT, under the parent's names (MergeAttributes; a same-named
  one of its own merges). ATTACH and INHERIT refuse a table missing one ("child table is missing
  constraint") or a parent's NOT NULL column that is nullable in it (MergeAttributesIntoExisting).
- A partition gets, in the parent's order, a partition of each of the parent's indexes
  (DefineRelation, DefineIndex recursing): on ATTACH an equal index of its own is taken when
  there is one (AttachPartitionEnsureIndexes: same keys, uniqueness, predicate, and both backing
  a constraint or neither); otherwise a new one named by ChooseIndexName from the partition's name
  and the parent index's column names (`pkey`, `key` for a UNIQUE constraint, `excl`, `idx`). A
  primary key or unique constraint comes with its index, under the index's name.
- A partition gets the parent's foreign keys under the parent's names (CloneFkReferencing), or a
  chosen name when the partition has a constraint of that name already.
- An index, primary key, unique constraint, foreign key or CHECK added to the parent later is
  added to its partitions (inheriting tables: CHECK only) the same way, unless ONLY is written.
- Dropping the parent's index or constraint drops the copies (pg_depend's partition
  dependencies); DETACH and NO INHERIT leave them, as the table's own.
"""

from __future__ import annotations

from dataclasses import replace

from ..catalog.model import Index
from .state import ConstraintInfo, State, choose_name

INDEX_KINDS = "pux"


def index_constraint(state: State, index_key: str) -> ConstraintInfo | None:
    """The primary key, unique or exclusion constraint an index backs (named as the index)."""
    index = state.indexes.get(index_key)
    if index is None:
        return None
    info = state.constraints.get(index.table, {}).get(index_key.split(".", 1)[1])
    return info if info is not None and info.kind in INDEX_KINDS else None


def index_colnames(index: Index) -> tuple[str, ...]:
    """The index's pg_attribute names (what a copy's name is chosen from)."""
    return index.colnames or tuple("expr" if c.startswith("(") else c for c in index.columns)


def unique_colnames(names: list[str]) -> tuple[str, ...]:
    """ChooseIndexColumnNames: each name made unique among the index's by a number."""
    out: list[str] = []
    for name in names:
        chosen, n = name, 0
        while chosen in out:
            n += 1
            chosen = f"{name}{n}"
        out.append(chosen)
    return tuple(out)


def partitions(state: State, key: str) -> list[str]:
    return [child for child, links in state.parents.items() if any(p == key and part for p, part in links)]


def _equal(a: Index, b: Index) -> bool:
    return (a.columns, a.unique, a.predicate, a.nulls_not_distinct) == (
        b.columns,
        b.unique,
        b.predicate,
        b.nulls_not_distinct,
    )


def clone_index(state: State, parent_index: str, child: str, attach: bool) -> None:
    """A partition of the index `parent_index` on the partition `child` (and on down)."""
    index = state.indexes[parent_index]
    info = index_constraint(state, parent_index)
    found = None
    if attach:
        taken = set(state.index_parent)
        for key, own in state.indexes.items():
            both = (index_constraint(state, key) is None) == (info is None)
            if own.table == child and key not in taken and _equal(own, index) and both:
                found = key
                break
    if found is None:
        found = copy_index(state, parent_index, child)
    state.index_parent[found] = parent_index
    _add_key(state, child, index, info)
    for grandchild in partitions(state, child):
        clone_index(state, found, grandchild, attach=True)


def copy_index(state: State, index_key: str, target: str) -> str:
    """A copy of an index on `target`, named by ChooseIndexName from the table's name and the
    index's column names; a constraint's index comes with its constraint (of the index's name)."""
    index = state.indexes[index_key]
    info = index_constraint(state, index_key)
    table = state.tables[target]
    label = {"p": "pkey", "u": "key", "x": "excl"}[info.kind] if info is not None else "idx"
    addition = "" if label == "pkey" else "_".join(index_colnames(index))
    existing = state.constraints.setdefault(target, {})
    name = choose_name(
        table.name,
        addition,
        label,
        lambda n: state.relation_exists(f"{table.schema}.{n}") or (info is not None and n in existing),
    )
    copy = f"{table.schema}.{name}"
    state.indexes[copy] = replace(index, name=copy, table=target)
    state.index_reads[copy] = set(state.index_reads.get(index_key, set(index.columns)))
    if info is not None:
        existing[name] = replace(info)
    _add_key(state, target, index, info)
    return copy


def _add_key(state: State, key: str, index: Index, info: ConstraintInfo | None) -> None:
    """A unique index's columns as a key of the table (a primary key's NOT NULL too)."""
    table = state.tables[key]
    cols = index.columns
    plain = not any(c.startswith("(") for c in cols)
    if index.unique and plain and not index.partial and cols not in table.unique_keys:
        primary = info is not None and info.kind == "p"
        state.tables[key] = replace(
            table,
            columns=tuple(replace(c, not_null=True) if primary and c.name in cols else c for c in table.columns),
            primary_key=cols if primary and not table.primary_key else table.primary_key,
            unique_keys=(*table.unique_keys, cols),
        )


def clone_constraint(state: State, parent: str, name: str, child: str) -> None:
    """The parent's CHECK or foreign key `name` on `child` (and on down)."""
    info = state.constraints[parent][name]
    existing = state.constraints.setdefault(child, {})
    if info.kind == "f":
        same = next(
            (
                n
                for n, own in existing.items()
                if own.kind == "f"
                and (own.columns, own.references, own.ref_columns) == (info.columns, info.references, info.ref_columns)
                and (child, n) not in state.constraint_parent
            ),
            None,
        )
        chosen = same or name
        if same is None and name in existing:
            table = state.tables[child]
            chosen = choose_name(table.name, "_".join(info.columns), "fkey", lambda n: n in existing)
    else:
        chosen = name  # a CHECK of the same name merges
    if chosen not in existing:
        existing[chosen] = replace(info)
    state.constraint_parent[(child, chosen)] = (parent, name)
    for grandchild in state.children(child, partitions_only=info.kind == "f"):
        clone_constraint(state, child, chosen, grandchild)


def _derived(state: State, table: str, name: str) -> bool:
    """A foreign key's constraint on a referenced partition (`referenced_partition`)."""
    return state.constraint_parent.get((table, name), ("",))[0] == table


def referenced_partition(state: State, table: str, name: str, part: str) -> None:
    """A foreign key referencing a partitioned table: PostgreSQL adds, on the referencing table, a
    constraint referencing each partition (addFkRecurseReferenced), named by
    ChooseConstraintName; it goes with the foreign key."""
    info = state.constraints[table][name]
    existing = state.constraints[table]
    chosen = choose_name(state.tables[table].name, "_".join(info.columns), "fkey", lambda n: n in existing)
    existing[chosen] = replace(info, references=part)
    state.constraint_parent[(table, chosen)] = (table, name)
    for sub in partitions(state, part):
        referenced_partition(state, table, chosen, sub)


def inherit(state: State, parent: str, child: str, partition: bool, attach: bool) -> bool:
    """What `child` takes from `parent` as it starts inheriting; False when ATTACH / INHERIT is
    refused (reported)."""
    checks = [n for n, info in state.constraints.get(parent, {}).items() if info.kind == "c" and not info.no_inherit]
    if attach:
        own = state.tables[child]
        for col in state.tables[parent].columns:
            mine = own.column(col.name)
            if mine is None:
                state.error(f"child table is missing column {col.name}")
                return False
            if col.not_null and not mine.not_null:
                state.error(f"column {col.name} in child table must be marked NOT NULL")
                return False
        have = state.constraints.get(child, {})
        for name in checks:
            if name not in have or have[name].kind != "c":
                state.error(f"child table is missing constraint {name}")
                return False
    for name in checks:
        clone_constraint(state, parent, name, child)
    if partition:
        for index_key, index in list(state.indexes.items()):
            if index.table == parent:
                clone_index(state, index_key, child, attach)
        for name, info in list(state.constraints.get(parent, {}).items()):
            if info.kind == "f" and not _derived(state, parent, name):
                clone_constraint(state, parent, name, child)
        for table, constraints in list(state.constraints.items()):
            for name, info in list(constraints.items()):
                if info.kind == "f" and info.references == parent:
                    referenced_partition(state, table, name, child)
    return True


def added_constraint(state: State, key: str, name: str) -> None:
    """A constraint added to `key` (ALTER TABLE without ONLY): onto its children as above."""
    info = state.constraints.get(key, {}).get(name)
    if info is None:
        return
    if info.kind in INDEX_KINDS:
        schema = key.split(".", 1)[0]
        index_key = f"{schema}.{name}"
        if index_key in state.indexes:
            for child in partitions(state, key):
                clone_index(state, index_key, child, attach=True)
    elif (info.kind == "c" and not info.no_inherit) or (info.kind == "f" and not _derived(state, key, name)):
        for child in state.children(key, partitions_only=info.kind == "f"):
            clone_constraint(state, key, name, child)


def dropped_index(state: State, index_key: str) -> None:
    """DROP INDEX / DROP CONSTRAINT of a parent's index: its partitions' copies go too."""
    state.index_parent.pop(index_key, None)
    for copy in [k for k, p in state.index_parent.items() if p == index_key]:
        index = state.indexes.pop(copy, None)
        state.index_reads.pop(copy, None)
        if index is not None:
            state.constraints.get(index.table, {}).pop(copy.split(".", 1)[1], None)
            table = state.tables.get(index.table)
            if table is not None and index.columns in table.unique_keys:
                keys = list(table.unique_keys)
                keys.remove(index.columns)
                primary = () if table.primary_key == index.columns else table.primary_key
                state.tables[index.table] = replace(table, unique_keys=tuple(keys), primary_key=primary)
        dropped_index(state, copy)


def dropped_constraint(state: State, key: str, name: str) -> None:
    """DROP CONSTRAINT of a parent's CHECK or foreign key: the inherited copies go too."""
    state.constraint_parent.pop((key, name), None)
    for (child, copy), origin in list(state.constraint_parent.items()):
        if origin == (key, name):
            state.constraints.get(child, {}).pop(copy, None)
            dropped_constraint(state, child, copy)


def detached(state: State, parent: str, child: str) -> None:
    """DETACH PARTITION / NO INHERIT: the copies stay, as the table's own."""
    for copy, origin in list(state.index_parent.items()):
        mine, theirs = state.indexes.get(copy), state.indexes.get(origin)
        if mine is not None and theirs is not None and mine.table == child and theirs.table == parent:
            del state.index_parent[copy]
    for (table, name), (origin, _) in list(state.constraint_parent.items()):
        if table == child and origin == parent:
            del state.constraint_parent[(table, name)]
