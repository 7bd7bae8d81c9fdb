"""Request fields -> statement parameters: each `@name` must be a field of the request whose
type binds where PostgreSQL expects the parameter's type (bind/typemap.py), and an `optional`
field must not feed a NOT NULL column directly."""

from __future__ import annotations

from collections.abc import Iterator

from pglast import ast

from ..diagnostics import SqlSpan
from ..protos import Field, Message, ProtoIndex
from ..sql import Analysis, PgType, closest
from . import ir, syntax
from . import typemap as t
from .enums import enum_mapping
from .report import Reporter


def field_ref(f: Field, index: ProtoIndex) -> ir.FieldRef:
    wrapper = index.messages.get(f.type) if f.type in t.WRAPPERS else None
    return ir.FieldRef(
        f.name,
        f.type,
        f.repeated,
        f.has_presence,
        wrapper=ir.TypeRef(wrapper.full_name, wrapper.file, wrapper.python_path) if wrapper else None,
    )


def bind_params(
    rep: Reporter,
    si: int,
    mi: int,
    rpc: str,
    sql: str,
    analysis: Analysis,
    request: Message,
    also_used: frozenset[str] = frozenset(),
) -> tuple[ir.Param, ...]:
    """`also_used`: request fields the handler reads though no parameter binds them (a block's
    condition, the page's size and token)."""
    bindings = []
    used = set(also_used)
    for p in analysis.params:
        span = p.spans[0] if p.spans else None
        f = request.field(p.name)
        if f is None:
            names = [x.name for x in request.fields]
            close = closest(p.name, names)
            hint = f"; did you mean @{close}?" if close else ""
            rep.at_method(si, mi, f"{rpc}: parameter @{p.name} is not a field of {request.full_name}{hint}", sql, span)
            continue
        used.add(f.name)
        if p.type is None:
            continue
        param = _bind(rep, p.type, f)
        if isinstance(param, str):
            rep.at_method(si, mi, f"{rpc}: parameter @{p.name}: {param}", sql, span)
            continue
        bindings.append(param)
    for f in request.fields:
        if f.name not in used:
            rep.at_method(
                si,
                mi,
                f"{rpc}: request field {request.full_name}.{f.name} is not used by the statement",
                severity="warning",
            )
    for name, column, table, span in _optional_into_not_null(sql, analysis, request):
        rep.at_method(
            si,
            mi,
            f"{rpc}: parameter @{name}: {request.full_name}.{name} is optional, but it is stored as is in column "
            f"{column} of {table}, which is NOT NULL{'' if analysis.kind == 'update' else ' and has no default'}: "
            f"an unset field would fail the statement; drop `optional` from the field, or give the "
            f"column a value when it is unset (COALESCE(@{name}, ...))",
            sql,
            span,
        )
    return tuple(bindings)


def _bind(rep: Reporter, pg: PgType, f: Field) -> ir.Param | str:
    """The binding, or what is wrong with it."""
    if pg.is_array != f.repeated:
        if pg.is_array:
            return (
                f"the statement expects an array ({pg}), so the field must be repeated, but {f.name} is {f.describe()}"
            )
        return (
            f"{f.name} is repeated, but the statement expects a single {pg}; use = ANY(@{f.name}) or cast to an array"
        )
    m = t.mapping(pg.element, f.type)
    if m is None or not m.binds:
        wide = t.mapping(PgType("int8"), f.type)
        if pg.element.name in ("int2", "int4") and wide is not None and wide.binds:
            # PostgreSQL fixed the parameter's type at int2/int4 (from the expression around it,
            # `COALESCE(@n, 10)`), so a 64-bit value could only fail at run time: refused here.
            return (
                f"PostgreSQL types @{f.name} as {pg}, so a 64-bit {f.describe()} value may not fit it; "
                f"make the field int32, or cast the parameter (@{f.name}::bigint) so PostgreSQL types it bigint"
            )
        return f"a {f.describe()} field cannot be bound where Postgres expects {pg} (see the type table in docs/diagnostics.md)"
    mapping = None
    if m.conversion is ir.Conversion.ENUM:
        mapping, problems = enum_mapping(pg.element, rep.index.enums[f.type_name])
        if problems:
            return "; ".join(problems)
    return ir.Param(f.name, pg, field_ref(f, rep.index), m.conversion, mapping)


def _optional_into_not_null(
    sql: str, analysis: Analysis, request: Message
) -> Iterator[tuple[str, str, str, SqlSpan | None]]:
    """(param, column, table, span) for each `optional` request field the statement writes,
    as the whole value, into a NOT NULL column (INSERT ... VALUES, UPDATE ... SET)."""
    table = analysis.target
    # Scalars declared `optional` (message fields, wrappers included, always have presence:
    # their "unset" is a choice the proto already made).
    optional = {
        p.name: p
        for p in analysis.params
        if (f := request.field(p.name)) and f.has_presence and not f.repeated and "." not in f.type
    }
    parsed = syntax.parse(analysis) if table is not None and optional else None
    if parsed is None or table is None:
        return
    node = parsed.node
    pairs: list[tuple[str | None, ast.Node | None]] = []
    if isinstance(node, ast.InsertStmt) and node.selectStmt is not None:
        names = [c.name for c in node.cols or ()] or [c.name for c in table.columns]
        for values in getattr(node.selectStmt, "valuesLists", None) or ():
            pairs += list(zip(names, values, strict=False))
        if node.onConflictClause is not None:
            pairs += [(r.name, r.val) for r in node.onConflictClause.targetList or () if isinstance(r, ast.ResTarget)]
    elif isinstance(node, ast.UpdateStmt):
        pairs += [(r.name, r.val) for r in node.targetList or () if isinstance(r, ast.ResTarget)]
    for column_name, value in pairs:
        name = parsed.param(value)
        if name is None:
            continue
        param = optional.get(name)
        column = table.column(column_name) if column_name else None
        if param is None or column is None or not column.not_null:
            continue
        if analysis.kind == "insert" and column.has_default:
            continue
        yield param.name, column.name, table.qualified, param.spans[0] if param.spans else None
