"""IR -> render model: the Python for each value's conversion, psycopg placeholders, the probe's
SQL with quoted identifiers, module aliases and helper names. Decides nothing about SQL
validity: everything here was checked by bind."""

from __future__ import annotations

import json
import keyword
from dataclasses import dataclass, field, replace

from pydb import __version__

from ..bind import ir, typemap
from ..protos import python_module, snake_case
from ..sql import quote_ident
from . import copying, model, shaped
from .text import py_str, py_tuple

_C = ir.Conversion

#: Conversions whose Python value is the text PostgreSQL sends (a text loader for the type).
_TEXT_LOADED = frozenset({_C.TEXT, _C.UUID})
#: Types whose binary form psycopg loads (in C) as the same value as their text form: a streamed
#: read of only these, enums and timestamps reads its cursor in binary (rt.binary_loaders).
_BINARY_SAME = frozenset({"bool", "int2", "int4", "int8", "float4", "float8", "text", "varchar", "bpchar", "bytea"})
_LISTEN_PARSERS = {
    ir.ListenFilter.TEXT: None,
    ir.ListenFilter.UUID: "rt.parse_uuids",
    ir.ListenFilter.INTEGER: "rt.parse_ints",
}


def argument(name: str, expr: str) -> str:
    """A keyword argument of a message constructor; Python keywords go through `**{...}`."""
    return f"**{{{py_str(name)}: {expr}}}" if keyword.iskeyword(name) else f"{name}={expr}"


def attribute(obj: str, name: str) -> str:
    return f"getattr({obj}, {py_str(name)})" if keyword.iskeyword(name) else f"{obj}.{name}"


@dataclass
class _Module:
    """Per-file state: imports and helpers the generated module needs."""

    proto: str
    imports: dict[str, str] = field(default_factory=dict)  # pb2 module -> alias
    enums: dict[tuple[str, str], model.EnumMap] = field(default_factory=dict)
    converters: dict[tuple[str, tuple[str, ...]], model.RowConverter] = field(default_factory=dict)

    def alias(self, proto_file: str) -> str:
        module = python_module(proto_file)
        if module not in self.imports:
            alias = module.rsplit(".", 1)[-1]
            if alias in self.imports.values():
                alias = module.replace(".", "_")
            self.imports[module] = alias
        return self.imports[module]

    def type(self, ref: ir.TypeRef) -> str:
        return f"{self.alias(ref.file)}.{ref.local_name}"

    def enum_map(self, mapping: ir.EnumMapping, to_pg: bool) -> model.EnumMap:
        key = (mapping.pg_type, mapping.proto.full_name)
        existing = self.enums.get(key)
        base = "_" + snake_case(mapping.proto.local_name.replace(".", "")).upper()
        # Values of a nested enum live on the enclosing message; of a top-level one, on the module.
        scope = self.type(mapping.proto).rsplit(".", 1)[0]
        em = model.EnumMap(
            from_pg_name=base + "_FROM_PG",
            to_pg_name=base + "_TO_PG",
            proto_type=self.type(mapping.proto),
            pairs=tuple((label, f"{scope}.{value}") for label, value in mapping.pairs),
            pg_type=mapping.pg_type,
            used_from_pg=(existing is not None and existing.used_from_pg) or not to_pg,
            used_to_pg=(existing is not None and existing.used_to_pg) or to_pg,
        )
        self.enums[key] = em
        return em

    # -- parameters ------------------------------------------------------------------------
    def param(self, p: ir.Param, message: str = "request") -> model.ParamBinding:
        """The value bound for `p`, read from the field of `message` (a variable's name)."""
        f = p.field
        access = attribute(message, f.name)
        if f.wrapper is not None:
            access += ".value"
        quoted = py_str(f.name)
        if p.conversion is _C.ENUM:
            assert p.enum is not None
            labels = self.enum_map(p.enum, to_pg=True).to_pg_name
            one, many = f"rt.enum_label({labels}, {{}}, {quoted})", None
        elif p.conversion is _C.UUID:
            one, many = f"rt.parse_uuid({{}}, {quoted})", f"rt.parse_uuids({{}}, {quoted})"
        elif p.conversion is _C.TIMESTAMP:
            one, many = f"rt.timestamp_param({{}}, {quoted})", None
        elif p.conversion is _C.DURATION:
            one, many = "{}.ToTimedelta()", None
        elif p.pg_type.name in typemap.ARRAY_DELIMITERS:  # box[]: psycopg would join with `,`
            one, many = "{}", f"rt.array_text({{}}, {py_str(typemap.ARRAY_DELIMITERS[p.pg_type.name])})"
        else:  # the field's value is what psycopg sends: numbers, bool, bytes, text
            one, many = "{}", "list({})"
        if f.repeated:
            expr = many.format(access) if many else f"[{one.format('v')} for v in {access}]"
        else:
            expr = one.format(access)
        if f.presence:
            expr = f"{expr} if {message}.HasField({quoted}) else None"
        return model.ParamBinding(p.name, expr)

    # -- results ---------------------------------------------------------------------------
    def value(self, c: ir.Column, binary: bool = False) -> str:
        """`c`'s value in `row`; `binary`: read from a binary cursor (timestamps as microseconds)."""
        v = f"row[{c.position}]"
        if c.conversion is _C.ENUM:
            assert c.enum is not None
            zero = f"{self.type(c.enum.proto).rsplit('.', 1)[0]}.{c.enum.zero}"
            convert = self.enum_map(c.enum, to_pg=False).from_pg_name + f".get({{}}, {zero})"
        elif c.conversion is _C.NUMERIC_TEXT:
            convert = "str({})"
        elif c.conversion is _C.NUMERIC_DOUBLE:
            convert = "float({})"
        elif c.conversion is _C.TIMESTAMP and binary:
            convert = "rt.timestamp_micros({})"  # int8 microseconds: no datetime in between
        elif c.conversion is _C.TIMESTAMP:
            convert = "rt.timestamp_value({})"  # seconds/nanos: 2x faster than protobuf converting
        elif c.conversion is _C.DURATION:
            convert = "rt.duration_value({})"
        else:
            convert = "{}"
        if c.field.wrapper is not None:
            convert = f"{self.type(c.field.wrapper)}(value={convert})"
        if c.field.repeated:
            # NULL reads as no elements; a NULL element is refused. psycopg does not know the
            # array types of enums and of types outside pg_catalog (citext, composites, ...):
            # it hands over the array's text form.
            as_text = c.pg_type.is_enum or c.conversion is _C.TEXT
            source = f"rt.text_array({v})" if as_text else f"rt.elements({v})"
            return source if convert == "{}" else f"[{convert.format('x')} for x in {source}]"
        if convert == "{}":
            return v
        if c.nullable:
            return f"None if {v} is None else {convert.format(v)}"
        return convert.format(v)

    def converter(self, row: ir.Row, table: str | None = None) -> str:
        """The name of the function turning a row into `row.message` (one per distinct body);
        `table`: the row is an element of an array of that table's rows (rt.table_rows)."""
        values = self.row_values(row)
        key = (row.message.full_name, tuple(v.argument for v in values))
        if key not in self.converters:
            base = f"_{snake_case(row.message.local_name.replace('.', ''))}_from_row"
            taken = {c.function for c in self.converters.values()}
            name, n = base, 2
            while name in taken:
                name, n = f"{base}_{n}", n + 1
            self.converters[key] = model.RowConverter(
                name, self.type(row.message), f"A result row as a {row.message.full_name}.", tuple(values)
            )
        found = self.converters[key]
        if table is not None and found.loads is None:
            const = found.function.removesuffix("_from_row").upper() + "_COLUMNS"
            types = py_tuple(tuple(_loaded_as(x) for x in sorted(_columns(row), key=lambda x: x.position)))
            self.converters[key] = replace(found, loads=(const, types, table))
        return found.function

    def row_values(self, row: ir.Row, binary: bool = False) -> list[model.FieldValue]:
        """A row as the keyword arguments of `row.message`'s constructor (`binary`: read from a
        binary cursor, `binary_stream`)."""
        values = []
        for c in row.columns:
            if isinstance(c, ir.Embedded):
                nested = self.converter(c.row)
                expr = f"{nested}(row)"
                if c.presence is not None:
                    expr = f"None if row[{c.presence}] is None else {expr}"
                comment = f"{c.name}: a joined row" + (
                    " (absent after an outer join)" if c.presence is not None else ""
                )
                values.append(model.FieldValue(argument(c.field.name, expr), comment))
            elif isinstance(c, ir.Nested):
                nested = self.converter(c.row, str(c.pg_type.element))
                loads = next(x.loads for x in self.converters.values() if x.function == nested)
                assert loads is not None
                expr = f"[{nested}(x) for x in rt.table_rows(row[{c.position}], {loads[0]})]"
                comment = f"{c.name} {c.pg_type}: a table's rows, one message each"
                values.append(model.FieldValue(argument(c.field.name, expr), comment))
            else:
                comment = f"{c.name} {c.pg_type}" + (" (nullable)" if c.nullable else "")
                values.append(model.FieldValue(argument(c.field.name, self.value(c, binary)), comment))
        return values


#: Generated SQL lines are kept to this width where a column list is what makes them long.
SQL_WIDTH = 100


def psycopg_sql(statement: ir.Statement) -> str:
    """The statement as psycopg takes it: parameters as `%(name)s`, every other `%` doubled,
    and each column list wrapped at SQL_WIDTH (continuation lines indented two spaces past the
    line the list starts on; what follows a wrapped list on its line moves to a line of its own
    when it would pass SQL_WIDTH). Only whitespace between tokens changes."""
    texts = [
        p.replace("%", "%%") if isinstance(p, str) else f"%({p.name})s" if isinstance(p, ir.ParamRef) else p
        for p in statement.pieces
    ]
    out = ""
    for i, piece in enumerate(texts):
        if isinstance(piece, str):
            out += piece
            continue
        line = out[out.rfind("\n") + 1 :]
        base = line[: len(line) - len(line.lstrip())]
        indent = base + "  "
        moved = bool(line.strip()) and len(line) + len(piece.columns[0]) > SQL_WIDTH
        if moved:  # the line is long already: the list starts on a line of its own
            out = out.rstrip(" ") + "\n" + indent
            line = indent
        listed = _wrapped(tuple(c.replace("%", "%%") for c in piece.columns), len(line), indent)
        out += listed
        rest = "".join(t if isinstance(t, str) else ", ".join(t.columns) for t in texts[i + 1 :]).split("\n", 1)[0]
        last = (line + listed).rsplit("\n", 1)[-1]
        if rest.startswith(" ") and (moved or ("\n" in listed and len(last) + len(rest) > SQL_WIDTH)):
            out += "\n" + base
            texts[i + 1] = str(texts[i + 1]).lstrip(" ")
    return out


def _wrapped(columns: tuple[str, ...], start: int, indent: str) -> str:
    """`columns` joined by commas from column `start` on, a new line (at `indent`) before a
    column that would pass SQL_WIDTH."""
    text, width = columns[0], start + len(columns[0])
    for column in columns[1:]:
        if width + 2 + len(column) > SQL_WIDTH:
            text += ",\n" + indent + column
            width = len(indent) + len(column)
        else:
            text += ", " + column
            width += 2 + len(column)
    return text


def _columns(row: ir.Row) -> list[ir.Column]:
    out: list[ir.Column] = []
    for c in row.columns:
        out += [c] if isinstance(c, ir.Column) else _columns(c.row)
    return out


def _rows(row: ir.Row) -> list[ir.Column | ir.Embedded | ir.Nested]:
    """`row`'s columns and those of the rows nested in it."""
    out: list[ir.Column | ir.Embedded | ir.Nested] = []
    for c in row.columns:
        out += [c] if isinstance(c, ir.Column) else [c, *_rows(c.row)]
    return out


def _loaded_as(c: ir.Column) -> str:
    """The built-in type whose psycopg loader reads `c` inside a table's row (rt.table_rows):
    its own, or `text` for the values read as their text form (enums, uuid, json, ...)."""
    if c.conversion in _TEXT_LOADED or c.conversion is _C.ENUM or "." in c.pg_type.name:
        name = "text"
    else:
        name = c.pg_type.name
    return name + "[]" if c.pg_type.is_array else name


def _braces(text: str) -> str:
    """`text` as the literal part of an f-string."""
    return text.replace("{", "{{").replace("}", "}}")


def _fstring(body: str) -> str:
    """An f-string literal around `body`: double-quoted, so the expressions in it may use single
    quotes (before Python 3.12 they may not hold a backslash)."""
    return "f" + json.dumps(body, ensure_ascii=False)


def _probe(rpc: ir.Rpc, const: str) -> model.Probe | None:
    p = rpc.probe
    if p is None:
        return None
    table = str(p.table)
    sql = f"SELECT 1 FROM {p.table.sql()} WHERE {quote_ident(p.key)} = ".replace("%", "%%") + f"%({p.param})s"
    key = "{params['" + p.param + "']}"  # parameter names are proto field names: identifiers
    return model.Probe(
        const=const,
        sql=sql,
        param=p.param,
        table=table,
        missing=_fstring(f"{_braces(table)} {key} does not exist"),
        wrong_state=_fstring(f"{rpc.name} does not apply to {_braces(table)} {key} in its current state"),
    )


def _rpc(m: _Module, rpc: ir.Rpc) -> model.Rpc:
    function = snake_case(rpc.name)
    response_type = m.type(rpc.response)
    response = ""
    text_types: tuple[str, ...] = ()
    timestamp_types: tuple[str, ...] = ()
    own_loaders = False
    can_fail = False
    if rpc.row is not None:
        # A streamed read fills each batch in place (stream_values): no converter of its own.
        converter = m.converter(rpc.row) if rpc.shape is not ir.Shape.SERVER_STREAM else ""
        if rpc.cardinality is ir.Cardinality.MANY:
            assert rpc.result_field is not None
            response = f"{response_type}({argument(rpc.result_field, f'[{converter}(row) for row in rows]')})"
        elif rpc.result_field:
            response = f"{response_type}({argument(rpc.result_field, f'{converter}(row)')})"
        else:
            response = f"{converter}(row)"
        columns = _columns(rpc.row)
        text_types = tuple(sorted({c.pg_type.name for c in columns if c.conversion in _TEXT_LOADED}))
        timestamp_types = tuple(sorted({c.pg_type.name for c in columns if c.conversion is _C.TIMESTAMP}))
        # An array of a table's rows must reach rt.table_rows as its text form: a handler with
        # rows of it reads with loaders of its own, whatever the connection's owner registered.
        own_loaders = any(isinstance(c, ir.Nested) for c in _rows(rpc.row))
        # Every value converts (docs/diagnostics.md) but a NULL element of an array.
        can_fail = any(c.field.repeated for c in columns)
    if rpc.cardinality is ir.Cardinality.EXEC_ROWS:
        assert rpc.result_field is not None
        written = "written" if rpc.shape is ir.Shape.COPY else "await rt.row_count(conn, cur)"
        response = f"{response_type}({argument(rpc.result_field, written)})"
    shape = None
    if rpc.parts:
        shape = shaped.lower_parts(m, rpc, function.upper() + "_SQL", [psycopg_sql(p.statement) for p in rpc.parts])
    if shape is not None and shape.page is not None:
        assert rpc.result_field is not None and rpc.row is not None
        rows = f"[{m.converter(rpc.row)}(row) for row in rows[:size]]"
        response = f"{response_type}({argument(rpc.result_field, rows)}, {argument(shape.page.next_field, 'token')})"
    traceparent = None
    if rpc.traceparent is not None:
        name = rpc.traceparent.name
        traceparent = f"not request.HasField({py_str(name)})" if rpc.traceparent.presence else f"not request.{name}"
    binary = binary_stream(rpc)
    loaders_const = function.upper() + "_LOADERS" if text_types or timestamp_types or own_loaders or binary else None
    copy_types = copying.binary_types(rpc.params) if rpc.shape is ir.Shape.COPY else ()
    return model.Rpc(
        name=rpc.name,
        function=function,
        sql_const=function.upper() + "_SQL",
        # A COPY takes no parameters: psycopg sends its text as written (`%` not doubled).
        sql=_copy_sql(rpc, copy_types) if rpc.shape is ir.Shape.COPY else psycopg_sql(rpc.statement),
        request_type=m.type(rpc.request),
        response_type=response_type,
        cardinality=rpc.cardinality,
        summary=rpc.comment,
        params=tuple(m.param(p) for p in rpc.params),
        response=response,
        result_field=rpc.result_field,
        loaders_const=loaders_const,
        cursor=f"rt.cursor(conn, {loaders_const})" if loaders_const else "conn.cursor(row_factory=tuple_row)",
        loaders_factory="rt.binary_loaders" if binary else "rt.loaders",
        binary=binary,
        loaders_args=", ".join(
            f"{keyword}={py_tuple(types)}"
            for keyword, types in (("text", text_types), ("timestamps", timestamp_types))
            if types
        ),
        probe=_probe(rpc, function.upper() + "_EXISTS_SQL"),
        conflict_do_nothing=rpc.conflict_do_nothing,
        transaction=rpc.writes and can_fail,
        traceparent_unset=traceparent,
        on_replica=not rpc.writes and not rpc.primary,
        reads_only=not rpc.writes,
        copy_values=_copy_values(m, rpc),
        stream_values=_stream_values(m, rpc),
        stream_add=attribute("batch", rpc.result_field) + ".add"
        if rpc.shape is ir.Shape.SERVER_STREAM and rpc.result_field
        else "",
        copy_batch=attribute("request", rpc.copy_batch) if rpc.copy_batch else None,
        copy_types_const=function.upper() + "_TYPES" if copy_types else None,
        copy_types=tuple((py_str(t), p.name) for t, p in zip(copy_types, rpc.params, strict=True))
        if copy_types
        else (),
        shaped=shape,
    )


def binary_stream(rpc: ir.Rpc) -> bool:
    """A streamed read whose every column reads from a binary cursor as cheaply or cheaper than
    from a text one (docs/performance.md: the loading of a timestamp is most of a row's): plain
    columns of _BINARY_SAME types, enums (their label), timestamps (int8 microseconds)."""
    if rpc.shape is not ir.Shape.SERVER_STREAM or rpc.row is None:
        return False
    for c in rpc.row.columns:
        if not isinstance(c, ir.Column) or c.pg_type.is_array or c.field.repeated:
            return False
        plain = c.conversion is _C.IDENTITY and c.pg_type.name in _BINARY_SAME
        if not (plain or c.conversion is _C.TIMESTAMP or (c.conversion is _C.ENUM and c.pg_type.is_enum)):
            return False
    return True


def _stream_values(m: _Module, rpc: ir.Rpc) -> tuple[model.FieldValue, ...]:
    """A streamed read's row as the arguments of the message it fills (its converter's)."""
    if rpc.shape is not ir.Shape.SERVER_STREAM or rpc.row is None:
        return ()
    return tuple(m.row_values(rpc.row, binary_stream(rpc)))


def _copy_sql(rpc: ir.Rpc, binary_types: tuple[str, ...]) -> str:
    """A COPY's text: as written, in the binary format when its columns allow (pygen/copying.py)."""
    sql = "".join(map(str, rpc.statement.pieces))
    return copying.binary_copy(sql) if binary_types else sql


def _copy_values(m: _Module, rpc: ir.Rpc) -> tuple[tuple[str, str], ...]:
    """A COPY's row: per column (each a parameter of the request field of its name) its value."""
    if rpc.shape is not ir.Shape.COPY:
        return ()
    row = "row" if rpc.copy_batch else "request"
    return tuple((m.param(p, row).expr, f"{p.name} {p.pg_type}") for p in rpc.params)


def _listen(m: _Module, listen: ir.Listen) -> model.Listen:
    return model.Listen(
        name=listen.name,
        request_type=m.type(listen.request),
        response_type=m.type(listen.response),
        channel=listen.channel,
        payload_field=listen.payload_field,
        response=f"{m.type(listen.response)}({argument(listen.payload_field, 'payload')})",
        filter_field=listen.filter_field,
        filter_access=attribute("request", listen.filter_field) if listen.filter_field else None,
        filter_parser=_LISTEN_PARSERS[listen.filter],
        summary=listen.comment,
    )


def lower(file: ir.File) -> model.File:
    m = _Module(file.proto)
    pb2 = python_module(file.proto)
    m.alias(file.proto)
    services = tuple(
        model.Service(
            s.name,
            s.full_name,
            f"{s.name}Handlers",
            tuple(_rpc(m, r) for r in s.rpcs if r.shape is ir.Shape.UNARY),
            s.unannotated,
            tuple(_listen(m, lst) for lst in s.listens),
            streams=tuple(_rpc(m, r) for r in s.rpcs if r.shape is ir.Shape.SERVER_STREAM),
            copies=tuple(_rpc(m, r) for r in s.rpcs if r.shape is ir.Shape.COPY),
        )
        for s in file.services
    )
    stem = file.proto[: -len(".proto")].replace("-", "_")
    grpc_module = pb2 + "_grpc"
    return model.File(
        proto=file.proto,
        pb2_module=pb2,
        pb2_alias=m.imports[pb2],
        grpc_module=grpc_module,
        grpc_alias=grpc_module.rsplit(".", 1)[-1],
        handlers_module=stem.replace("/", ".") + "_pydb",
        handlers_path=stem + "_pydb.py",
        server_path=stem + "_pydb_server.py",
        extra_imports=tuple(sorted((mod, a) for mod, a in m.imports.items() if mod != pb2)),
        enums=tuple(sorted(m.enums.values(), key=lambda e: e.from_pg_name)),
        converters=tuple(m.converters.values()),
        services=services,
        version=__version__,
        uses_tuple_row=any(r.loaders_const is None for s in services for r in s.rpcs),
        streams=any(s.streams or s.copies for s in services),
    )
