"""Types (enums, domains, composites, ranges), sequences, views, CREATE TABLE AS, functions,
extensions and triggers, applied as PostgreSQL applies them (DROP and RENAME: rename.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pglast import ast
from pglast.enums import FunctionParameterMode, ObjectType

from ..catalog.builtins import load_builtins
from ..catalog.identifiers import split_name
from ..catalog.model import Column, CompositeType, Domain, RangeType, Sequence, Table
from ..catalog.signatures import FunctionSig, Volatility
from ..catalog.types import PgType
from ..syntax.pgtree import nodes_of, walk
from . import rename
from .state import PgNode, State, qualified, strings
from .tables import deparse

_RELATION_KINDS = {
    ObjectType.OBJECT_TABLE: ("table", "partitioned_table"),
    ObjectType.OBJECT_VIEW: ("view",),
    ObjectType.OBJECT_MATVIEW: ("materialized_view",),
    ObjectType.OBJECT_FOREIGN_TABLE: ("foreign_table",),
}
_INPUT_MODES = (
    FunctionParameterMode.FUNC_PARAM_IN,
    FunctionParameterMode.FUNC_PARAM_INOUT,
    FunctionParameterMode.FUNC_PARAM_VARIADIC,
    FunctionParameterMode.FUNC_PARAM_DEFAULT,
)
_OUTPUT_MODES = (
    FunctionParameterMode.FUNC_PARAM_OUT,
    FunctionParameterMode.FUNC_PARAM_INOUT,
    FunctionParameterMode.FUNC_PARAM_TABLE,
)


def _new_type_key(state: State, names: list[str], location: int | None = None) -> str | None:
    schema, name = split_name(names)
    created_in = state.creation_schema(schema, location)
    if created_in is None:
        return None
    key = f"{created_in}.{name}"
    if key in state.types:
        state.error(f"type {key} already exists", location)
        return None
    return key


# -- types ----------------------------------------------------------------------------------
def create_enum(state: State, node: PgNode) -> None:
    key = _new_type_key(state, [s.sval for s in node.typeName])
    if key is None:
        return
    labels = tuple(s.sval for s in node.vals or ())
    if len(set(labels)) != len(labels):
        state.error(f"enum {key} repeats a label (enum labels must be unique)")
    state.enums[key] = labels
    state.types[key] = PgType(key, labels=labels)


def alter_enum(state: State, node: PgNode) -> None:
    names = [s.sval for s in node.typeName]
    key = state.find_key(*split_name(names), state.enums)
    if key is None:
        state.error(f"type {'.'.join(names)} does not exist (ALTER TYPE)", word=names[-1])
        return
    labels = list(state.enums[key])
    if node.oldVal is not None:  # RENAME VALUE
        if node.oldVal not in labels:
            state.error(f"{node.oldVal!r} is not an existing enum label of {key}")
            return
        if node.newVal in labels:
            state.error(f"enum label {node.newVal!r} already exists in {key}")
            return
        labels[labels.index(node.oldVal)] = node.newVal
    else:
        if node.newVal in labels:
            if not node.skipIfNewValExists:
                state.error(f"enum label {node.newVal!r} already exists in {key}")
            return
        if node.newValNeighbor is not None:
            if node.newValNeighbor not in labels:
                state.error(f"{node.newValNeighbor!r} is not an existing enum label of {key}")
                return
            at = labels.index(node.newValNeighbor) + (1 if node.newValIsAfter else 0)
            labels.insert(at, node.newVal)
        else:
            labels.append(node.newVal)
    state.enums[key] = tuple(labels)
    state.types[key] = PgType(key, labels=tuple(labels))
    state.retype(key, state.types[key])


def create_domain(state: State, node: PgNode) -> None:
    key = _new_type_key(state, [s.sval for s in node.domainname])
    if key is None:
        return
    base = state.resolve_type(node.typeName, f"domain {key}")
    base_names = [s.sval for s in node.typeName.names]
    base_domain = state.find_key(*split_name(base_names), state.domains)
    not_null = base_domain is not None and state.domains[base_domain].not_null
    checks: list[str] = []
    for con in node.constraints or ():
        if con.contype.name == "CONSTR_NOTNULL":
            not_null = True
        elif con.contype.name == "CONSTR_CHECK" and con.raw_expr is not None:
            checks.append(deparse(con.raw_expr))
    state.domains[key] = Domain(qualified(key), base, not_null, tuple(checks))
    # A value of the domain is its base type's, naming the domain (PostgreSQL types a parameter
    # stored into a domain column as the domain).
    state.types[key] = replace(base, domain=key)


def alter_domain(state: State, node: PgNode) -> None:
    names = [s.sval for s in node.typeName]
    key = state.find_key(*split_name(names), state.domains)
    if key is None:
        if not node.missing_ok:
            state.error(f"domain {'.'.join(names)} does not exist")
        return
    if node.subtype in ("N", "O"):  # DROP / SET NOT NULL
        state.domains[key] = replace(state.domains[key], not_null=node.subtype == "O")


def create_composite(state: State, node: PgNode) -> None:
    rv = node.typevar
    key = _new_type_key(state, [*([rv.schemaname] if rv.schemaname else []), rv.relname], rv.location)
    if key is None:
        return
    attrs = tuple(
        (cd.colname, state.resolve_type(cd.typeName, f"attribute {cd.colname}")) for cd in node.coldeflist or ()
    )
    state.composites[key] = CompositeType(qualified(key), attrs)
    state.types[key] = PgType(key)


def create_range(state: State, node: PgNode) -> None:
    key = _new_type_key(state, [s.sval for s in node.typeName])
    if key is None:
        return
    subtype = PgType("unknown")
    multirange = None
    for opt in node.params or ():
        if opt.defname == "subtype" and isinstance(opt.arg, ast.TypeName):
            subtype = state.resolve_type(opt.arg, f"range {key}")
        elif opt.defname == "multirange_type_name" and isinstance(opt.arg, ast.TypeName):
            multirange = ".".join(strings(opt.arg.names))
    state.ranges[key] = RangeType(qualified(key), subtype)
    state.types[key] = PgType(key)
    schema, name = key.split(".", 1)
    # PostgreSQL names the multirange type after the range: `range` -> `multirange`, else + `_multirange`.
    multi = multirange or (name.replace("range", "multirange", 1) if "range" in name else f"{name}_multirange")
    multi_key = multi if "." in multi else f"{schema}.{multi}"
    state.types[multi_key] = PgType(multi_key)
    # The constructor functions PostgreSQL creates with a range type.
    rng, many = state.types[key], state.types[multi_key]
    multi_schema, multi_name = multi_key.split(".", 1)
    constructors = [
        (schema, name, (subtype, subtype), rng, False),
        (schema, name, (subtype, subtype, PgType("text")), rng, False),
        (multi_schema, multi_name, (), many, False),
        (multi_schema, multi_name, (rng,), many, False),
        (multi_schema, multi_name, (rng.array(),), many, True),
    ]
    for fschema, fname, args, result, variadic in constructors:
        sig = FunctionSig(fschema, fname, args, ("",) * len(args), result, variadic=variadic, volatility="i")
        state.routines.setdefault(f"{fschema}.{fname}", []).append(sig)


def define(state: State, node: PgNode) -> None:
    """CREATE TYPE name (a shell or base type), CREATE AGGREGATE, CREATE OPERATOR, text search
    and collation objects."""
    names = [s.sval for s in node.defnames]
    if node.kind == ObjectType.OBJECT_TYPE:
        schema, name = split_name(names)
        created_in = state.creation_schema(schema, None)
        if created_in is not None:
            state.types.setdefault(f"{created_in}.{name}", PgType(f"{created_in}.{name}"))
    elif node.kind in (ObjectType.OBJECT_AGGREGATE, ObjectType.OBJECT_OPERATOR):
        what = "aggregate" if node.kind == ObjectType.OBJECT_AGGREGATE else "operator"
        state.warning(
            f"{what} {'.'.join(names)} is not modelled by the catalog: a statement using it will say it does not exist"
        )


# -- sequences ------------------------------------------------------------------------------
def _owned_by(state: State, opts: PgNode) -> tuple[str, str] | bool | None:
    """OWNED BY table.column -> (table key, column); OWNED BY NONE -> None; absent -> False."""
    for opt in opts or ():
        if opt.defname == "owned_by":
            parts = [s.sval for s in opt.arg]
            if parts == ["none"]:
                return None
            if len(parts) < 2:  # PostgreSQL's words for `OWNED BY word`
                state.error("invalid OWNED BY option; specify OWNED BY table.column or OWNED BY NONE")
                return False
            schema, table = split_name(parts[:-1])
            key = state.find_key(schema, table, state.tables)
            if key is None or state.tables[key].column(parts[-1]) is None:
                state.error(f"OWNED BY {'.'.join(parts)}: no such table column")
                return False
            return key, parts[-1]
    return False


def create_sequence(state: State, node: PgNode) -> None:
    rv = node.sequence
    created = state.new_relation(rv, node.if_not_exists)
    if created is None:
        return
    _, key = created
    seqtype = PgType("int8")
    for opt in node.options or ():
        if opt.defname == "as" and isinstance(opt.arg, ast.TypeName):
            seqtype = state.resolve_type(opt.arg, f"sequence {key}")
    owner = _owned_by(state, node.options)
    state.sequences[key] = Sequence(qualified(key), seqtype, owner if isinstance(owner, tuple) else None)


def alter_sequence(state: State, node: PgNode) -> None:
    rv = node.sequence
    key = state.find_key(rv.schemaname, rv.relname, state.sequences)
    if key is None:
        if not node.missing_ok:
            state.error(f"relation {rv.relname} does not exist (ALTER SEQUENCE)", rv.location, len(rv.relname))
        return
    owner = _owned_by(state, node.options)
    if owner is not False:
        state.sequences[key] = replace(state.sequences[key], owned_by=owner if isinstance(owner, tuple) else None)
    for opt in node.options or ():
        if opt.defname == "as" and isinstance(opt.arg, ast.TypeName):
            state.sequences[key] = replace(state.sequences[key], type=state.resolve_type(opt.arg))


# -- views and CREATE TABLE AS --------------------------------------------------------------
def _query_columns(state: State, query: PgNode, what: str, names: list[str]) -> tuple[Column, ...]:
    """The columns of a view's or CREATE TABLE AS's query, analysed by the statement checker."""
    columns, errors = state.query_typer(deparse(query), state.freeze(state.search_path))
    if errors:
        state.warning(f"{what}: its query could not be fully analysed ({errors[0]}); columns may be missing or untyped")
    result = columns if columns is not None else ()
    out = []
    for i, rc in enumerate(result):
        name = names[i] if i < len(names) else rc.name
        out.append(Column(name, rc.type or PgType("unknown"), not rc.nullable, False))
    from .viewdomains import keep_domains  # views only: not imported by every run

    return keep_domains(state, query, tuple(out))


def create_view(state: State, node: PgNode) -> None:
    rv = node.view
    created = state.new_relation(rv, or_replace_view=node.replace)
    if created is None:
        return
    schema, key = created
    aliases = [s.sval for s in node.aliases or ()]
    columns = _query_columns(state, node.query, f"view {key}", aliases)
    names = [c.name for c in columns]
    twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if twice is not None:
        state.error(f"column {twice} specified more than once", rv.location)
        return
    state.tables[key] = Table(schema, rv.relname, columns, kind="view")
    state.types[key] = PgType(key)
    _record_view_reads(state, key, node.query)


def create_table_as(state: State, node: PgNode) -> None:
    rv = node.into.rel
    created = state.new_relation(rv, node.if_not_exists)
    if created is None:
        return
    schema, key = created
    matview = node.objtype == ObjectType.OBJECT_MATVIEW
    names = [s.sval for s in node.into.colNames or ()]
    what = f"{'materialized view' if matview else 'table'} {key}"
    columns = _query_columns(state, node.query, what, names)
    if not matview:  # a table made from a query has no NOT NULL columns
        columns = tuple(replace(c, not_null=False) for c in columns)
    state.tables[key] = Table(schema, rv.relname, columns, kind="materialized_view" if matview else "table")
    state.types[key] = PgType(key)
    state.constraints[key] = {}
    if matview:
        _record_view_reads(state, key, node.query)


def _record_view_reads(state: State, key: str, query: PgNode) -> None:
    """What a view's query depends on, as DROP needs it: the relations it reads, the types it
    names, the column names it refers to."""
    state.view_deps[key] = _reads(state, query)
    types: set[str] = set()
    columns: set[str] = set()
    for node in walk(query):
        if isinstance(node, ast.TypeName) and not node.pct_type and node.names:  # no names: a type by oid
            type_key = state.type_key(*split_name([n.sval for n in node.names]))
            if type_key is not None:
                types.add(type_key)
        elif isinstance(node, ast.ColumnRef) and node.fields:
            last = node.fields[-1]
            columns.add("*" if isinstance(last, ast.A_Star) else str(last.sval))
    state.view_types[key] = types
    state.view_columns[key] = columns


def _reads(state: State, query: PgNode) -> set[str]:
    """The relations a query reads (WITH query names resolve to no relation and drop out)."""
    return {key for rv in nodes_of(query, ast.RangeVar) if (key := state.relation_key(rv)) is not None}


# -- functions ------------------------------------------------------------------------------
def create_function(state: State, node: PgNode) -> None:
    names = [s.sval for s in node.funcname]
    schema, name = split_name(names)
    created_in = state.creation_schema(schema, None)
    if created_in is None:
        return
    arg_types: list[PgType] = []
    arg_names: list[str] = []
    outs: list[tuple[str, PgType]] = []
    call_args: list[tuple[str, PgType]] = []
    n_defaults = 0
    variadic = False
    for param in node.parameters or ():
        ptype = state.resolve_type(param.argType, f"argument {param.name or len(arg_types) + 1} of {name}")
        if param.mode in _INPUT_MODES:
            arg_types.append(ptype)
            arg_names.append(param.name or "")
            n_defaults = n_defaults + 1 if param.defexpr is not None else 0
            variadic = param.mode == FunctionParameterMode.FUNC_PARAM_VARIADIC
        if param.mode in _OUTPUT_MODES:
            outs.append((param.name or f"column{len(outs) + 1}", ptype))
        if param.mode != FunctionParameterMode.FUNC_PARAM_TABLE:
            call_args.append((param.name or "", ptype))
    out_names = [p.name or "" for p in node.parameters or () if p.mode in _OUTPUT_MODES]
    returns_set = bool(node.returnType is not None and node.returnType.setof)
    if node.returnType is not None and not (outs and _is_record(node.returnType)):
        return_type = state.resolve_type(node.returnType, f"result of {name}")
    elif len(outs) == 1:
        return_type = outs[0][1]
    elif outs:
        return_type = PgType("record")
    else:
        return_type = PgType("void")
    volatility: Volatility = "v"
    strict = False
    for opt in node.options or ():
        if opt.defname == "volatility":
            volatility = "i" if opt.arg.sval == "immutable" else "s" if opt.arg.sval == "stable" else "v"
        elif opt.defname == "strict":
            strict = bool(opt.arg.boolval)
    sig = FunctionSig(
        schema=created_in,
        name=name,
        arg_types=tuple(arg_types),
        arg_names=tuple(arg_names),
        return_type=return_type,
        returns_set=returns_set,
        kind="p" if node.is_procedure else "f",
        variadic=variadic,
        n_defaults=n_defaults,
        out_columns=tuple(outs)
        if len(outs) > 1 or _is_record(node.returnType) or (returns_set and outs) or node.is_procedure
        else (),
        volatility=volatility,
        strict=strict,
        call_args=tuple(call_args) if node.is_procedure else (),
        out_name=out_names[0] if len(out_names) == 1 else "",
    )
    key = f"{created_in}.{name}"
    sigs = state.routines.setdefault(key, [])
    for i, old in enumerate(sigs):
        if old.arg_types == sig.arg_types:
            if not node.replace:
                state.error(
                    f"function {name}({', '.join(map(str, sig.arg_types))}) already exists with same argument types"
                )
            elif (old.return_type, old.returns_set) != (sig.return_type, sig.returns_set):
                state.error(f"cannot change return type of existing function {name}")
            else:
                sigs[i] = sig
            return
    sigs.append(sig)


def _is_record(tn: PgNode) -> bool:
    return tn is not None and [s.sval for s in tn.names][-1] == "record"


# -- extensions -----------------------------------------------------------------------------
def create_extension(state: State, node: PgNode) -> None:
    name = node.extname
    if name in state.extensions:
        if not node.if_not_exists:
            state.error(f"extension {name} already exists")
        return
    schema = None
    for opt in node.options or ():
        if opt.defname == "schema" and isinstance(opt.arg, ast.String):
            schema = opt.arg.sval
    created_in = state.creation_schema(schema, None)
    if created_in is None:
        return
    state.extensions[name] = created_in
    if name == "plpgsql":
        return  # the procedural language: no types, functions or operators for statements
    data = load_builtins().extension(name)
    if data is None:
        state.unknown_extensions.append(name)
        state.warning(
            f"extension {name} is not known to the catalog: its types, functions and operators are unknown, and "
            "a statement using them will say they do not exist"
        )
        return
    # Extension types keep their bare name (`citext`), as built-in types do: the binder and the
    # resolver know them by it; the schema they are installed in decides only their visibility.
    for info in data.types:
        if not info.type.is_array:
            state.types[f"{created_in}.{info.type.name}"] = info.type
    for sig in data.functions:
        state.routines.setdefault(f"{created_in}.{sig.name}", []).append(replace(sig, schema=created_in))
    state.operators.extend(replace(op, schema=created_in) for op in data.operators)


# -- triggers -------------------------------------------------------------------------------
def create_trigger(state: State, node: PgNode) -> None:
    if state.relation_key(node.relation) is None:
        state.missing_relation(node.relation)


HANDLERS: dict[str, Callable[[State, PgNode], None]] = {
    "CreateEnumStmt": create_enum,
    "AlterEnumStmt": alter_enum,
    "CreateDomainStmt": create_domain,
    "AlterDomainStmt": alter_domain,
    "CompositeTypeStmt": create_composite,
    "CreateRangeStmt": create_range,
    "DefineStmt": define,
    "CreateSeqStmt": create_sequence,
    "AlterSeqStmt": alter_sequence,
    "ViewStmt": create_view,
    "CreateTableAsStmt": create_table_as,
    "CreateFunctionStmt": create_function,
    "CreateExtensionStmt": create_extension,
    "CreateTrigStmt": create_trigger,
    "DropStmt": rename.drop,
    "RenameStmt": rename.rename,
    "AlterObjectSchemaStmt": rename.set_schema,
}
