"""Result columns -> response fields: where the rows go (the response, or its `result_field`),
which field each column fills and how its value converts, joined rows into nested messages, and
that every field of the row's message is filled."""

from __future__ import annotations

import functools
from collections.abc import Callable

from ..protos import Field, Message
from ..sql import NULL, Analysis, Catalog, Expansion, PgType, ResultColumn, closest, did_you_mean
from . import ir
from . import typemap as t
from .enums import enum_mapping
from .params import field_ref
from .report import Reporter

#: A function's "no value" (pg_advisory_lock, pg_notify): a result column of it is skipped.
VOID = PgType("void")


class _Rpc:
    """The RPC being bound, for placing its diagnostics."""

    def __init__(
        self,
        rep: Reporter,
        si: int,
        mi: int,
        name: str,
        sql: str,
        null_literals: Callable[[], frozenset[str]],
        expansions: tuple[Expansion, ...] = (),
        catalog: Catalog | None = None,
    ) -> None:
        self.rep, self.si, self.mi, self.name, self.sql = rep, si, mi, name, sql
        self._null_literals = null_literals
        self.expansions = expansions
        self.catalog = catalog
        #: While the columns of an array of rows are bound: what their diagnostics start with.
        self.within = ""
        #: (message, field) pairs no column fills.
        self.unfilled: list[tuple[str, str]] = []

    @functools.cached_property
    def null_literals(self) -> frozenset[str]:
        """The top-level output columns that are a NULL literal (parsing the statement only when
        a column would not fit otherwise: most RPCs never need it)."""
        return self._null_literals()

    def error(self, message: str, col: ResultColumn | None = None) -> None:
        message = self.within + message
        self.rep.at_method(self.si, self.mi, f"{self.name}: {message}", self.sql, col.span if col else None)


def row_target(
    rep: Reporter,
    si: int,
    mi: int,
    rpc: str,
    analysis: Analysis,
    response: Message,
    cardinality: ir.Cardinality,
    result_field: str,
    beside: frozenset[str] = frozenset(),
) -> Message | None:
    """The message a row becomes (the response, or the message of `result_field`); None after
    reporting why the cardinality and the response do not fit together. For EXEC, always None.
    `beside`: response fields the handler fills besides the rows (a page's next_page_token)."""
    where = _Rpc(rep, si, mi, rpc, "", frozenset)
    if cardinality is ir.Cardinality.EXEC:
        # `SELECT pg_notify(@channel, @payload)`: a row of nothing but void values carries nothing.
        if analysis.columns is not None and any(c.type != VOID for c in analysis.columns):
            where.error(
                "CARDINALITY_EXEC statements must not return rows; drop RETURNING or use CARDINALITY_ONE/OPTIONAL/MANY"
            )
        if result_field:
            where.error("result_field is set, but CARDINALITY_EXEC returns no rows")
        return None
    if cardinality is ir.Cardinality.EXEC_ROWS:
        _check_rows_written(rep, where, analysis, response, result_field)
        return None
    card = f"CARDINALITY_{cardinality.name}"
    if analysis.columns is None:
        where.error(
            f"{card} needs rows, but the {'statement' if analysis.kind == 'utility' else analysis.kind.upper()} returns none; add SELECT or RETURNING or use CARDINALITY_EXEC"
        )
        return None
    if not result_field:
        if cardinality is ir.Cardinality.MANY:
            where.error(f"CARDINALITY_MANY needs result_field naming a repeated message field of {response.full_name}")
            return None
        return response
    f = _result_field(where, response, result_field)
    if f is None:
        return None
    msg = rep.index.messages.get(f.type)
    if msg is None or f.type in t.WRAPPERS or f.type in (t.TIMESTAMP_MSG, t.DURATION_MSG):
        where.error(
            f"result_field {result_field} must be a message field that receives the row, but it is {f.describe()}"
        )
        return None
    if cardinality is ir.Cardinality.MANY and not f.repeated:
        where.error(
            f"CARDINALITY_MANY needs a repeated result field, but {response.full_name}.{result_field} is not repeated"
        )
        return None
    if cardinality is not ir.Cardinality.MANY and f.repeated:
        where.error(
            f"{card} needs a singular result field, but {response.full_name}.{result_field} is repeated; use CARDINALITY_MANY"
        )
        return None
    _never_filled(rep, response, result_field, "the rows go", rpc, beside)
    return msg


def _result_field(where: _Rpc, response: Message, result_field: str) -> Field | None:
    """The response's field `result_field` names; None after reporting it is not one."""
    f = response.field(result_field)
    if f is None:
        hint = did_you_mean(result_field, [x.name for x in response.fields])
        where.error(f"result_field {result_field} is not a field of {response.full_name}{hint}")
    return f


def _never_filled(
    rep: Reporter, response: Message, result_field: str, what: str, rpc: str, beside: frozenset[str] = frozenset()
) -> None:
    """Every other field of the response (but those in `beside`, filled by the handler itself) is
    left empty: `what` ("the rows go") into `result_field`."""
    for other in response.fields:
        if other.name != result_field and other.name not in beside:
            rep.at_field(
                response.full_name,
                other.name,
                f"is never filled: {what} into {result_field}; remove the field or use another response message",
                rpc,
            )


def bind_row(
    rep: Reporter,
    si: int,
    mi: int,
    rpc: str,
    sql: str,
    columns: tuple[ResultColumn, ...],
    target: Message,
    null_literals: Callable[[], frozenset[str]],
    expansions: tuple[Expansion, ...],
    catalog: Catalog | None = None,
) -> ir.Row:
    """The row as a `target` message; every problem reported (the caller checks the count).
    Fields no column fills are reported (once, at the field) only when the RPC and the schema
    have no other error: after a wrong column name they are a follow-on. A column among
    `null_literals()` (a NULL literal, `NULL::int AS age`) leaves its field unset on purpose.
    `catalog` gives the columns of a table whose rows an array column holds (`_nested`)."""
    errors_before = rep.error_count()
    where = _Rpc(rep, si, mi, rpc, sql, null_literals, expansions, catalog)
    row = _row(where, columns, target, 0, top=True)
    if rep.error_count() == errors_before and not rep.schema_has_errors:
        for message, name in where.unfilled:
            rep.at_field(
                message,
                name,
                f"no result column fills it; select a column named {name}, or leave the field unset on purpose "
                f"with a typed NULL, `NULL::<type> AS {name}` (see docs/diagnostics.md)",
                rpc,
            )
    return row


def _row(where: _Rpc, columns: tuple[ResultColumn, ...], target: Message, start: int, top: bool = False) -> ir.Row:
    out: list[ir.Column | ir.Embedded | ir.Nested] = []
    filled: set[str] = set()
    position = start
    for col in columns:
        width = len(col.embedded) if col.embedded is not None else 1
        f = target.field(col.name)
        if col.type == VOID:
            # `SELECT pg_advisory_lock(@id)`: the row exists, its void value carries nothing.
            if f is not None:
                filled.add(f.name)
                where.error(
                    f"result column {col.name} is void, which carries no value: it fills no field; "
                    f"remove {target.full_name}.{f.name} (the column is skipped)",
                    col,
                )
            position += width
            continue
        if f is None:
            close = closest(col.name, [x.name for x in target.fields])
            hint = f"; did you mean {close}? (or alias the column: AS {close})" if close else ""
            where.error(f"result column {col.name} has no field in {target.full_name}{hint}", col)
        else:
            filled.add(f.name)
            literal = top and col.nullable and col.embedded is None and _misfits(where, col, f)
            if literal and col.name in where.null_literals:
                position += width
                continue  # NULL::type AS field: left unset on purpose
            bound: ir.Column | ir.Embedded | ir.Nested | None
            if col.embedded is not None:
                bound = _embedded(where, col, target, position)
            elif f.repeated and _message(where, f) is not None:
                bound = _nested(where, col, target, position)
            else:
                bound = _column(where, col, target, position)
            if bound is not None:
                out.append(bound)
        position += width
    where.unfilled += [(target.full_name, f.name) for f in target.fields if f.name not in filled]
    return ir.Row(ir.TypeRef(target.full_name, target.file, target.python_path), tuple(out))


def _misfits(where: _Rpc, col: ResultColumn, f: Field) -> bool:
    """Whether binding `col` to `f` reports a problem (a cheap check before parsing)."""
    pg = col.type
    if pg is None or pg == NULL:
        return False
    m = t.mapping(pg.element, f.type)
    if pg.is_array != f.repeated or m is None or not m.reads or (not f.has_presence and not f.repeated):
        return True
    return m.conversion is ir.Conversion.ENUM and bool(enum_mapping(pg.element, where.rep.index.enums[f.type_name])[1])


def _column(where: _Rpc, col: ResultColumn, target: Message, position: int) -> ir.Column | None:
    f = target.field(col.name)
    assert f is not None
    if col.type is None or col.type == NULL:
        return None  # unknown: the analyzer reported why; NULL: the field is left unset on purpose
    pg = col.type
    if pg.is_array != f.repeated:
        where.error(f"result column {col.name} is {pg} but {target.full_name}.{f.name} is {f.describe()}", col)
        return None
    m = t.mapping(pg.element, f.type)
    if m is None or not m.reads:
        where.error(
            f"result column {col.name} is {pg}, which does not fit {target.full_name}.{f.name} ({f.describe()}); "
            "see the type table in docs/diagnostics.md",
            col,
        )
        return None
    mapping = None
    if m.conversion is ir.Conversion.ENUM:
        mapping, problems = enum_mapping(pg.element, where.rep.index.enums[f.type_name])
        for problem in problems:
            where.rep.at_field(target.full_name, f.name, problem, where.name)
        if problems:
            return None
    # A NULL array reads as an empty repeated field (docs/diagnostics.md): repeated fields have
    # no presence, and "no elements" is what an absent list means.
    if col.nullable and not f.has_presence and not f.repeated:
        where.error(
            f"result column {col.name} may be NULL, but {target.full_name}.{f.name} ({f.describe()}) cannot tell NULL from "
            f"its zero value; make the field `optional`, use a wrapper type, or COALESCE the column",
            col,
        )
        return None
    return ir.Column(col.name, position, pg, col.nullable, field_ref(f, where.rep.index), m.conversion, mapping)


def _embedded(where: _Rpc, col: ResultColumn, target: Message, position: int) -> ir.Embedded | None:
    """A joined table's row (`SELECT o.*, c FROM orders o JOIN customers c ...`) into the
    message field named like the column."""
    f = target.field(col.name)
    assert f is not None and col.embedded is not None
    nested = where.rep.index.messages.get(f.type)
    if nested is None or f.repeated or f.type in t.WRAPPERS or f.type in (t.TIMESTAMP_MSG, t.DURATION_MSG):
        where.error(
            f"result column {col.name} is a whole row, which fills a singular message field, but "
            f"{target.full_name}.{f.name} is {f.describe()}",
            col,
        )
        return None
    span = col.span
    if span is None or not any(e.span.start <= span.start and span.end <= e.span.end for e in where.expansions):
        # The row is read column by column: the reference must be written out as its columns.
        where.error(
            f"the whole-row reference {col.name} is not written out as its columns (an alias, `c AS {col.name}`, "
            f"keeps it a record); name the FROM item after the field instead: `JOIN ... {col.name} ON ...` and "
            f"select `{col.name}`",
            col,
        )
        return None
    presence = None
    if col.nullable:
        # After an outer join that finds nothing every column is NULL; a column that is NOT NULL
        # in the table tells that apart from a row that exists.
        presence = next((position + i for i, c in enumerate(col.embedded) if not c.nullable), None)
        if presence is None:
            where.error(
                f"result column {col.name} may be absent (an outer join), but none of its columns is NOT NULL, "
                "so an absent row cannot be told from a row of NULLs; use an inner join or select the columns one by one",
                col,
            )
            return None
    # Inside the nested message a column's own nullability counts, not the outer join's.
    row = _row(where, col.embedded, nested, position)
    return ir.Embedded(col.name, field_ref(f, where.rep.index), row, presence)


def _message(where: _Rpc, f: Field) -> Message | None:
    """The message of a field that holds one (a wrapper, Timestamp or Duration holds a value)."""
    if f.type in t.WRAPPERS or f.type in (t.TIMESTAMP_MSG, t.DURATION_MSG):
        return None
    return where.rep.index.messages.get(f.type)


#: The one form a repeated message field is filled from, for the diagnostics of the others.
NESTED_FORM = "array_agg(t ORDER BY t.id) FILTER (WHERE t.id IS NOT NULL) AS {name}"


def _nested(where: _Rpc, col: ResultColumn, target: Message, position: int) -> ir.Nested | None:
    """An array of a table's rows (`array_agg(l ...)`, or a LATERAL subquery's) into a repeated
    message field: the table's columns checked against the nested message like result columns,
    by name, type and nullability (NOT NULL in the table counts: the rows are the table's)."""
    f = target.field(col.name)
    nested = _message(where, f) if f is not None else None
    assert f is not None and nested is not None
    if col.type is None or col.type == NULL:
        return None  # unknown: the analyzer reported why
    pg = col.type
    table = where.catalog.table(pg.name) if where.catalog is not None and pg.is_array else None
    if table is None:
        what = "an array of anonymous records" if pg == PgType("record", is_array=True) else str(pg)
        why = (
            "whose elements carry no column types to check"
            if pg.name in ("json", "jsonb", "record")
            else "which is not an array of a table's rows"
        )
        where.error(
            f"result column {col.name} is {what}, {why}, but {target.full_name}.{f.name} is {f.describe()}; "
            f"aggregate the table's rows themselves, `{NESTED_FORM.format(name=col.name)}` with t the "
            "table's alias (see docs/adding-an-rpc.md, one-to-many)",
            col,
        )
        return None
    columns = tuple(ResultColumn(c.name, c.type, not c.not_null, col.span) for c in table.columns)
    where.within = f"in {col.name}, an array of {table.schema}.{table.name} rows: "
    try:
        row = _row(where, columns, nested, 0)
    finally:
        where.within = ""
    return ir.Nested(col.name, position, pg, field_ref(f, where.rep.index), row)


#: The fields that hold any count PostgreSQL reports (its command tag counts in 64 bits).
_COUNT_FIELDS = frozenset({"int64", "uint64", "sint64", "sfixed64", "fixed64"})


def _check_rows_written(rep: Reporter, where: _Rpc, analysis: Analysis, response: Message, result_field: str) -> None:
    """CARDINALITY_EXEC_ROWS: an INSERT, UPDATE or DELETE that returns no rows, and a 64-bit
    integer field of the response for the number of rows it wrote (psycopg's `rowcount`)."""
    card = "CARDINALITY_EXEC_ROWS"
    if analysis.kind not in ("insert", "update", "delete"):
        what = "statement" if analysis.kind == "utility" else analysis.kind.upper()
        where.error(f"{card} counts the rows an INSERT, UPDATE or DELETE writes, but this is a {what}")
    elif analysis.columns is not None:
        where.error(
            f"{card} answers a count, not rows, but the {analysis.kind.upper()} has RETURNING;"
            " drop RETURNING, or keep it and use CARDINALITY_MANY (the count is the number of rows)"
        )
    if not result_field:
        where.error(f"{card} needs result_field naming the int64 field of {response.full_name} that receives the count")
        return
    f = _result_field(where, response, result_field)
    if f is None:
        return
    if f.repeated or f.type not in _COUNT_FIELDS:
        where.error(
            f"{card} needs an int64 result field for the count, but {response.full_name}.{result_field} is {f.describe()}"
        )
        return
    _never_filled(rep, response, result_field, "the count goes", where.name)
