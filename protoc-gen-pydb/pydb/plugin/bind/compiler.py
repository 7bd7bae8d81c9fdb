"""The binder's driver: annotated protos + schema -> the IR (bind/ir.py), or diagnostics.

For every RPC carrying `(pydb.v1.sql)`: analyze the statement against the catalog, bind each
`@param` to a request field (params.py), map each result column to a response field
(results.py), and check the cardinality. Every problem is collected; bind emits no code.
"""

from __future__ import annotations

import posixpath
import re
import traceback
from collections.abc import Mapping
from typing import TYPE_CHECKING

from google.protobuf import descriptor_pb2

from pydb.v1 import options_pb2

from ..diagnostics import Diagnostic, Problem
from ..protos import Message, ProtoIndex, leading_comment, location
from ..sql import Analysis, Catalog, QualifiedName, SchemaRoots, analyze, load_catalog, read_files, schema_path
from . import ir, paging, shapes, syntax
from .params import bind_params, field_ref
from .positions import SourceMap
from .report import Reporter, method_path
from .results import bind_row, row_target

if TYPE_CHECKING:  # the cache is the language server's and `check --watch`'s (passed in)
    from .cache import CompileCache

_CARDINALITY = {
    options_pb2.CARDINALITY_ONE: ir.Cardinality.ONE,
    options_pb2.CARDINALITY_OPTIONAL: ir.Cardinality.OPTIONAL,
    options_pb2.CARDINALITY_MANY: ir.Cardinality.MANY,
    options_pb2.CARDINALITY_EXEC: ir.Cardinality.EXEC,
    options_pb2.CARDINALITY_EXEC_ROWS: ir.Cardinality.EXEC_ROWS,
}

TRACEPARENT_FIELD = "w3c_traceparent"

_CHANNEL = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
#: (pydb.v1.listen).payload_type -> how the filter's values are checked.
_LISTEN_FILTERS: dict[str, ir.ListenFilter] = {
    "": ir.ListenFilter.TEXT,
    "text": ir.ListenFilter.TEXT,
    "uuid": ir.ListenFilter.UUID,
    "int4": ir.ListenFilter.INTEGER,
    "int8": ir.ListenFilter.INTEGER,
}


def _type_ref(msg: Message) -> ir.TypeRef:
    return ir.TypeRef(msg.full_name, msg.file, msg.python_path)


class FileCompiler:
    def __init__(
        self,
        file: descriptor_pb2.FileDescriptorProto,
        index: ProtoIndex,
        read_schema: SchemaRoots,
        catalogs: dict[str, tuple[Catalog | None, list[Diagnostic]]],
        source: str | None = None,
        cache: CompileCache | None = None,
    ) -> None:
        self.file = file
        self.index = index
        self.read_schema = read_schema
        self.catalogs = catalogs
        self.cache = cache
        self.report = Reporter(file, index, source=proto_source(file.name, read_schema, source))
        self.diagnostics = self.report.diagnostics
        self.at_method = self.report.at_method

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
                self.catalogs[path] = (
                    self.cache.catalog(found) if self.cache is not None else load_catalog(read_files(found), found)
                )
            except Exception as err:  # a bug in protoc-gen-pydb, not in the schema
                self.catalogs[path] = (None, [Diagnostic(str(found), 1, 1, internal_error(f"schema {found}", err))])
            self.diagnostics.extend(self.catalogs[path][1])
        # A schema with errors still gives the catalog of what applied: each RPC's statement
        # is checked against it, and one using a missing object gets its error there.
        self.report.schema_has_errors = any(d.severity == "error" for d in self.catalogs[path][1])
        return self.catalogs[path][0]

    # -- compile ---------------------------------------------------------------------------
    def compile(self) -> ir.File | None:
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
        services: list[ir.Service] = []
        for si, svc in enumerate(self.file.service):
            rpcs: list[ir.Rpc] = []
            listens: list[ir.Listen] = []
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
                services.append(ir.Service(svc.name, full, tuple(rpcs), tuple(unannotated), tuple(listens)))
        self.report.flush()
        return ir.File(self.file.name, self.file.package, tuple(services))

    def compile_listen(self, si: int, mi: int, method: descriptor_pb2.MethodDescriptorProto) -> ir.Listen | None:
        """`(pydb.v1.listen)`: a server-streaming RPC relaying NOTIFYs on a channel (no SQL to check)."""
        opt = method.options.Extensions[options_pb2.listen]
        errors_before = self.report.error_count()
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
        kind = _LISTEN_FILTERS.get(opt.payload_type)
        if kind is None:
            known = ", ".join(repr(k) for k in _LISTEN_FILTERS if k)
            self.at_method(
                si, mi, f"{method.name}: (pydb.v1.listen).payload_type must be one of {known}, got {opt.payload_type!r}"
            )
        if self.report.error_count() > errors_before or kind is None:
            return None
        return ir.Listen(
            name=method.name,
            request=_type_ref(request),
            response=_type_ref(response),
            comment=leading_comment(self.file, method_path(si, mi)),
            channel=opt.channel,
            payload_field=opt.payload_field,
            filter_field=opt.filter_field or None,
            filter=kind,
        )

    def compile_method(
        self, si: int, mi: int, method: descriptor_pb2.MethodDescriptorProto, catalog: Catalog
    ) -> ir.Rpc | None:
        opt = method.options.Extensions[options_pb2.sql]
        sql = opt.query
        errors_before = self.report.error_count()
        request = self.index.messages.get(method.input_type.lstrip("."))
        response = self.index.messages.get(method.output_type.lstrip("."))
        assert request is not None and response is not None  # protoc resolved them
        if method.client_streaming:
            from .copyfrom import compile_copy  # COPY FROM RPCs only: not imported by every run

            return compile_copy(self.report, self.index, self.cache, si, mi, method, catalog, request, response)
        if method.server_streaming and opt.cardinality != options_pb2.CARDINALITY_MANY:
            self.at_method(
                si,
                mi,
                f"{method.name}: a server-streaming RPC streams rows: set cardinality: CARDINALITY_MANY and result_field "
                "to the repeated field each response carries a batch of rows in",
            )
            return None
        if not sql.strip():
            self.at_method(si, mi, f"{method.name}: (pydb.v1.sql).query is empty")
            return None
        cardinality = _CARDINALITY.get(opt.cardinality)
        if cardinality is None:
            self.at_method(
                si,
                mi,
                f"{method.name}: set (pydb.v1.sql).cardinality to CARDINALITY_ONE, _OPTIONAL, _MANY, _EXEC or _EXEC_ROWS",
            )
        nullable_params = frozenset(f.name for f in request.fields if f.has_presence)

        def analyze_one(text: str) -> tuple[Analysis | None, list[Problem]]:
            if self.cache is not None:
                return self.cache.analyze(text, catalog, nullable_params)
            return analyze(text, catalog, nullable_params)

        page = shapes.page_option(opt)
        if page is not None:
            for message in paging.check_fields(request, response, opt.result_field):
                self.at_method(si, mi, f"{method.name}: {message}")
            if cardinality is not ir.Cardinality.MANY:
                self.at_method(si, mi, f"{method.name}: page: a paged statement is CARDINALITY_MANY")
            if self.report.error_count() > errors_before:
                return None
        analysis, problems, shape = shapes.analyze_shaped(
            sql, request, self.index, analyze_one, catalog, page is not None
        )
        for p in problems:
            self.at_method(si, mi, f"{method.name}: {p.message}", sql, p.span, p.severity)
        if analysis is None or cardinality is None:
            return None
        if method.server_streaming and not _streamable(analysis):
            self.at_method(
                si,
                mi,
                f"{method.name}: a server-streaming RPC reads with a server-side cursor, which takes a read-only "
                f"SELECT or VALUES, not this {analysis.kind.upper()}; use a unary RPC",
            )
            return None
        page_fields = frozenset((paging.SIZE, paging.TOKEN)) if page is not None else frozenset()
        params = bind_params(
            self.report, si, mi, method.name, sql, analysis, request, shapes.selector_fields(shape) | page_fields
        )
        if any(p.severity == "error" for p in problems):
            # The result columns of a statement with errors are partly guesses: checking them
            # against the response would only add follow-on errors.
            return None
        beside = frozenset((paging.NEXT,)) if page is not None else frozenset()
        target = row_target(self.report, si, mi, method.name, analysis, response, cardinality, opt.result_field, beside)
        row = None
        if target is not None and analysis.columns is not None and self.report.error_count() == errors_before:

            def null_literals() -> frozenset[str]:
                parsed = syntax.parse(analysis)
                return parsed.null_columns() if parsed is not None else frozenset()

            row = bind_row(
                self.report,
                si,
                mi,
                method.name,
                sql,
                analysis.columns,
                target,
                null_literals,
                analysis.expansions,
                catalog,
            )
        if self.report.error_count() > errors_before:
            return None
        parts: tuple[ir.Part, ...] = ()
        paged = None
        first = (sql, analysis)
        if shape is not None and (shape.blocks or page is not None):
            parts, paged = shapes.parts(shape, analysis, statement, request, self.index, page)
            first = (shape.variants[0][0].text, shape.variants[0][1])
        return ir.Rpc(
            name=method.name,
            request=_type_ref(request),
            response=_type_ref(response),
            comment=leading_comment(self.file, method_path(si, mi)),
            statement=statement(*first),
            cardinality=cardinality,
            params=params,
            row=row,
            result_field=opt.result_field or None,
            probe=_probe(analysis, cardinality),
            conflict_do_nothing=analysis.conflict_do_nothing,
            writes=not analysis.read_only,
            primary=opt.primary,
            traceparent=_traceparent(request, params, self.index),
            shape=ir.Shape.SERVER_STREAM if method.server_streaming else ir.Shape.UNARY,
            parts=parts,
            page=paged,
        )

    def compile_method_guarded(
        self, si: int, mi: int, method: descriptor_pb2.MethodDescriptorProto, catalog: Catalog
    ) -> ir.Rpc | None:
        """compile_method, with a crash turned into an error at the RPC: a bug in the plugin
        must not hide the diagnostics of the other RPCs, nor print a traceback at the user."""
        try:
            return self.compile_method(si, mi, method, catalog)
        except Exception as err:  # a bug in protoc-gen-pydb, not in the annotation
            self.at_method(si, mi, internal_error(f"RPC {method.name}", err))
            return None


def statement(sql: str, analysis: Analysis, start: int = 0, end: int | None = None) -> ir.Statement:
    """The statement (or its text in [start, end)) as text pieces and parameters, `*` and
    whole-row references replaced by the analyzer's explicit column lists: one pass over
    non-overlapping span rewrites."""
    unplaced = [p.name for p in analysis.params if not p.spans]
    if unplaced:  # it would reach PostgreSQL as `@name`: fail the build, not the first call
        raise ValueError(f"parameter @{unplaced[0]} has no place in the statement text")
    end = len(sql) if end is None else end
    rewrites: list[tuple[int, int, ir.ParamRef | ir.ColumnList]] = [
        (span.start, span.end, ir.ParamRef(p.name)) for p in analysis.params for span in p.spans
    ]
    rewrites += [
        (e.span.start, e.span.end, ir.ColumnList(column_list(e.text), sql[e.span.start : e.span.end + 1]))
        for e in analysis.expansions
    ]
    rewrites = sorted((r for r in rewrites if start <= r[0] < end), key=lambda r: r[0])
    if any(r[1] >= end for r in rewrites):
        raise ValueError("a parameter or column list crosses an optional block's edge")
    pieces: list[str | ir.ParamRef | ir.ColumnList] = []
    pos = start
    for at, last, replacement in rewrites:
        if at < pos:
            raise ValueError(f"overlapping rewrites of the statement at offset {at}")
        pieces += [sql[pos:at], replacement]
        pos = last + 1
    pieces.append(sql[pos:end])
    merged: list[str | ir.ParamRef | ir.ColumnList] = []
    for piece in pieces:
        if isinstance(piece, str) and merged and isinstance(merged[-1], str):
            merged[-1] += piece
        elif piece != "":
            merged.append(piece)
    return ir.Statement(tuple(merged))


def column_list(text: str) -> tuple[str, ...]:
    """An expansion's `a, b, "c, d", f(x, y)` as its items: split at the commas outside quoted
    identifiers, string literals and parentheses."""
    items: list[str] = []
    depth, quote, start = 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote  # a doubled quote closes and reopens: the same
        elif ch in "\"'":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    items.append(text[start:].strip())
    if quote or depth or "" in items:
        raise ValueError(f"not a column list: {text!r}")
    return tuple(items)


def _streamable(analysis: Analysis) -> bool:
    """Whether DECLARE CURSOR takes the statement: a SELECT without data-modifying CTEs."""
    return analysis.kind == "select" and analysis.read_only


def _probe(analysis: Analysis, cardinality: ir.Cardinality) -> ir.Probe | None:
    """ONE statements that update or delete a row by primary key: how to tell a missing row
    from one not in the needed state."""
    table = analysis.target
    if (
        cardinality is not ir.Cardinality.ONE
        or analysis.key_param is None
        or table is None
        or analysis.kind not in ("update", "delete")
        or len(table.primary_key) != 1
    ):
        return None
    return ir.Probe(QualifiedName(table.schema, table.name), table.primary_key[0], analysis.key_param)


def _traceparent(request: Message, params: tuple[ir.Param, ...], index: ProtoIndex) -> ir.FieldRef | None:
    """The W3C trace context hook: see ir.Rpc.traceparent."""
    f = request.field(TRACEPARENT_FIELD)
    if f is None or f.type != "string" or f.repeated or all(p.name != f.name for p in params):
        return None
    return field_ref(f, index)


def internal_error(what: str, err: Exception) -> str:
    """The message for a crash of the plugin itself: says so, names what it was compiling and
    where it failed, and asks for a report (no traceback: the user did nothing wrong)."""
    frames = traceback.extract_tb(err.__traceback__)
    where = f" at {posixpath.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
    return (
        f"internal error in protoc-gen-pydb while compiling {what}: {type(err).__name__}: {err}{where}. "
        "This is a bug in protoc-gen-pydb, not in your proto; please report it with the .proto and schema.sql"
    )


def proto_source(name: str, roots: SchemaRoots, text: str | None = None) -> SourceMap | None:
    """The .proto's own text (given, or read under the proto_path roots), for exact positions."""
    if text is None:
        path = roots.find(name)
        if path is None or not path.is_file():
            return None
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
    return SourceMap(text)


def compile_request(
    files: list[descriptor_pb2.FileDescriptorProto],
    to_generate: list[str],
    read_schema: SchemaRoots,
    sources: Mapping[str, str] | None = None,
    cache: CompileCache | None = None,
) -> tuple[list[ir.File], list[Diagnostic]]:
    """`sources`: the text of protos by name, where it is not (yet) on disk (an editor's buffer);
    `cache`: what a long-lived checker (watch mode, the language server) keeps between runs."""
    index = ProtoIndex(files)
    catalogs: dict[str, tuple[Catalog | None, list[Diagnostic]]] = {}
    out: list[ir.File] = []
    diagnostics: list[Diagnostic] = []
    for name in to_generate:
        compiler = FileCompiler(index.files[name], index, read_schema, catalogs, (sources or {}).get(name), cache)
        compiled = compiler.compile()
        diagnostics.extend(compiler.diagnostics)
        if compiled is not None:
            out.append(compiled)
    return out, dedupe(diagnostics)


def dedupe(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    seen = set()
    out = []
    for d in diagnostics:
        if d not in seen:
            seen.add(d)
            out.append(d)
    return out
