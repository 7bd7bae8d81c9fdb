"""`COPY table (columns) FROM STDIN` on a client-streaming RPC: each request message is one row.

The COPY is checked as the INSERT it stands for, `INSERT INTO table (columns) VALUES (@c1, @c2,
...)`, each `@column` the request field of that name: the analyzer's INSERT checks (the table and
columns exist, NOT NULL columns without a default are given, a value fits its column) and
params.py's (the field's type binds where the column's type is expected; an `optional` field
does not feed a NOT NULL column) apply to COPY as they do to INSERT. Diagnostics of that INSERT are
placed back on the COPY's own text: the table, the column list, or the column a value goes to.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from google.protobuf import descriptor_pb2
from pglast import ast

from pydb.v1 import options_pb2

from ..diagnostics import Severity, SqlSpan
from ..protos import Field, Message, ProtoIndex, leading_comment
from ..sql import Catalog, PgSyntaxError, analyze, parse, scan
from . import ir
from .cache import CompileCache
from .params import bind_params
from .report import Reporter, method_path
from .results import row_target

_PARAM_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
_INSERT = "INSERT INTO "


@dataclass(frozen=True)
class _Stand:
    """The INSERT a COPY stands for, and how its offsets map back to the COPY's text."""

    copy_sql: str
    insert_sql: str
    #: Where the table and column list start in the COPY, and their length (copied verbatim).
    target_start: int
    target_len: int
    #: Per column: its span in the COPY, and its `@name`'s span in the INSERT.
    columns: tuple[tuple[SqlSpan, SqlSpan], ...]

    def to_copy(self, span: SqlSpan | None) -> SqlSpan | None:
        if span is None:
            return None
        offset = len(_INSERT)
        if offset <= span.start < offset + self.target_len:
            shift = self.target_start - offset
            return SqlSpan(span.start + shift, min(span.end, offset + self.target_len - 1) + shift)
        for in_copy, in_insert in self.columns:
            if in_insert.start <= span.start <= in_insert.end:
                return in_copy
        return None


class _AtCopy(Reporter):
    """The file's reporter, placing the INSERT's diagnostics on the COPY's text."""

    def __init__(self, outer: Reporter, stand: _Stand) -> None:
        self.__dict__.update(outer.__dict__)  # the same diagnostics, source map and caches
        self.stand = stand

    def at_method(
        self,
        si: int,
        mi: int,
        message: str,
        sql: str | None = None,
        span: SqlSpan | None = None,
        severity: Severity = "error",
    ) -> None:
        if sql == self.stand.insert_sql:
            sql, span = self.stand.copy_sql, self.stand.to_copy(span)
        super().at_method(si, mi, copy_message(message), sql, span, severity)


#: How the INSERT's diagnostics read for the COPY it stands for.
_REWORDED = (
    (
        re.compile(r"\bparameter @(\w+) is not a field of ([\w.]+)"),
        r"column \1 is filled from a field \1 of \2, which has none",
    ),
    (re.compile(r"did you mean @(\w+)\?"), r"did you mean \1?"),
    # A COPY has no expression to give an unset field's column a value.
    (re.compile(r", or give the column a value when it is unset \(COALESCE\(@\w+, \.\.\.\)\)"), ""),
    (re.compile(r"\bparameter @(\w+)"), r"column \1 (field \1)"),
    (re.compile(r"is not used by the statement"), "is not one of the COPY's columns"),
    (re.compile(r"\bthe INSERT\b"), "the COPY"),
)


def copy_message(message: str) -> str:
    for pattern, replacement in _REWORDED:
        message = pattern.sub(replacement, message)
    return message


def insert_for(sql: str) -> str | None:
    """The INSERT a valid `COPY table (columns) FROM STDIN` is checked as (None for any other
    text): what the corpus's PostgreSQL oracle prepares in its place."""
    node = _copy_stmt(sql)
    stand = _stand_in(sql, node) if node is not None else None
    return stand.insert_sql if isinstance(stand, _Stand) else None


def _copy_stmt(sql: str) -> ast.CopyStmt | None:
    try:
        statements = parse(sql)
    except PgSyntaxError:
        return None
    if len(statements) == 1 and isinstance(statements[0].node, ast.CopyStmt):
        return statements[0].node
    return None


def _stand_in(sql: str, node: ast.CopyStmt) -> _Stand | str:
    """The INSERT `node` stands for, or why there is none."""
    if not node.is_from or node.query is not None:
        return "COPY ... TO sends rows to the client; a client-streaming RPC takes COPY table (columns) FROM STDIN"
    if node.filename is not None or node.is_program:
        return "COPY FROM a file or program reads on the database server; write COPY table (columns) FROM STDIN"
    if node.options:
        return (
            "COPY's WITH options are not taken: the handler chooses COPY's format (binary where every column allows it); "
            "write COPY table (columns) FROM STDIN"
        )
    if node.whereClause is not None:
        return "COPY ... WHERE is not taken: every streamed request is a row to write"
    if not node.attlist:
        return "name the columns COPY fills, each a request field of that name: COPY table (a, b) FROM STDIN"
    names = [col.sval or "" for col in node.attlist if isinstance(col, ast.String)]
    tokens = scan(sql)
    start = node.relation.location if node.relation is not None else None
    if not isinstance(start, int):
        return "COPY names a table: COPY table (columns) FROM STDIN"
    opened = next(i for i, tok in enumerate(tokens) if tok.start >= start and tok.name == "ASCII_40")
    depth, spans, close = 0, [], opened
    for i in range(opened, len(tokens)):
        tok = tokens[i]
        if tok.name == "ASCII_40":
            depth += 1
        elif tok.name == "ASCII_41":
            depth -= 1
            if depth == 0:
                close = i
                break
        elif depth == 1 and tok.name != "ASCII_44":
            spans.append(SqlSpan(tok.start, tok.end))
    if len(spans) != len(names):
        return "each COPY column must be a plain column name"
    for name in names:
        if not _PARAM_NAME.match(name):
            return f"column {name!r}: COPY's columns are filled from request fields of the same name; rename the column"
    target = sql[start : tokens[close].end + 1]
    insert = _INSERT + target + " VALUES ("
    columns: list[tuple[SqlSpan, SqlSpan]] = []
    for name, span in zip(names, spans, strict=True):
        if columns:
            insert += ", "
        at = len(insert)
        insert += "@" + name
        columns.append((span, SqlSpan(at, at + len(name))))
    return _Stand(sql, insert + ")", start, len(target), tuple(columns))


def compile_copy(
    rep: Reporter,
    index: ProtoIndex,
    cache: CompileCache | None,
    si: int,
    mi: int,
    method: descriptor_pb2.MethodDescriptorProto,
    catalog: Catalog,
    request: Message,
    response: Message,
) -> ir.Rpc | None:
    """A client-streaming RPC: its annotation must be a COPY ... FROM STDIN of the request's fields
    (or of the fields of the message of its one repeated field: a batch of rows per request)."""
    opt = method.options.Extensions[options_pb2.sql]
    sql, name = opt.query, method.name
    errors_before = rep.error_count()
    if method.server_streaming:
        rep.at_method(
            si, mi, f"{name}: a bidirectional stream cannot carry (pydb.v1.sql); stream requests or responses"
        )
        return None
    node = _copy_stmt(sql)
    if node is None:
        rep.at_method(
            si,
            mi,
            f"{name}: a client-streaming RPC writes its requests with COPY table (columns) FROM STDIN, "
            "one row per request; other statements need a unary RPC",
        )
        return None
    stand = _stand_in(sql, node)
    if isinstance(stand, str):
        rep.at_method(si, mi, f"{name}: {stand}", sql, SqlSpan(0, 3))
        return None
    if opt.cardinality != options_pb2.CARDINALITY_EXEC_ROWS:
        rep.at_method(
            si,
            mi,
            f"{name}: a COPY answers how many rows it wrote: set cardinality: CARDINALITY_EXEC_ROWS and "
            "result_field to an integer field of the response",
        )
        return None
    report = _AtCopy(rep, stand)
    batch = batch_field(request, index)
    rows = index.messages[batch.type_name] if batch is not None else request
    nullable = frozenset(f.name for f in rows.fields if f.has_presence)
    analysis, problems = (
        cache.analyze(stand.insert_sql, catalog, nullable) if cache else analyze(stand.insert_sql, catalog, nullable)
    )
    for p in problems:
        report.at_method(si, mi, f"{name}: {p.message}", stand.insert_sql, p.span, p.severity)
    if analysis is None:
        return None
    params = bind_params(report, si, mi, name, stand.insert_sql, analysis, rows)
    if any(p.severity == "error" for p in problems):
        return None
    row_target(report, si, mi, name, analysis, response, ir.Cardinality.EXEC_ROWS, opt.result_field)
    if rep.error_count() > errors_before:
        return None
    return ir.Rpc(
        name=name,
        request=ir.TypeRef(request.full_name, request.file, request.python_path),
        response=ir.TypeRef(response.full_name, response.file, response.python_path),
        comment=leading_comment(rep.file, method_path(si, mi)),
        statement=ir.Statement((sql,)),
        cardinality=ir.Cardinality.EXEC_ROWS,
        params=params,
        row=None,
        result_field=opt.result_field,
        probe=None,
        conflict_do_nothing=False,
        writes=True,
        primary=True,
        shape=ir.Shape.COPY,
        copy_batch=batch.name if batch is not None else None,
    )


def batch_field(request: Message, index: ProtoIndex) -> Field | None:
    """A request whose only field is a repeated message carries a batch of rows: that field (its
    message's fields are the COPY's columns); None when the request is one row itself."""
    if len(request.fields) != 1:
        return None
    f = request.fields[0]
    return f if f.repeated and f.type_name in index.messages else None
