"""Where bind's diagnostics go: at an RPC's `(pydb.v1.sql)` option, or, for a problem of a
message itself (a field no column fills, an enum that does not pair with its PostgreSQL type),
once at the field however many RPCs share the message."""

from __future__ import annotations

from dataclasses import dataclass, field

from google.protobuf import descriptor_pb2

from pydb.v1 import options_pb2

from ..diagnostics import Diagnostic, Severity, SqlSpan
from ..protos import ProtoIndex, location, location_span
from .positions import Position, SourceMap

# FileDescriptorProto.service = 6, ServiceDescriptorProto.method = 2, MethodDescriptorProto.options = 4
_SERVICE, _METHOD, _OPTIONS = 6, 2, 4
_QUERY = 1  # Sql.query: `option (pydb.v1.sql).query = "..."` is located at [..., sql, 1]
# FileDescriptorProto.message_type = 4, DescriptorProto.field = 2 / nested_type = 3
_MESSAGE, _FIELD, _NESTED = 4, 2, 3


def method_path(si: int, mi: int) -> list[int]:
    return [_SERVICE, si, _METHOD, mi]


@dataclass
class Reporter:
    file: descriptor_pb2.FileDescriptorProto
    index: ProtoIndex
    diagnostics: list[Diagnostic] = field(default_factory=list)
    #: (message full name, field name, message) -> the RPCs it concerns, in order.
    at_fields: dict[tuple[str, str, str], list[str]] = field(default_factory=dict)
    #: The schema had errors: the RPCs are still checked against what applied, but follow-on
    #: reports (a field no column fills, when a table's columns may be missing) are left out.
    schema_has_errors: bool = False
    #: The .proto's own text, when it was found under the proto_path roots: a problem in a
    #: statement is then placed at its token inside the string literal(s), not at the option.
    source: SourceMap | None = None
    _positions: dict[tuple[int, int], list[Position] | None] = field(default_factory=dict)

    def at_method(
        self,
        si: int,
        mi: int,
        message: str,
        sql: str | None = None,
        span: SqlSpan | None = None,
        severity: Severity = "error",
    ) -> None:
        option = [*method_path(si, mi), _OPTIONS, options_pb2.sql.number]
        line, col = location(self.file, option, [*option, _QUERY], method_path(si, mi))
        end: tuple[int | None, int | None] = (None, None)
        positions = self._query_positions(si, mi, sql) if span is not None and sql is not None else None
        if positions is not None and span is not None:
            first = positions[min(max(span.start, 0), len(positions) - 1)]
            last = positions[min(max(span.end, span.start, 0) + 1, len(positions) - 1)]
            line, col = first[0] + 1, first[1] + 1
            end = (last[0] + 1, last[1] + 1) if last > first else (line, col + 1)
        self.diagnostics.append(Diagnostic(self.file.name, line, col, message, severity, sql, span, *end))

    def _query_positions(self, si: int, mi: int, sql: str | None) -> list[Position] | None:
        """Per character of the RPC's query its place in the .proto (see positions.py)."""
        if self.source is None or sql is None:
            return None
        if (si, mi) not in self._positions:
            option = [*method_path(si, mi), _OPTIONS, options_pb2.sql.number]
            span = location_span(self.file, [*option, _QUERY], option)
            self._positions[si, mi] = None if span is None else self.source.query_positions(span, sql)
        return self._positions[si, mi]

    def at_field(self, message: str, field_name: str, text: str, rpc: str) -> None:
        """An error about field `field_name` of message `message`, found while binding `rpc`:
        reported once (naming every RPC concerned) when `flush` runs."""
        rpcs = self.at_fields.setdefault((message, field_name, text), [])
        if rpc not in rpcs:
            rpcs.append(rpc)

    def flush(self) -> None:
        for (message, field_name, text), rpcs in self.at_fields.items():
            path, line, col = self.field_location(message, field_name)
            which = "RPC" if len(rpcs) == 1 else "RPCs"
            self.diagnostics.append(
                Diagnostic(path, line, col, f"{message}.{field_name}: {text} (used by {which} {', '.join(rpcs)})")
            )
        self.at_fields.clear()

    def field_location(self, message: str, field_name: str) -> tuple[str, int, int]:
        msg = self.index.messages[message]
        proto = self.index.files[msg.file]
        path = _message_path(proto, msg.python_path.split("."))
        if path is None:
            return proto.name, 1, 1
        fields = _descriptor_at(proto, path).field
        fi = next((i for i, f in enumerate(fields) if f.name == field_name), None)
        line, col = location(proto, [*path, _FIELD, fi] if fi is not None else path, path)
        return proto.name, line, col

    def error_count(self) -> int:
        return sum(1 for d in self.diagnostics if d.severity == "error")


def _message_path(proto: descriptor_pb2.FileDescriptorProto, names: list[str]) -> list[int] | None:
    path: list[int] = []
    candidates = list(proto.message_type)
    kind = _MESSAGE
    for name in names:
        i = next((i for i, m in enumerate(candidates) if m.name == name), None)
        if i is None:
            return None
        path += [kind, i]
        candidates, kind = list(candidates[i].nested_type), _NESTED
    return path


def _descriptor_at(proto: descriptor_pb2.FileDescriptorProto, path: list[int]) -> descriptor_pb2.DescriptorProto:
    msg = proto.message_type[path[1]]
    for i in range(3, len(path), 2):
        msg = msg.nested_type[path[i]]
    return msg
