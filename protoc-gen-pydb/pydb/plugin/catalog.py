"""schema.sql -> Catalog: the schemas, enum types, tables and indexes the statements run against.

Only DDL is accepted. A statement the catalog does not understand is an error naming its
line, never silently skipped: a half-read schema would let a wrong query through.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from .diagnostics import Problem, SqlSpan
from .pgtypes import PgType, UnknownType, qualified_name, resolve_datatype


@dataclass(frozen=True)
class Column:
    name: str
    type: PgType
    not_null: bool
    has_default: bool


@dataclass(frozen=True)
class Table:
    schema: str
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    unique_keys: tuple[tuple[str, ...], ...] = ()

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"

    def column(self, name: str) -> Column | None:
        for col in self.columns:
            if col.name == name:
                return col
        return None


@dataclass(frozen=True)
class Index:
    name: str
    table: str
    columns: tuple[str, ...]
    unique: bool
    partial: bool


@dataclass(frozen=True)
class Catalog:
    schemas: frozenset[str]
    enums: dict[str, tuple[str, ...]]
    tables: dict[str, Table]
    indexes: dict[str, Index]

    def table(self, name: str) -> Table | None:
        """A table by `schema.name`, or by bare name in `public`."""
        return self.tables.get(name if "." in name else f"public.{name}")

    def table_names(self) -> list[str]:
        return sorted(self.tables)


@dataclass
class _Builder:
    schemas: set[str] = field(default_factory=lambda: {"public"})
    enums: dict[str, tuple[str, ...]] = field(default_factory=dict)
    tables: dict[str, Table] = field(default_factory=dict)
    indexes: dict[str, Index] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


def _span_of(node: exp.Expression) -> SqlSpan | None:
    starts: list[int] = []
    ends: list[int] = []
    for sub in node.walk():
        meta = sub.meta if isinstance(sub, exp.Expression) else {}
        if "start" in meta and "end" in meta:
            starts.append(int(meta["start"]))
            ends.append(int(meta["end"]))
    if not starts:
        return None
    return SqlSpan(min(starts), max(ends))


def _qualify(table: exp.Table) -> str:
    name = qualified_name(table)
    return name if "." in name else f"public.{name}"


def build_catalog(sql: str) -> tuple[Catalog, list[Problem]]:
    """Parse `sql` and build the catalog. Problems carry spans into `sql`."""
    b = _Builder()
    try:
        statements = sqlglot.parse(sql, read="postgres")
    except (ParseError, TokenError) as err:
        return _freeze(b), [_parse_problem(err)]
    for stmt in statements:
        if stmt is None:
            continue
        try:
            _apply(b, stmt)
        except UnknownType as err:
            b.problems.append(Problem(f"unknown type {err}", _span_of(stmt)))
    return _freeze(b), b.problems


def _freeze(b: _Builder) -> Catalog:
    return Catalog(frozenset(b.schemas), dict(b.enums), dict(b.tables), dict(b.indexes))


def _parse_problem(err: ParseError | TokenError) -> Problem:
    errors = getattr(err, "errors", None) or []
    if errors:
        first = errors[0]
        desc = str(first.get("description", "syntax error"))
        start = len(str(first.get("start_context", "")))
        return Problem(f"syntax error: {desc.split(' <Token')[0]}", _line_col_span(first))
    return Problem(f"syntax error: {err}")


def _line_col_span(error: dict[str, object]) -> SqlSpan | None:
    # sqlglot reports the failing token's line/col, not its offset; the caller maps it.
    return None


def _apply(b: _Builder, stmt: exp.Expression) -> None:
    if isinstance(stmt, exp.Create):
        kind = str(stmt.args.get("kind") or "").upper()
        if kind == "SCHEMA":
            target = stmt.this
            name = qualified_name(target.args["db"]) if isinstance(target, exp.Table) and target.args.get("db") else qualified_name(target)
            b.schemas.add(name)
            return
        if kind == "TYPE" and isinstance(stmt.expression, exp.DataType) and stmt.expression.this == exp.DataType.Type.ENUM:
            name = _qualify(stmt.this)
            labels = tuple(str(lit.this) for lit in stmt.expression.expressions)
            b.enums[name] = labels
            return
        if kind == "TABLE" and isinstance(stmt.this, exp.Schema):
            _create_table(b, stmt.this)
            return
        if kind == "INDEX" and isinstance(stmt.this, exp.Index):
            _create_index(b, stmt, stmt.this)
            return
    if isinstance(stmt, exp.Alter) and str(stmt.args.get("kind") or "").upper() == "TABLE":
        _alter_table(b, stmt)
        return
    if isinstance(stmt, exp.Comment):
        return
    first_line = stmt.sql(dialect="postgres").split("\n")[0][:60]
    b.problems.append(Problem(f"unsupported statement in schema: {first_line}", _span_of(stmt)))


def _create_table(b: _Builder, schema: exp.Schema) -> None:
    table_node = schema.this
    assert isinstance(table_node, exp.Table)
    qname = _qualify(table_node)
    schema_name, _, table_name = qname.partition(".")
    if schema_name not in b.schemas:
        b.problems.append(Problem(f"schema {schema_name} is not created before table {qname}", _span_of(table_node)))
    columns: list[Column] = []
    primary: tuple[str, ...] = ()
    uniques: list[tuple[str, ...]] = []
    for item in schema.expressions:
        if isinstance(item, exp.ColumnDef):
            col, is_pk, is_unique = _column(b, item)
            columns.append(col)
            if is_pk:
                primary = (col.name,)
            if is_unique:
                uniques.append((col.name,))
        elif isinstance(item, exp.PrimaryKey):
            primary = tuple(qualified_name(c.this if isinstance(c, exp.Ordered) else c) for c in item.expressions)
        elif isinstance(item, exp.UniqueColumnConstraint) or isinstance(item, exp.Unique):
            target = item.this
            cols = target.expressions if isinstance(target, exp.Schema) else []
            uniques.append(tuple(qualified_name(c) for c in cols))
        # CHECK and FOREIGN KEY table constraints do not change the column model.
    if primary:
        columns = [replace(c, not_null=True) if c.name in primary else c for c in columns]
        uniques.append(primary)
    b.tables[qname] = Table(schema_name, table_name, tuple(columns), primary, tuple(uniques))


def _column(b: _Builder, item: exp.ColumnDef) -> tuple[Column, bool, bool]:
    name = qualified_name(item.this)
    kind = item.args.get("kind")
    if not isinstance(kind, exp.DataType):
        raise UnknownType(f"(none) for column {name}")
    pgtype = resolve_datatype(kind, b.enums)
    not_null = is_pk = is_unique = False
    has_default = kind.this in (exp.DataType.Type.SERIAL, exp.DataType.Type.BIGSERIAL, exp.DataType.Type.SMALLSERIAL)
    for constraint in item.args.get("constraints") or []:
        ck = constraint.args.get("kind") if isinstance(constraint, exp.ColumnConstraint) else constraint
        if isinstance(ck, exp.NotNullColumnConstraint):
            not_null = not ck.args.get("allow_null")
        elif isinstance(ck, exp.PrimaryKeyColumnConstraint):
            is_pk = not_null = True
        elif isinstance(ck, exp.UniqueColumnConstraint):
            is_unique = True
        elif isinstance(ck, (exp.DefaultColumnConstraint, exp.GeneratedAsIdentityColumnConstraint)):
            has_default = True
    return Column(name, pgtype, not_null, has_default), is_pk, is_unique


def _create_index(b: _Builder, stmt: exp.Create, index: exp.Index) -> None:
    table = index.args.get("table")
    if not isinstance(table, exp.Table):
        b.problems.append(Problem("CREATE INDEX without a table", _span_of(stmt)))
        return
    qname = _qualify(table)
    target = b.tables.get(qname)
    if target is None:
        b.problems.append(Problem(f"index on unknown table {qname}", _span_of(table)))
        return
    params = index.args.get("params")
    cols: list[str] = []
    for ordered in params.args.get("columns") or [] if params else []:
        col = ordered.this if isinstance(ordered, exp.Ordered) else ordered
        if isinstance(col, exp.Column):
            cname = qualified_name(col.this)
            if target.column(cname) is None:
                b.problems.append(Problem(f"index column {cname} does not exist in {qname}", _span_of(col)))
            cols.append(cname)
    name = qualified_name(index.this) if index.this else f"{target.name}_idx"
    partial = bool(params and params.args.get("where"))
    unique = bool(stmt.args.get("unique"))
    b.indexes[name] = Index(name, qname, tuple(cols), unique, partial)
    if unique and not partial:
        b.tables[qname] = replace(target, unique_keys=(*target.unique_keys, tuple(cols)))


def _alter_table(b: _Builder, stmt: exp.Alter) -> None:
    table_node = stmt.this
    assert isinstance(table_node, exp.Table)
    qname = _qualify(table_node)
    table = b.tables.get(qname)
    if table is None:
        b.problems.append(Problem(f"ALTER TABLE of unknown table {qname}", _span_of(table_node)))
        return
    columns = list(table.columns)
    for action in stmt.args.get("actions") or []:
        if isinstance(action, exp.ColumnDef):
            col, _, _ = _column(b, action)
            columns.append(col)
        elif isinstance(action, exp.Drop) and str(action.args.get("kind") or "").upper() == "COLUMN":
            names = {qualified_name(c.this if isinstance(c, exp.Column) else c) for c in action.args.get("tables") or []}
            columns = [c for c in columns if c.name not in names]
        elif isinstance(action, exp.AlterColumn):
            cname = qualified_name(action.this)
            idx = next((i for i, c in enumerate(columns) if c.name == cname), None)
            if idx is None:
                b.problems.append(Problem(f"column {cname} does not exist in {qname}", _span_of(action)))
                continue
            col = columns[idx]
            dtype = action.args.get("dtype")
            if isinstance(dtype, exp.DataType):
                col = replace(col, type=resolve_datatype(dtype, b.enums))
            if action.args.get("drop") and action.args.get("allow_null"):
                col = replace(col, not_null=False)
            elif action.args.get("allow_null") is False:
                col = replace(col, not_null=True)
            if action.args.get("default") is not None:
                col = replace(col, has_default=True)
            elif action.args.get("drop") and not action.args.get("allow_null"):
                col = replace(col, has_default=False)
            columns[idx] = col
        else:
            b.problems.append(Problem(f"unsupported ALTER TABLE action: {action.sql(dialect='postgres')[:60]}", _span_of(action)))
    b.tables[qname] = replace(table, columns=tuple(columns))
