"""CREATE TABLE (partitions, INHERITS, LIKE, OF type, generated and identity columns),
constraints and CREATE INDEX, applied as PostgreSQL applies them (ALTER TABLE: `alter.py`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pglast import ast
from pglast.enums import ConstrType, TableLikeOption
from pglast.stream import RawStream

from ..catalog.identifiers import did_you_mean, split_name
from ..catalog.model import Column, Index, PartitionBound, PartitionKey, RelationKind, Sequence, Table
from ..catalog.types import PgType
from ..syntax.colnames import figure_index_colname
from ..syntax.pgtree import nodes_of
from .depend import column_refs, null_default
from .exprcheck import check_functions
from .inherit import clone_index, copy_index, inherit, partitions, referenced_partition, unique_colnames
from .partitions import inherited_keys_include_key, partition_bound, partition_key, unique_includes_key
from .state import SERIALS, ConstraintInfo, PgNode, State, choose_name, qualified, strings

_LIKE = {m.name: int(m.value) for m in TableLikeOption}


def deparse(node: PgNode) -> str:
    return str(RawStream()(node))


# -- columns --------------------------------------------------------------------------------
ColumnConstraint = tuple[PgNode, tuple[str, ...] | None]


def column_def(state: State, cd: PgNode, table_key: str) -> tuple[Column, list[ColumnConstraint]]:
    """A column and the constraints declared on it (PRIMARY KEY, UNIQUE, REFERENCES, CHECK),
    returned as table constraints on that one column."""
    tn = cd.typeName
    names = [s.sval for s in tn.names] if tn is not None else []
    serial = SERIALS.get(names[0]) if len(names) == 1 and tn is not None and not tn.arrayBounds else None
    not_null = bool(cd.is_not_null)
    has_default = False
    domain: bool | None = None
    if serial is not None:
        pgtype = PgType(serial)
        not_null = has_default = True
        schema, table = table_key.split(".", 1)
        seq = choose_name(table, cd.colname, "seq", lambda n: state.relation_exists(f"{schema}.{n}"))
        state.sequences[f"{schema}.{seq}"] = Sequence(qualified(f"{schema}.{seq}"), pgtype, (table_key, cd.colname))
    elif tn is not None:
        pgtype = state.resolve_type(tn, f"column {cd.colname}")
        domain = _domain_of(state, names)
        not_null = not_null or (domain is not None and domain)
    else:
        pgtype = PgType("unknown")
    generated = identity_always = False
    identity: PgNode = None
    table_constraints: list[ColumnConstraint] = []
    for con in cd.constraints or ():
        kind = con.contype
        if kind == ConstrType.CONSTR_NOTNULL:
            not_null = True
        elif kind == ConstrType.CONSTR_NULL:
            not_null = False
        elif kind == ConstrType.CONSTR_DEFAULT:
            # A NULL coerced by a typmod (varchar(36)), bpchar's length or a domain is an
            # expression PostgreSQL stores; a bare NULL of the column's type is not.
            coerced = tn is not None and (bool(tn.typmods) or names[-1] in ("bpchar", "char") or domain is not None)
            has_default = coerced or not null_default(con.raw_expr)
            check_functions(state, con.raw_expr)
        elif kind == ConstrType.CONSTR_IDENTITY:
            has_default = not_null = True
            identity_always = con.generated_when == "a"
            identity = con
        elif kind == ConstrType.CONSTR_GENERATED:
            has_default = generated = True
            check_functions(state, con.raw_expr)
            state.generated_reads.setdefault(table_key, {})[cd.colname] = set(column_refs(con.raw_expr))
        elif kind in (ConstrType.CONSTR_PRIMARY, ConstrType.CONSTR_UNIQUE, ConstrType.CONSTR_FOREIGN):
            if kind == ConstrType.CONSTR_PRIMARY:
                not_null = True
            table_constraints.append((con, (cd.colname,)))
        elif kind == ConstrType.CONSTR_CHECK:
            table_constraints.append((con, None))  # named, like a table CHECK, after what it reads
    column = Column(cd.colname, pgtype, not_null, has_default, generated, identity_always)
    if identity is not None:
        identity_sequence(state, table_key, column, identity)
    return column, table_constraints


def _domain_of(state: State, names: list[str]) -> bool | None:
    """Whether the named type is a domain with NOT NULL (None: not a domain)."""
    schema, name = split_name(names)
    key = state.find_key(schema, name, state.domains)
    return state.domains[key].not_null if key else None


def _merge(state: State, columns: list[Column], col: Column, location: int | None, inherited: bool) -> None:
    """Add a column; a same-named inherited one merges if the types agree (PostgreSQL's
    "merging column with inherited definition"), else it is PostgreSQL's type conflict."""
    for i, old in enumerate(columns):
        if old.name != col.name:
            continue
        if old.type != col.type:
            state.error(
                f"column {col.name} has a type conflict: {old.type} versus {col.type} "
                f"({'between inherited definitions' if inherited else 'with its inherited definition'})",
                location,
                len(col.name),
            )
            return
        columns[i] = replace(
            old,
            not_null=old.not_null or col.not_null,
            has_default=old.has_default or col.has_default,
            generated=old.generated or col.generated,
        )
        return
    columns.append(col)


def identity_sequence(state: State, key: str, col: Column, con: PgNode) -> None:
    schema, table = key.split(".", 1)
    seq_key = None
    for opt in (con.options if con is not None else None) or ():
        if opt.defname == "sequence_name":
            seq_schema, seq_name = split_name(strings(opt.arg))
            seq_key = f"{seq_schema or schema}.{seq_name}"
    if seq_key is None:
        seq_key = f"{schema}.{choose_name(table, col.name, 'seq', lambda n: state.relation_exists(f'{schema}.{n}'))}"
    state.sequences[seq_key] = Sequence(qualified(seq_key), col.type, (key, col.name))
    state.identities.add((key, col.name))


# -- CREATE TABLE ---------------------------------------------------------------------------
def create_table(state: State, node: PgNode) -> None:
    rv = node.relation
    created = state.new_relation(rv, node.if_not_exists, types_too=True)
    if created is None:
        return
    schema, key = created
    kind: RelationKind = "partitioned_table" if node.partspec is not None else "table"
    if isinstance(node, ast.CreateForeignTableStmt):
        kind = "foreign_table"
    columns: list[Column] = []
    constraints: list[tuple[PgNode, tuple[str, ...] | None]] = []
    inherited_keys: tuple[tuple[str, ...], ...] = ()
    primary: tuple[str, ...] = ()
    likes: list[tuple[str, int]] = []
    for parent_rv in node.inhRelations or ():
        parent_key = state.relation_key(parent_rv)
        if parent_key is None:
            state.missing_relation(parent_rv)
            continue
        state.parents.setdefault(key, []).append((parent_key, node.partbound is not None))
        parent = state.tables[parent_key]
        if node.partbound is not None:
            if parent.kind != "partitioned_table":
                state.error(f"{parent_key} is not partitioned (PARTITION OF)", parent_rv.location)
            primary, inherited_keys = parent.primary_key, parent.unique_keys
        for col in parent.columns:
            _merge(
                state,
                columns,
                col,
                parent_rv.location,
                True,
            )
    if node.ofTypename is not None:
        comp_names = [s.sval for s in node.ofTypename.names]
        comp_key = state.find_key(*split_name(comp_names), state.composites)
        if comp_key is None:
            state.error(f"type {'.'.join(comp_names)} is not a composite type (OF)", node.ofTypename.location)
        else:
            columns.extend(Column(n, t, False, False) for n, t in state.composites[comp_key].attributes)
    for elt in node.tableElts or ():
        if isinstance(elt, ast.ColumnDef):
            if node.partbound is not None or node.ofTypename is not None:
                # PARTITION OF / OF type: `col WITH OPTIONS NOT NULL DEFAULT ...` only.
                _column_options(state, columns, elt, constraints)
                continue
            col, col_constraints = column_def(state, elt, key)
            if any(c.name == col.name for c in columns) and not node.inhRelations:
                state.error(f"column {col.name} specified more than once", elt.location, len(col.name))
                continue
            _merge(state, columns, col, elt.location, False)
            constraints.extend(col_constraints)
        elif isinstance(elt, ast.Constraint):
            constraints.append((elt, None))
        elif isinstance(elt, ast.TableLikeClause):
            like = _like(state, elt, columns, bool(node.inhRelations))
            if like is not None:
                likes.append(like)
    constraints.extend((con, None) for con in node.constraints or ())
    pkey: PartitionKey | None = None
    if node.partspec is not None:
        pkey = partition_key(state, tuple(columns), node.partspec)
    bound: PartitionBound | None = None
    parent_keys = [p for p, part in state.parents.get(key, []) if part]
    if node.partbound is not None and parent_keys:
        bound = partition_bound(state, state.tables[parent_keys[0]], node.partbound, key)
    state.tables[key] = Table(schema, rv.relname, tuple(columns), primary, inherited_keys, kind, pkey, bound)
    if pkey is not None and parent_keys:
        inherited_keys_include_key(state, state.tables[key], parent_keys[0], node.partspec.location)
    state.types[key] = PgType(key)
    state.constraints[key] = {}
    for parent_key, part in state.parents.get(key, []):
        inherit(state, parent_key, key, part, attach=False)
    for con, cols in constraints:
        add_constraint(state, key, con, cols)
    for source_key, opts in likes:
        _like_copies(state, source_key, key, opts)


def _column_options(
    state: State,
    columns: list[Column],
    cd: PgNode,
    constraints: list[tuple[PgNode, tuple[str, ...] | None]],
) -> None:
    idx = next((i for i, c in enumerate(columns) if c.name == cd.colname), None)
    if idx is None:
        state.error(f"column {cd.colname} does not exist", cd.location, len(cd.colname))
        return
    for con in cd.constraints or ():
        if con.contype == ConstrType.CONSTR_NOTNULL:
            columns[idx] = replace(columns[idx], not_null=True)
        elif con.contype == ConstrType.CONSTR_DEFAULT:
            columns[idx] = replace(columns[idx], has_default=True)
        elif con.contype in (ConstrType.CONSTR_PRIMARY, ConstrType.CONSTR_UNIQUE):
            constraints.append((con, (cd.colname,)))


def _like(state: State, like: PgNode, columns: list[Column], inherits: bool) -> tuple[str, int] | None:
    """LIKE source [INCLUDING ...]: its columns, NOT NULL always; defaults, identity and generation
    expressions when included (transformTableLikeClause). Returns what is copied once the table
    exists (expandTableLikeClause): the source and the options."""
    source_key = state.relation_key(like.relation)
    if source_key is None:
        state.missing_relation(like.relation)
        return None
    source = state.tables[source_key]
    opts = int(like.options or 0)
    for col in source.columns:
        identity = (source_key, col.name) in state.identities
        if identity:
            keep = bool(opts & _LIKE["CREATE_TABLE_LIKE_IDENTITY"])
        elif col.generated:
            keep = bool(opts & _LIKE["CREATE_TABLE_LIKE_GENERATED"])
        else:
            keep = bool(opts & _LIKE["CREATE_TABLE_LIKE_DEFAULTS"])
        copied = replace(
            col,
            has_default=keep and col.has_default,
            generated=col.generated and keep,
            identity_always=col.identity_always and keep,
        )
        if any(c.name == col.name for c in columns) and not inherits:
            # PostgreSQL refuses the table; the catalog keeps it (the first column of that name),
            # so that statements using it are still checked, as for a column written twice.
            state.error(f"column {col.name} specified more than once", like.relation.location)
            continue
        _merge(state, columns, copied, like.relation.location, True)
    return source_key, opts


def _like_copies(state: State, source_key: str, key: str, opts: int) -> None:
    """INCLUDING IDENTITY: a sequence of the table's own; INCLUDING CONSTRAINTS: the CHECKs under
    their names; INCLUDING INDEXES: each index (and the constraint it backs), named from the new
    table as PostgreSQL names them (never foreign keys)."""
    table = state.tables[key]
    if opts & _LIKE["CREATE_TABLE_LIKE_IDENTITY"]:
        for col in table.columns:
            if (source_key, col.name) in state.identities:
                identity_sequence(state, key, col, None)
    existing = state.constraints.setdefault(key, {})
    if opts & _LIKE["CREATE_TABLE_LIKE_CONSTRAINTS"]:
        for name, info in list(state.constraints.get(source_key, {}).items()):
            if info.kind == "c" and name not in existing:
                existing[name] = replace(info)
    if opts & _LIKE["CREATE_TABLE_LIKE_INDEXES"]:
        for index_key, index in list(state.indexes.items()):
            if index.table == source_key:
                copy_index(state, index_key, key)


# -- constraints ----------------------------------------------------------------------------
def constraint_keys(con: PgNode) -> tuple[str, ...]:
    if con.contype == ConstrType.CONSTR_EXCLUSION:
        out = []
        for pair in con.exclusions or ():
            elem = pair[0] if isinstance(pair, tuple) else pair
            if isinstance(elem, ast.IndexElem) and elem.name:
                out.append(elem.name)
        return tuple(out)
    return tuple(s.sval for s in con.keys or ())


def add_constraint(state: State, key: str, con: PgNode, on_columns: tuple[str, ...] | None = None) -> None:
    """A table constraint, or (`on_columns`) one declared on a column."""
    table = state.tables[key]
    names = [c.name for c in table.columns]
    kind = con.contype
    if on_columns is not None:
        cols = on_columns
    elif kind == ConstrType.CONSTR_CHECK:
        cols = tuple(column_refs(con.raw_expr))
        if not check_functions(state, con.raw_expr):
            return
    else:
        cols = tuple(s.sval for s in con.fk_attrs or ()) if kind == ConstrType.CONSTR_FOREIGN else constraint_keys(con)
    if kind == ConstrType.CONSTR_CHECK and con.is_no_inherit and table.kind == "partitioned_table":
        state.error(f"cannot add NO INHERIT constraint to partitioned table {table.name}", con.location)
        return
    if kind == ConstrType.CONSTR_EXCLUSION and table.kind == "partitioned_table":
        state.error("exclusion constraints are not supported on partitioned tables", con.location)
        return
    if kind in (ConstrType.CONSTR_PRIMARY, ConstrType.CONSTR_UNIQUE) and con.indexname:
        index_key = f"{table.schema}.{con.indexname}"
        index = state.indexes.get(index_key)
        if index is None:
            state.error(f"index {con.indexname} does not exist (USING INDEX)", con.location)
            return
        cols = index.columns
    for col in cols if kind != ConstrType.CONSTR_CHECK else ():
        if col not in names:
            state.error(
                f"column {col} named in key does not exist in {table.qualified}{did_you_mean(col, names)}",
                word=col,
            )
            return
    if kind in (ConstrType.CONSTR_PRIMARY, ConstrType.CONSTR_UNIQUE) and not unique_includes_key(
        state, table, cols, kind == ConstrType.CONSTR_PRIMARY, con.location
    ):
        return
    label = {
        ConstrType.CONSTR_PRIMARY: "pkey",
        ConstrType.CONSTR_UNIQUE: "key",
        ConstrType.CONSTR_EXCLUSION: "excl",
        ConstrType.CONSTR_FOREIGN: "fkey",
        ConstrType.CONSTR_CHECK: "check",
        ConstrType.CONSTR_NOTNULL: "not_null",
    }.get(kind)
    if label is None:
        return
    existing = state.constraints.setdefault(key, {})
    name = con.conname or choose_name(
        table.name,
        _name_addition(kind, cols),
        label,
        lambda n: n in existing or state.relation_exists(f"{table.schema}.{n}"),
    )
    if name in existing:
        if kind == ConstrType.CONSTR_CHECK and existing[name].kind == "c" and (key, name) in state.constraint_parent:
            return  # merged with the inherited CHECK of that name
        state.error(f"constraint {name} for relation {table.qualified} already exists", con.location)
        return
    if kind == ConstrType.CONSTR_FOREIGN and not _check_reference(state, table, con, cols):
        return
    references = state.relation_key(con.pktable) if kind == ConstrType.CONSTR_FOREIGN and con.pktable else None
    ref_columns = tuple(s.sval for s in con.pk_attrs or ())
    if references is not None and not ref_columns:
        target = table if references == key else state.tables.get(references)
        ref_columns = target.primary_key if target is not None else ()
    existing[name] = ConstraintInfo(
        {"pkey": "p", "key": "u", "excl": "x", "fkey": "f", "check": "c"}.get(label, "n"),
        cols,
        references,
        ref_columns,
        bool(con.is_no_inherit),
    )
    if references is not None and references in state.tables and state.tables[references].kind == "partitioned_table":
        for part in partitions(state, references):
            referenced_partition(state, key, name, part)
    if kind == ConstrType.CONSTR_PRIMARY:
        if _has_primary(state, key, name):
            state.error(f"multiple primary keys for table {table.qualified} are not allowed", con.location)
            return
        columns = tuple(replace(c, not_null=True) if c.name in cols else c for c in table.columns)
        table = replace(table, columns=columns, primary_key=cols, unique_keys=(*table.unique_keys, cols))
    elif kind == ConstrType.CONSTR_UNIQUE:
        table = replace(table, unique_keys=(*table.unique_keys, cols))
    if kind in (ConstrType.CONSTR_PRIMARY, ConstrType.CONSTR_UNIQUE, ConstrType.CONSTR_EXCLUSION):
        index_key = f"{table.schema}.{name}"
        if not con.indexname:
            if state.relation_exists(index_key):
                state.error(f"relation {index_key} already exists", con.location)
                return
            state.indexes[index_key] = Index(
                index_key,
                key,
                cols,
                kind != ConstrType.CONSTR_EXCLUSION,
                False,
                None,
                bool(con.nulls_not_distinct),
                unique_colnames(list(cols)),
            )
    state.tables[key] = table


def _name_addition(kind: ConstrType, cols: tuple[str, ...]) -> str:
    """The middle of a constraint name PostgreSQL chooses: every key column for UNIQUE and FOREIGN
    KEY (ChooseForeignKeyConstraintNameAddition, ChooseIndexColumnNames), the first for an
    exclusion constraint, the one column a CHECK reads (none when it reads several), none for a
    primary key."""
    if kind == ConstrType.CONSTR_PRIMARY:
        return ""
    if kind == ConstrType.CONSTR_CHECK:
        return cols[0] if len(cols) == 1 else ""
    return "_".join(cols if kind != ConstrType.CONSTR_EXCLUSION else cols[:1])


def _has_primary(state: State, key: str, new_name: str) -> bool:
    return any(info.kind == "p" for name, info in state.constraints[key].items() if name != new_name)


def _check_reference(state: State, table: Table, con: PgNode, cols: tuple[str, ...]) -> bool:
    """REFERENCES: the table must exist and the referenced columns carry a primary key or a
    unique constraint (PostgreSQL's "no unique constraint matching given keys")."""
    rv = con.pktable
    if rv is None:
        return True
    target_key = state.relation_key(rv)
    if target_key is None:
        state.missing_relation(rv)
        return False
    target = state.tables[target_key] if target_key != table.qualified else table
    refs = tuple(s.sval for s in con.pk_attrs or ())
    if not refs:
        if not target.primary_key:
            state.error(f"there is no primary key for referenced table {target.qualified}", rv.location)
            return False
        refs = target.primary_key
    names = [c.name for c in target.columns]
    for ref in refs:
        if ref not in names:
            state.error(
                f"column {ref} referenced in foreign key constraint does not exist in {target.qualified}"
                f"{did_you_mean(ref, names)}",
                word=ref,
            )
            return False
    if len(refs) != len(cols):
        state.error("number of referencing and referenced columns for foreign key disagree", con.location)
        return False
    if set(refs) not in [set(u) for u in target.unique_keys]:
        state.error(
            f"there is no unique constraint matching given keys for referenced table {target.qualified}", rv.location
        )
        return False
    return True


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
                    f"column {elem.name} does not exist in {table.qualified}{did_you_mean(elem.name, names)}",
                    word=elem.name,
                )
                return
            cols.append(elem.name)
        else:
            plain = False
            for ref in _column_refs(elem.expr):
                if ref not in names:
                    state.error(f"column {ref} does not exist in {table.qualified}{did_you_mean(ref, names)}", word=ref)
                    return
            cols.append(f"({deparse(elem.expr)})")
    colnames = unique_colnames(naming)
    name = node.idxname or choose_name(
        table.name,
        "_".join(colnames),
        "idx",
        lambda n: state.relation_exists(f"{table.schema}.{n}"),
    )
    index_key = f"{table.schema}.{name}"
    if state.relation_exists(index_key):
        if not node.if_not_exists:
            state.error(f"relation {index_key} already exists", rv.location)
        return
    predicate = deparse(node.whereClause) if node.whereClause is not None else None
    for ref in _column_refs(node.whereClause):
        if ref not in names:
            state.error(f"column {ref} does not exist in {table.qualified} (index predicate)", word=ref)
            return
    if node.unique and not unique_includes_key(state, table, tuple(cols), False, rv.location):
        return
    state.indexes[index_key] = Index(
        index_key,
        key,
        tuple(cols),
        bool(node.unique),
        predicate is not None,
        predicate,
        bool(node.nulls_not_distinct),
        colnames,
    )
    reads = [e.name or ref for e in node.indexParams or () for ref in ([e.name] if e.name else column_refs(e.expr))]
    state.index_reads[index_key] = {*reads, *(e.name for e in node.indexIncludingParams or () if e.name)}
    state.index_reads[index_key] |= set(column_refs(node.whereClause))
    if node.unique and predicate is None and plain:
        state.tables[key] = replace(table, unique_keys=(*table.unique_keys, tuple(cols)))
    if rv.inh:  # a partitioned table's index: a partition of it on each partition
        for child in partitions(state, key):
            clone_index(state, index_key, child, attach=True)


def _column_refs(node: PgNode) -> list[str]:
    """The column names an index expression or predicate reads, in the order written."""
    refs = sorted(nodes_of(node, ast.ColumnRef), key=lambda ref: ref.location or 0)
    return [str(ref.fields[-1].sval) for ref in refs if ref.fields and isinstance(ref.fields[-1], ast.String)]


HANDLERS: dict[str, Callable[[State, PgNode], None]] = {
    "CreateStmt": create_table,
    "CreateForeignTableStmt": create_table,
    "IndexStmt": create_index,
}
