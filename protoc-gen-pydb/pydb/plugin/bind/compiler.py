"""The compiler: annotated protos + schema -> render model, or diagnostics.

For every RPC carrying `(pydb.v1.sql)`: analyze the statement against the catalog, bind each
`@param` to a request field, map each result column to a response field, and check the
cardinality. Every problem is collected; nothing is rendered if any is an error.
"""

from __future__ import annotations

import difflib
import posixpath
import re
import traceback
from dataclasses import dataclass, field

from google.protobuf import descriptor_pb2

from pydb import __version__
from pydb.v1 import options_pb2

from ..diagnostics import Diagnostic, Severity, SqlSpan
from ..protos import Enum, Field, Message, ProtoIndex, leading_comment, location, python_module, snake_case
from ..pygen import model
from ..sql.analysis import Analysis, ResultColumn
from ..sql.analyze import analyze
from ..sql.catalog import Catalog
from ..sql.schema_source import SchemaRoots, load_catalog, read_files, schema_path
from ..sql.types import NULL, PgType
from . import typemap as t

# FileDescriptorProto.service = 6, ServiceDescriptorProto.method = 2, MethodDescriptorProto.options = 4
_SERVICE, _METHOD, _OPTIONS = 6, 2, 4
_SQL_EXT = options_pb2.sql.number
_CARDINALITY = {
    options_pb2.CARDINALITY_ONE: "one",
    options_pb2.CARDINALITY_OPTIONAL: "optional",
    options_pb2.CARDINALITY_MANY: "many",
    options_pb2.CARDINALITY_EXEC: "exec",
}

TRACEPARENT_FIELD = "w3c_traceparent"

_CHANNEL = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
#: (pydb.v1.listen).payload_type -> the runtime function that checks the filter's values.
_LISTEN_PAYLOAD_PARSERS: dict[str, str | None] = {
    "": None,
    "text": None,
    "uuid": "rt.parse_uuids",
    "int4": "rt.parse_ints",
    "int8": "rt.parse_ints",
}

"""Looks a schema file up by its path relative to a proto root: (display path, text) or None."""


@dataclass
class _Context:
    """Per-file state while compiling: imports and helpers the generated module needs."""

    file: descriptor_pb2.FileDescriptorProto
    index: ProtoIndex
    imports: dict[str, str] = field(default_factory=dict)  # pb2 module -> alias
    enums: dict[tuple[str, str], model.EnumMap] = field(default_factory=dict)
    converters: dict[tuple[str, tuple[tuple[str, str], ...]], model.RowConverter] = field(default_factory=dict)

    def module_alias(self, proto_file: str) -> str:
        module = python_module(proto_file)
        if module not in self.imports:
            alias = module.rsplit(".", 1)[-1]
            if alias in self.imports.values():
                alias = module.replace(".", "_")
            self.imports[module] = alias
        return self.imports[module]

    def message_type(self, msg: Message) -> str:
        return f"{self.module_alias(msg.file)}.{msg.python_path}"

    def enum_type(self, enum: Enum) -> str:
        return f"{self.module_alias(enum.file)}.{enum.python_path}"


class FileCompiler:
    def __init__(
        self,
        file: descriptor_pb2.FileDescriptorProto,
        index: ProtoIndex,
        read_schema: SchemaRoots,
        catalogs: dict[str, tuple[Catalog | None, list[Diagnostic]]],
    ) -> None:
        self.file = file
        self.index = index
        self.read_schema = read_schema
        self.catalogs = catalogs
        self.diagnostics: list[Diagnostic] = []
        self.ctx = _Context(file, index)
        self.ctx.module_alias(file.name)

    # -- diagnostics -----------------------------------------------------------------------
    def at_method(
        self,
        si: int,
        mi: int,
        message: str,
        sql: str | None = None,
        span: SqlSpan | None = None,
        severity: Severity = "error",
    ) -> None:
        line, col = location(self.file, [_SERVICE, si, _METHOD, mi, _OPTIONS, _SQL_EXT], [_SERVICE, si, _METHOD, mi])
        self.diagnostics.append(Diagnostic(self.file.name, line, col, message, severity, sql, span))

    # -- schema ----------------------------------------------------------------------------
    def catalog(self) -> Catalog | None:
        opts = self.file.options
        option = opts.Extensions[options_pb2.schema] if opts.HasExtension(options_pb2.schema) else None
        path = schema_path(self.file.name, option, self.read_schema)
        if path not in self.catalogs:
            found = self.read_schema.find(path)
            if found is None:
                line, col = location(self.file, [8], [12], [2])
                self.diagnostics.append(
                    Diagnostic(
                        self.file.name,
                        line,
                        col,
                        f"schema file or migrations directory {path} not found in any proto_path root (set it "
                        "with option (pydb.v1.schema), the schema= parameter or the proto_path= parameter)",
                    )
                )
                return None
            try:
                self.catalogs[path] = load_catalog(read_files(found))
            except Exception as err:  # a bug in protoc-gen-pydb, not in the schema
                self.catalogs[path] = (None, [Diagnostic(str(found), 1, 1, internal_error(f"schema {found}", err))])
            self.diagnostics.extend(self.catalogs[path][1])
        # A schema with errors still gives the catalog of what applied: each RPC's statement
        # is checked against it, and one using a missing object gets its error there.
        return self.catalogs[path][0]

    # -- compile ---------------------------------------------------------------------------
    def compile(self) -> model.File | None:
        annotated = [
            (si, mi)
            for si, svc in enumerate(self.file.service)
            for mi, m in enumerate(svc.method)
            if m.options.HasExtension(options_pb2.sql) or m.options.HasExtension(options_pb2.listen)
        ]
        if not annotated:
            return None
        catalog = self.catalog()
        if catalog is None:
            return None
        services: list[model.Service] = []
        for si, svc in enumerate(self.file.service):
            rpcs: list[model.Rpc] = []
            listens: list[model.Listen] = []
            unannotated: list[str] = []
            for mi, method in enumerate(svc.method):
                if method.options.HasExtension(options_pb2.listen):
                    listen = self.compile_listen(si, mi, method)
                    if listen is not None:
                        listens.append(listen)
                    continue
                if not method.options.HasExtension(options_pb2.sql):
                    unannotated.append(method.name)
                    continue
                rpc = self.compile_method_guarded(si, mi, method, catalog)
                if rpc is not None:
                    rpcs.append(rpc)
            if rpcs or listens or (unannotated and len(unannotated) < len(svc.method)):
                for name in unannotated:
                    mi = [m.name for m in svc.method].index(name)
                    self.at_method(
                        si,
                        mi,
                        f"{svc.name}.{name} has no (pydb.v1.sql) option; its handler answers UNIMPLEMENTED",
                        severity="warning",
                    )
                full = f"{self.file.package}.{svc.name}" if self.file.package else svc.name
                services.append(
                    model.Service(
                        svc.name, full, f"{svc.name}Handlers", tuple(rpcs), tuple(unannotated), tuple(listens)
                    )
                )
        stem = self.file.name[: -len(".proto")].replace("-", "_")
        pb2 = python_module(self.file.name)
        grpc_module = pb2 + "_grpc"
        imports = tuple(sorted((m, a) for m, a in self.ctx.imports.items() if m != pb2))
        return model.File(
            proto=self.file.name,
            package=self.file.package,
            pb2_module=pb2,
            pb2_alias=self.ctx.imports[pb2],
            grpc_module=grpc_module,
            grpc_alias=grpc_module.rsplit(".", 1)[-1],
            handlers_module=stem.replace("/", ".") + "_pydb",
            handlers_path=stem + "_pydb.py",
            server_path=stem + "_pydb_server.py",
            extra_imports=imports,
            enums=tuple(sorted(self.ctx.enums.values(), key=lambda e: e.from_pg_name)),
            converters=tuple(self.ctx.converters.values()),
            services=tuple(services),
            version=__version__,
        )

    def compile_listen(self, si: int, mi: int, method: descriptor_pb2.MethodDescriptorProto) -> model.Listen | None:
        """`(pydb.v1.listen)`: a server-streaming RPC relaying NOTIFYs on a channel (no SQL to check)."""
        opt = method.options.Extensions[options_pb2.listen]
        errors_before = self._error_count()
        request = self.index.messages.get(method.input_type.lstrip("."))
        response = self.index.messages.get(method.output_type.lstrip("."))
        assert request is not None and response is not None  # protoc resolved them
        if method.options.HasExtension(options_pb2.sql):
            self.at_method(si, mi, f"{method.name}: an RPC carries either (pydb.v1.sql) or (pydb.v1.listen), not both")
        if method.client_streaming or not method.server_streaming:
            self.at_method(
                si,
                mi,
                f"{method.name}: (pydb.v1.listen) needs a server-streaming RPC: rpc {method.name}(Request) returns (stream Response)",
            )
        if not _CHANNEL.match(opt.channel):
            self.at_method(
                si, mi, f"{method.name}: (pydb.v1.listen).channel must be a lower-case identifier, got {opt.channel!r}"
            )
        payload = response.field(opt.payload_field) if opt.payload_field else None
        if payload is None or payload.type != "string" or payload.repeated:
            self.at_method(
                si,
                mi,
                f"{method.name}: (pydb.v1.listen).payload_field must name a singular string field of {response.full_name}, got {opt.payload_field!r}",
            )
        if opt.filter_field:
            flt = request.field(opt.filter_field)
            if flt is None or flt.type != "string" or not flt.repeated:
                self.at_method(
                    si,
                    mi,
                    f"{method.name}: (pydb.v1.listen).filter_field must name a repeated string field of {request.full_name}, got {opt.filter_field!r}",
                )
        parser = _LISTEN_PAYLOAD_PARSERS.get(opt.payload_type, "?")
        if parser == "?":
            known = ", ".join(repr(k) for k in _LISTEN_PAYLOAD_PARSERS if k)
            self.at_method(
                si, mi, f"{method.name}: (pydb.v1.listen).payload_type must be one of {known}, got {opt.payload_type!r}"
            )
        if self._error_count() > errors_before:
            return None
        return model.Listen(
            name=method.name,
            request_type=self.ctx.message_type(request),
            response_type=self.ctx.message_type(response),
            channel=opt.channel,
            payload_field=opt.payload_field,
            filter_field=opt.filter_field or None,
            filter_parser=parser,
            summary=leading_comment(self.file, [_SERVICE, si, _METHOD, mi]),
        )

    def compile_method(
        self, si: int, mi: int, method: descriptor_pb2.MethodDescriptorProto, catalog: Catalog
    ) -> model.Rpc | None:
        opt = method.options.Extensions[options_pb2.sql]
        sql = opt.query
        errors_before = self._error_count()
        request = self.index.messages.get(method.input_type.lstrip("."))
        response = self.index.messages.get(method.output_type.lstrip("."))
        assert request is not None and response is not None  # protoc resolved them
        if method.client_streaming or method.server_streaming:
            self.at_method(si, mi, f"{method.name}: streaming RPCs cannot carry (pydb.v1.sql); use a unary RPC")
            return None
        if not sql.strip():
            self.at_method(si, mi, f"{method.name}: (pydb.v1.sql).query is empty")
            return None
        cardinality = _CARDINALITY.get(opt.cardinality)
        if cardinality is None:
            self.at_method(
                si, mi, f"{method.name}: set (pydb.v1.sql).cardinality to CARDINALITY_ONE, _OPTIONAL, _MANY or _EXEC"
            )
        nullable_params = frozenset(f.name for f in request.fields if f.has_presence)
        analysis, problems = analyze(sql, catalog, nullable_params)
        for p in problems:
            self.at_method(si, mi, f"{method.name}: {p.message}", sql, p.span, p.severity)
        if analysis is None or cardinality is None:
            return None
        params = self.bind_params(si, mi, method.name, sql, analysis, request)
        if any(p.severity == "error" for p in problems):
            # The result columns of a statement with errors are partly guesses: checking them
            # against the response would only add follow-on errors.
            return None
        converter, result_field = self.bind_results(
            si, mi, method.name, sql, analysis, response, cardinality, opt.result_field
        )
        if self._error_count() > errors_before:
            return None
        function = snake_case(method.name)
        probe_sql = probe_param = probe_table = None
        if (
            cardinality == "one"
            and analysis.key_param
            and analysis.target is not None
            and analysis.kind in ("update", "delete")
        ):
            table = analysis.target
            probe_param = analysis.key_param
            probe_table = table.qualified
            probe_sql = f"SELECT 1 FROM {table.qualified} WHERE {table.primary_key[0]} = %({probe_param})s"
        loads_text = analysis.columns is not None and any(
            c.type is not None and c.type.name in ("uuid", "json", "jsonb") for c in analysis.columns
        )
        comment = leading_comment(self.file, [_SERVICE, si, _METHOD, mi])
        return model.Rpc(
            name=method.name,
            function=function,
            sql_const=function.upper() + "_SQL",
            sql=psycopg_sql(sql, analysis),
            request_type=self.ctx.message_type(request),
            response_type=self.ctx.message_type(response),
            cardinality=cardinality,
            summary=comment,
            params=params,
            converter=converter,
            result_field=result_field,
            loads_text=loads_text,
            probe_const=function.upper() + "_EXISTS_SQL" if probe_sql else None,
            probe_sql=probe_sql,
            probe_param=probe_param,
            probe_table=probe_table,
            conflict_do_nothing=analysis.conflict_do_nothing,
            source_comment=f"{self.file.name}: {method.name}",
            traceparent_unset=_traceparent_unset(request, params),
        )

    def compile_method_guarded(
        self, si: int, mi: int, method: descriptor_pb2.MethodDescriptorProto, catalog: Catalog
    ) -> model.Rpc | None:
        """compile_method, with a crash turned into an error at the RPC: a bug in the plugin
        must not hide the diagnostics of the other RPCs, nor print a traceback at the user."""
        try:
            return self.compile_method(si, mi, method, catalog)
        except Exception as err:  # a bug in protoc-gen-pydb, not in the annotation
            self.at_method(si, mi, internal_error(f"RPC {method.name}", err))
            return None

    def _error_count(self) -> int:
        return sum(1 for d in self.diagnostics if d.severity == "error")

    # -- parameters ------------------------------------------------------------------------
    def bind_params(
        self, si: int, mi: int, rpc: str, sql: str, analysis: Analysis, request: Message
    ) -> tuple[model.ParamBinding, ...]:
        bindings = []
        used = set()
        for p in analysis.params:
            span = p.spans[0] if p.spans else None
            f = request.field(p.name)
            if f is None:
                names = [x.name for x in request.fields]
                close = difflib.get_close_matches(p.name, names, n=1, cutoff=0.6)
                hint = f"; did you mean @{close[0]}?" if close else ""
                self.at_method(
                    si, mi, f"{rpc}: parameter @{p.name} is not a field of {request.full_name}{hint}", sql, span
                )
                continue
            used.add(f.name)
            if p.type is None:
                continue
            problem = self.check_param(p.type, f)
            if problem:
                self.at_method(si, mi, f"{rpc}: parameter @{p.name}: {problem}", sql, span)
                continue
            bindings.append(model.ParamBinding(p.name, self.param_expr(p.type, f)))
        for f in request.fields:
            if f.name not in used:
                self.at_method(
                    si,
                    mi,
                    f"{rpc}: request field {request.full_name}.{f.name} is not used by the statement",
                    severity="warning",
                )
        return tuple(bindings)

    def check_param(self, pg: PgType, f: Field) -> str | None:
        if pg.is_array != f.repeated:
            if pg.is_array:
                return f"the statement expects an array ({pg}), so the field must be repeated, but {f.name} is {f.describe()}"
            return f"{f.name} is repeated, but the statement expects a single {pg}; use = ANY(@{f.name}) or cast to an array"
        if f.type == "enum" and pg.is_enum:
            return self.check_enum(pg, self.index.enums[f.type_name])
        if not t.param_compatible(pg.element, f.type):
            return f"a {f.describe()} field cannot be bound where Postgres expects {pg} (see the type table in docs/diagnostics.md)"
        return None

    def param_expr(self, pg: PgType, f: Field) -> str:
        access = f.python_access
        elem = pg.element
        if f.type == "enum" and pg.is_enum:
            enum_map = self.enum_map(pg, self.index.enums[f.type_name], to_pg=True)
            if f.repeated:
                return f'[rt.enum_label({enum_map.to_pg_name}, v, "{f.name}") for v in {access}]'
            value = f'rt.enum_label({enum_map.to_pg_name}, {access}, "{f.name}")'
        elif elem.name == "uuid" and f.type == "string":
            if f.repeated:
                return f'rt.parse_uuids({access}, "{f.name}")'
            value = f'rt.parse_uuid({access}, "{f.name}")'
        elif f.type == t.TIMESTAMP_MSG:
            value = f"rt.timestamp_param({access})"
        elif f.type == t.DURATION_MSG:
            value = f"{access}.ToTimedelta()"
        elif f.type in t.WRAPPERS:
            value = f"{access}.value"
        elif f.repeated:
            return f"list({access})"
        else:
            value = access
        if f.has_presence:
            return f'{value} if request.HasField("{f.name}") else None'
        return value

    # -- results ---------------------------------------------------------------------------
    def bind_results(
        self,
        si: int,
        mi: int,
        rpc: str,
        sql: str,
        analysis: Analysis,
        response: Message,
        cardinality: str,
        result_field: str,
    ) -> tuple[str | None, str | None]:
        columns = analysis.columns
        if cardinality == "exec":
            if columns is not None:
                self.at_method(
                    si,
                    mi,
                    f"{rpc}: CARDINALITY_EXEC statements must not return rows; drop RETURNING or use CARDINALITY_ONE/OPTIONAL/MANY",
                )
            if result_field:
                self.at_method(si, mi, f"{rpc}: result_field is set, but CARDINALITY_EXEC returns no rows")
            return None, None
        if columns is None:
            what = "SELECT or RETURNING"
            self.at_method(
                si,
                mi,
                f"{rpc}: CARDINALITY_{cardinality.upper()} needs rows, but the {analysis.kind.upper()} returns none; add {what} or use CARDINALITY_EXEC",
            )
            return None, None
        target = response
        if result_field:
            f = response.field(result_field)
            if f is None:
                names = [x.name for x in response.fields]
                close = difflib.get_close_matches(result_field, names, n=1, cutoff=0.6)
                hint = f"; did you mean {close[0]}?" if close else ""
                self.at_method(
                    si, mi, f"{rpc}: result_field {result_field} is not a field of {response.full_name}{hint}"
                )
                return None, None
            msg = self.index.messages.get(f.type)
            if msg is None or f.type in t.WRAPPERS or f.type in (t.TIMESTAMP_MSG, t.DURATION_MSG):
                self.at_method(
                    si,
                    mi,
                    f"{rpc}: result_field {result_field} must be a message field that receives the row, but it is {f.describe()}",
                )
                return None, None
            if cardinality == "many" and not f.repeated:
                self.at_method(
                    si,
                    mi,
                    f"{rpc}: CARDINALITY_MANY needs a repeated result field, but {response.full_name}.{result_field} is not repeated",
                )
                return None, None
            if cardinality != "many" and f.repeated:
                self.at_method(
                    si,
                    mi,
                    f"{rpc}: CARDINALITY_{cardinality.upper()} needs a singular result field, but {response.full_name}.{result_field} is repeated; use CARDINALITY_MANY",
                )
                return None, None
            target = msg
        elif cardinality == "many":
            self.at_method(
                si,
                mi,
                f"{rpc}: CARDINALITY_MANY needs result_field naming a repeated message field of {response.full_name}",
            )
            return None, None
        values = []
        for i, col in enumerate(columns):
            value = self.column_value(si, mi, rpc, sql, i, col, target)
            if value is not None:
                values.append(value)
        key = (target.full_name, tuple((v.field, v.expr) for v in values))
        if key not in self.ctx.converters:
            base = f"_{snake_case(target.python_path.replace('.', ''))}_from_row"
            taken = {c.function for c in self.ctx.converters.values()}
            name, n = base, 2
            while name in taken:
                name, n = f"{base}_{n}", n + 1
            self.ctx.converters[key] = model.RowConverter(
                name, self.ctx.message_type(target), f"A result row as a {target.full_name}.", tuple(values)
            )
        return self.ctx.converters[key].function, result_field or None

    def column_value(
        self, si: int, mi: int, rpc: str, sql: str, i: int, col: ResultColumn, target: Message
    ) -> model.FieldValue | None:
        f = target.field(col.name)
        if f is None:
            names = [x.name for x in target.fields]
            close = difflib.get_close_matches(col.name, names, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]}? (or alias the column: AS {close[0]})" if close else ""
            self.at_method(
                si, mi, f"{rpc}: result column {col.name} has no field in {target.full_name}{hint}", sql, col.span
            )
            return None
        if col.type is None or col.type == NULL:
            return None  # the analyzer reported why the type is unknown
        pg = col.type
        v = f"row[{i}]"
        if pg.is_array != f.repeated:
            self.at_method(
                si,
                mi,
                f"{rpc}: result column {col.name} is {pg} but {target.full_name}.{f.name} is {f.describe()}",
                sql,
                col.span,
            )
            return None
        if f.type == "enum" and pg.is_enum:
            problem = self.check_enum(pg, self.index.enums[f.type_name])
            if problem:
                self.at_method(si, mi, f"{rpc}: result column {col.name}: {problem}", sql, col.span)
                return None
        elif not t.compatible(pg.element, f.type):
            self.at_method(
                si,
                mi,
                f"{rpc}: result column {col.name} is {pg}, which does not fit {target.full_name}.{f.name} ({f.describe()}); see the type table in docs/diagnostics.md",
                sql,
                col.span,
            )
            return None
        if col.nullable and not f.has_presence:
            self.at_method(
                si,
                mi,
                f"{rpc}: result column {col.name} may be NULL, but {target.full_name}.{f.name} ({f.describe()}) cannot tell NULL from "
                f"its zero value; make the field `optional`, use a wrapper type, or COALESCE the column",
                sql,
                col.span,
            )
            return None
        convert = self.value_conversion(pg, f)
        if f.repeated:
            expr = f"{v}" if convert == "{}" else f"[{convert.format('x')} for x in {v}]"
        elif convert == "{}":
            expr = v
        elif col.nullable:
            expr = f"None if {v} is None else {convert.format(v)}"
        else:
            expr = convert.format(v)
        comment = f"{col.name} {pg}" + (" (nullable)" if col.nullable else "")
        return model.FieldValue(f.name, expr, comment)

    def value_conversion(self, pg: PgType, f: Field) -> str:
        """A format string turning a loaded value `{}` into what the field takes."""
        elem = pg.element
        if f.type == "enum" and pg.is_enum:
            enum_map = self.enum_map(elem, self.index.enums[f.type_name], to_pg=False)
            return enum_map.from_pg_name + "[{}]"
        if f.type in t.WRAPPERS:
            wrapper = self.index.messages.get(f.type)
            inner = self.value_conversion(pg, Field(f.name, t.WRAPPERS[f.type], "", False, False))
            wtype = self.ctx.message_type(wrapper) if wrapper else f.type
            return f"{wtype}(value={inner})"
        if elem.name == "numeric" and f.type == "string":
            return "str({})"
        if elem.name == "numeric" and f.type == "double":
            return "float({})"
        if elem.name in ("date", "time", "timetz") and f.type == "string":
            return "{}.isoformat()"
        if elem.name in ("timestamp", "timestamptz") and f.type == t.TIMESTAMP_MSG:
            return "rt.timestamp_value({})"  # 2x faster than protobuf converting the datetime
        return "{}"

    # -- enums -----------------------------------------------------------------------------
    def check_enum(self, pg: PgType, enum: Enum) -> str | None:
        pairs, problems = enum_pairs(pg, enum)
        del pairs
        return "; ".join(problems) if problems else None

    def enum_map(self, pg: PgType, enum: Enum, to_pg: bool) -> model.EnumMap:
        key = (pg.name, enum.full_name)
        existing = self.ctx.enums.get(key)
        pairs, _ = enum_pairs(pg, enum)
        base = "_" + snake_case(enum.python_path.replace(".", "")).upper()
        etype = self.ctx.enum_type(enum)
        alias = self.ctx.module_alias(enum.file)
        em = model.EnumMap(
            from_pg_name=base + "_FROM_PG",
            to_pg_name=base + "_TO_PG",
            proto_type=etype,
            pairs=tuple(
                (label, f"{alias}.{enum.python_path.rsplit('.', 1)[0] + '.' if '.' in enum.python_path else ''}{value}")
                for label, value in pairs
            ),
            pg_type=pg.name,
            used_from_pg=(existing.used_from_pg if existing else False) or not to_pg,
            used_to_pg=(existing.used_to_pg if existing else False) or to_pg,
        )
        self.ctx.enums[key] = em
        return em


def enum_pairs(pg: PgType, enum: Enum) -> tuple[list[tuple[str, str]], list[str]]:
    """Pair each pg label with the proto value named PREFIX_LABEL, PREFIX being the enum's
    name in UPPER_SNAKE (TaskStatus -> TASK_STATUS_). The zero value must be PREFIX_UNSPECIFIED."""
    prefix = snake_case(enum.python_path.rsplit(".", 1)[-1]).upper() + "_"
    labels = pg.labels or ()
    by_name = dict(enum.values)
    problems = []
    zero = [name for name, num in enum.values if num == 0]
    if not zero or zero[0] != prefix + "UNSPECIFIED":
        problems.append(f"{enum.full_name}'s zero value must be {prefix}UNSPECIFIED")
    pairs = []
    for label in labels:
        name = prefix + label.upper()
        if name not in by_name:
            problems.append(f"label '{label}' of {pg.name} has no value {name} in {enum.full_name}")
        else:
            pairs.append((label, name))
    expected = {prefix + label.upper() for label in labels} | {prefix + "UNSPECIFIED"}
    for name, _ in enum.values:
        if name not in expected:
            problems.append(f"{enum.full_name}.{name} has no label in {pg.name} ({', '.join(labels)})")
    return pairs, problems


def psycopg_sql(sql: str, analysis: Analysis) -> str:
    """The statement as psycopg takes it: `@name` -> `%(name)s`, every other `%` doubled."""
    replacements = sorted((span.start, span.end, p.name) for p in analysis.params for span in p.spans)
    out = []
    pos = 0
    for start, end, name in replacements:
        out.append(sql[pos:start].replace("%", "%%"))
        out.append(f"%({name})s")
        pos = end + 1
    out.append(sql[pos:].replace("%", "%%"))
    return "".join(out)


def _traceparent_unset(request: Message, params: tuple[model.ParamBinding, ...]) -> str | None:
    """The W3C trace context hook: see model.Rpc.traceparent_unset."""
    f = request.field(TRACEPARENT_FIELD)
    if f is None or f.type != "string" or f.repeated or all(p.name != f.name for p in params):
        return None
    return f'not request.HasField("{f.name}")' if f.has_presence else f"not request.{f.name}"


def internal_error(what: str, err: Exception) -> str:
    """The message for a crash of the plugin itself: says so, names what it was compiling and
    where it failed, and asks for a report (no traceback: the user did nothing wrong)."""
    frames = traceback.extract_tb(err.__traceback__)
    where = f" at {posixpath.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
    return (
        f"internal error in protoc-gen-pydb while compiling {what}: {type(err).__name__}: {err}{where}. "
        "This is a bug in protoc-gen-pydb, not in your proto; please report it with the .proto and schema.sql"
    )


def compile_request(
    files: list[descriptor_pb2.FileDescriptorProto],
    to_generate: list[str],
    read_schema: SchemaRoots,
) -> tuple[list[model.File], list[Diagnostic]]:
    index = ProtoIndex(files)
    catalogs: dict[str, tuple[Catalog | None, list[Diagnostic]]] = {}
    out: list[model.File] = []
    diagnostics: list[Diagnostic] = []
    for name in to_generate:
        compiler = FileCompiler(index.files[name], index, read_schema, catalogs)
        compiled = compiler.compile()
        diagnostics.extend(compiler.diagnostics)
        if compiled is not None:
            out.append(compiled)
    return out, _dedupe(diagnostics)


def _dedupe(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    seen = set()
    out = []
    for d in diagnostics:
        if d not in seen:
            seen.add(d)
            out.append(d)
    return out
