"""schema.sql -> Catalog: the schemas, enum types, tables and indexes the statements run against.

Only DDL is accepted. A statement the catalog does not understand is an error naming its
line, never silently skipped: a half-read schema would let a wrong query through.

The file is split into statements with sqlglot's tokenizer (so `;` inside strings, comments
and `$$` bodies does not split) and each statement is parsed on its own: one syntax error
is reported at its line and the rest of the file is still read.
"""

from __future__ import annotations

import difflib
import logging
import re
from dataclasses import dataclass, field, replace

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokenizer_core import TokenType

from ..diagnostics import Problem, SqlSpan, stray_comma, syntax_problem, unterminated_at
from .types import PgType, UnknownType, qualified_name, resolve_datatype, span_of

# sqlglot logs a WARNING whenever it falls back to a Command (every plpgsql CREATE FUNCTION);
# the catalog handles those itself, so keep the plugin's stderr for real diagnostics.
logging.getLogger("sqlglot").setLevel(logging.ERROR)


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
    #: Where the statement being applied starts in the file: node spans are relative to it.
    offset: int = 0
    #: The span of the current statement's first line, for problems no node can place.
    statement_span: SqlSpan | None = None

    def problem(self, message: str, node: exp.Expr | None = None) -> None:
        span = span_of(node) if node is not None else None
        if span is None:
            self.problems.append(Problem(message, self.statement_span))
        else:
            self.problems.append(Problem(message, SqlSpan(span.start + self.offset, span.end + self.offset)))


def _qualify(table: exp.Expr) -> str:
    name = qualified_name(table)
    return name if "." in name else f"public.{name}"


def split_statements(sql: str) -> list[tuple[int, str]]:
    """(offset, text) of each `;`-terminated statement, by sqlglot's tokenizer: a `;` in a
    string, comment or dollar-quoted body does not end a statement. Raises TokenError."""
    tokens = sqlglot.tokenize(sql, read="postgres")
    out: list[tuple[int, str]] = []
    start: int | None = None
    for tok in tokens:
        if tok.token_type == TokenType.SEMICOLON:
            if start is not None:
                out.append((start, sql[start : tok.end + 1]))
            start = None
        elif start is None:
            start = tok.start
    if start is not None:
        out.append((start, sql[start:]))
    return out


def build_catalog(sql: str) -> tuple[Catalog, list[Problem]]:
    """Parse `sql` and build the catalog. Problems carry spans into `sql`."""
    b = _Builder()
    try:
        chunks = split_statements(sql)
    except TokenError:
        at = unterminated_at(sql)
        return _freeze(b), [Problem("syntax error: unterminated string, quoted identifier or comment", at)]
    for offset, text in chunks:
        line_end = text.find("\n")
        b.offset = offset
        b.statement_span = SqlSpan(offset, offset + (line_end if line_end > 0 else len(text)) - 1)
        try:
            statements = sqlglot.parse(text, read="postgres")
        except ParseError as err:
            problem = syntax_problem(text, err)
            span = problem.span
            b.problems.append(
                replace(problem, span=SqlSpan(span.start + offset, span.end + offset) if span else b.statement_span)
            )
            continue
        except TokenError:
            b.problems.append(Problem("syntax error: cannot read this statement", b.statement_span))
            continue
        comma = stray_comma(text)
        if comma is not None and comma.span is not None:
            b.problems.append(replace(comma, span=SqlSpan(comma.span.start + offset, comma.span.end + offset)))
            continue
        for stmt in statements:
            if stmt is not None:
                _apply(b, stmt)
    return _freeze(b), b.problems


def _freeze(b: _Builder) -> Catalog:
    return Catalog(frozenset(b.schemas), dict(b.enums), dict(b.tables), dict(b.indexes))


# CREATE [OR REPLACE] FUNCTION/PROCEDURE with a body sqlglot cannot parse (plpgsql) falls back
# to a Command; ALTER TYPE ... ADD VALUE too.
_FUNCTION_COMMAND = re.compile(r"^\s*(OR\s+REPLACE\s+)?(FUNCTION|PROCEDURE)\b", re.IGNORECASE)
_ADD_VALUE = re.compile(
    r"^\s*TYPE\s+(?P<name>[\w.\"]+)\s+ADD\s+VALUE\s+(IF\s+NOT\s+EXISTS\s+)?'(?P<label>(?:[^']|'')*)'"
    r"(\s+(?P<where>BEFORE|AFTER)\s+'(?P<other>(?:[^']|'')*)')?\s*;?\s*$",
    re.IGNORECASE,
)


def _apply(b: _Builder, stmt: exp.Expr) -> None:
    if isinstance(stmt, exp.Create):
        kind = str(stmt.args.get("kind") or "").upper()
        if kind == "SCHEMA":
            target = stmt.this
            db = target.args.get("db") if isinstance(target, exp.Table) else None
            b.schemas.add(qualified_name(db) if isinstance(db, exp.Expr) else qualified_name(target))
            return
        enum = stmt.expression
        if kind == "TYPE" and isinstance(enum, exp.DataType) and enum.this == exp.DataType.Type.ENUM:
            name = _qualify(stmt.this)
            _check_schema(b, name, stmt.this)
            labels = tuple(str(lit.this) for lit in enum.expressions)
            if len(set(labels)) != len(labels):
                b.problem(f"enum {name} repeats a label", stmt.this)
            b.enums[name] = labels
            return
        if kind == "TABLE" and isinstance(stmt.this, exp.Schema):
            if stmt.expression is not None:
                b.problem("CREATE TABLE ... AS is not supported in schema.sql; list the columns", stmt.expression)
                return
            _create_table(b, stmt.this)
            return
        if kind == "INDEX" and isinstance(stmt.this, exp.Index):
            _create_index(b, stmt, stmt.this)
            return
        if kind in ("FUNCTION", "PROCEDURE"):
            return  # functions do not change the tables' shape; their bodies are not checked
        if kind == "TRIGGER":
            _create_trigger(b, stmt)
            return
    if isinstance(stmt, exp.Alter) and str(stmt.args.get("kind") or "").upper() == "TABLE":
        _alter_table(b, stmt)
        return
    if isinstance(stmt, exp.Comment):
        _comment(b, stmt)
        return
    if isinstance(stmt, exp.Command):
        keyword = str(stmt.this).upper()
        rest = str(stmt.expression or "")
        if keyword == "CREATE" and _FUNCTION_COMMAND.match(rest):
            return
        if keyword == "ALTER" and _alter_type_add_value(b, rest):
            return
        if re.match(r"^\s*(TABLE|INDEX|UNIQUE|TYPE|SCHEMA)\b", rest, re.IGNORECASE):
            # sqlglot gave up on a statement it knows: a syntax error it did not locate.
            b.problem(
                f"syntax error in {keyword} {rest.split()[0].upper()}: sqlglot cannot read this statement "
                "(a missing `;` before the next one?)"
            )
            return
    first_line = stmt.sql(dialect="postgres").split("\n")[0]
    if len(first_line) > 60:
        first_line = first_line[:57] + "..."
    b.problem(
        f"unsupported statement in schema: {first_line} (schema.sql takes CREATE SCHEMA/TYPE/TABLE/INDEX/FUNCTION/"
        "TRIGGER, ALTER TABLE and COMMENT; see docs/diagnostics.md)"
    )


def _check_schema(b: _Builder, qname: str, node: exp.Expr) -> None:
    schema_name = qname.partition(".")[0]
    if schema_name not in b.schemas:
        b.problem(f"schema {schema_name} does not exist; add CREATE SCHEMA {schema_name} before {qname}", node)


def _create_table(b: _Builder, schema: exp.Schema) -> None:
    table_node = schema.this
    if not isinstance(table_node, exp.Table):
        b.problem("CREATE TABLE without a table name", schema)
        return
    qname = _qualify(table_node)
    schema_name, _, table_name = qname.partition(".")
    _check_schema(b, qname, table_node)
    if qname in b.tables:
        b.problem(f"table {qname} is created twice", table_node)
    columns: list[Column] = []
    primary: tuple[str, ...] = ()
    uniques: list[tuple[str, ...]] = []
    key_nodes: list[exp.Expr] = []  # the identifiers PRIMARY KEY (...) and UNIQUE (...) name
    references: list[tuple[exp.Reference, exp.Expr]] = []
    for item in schema.expressions:
        constraint_items: list[exp.Expr] = [item]
        if isinstance(item, exp.Constraint):  # CONSTRAINT name <constraint>
            constraint_items = list(item.expressions)
        for ci in constraint_items:
            if isinstance(ci, exp.ColumnDef):
                result = _column(b, ci)
                if result is None:
                    continue
                col, is_pk, is_unique, refs = result
                if any(c.name == col.name for c in columns):
                    b.problem(f"column {col.name} is specified more than once in {qname}", ci.this)
                columns.append(col)
                references.extend((r, ci) for r in refs)
                if is_pk:
                    primary = (col.name,)
                if is_unique:
                    uniques.append((col.name,))
            elif isinstance(ci, exp.PrimaryKey):
                primary = tuple(_key_name(c) for c in ci.expressions)
                key_nodes.extend(ci.expressions)
            elif isinstance(ci, exp.UniqueColumnConstraint):
                target = ci.this
                cols = target.expressions if isinstance(target, exp.Schema) else []
                uniques.append(tuple(_key_name(c) for c in cols))
                key_nodes.extend(cols)
            elif isinstance(ci, exp.ForeignKey):
                ref = ci.args.get("reference")
                if isinstance(ref, exp.Reference):
                    references.append((ref, ci))
            # CHECK and EXCLUDE table constraints do not change the column model.
    names = [c.name for c in columns]
    for key_node in key_nodes:
        cname = _key_name(key_node)
        if cname not in names:
            b.problem(f"key column {cname} does not exist in {qname}{_suggest(cname, names)}", key_node)
    if primary:
        columns = [replace(c, not_null=True) if c.name in primary else c for c in columns]
        uniques.append(primary)
    table = Table(schema_name, table_name, tuple(columns), primary, tuple(uniques))
    b.tables[qname] = table
    for ref, node in references:
        _check_reference(b, ref, node)


def _key_name(node: exp.Expr) -> str:
    if isinstance(node, exp.Ordered):
        node = node.this
    if isinstance(node, exp.Column):
        return qualified_name(node.this)
    return qualified_name(node)


def _check_reference(b: _Builder, ref: exp.Reference, node: exp.Expr) -> None:
    """REFERENCES other (cols): the table and its columns must exist (or be the table being
    created, which is in `b.tables` by now)."""
    target = ref.this
    table_node = target.this if isinstance(target, exp.Schema) else target
    if not isinstance(table_node, exp.Table):
        return
    qname = _qualify(table_node)
    table = b.tables.get(qname)
    if table is None:
        b.problem(f"REFERENCES unknown table {qname}", table_node)
        return
    cols = target.expressions if isinstance(target, exp.Schema) else []
    for c in cols:
        cname = _key_name(c)
        if table.column(cname) is None:
            b.problem(f"REFERENCES unknown column {cname} of {qname}", c)


def _column(b: _Builder, item: exp.ColumnDef) -> tuple[Column, bool, bool, list[exp.Reference]] | None:
    name = qualified_name(item.this)
    kind = item.args.get("kind")
    if isinstance(kind, exp.DataType) and isinstance(kind.this, exp.Interval):
        pgtype = PgType("interval")  # `interval day` and friends
    elif not isinstance(kind, exp.DataType):
        b.problem(f"column {name} has no type", item)
        return None
    else:
        try:
            pgtype = resolve_datatype(kind, b.enums)
        except UnknownType as err:
            # sqlglot places no tokens on a DataType: point at the column's name.
            b.problem(
                f"type {err} does not exist (column {name}; see the supported types in docs/diagnostics.md)", item.this
            )
            return None
    not_null = is_pk = is_unique = False
    has_default = isinstance(kind, exp.DataType) and kind.this in (
        exp.DataType.Type.SERIAL,
        exp.DataType.Type.BIGSERIAL,
        exp.DataType.Type.SMALLSERIAL,
    )
    refs: list[exp.Reference] = []
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
        elif isinstance(ck, exp.Reference):
            refs.append(ck)
    return Column(name, pgtype, not_null, has_default), is_pk, is_unique, refs


def _create_index(b: _Builder, stmt: exp.Create, index: exp.Index) -> None:
    table = index.args.get("table")
    if not isinstance(table, exp.Table):
        b.problem("CREATE INDEX without a table", stmt)
        return
    qname = _qualify(table)
    target = b.tables.get(qname)
    if target is None:
        b.problem(f"index on unknown table {qname}", table)
        return
    params = index.args.get("params")
    cols: list[str] = []
    plain = True  # every key is a column (not an expression like lower(email))
    for ordered in (params.args.get("columns") or []) if params else []:
        col = ordered.this if isinstance(ordered, exp.Ordered) else ordered
        if isinstance(col, exp.Column):
            cname = qualified_name(col.this)
            if target.column(cname) is None:
                b.problem(
                    f"index column {cname} does not exist in {qname}{_suggest(cname, [c.name for c in target.columns])}",
                    col,
                )
            cols.append(cname)
        else:
            plain = False
            for ref in col.find_all(exp.Column):
                cname = qualified_name(ref.this)
                if target.column(cname) is None:
                    b.problem(f"index expression names column {cname}, which does not exist in {qname}", ref)
    where = params.args.get("where") if params else None
    if isinstance(where, exp.Expr):
        for ref in where.find_all(exp.Column):
            cname = qualified_name(ref.this)
            if target.column(cname) is None:
                b.problem(f"index predicate names column {cname}, which does not exist in {qname}", ref)
    name = qualified_name(index.this) if index.this else f"{target.name}_{'_'.join(cols)}_idx"
    partial = where is not None
    unique = bool(stmt.args.get("unique"))
    b.indexes[name] = Index(name, qname, tuple(cols), unique, partial)
    # A partial unique index only backs ON CONFLICT with a matching WHERE; not modelled.
    if unique and not partial and plain:
        b.tables[qname] = replace(target, unique_keys=(*target.unique_keys, tuple(cols)))


def _create_trigger(b: _Builder, stmt: exp.Create) -> None:
    """Triggers do not change the tables' shape; the table they are on must exist."""
    for table in stmt.find_all(exp.Table):
        parent = table.parent
        if isinstance(parent, exp.TriggerProperties) and parent.args.get("table") is table:
            qname = _qualify(table)
            if qname not in b.tables:
                b.problem(f"trigger on unknown table {qname}", table)


def _comment(b: _Builder, stmt: exp.Comment) -> None:
    kind = str(stmt.args.get("kind") or "").upper()
    target = stmt.this
    if kind == "TABLE" and isinstance(target, exp.Table):
        qname = _qualify(target)
        if qname not in b.tables:
            b.problem(f"COMMENT ON unknown table {qname}", target)
    elif kind == "COLUMN" and isinstance(target, exp.Column):
        parts = [qualified_name(p) for p in target.parts]
        qname = ".".join(parts[:-1]) if len(parts) > 2 else f"public.{parts[0]}" if len(parts) == 2 else ""
        table = b.tables.get(qname)
        if table is None:
            b.problem(f"COMMENT ON COLUMN of unknown table {qname or parts[-1]}", target)
        elif table.column(parts[-1]) is None:
            b.problem(f"COMMENT ON unknown column {parts[-1]} of {qname}", target)


def _alter_type_add_value(b: _Builder, text: str) -> bool:
    m = _ADD_VALUE.match(text)
    if m is None:
        return False
    name = m["name"].replace('"', "")
    name = name.lower() if '"' not in m["name"] else name
    qname = name if "." in name else f"public.{name}"
    labels = b.enums.get(qname)
    if labels is None:
        b.problem(f"ALTER TYPE of unknown enum {qname}")
        return True
    label = m["label"].replace("''", "'")
    if label in labels:
        return True
    if m["where"] and m["other"] in labels:
        i = labels.index(m["other"]) + (1 if m["where"].upper() == "AFTER" else 0)
        b.enums[qname] = (*labels[:i], label, *labels[i:])
    else:
        b.enums[qname] = (*labels, label)
    # Tables already hold the old enum type: refresh their columns' labels.
    for tname, table in b.tables.items():
        cols = tuple(
            replace(c, type=PgType(c.type.name, c.type.is_array, b.enums[qname])) if c.type.name == qname else c
            for c in table.columns
        )
        b.tables[tname] = replace(table, columns=cols)
    return True


def _alter_table(b: _Builder, stmt: exp.Alter) -> None:
    table_node = stmt.this
    if not isinstance(table_node, exp.Table):
        b.problem("ALTER TABLE without a table name", stmt)
        return
    qname = _qualify(table_node)
    table = b.tables.get(qname)
    if table is None:
        b.problem(f"ALTER TABLE of unknown table {qname}{_suggest(qname, sorted(b.tables))}", table_node)
        return
    columns = list(table.columns)
    uniques = list(table.unique_keys)
    primary = table.primary_key
    for action in stmt.args.get("actions") or []:
        if isinstance(action, exp.ColumnDef):
            result = _column(b, action)
            if result is None:
                continue
            col, is_pk, is_unique, refs = result
            if any(c.name == col.name for c in columns):
                if not action.args.get("exists"):  # ADD COLUMN IF NOT EXISTS is a no-op then
                    b.problem(f"column {col.name} of {qname} already exists", action.this)
                continue
            columns.append(col)
            if is_pk:
                primary = (col.name,)
                uniques.append(primary)
            if is_unique:
                uniques.append((col.name,))
            for ref in refs:
                _check_reference(b, ref, action)
        elif isinstance(action, exp.Drop) and str(action.args.get("kind") or "").upper() == "COLUMN":
            for c in action.args.get("tables") or []:
                cname = qualified_name(c.this if isinstance(c, exp.Column) else c)
                if not any(x.name == cname for x in columns):
                    if not action.args.get("exists"):
                        b.problem(f"column {cname} does not exist in {qname}", c)
                    continue
                columns = [x for x in columns if x.name != cname]
                uniques = [u for u in uniques if cname not in u]
                if cname in primary:
                    primary = ()
        elif isinstance(action, exp.AlterColumn):
            cname = qualified_name(action.this)
            idx = next((i for i, c in enumerate(columns) if c.name == cname), None)
            if idx is None:
                b.problem(
                    f"column {cname} does not exist in {qname}{_suggest(cname, [c.name for c in columns])}",
                    action.this,
                )
                continue
            columns[idx] = _alter_column(b, columns[idx], action)
        elif isinstance(action, exp.RenameColumn):
            old = qualified_name(action.this.this if isinstance(action.this, exp.Column) else action.this)
            to = action.args.get("to")
            new = qualified_name(to.this if isinstance(to, exp.Column) else to) if isinstance(to, exp.Expr) else old
            idx = next((i for i, c in enumerate(columns) if c.name == old), None)
            if idx is None:
                b.problem(f"column {old} does not exist in {qname}", action.this)
                continue
            columns[idx] = replace(columns[idx], name=new)
            uniques = [tuple(new if k == old else k for k in u) for u in uniques]
            primary = tuple(new if k == old else k for k in primary)
        elif isinstance(action, exp.AddConstraint):
            for constraint in action.expressions:
                inner = constraint.expressions if isinstance(constraint, exp.Constraint) else [constraint]
                for ci in inner:
                    if isinstance(ci, exp.UniqueColumnConstraint) and isinstance(ci.this, exp.Schema):
                        uniques.append(tuple(_key_name(c) for c in ci.this.expressions))
                    elif isinstance(ci, exp.PrimaryKey):
                        primary = tuple(_key_name(c) for c in ci.expressions)
                        uniques.append(primary)
                        columns = [replace(c, not_null=True) if c.name in primary else c for c in columns]
                    elif isinstance(ci, exp.ForeignKey):
                        fk_ref = ci.args.get("reference")
                        if isinstance(fk_ref, exp.Reference):
                            _check_reference(b, fk_ref, ci)
        else:
            text = action.sql(dialect="postgres")
            b.problem(f"unsupported ALTER TABLE action: {text[:57] + '...' if len(text) > 60 else text}", action)
    b.tables[qname] = replace(table, columns=tuple(columns), unique_keys=tuple(uniques), primary_key=primary)


def _alter_column(b: _Builder, col: Column, action: exp.AlterColumn) -> Column:
    """ALTER COLUMN: TYPE, SET/DROP NOT NULL, SET/DROP DEFAULT."""
    dtype = action.args.get("dtype")
    if isinstance(dtype, exp.DataType):
        try:
            col = replace(col, type=resolve_datatype(dtype, b.enums))
        except UnknownType as err:
            b.problem(f"type {err} does not exist (see the supported types in docs/diagnostics.md)", dtype)
    drop = bool(action.args.get("drop"))
    allow_null = action.args.get("allow_null")
    if allow_null is True and drop:
        col = replace(col, not_null=False)
    elif allow_null is False:
        col = replace(col, not_null=True)
    elif action.args.get("default") is not None:
        col = replace(col, has_default=True)
    elif drop:
        col = replace(col, has_default=False)
    return col


def _suggest(name: str, candidates: list[str]) -> str:
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""
