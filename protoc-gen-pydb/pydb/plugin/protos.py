"""Index of the descriptors in a CodeGeneratorRequest: messages, enums, fields, locations."""

from __future__ import annotations

import re
from dataclasses import dataclass

from google.protobuf import descriptor_pb2

F = descriptor_pb2.FieldDescriptorProto

_SCALARS: dict[int, str] = {
    F.TYPE_DOUBLE: "double",
    F.TYPE_FLOAT: "float",
    F.TYPE_INT64: "int64",
    F.TYPE_UINT64: "uint64",
    F.TYPE_INT32: "int32",
    F.TYPE_FIXED64: "fixed64",
    F.TYPE_FIXED32: "fixed32",
    F.TYPE_BOOL: "bool",
    F.TYPE_STRING: "string",
    F.TYPE_BYTES: "bytes",
    F.TYPE_UINT32: "uint32",
    F.TYPE_SFIXED32: "sfixed32",
    F.TYPE_SFIXED64: "sfixed64",
    F.TYPE_SINT32: "sint32",
    F.TYPE_SINT64: "sint64",
}


@dataclass(frozen=True)
class Field:
    name: str
    #: Scalar name, "enum", or the message's full name (no leading dot).
    type: str
    type_name: str  # full name of the enum or message, "" for scalars
    repeated: bool
    has_presence: bool

    def describe(self) -> str:
        base = self.type_name if self.type in ("enum",) or "." in self.type else self.type
        prefix = "repeated " if self.repeated else ("optional " if self.has_presence and "." not in self.type else "")
        return f"{prefix}{base}"


@dataclass(frozen=True)
class Message:
    full_name: str
    file: str
    python_path: str  # e.g. Task or Outer.Inner
    fields: tuple[Field, ...]

    def field(self, name: str) -> Field | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None


@dataclass(frozen=True)
class Enum:
    full_name: str
    file: str
    python_path: str
    values: tuple[tuple[str, int], ...]


def python_module(proto_path: str) -> str:
    """The module protoc's Python generator writes for a .proto (dots, `-` as `_`)."""
    stem = proto_path[: -len(".proto")] if proto_path.endswith(".proto") else proto_path
    return stem.replace("-", "_").replace("/", ".") + "_pb2"


def snake_case(name: str) -> str:
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()


class ProtoIndex:
    def __init__(self, files: list[descriptor_pb2.FileDescriptorProto]) -> None:
        self.files = {f.name: f for f in files}
        self.messages: dict[str, Message] = {}
        self.enums: dict[str, Enum] = {}
        for f in files:
            prefix = f.package + "." if f.package else ""
            for m in f.message_type:
                self._add_message(f, m, prefix, "")
            for e in f.enum_type:
                self._add_enum(f, e, prefix, "")

    def _add_message(
        self, f: descriptor_pb2.FileDescriptorProto, m: descriptor_pb2.DescriptorProto, prefix: str, py_prefix: str
    ) -> None:
        full = prefix + m.name
        py = py_prefix + m.name
        real_oneofs = {
            i
            for i, _ in enumerate(m.oneof_decl)
            if not any(fd.proto3_optional and fd.oneof_index == i for fd in m.field)
        }
        fields = []
        for fd in m.field:
            repeated = fd.label == F.LABEL_REPEATED
            if fd.type == F.TYPE_MESSAGE:
                ftype = fd.type_name.lstrip(".")
                type_name = ftype
            elif fd.type == F.TYPE_ENUM:
                ftype = "enum"
                type_name = fd.type_name.lstrip(".")
            else:
                ftype = _SCALARS.get(fd.type, "unknown")
                type_name = ""
            presence = not repeated and (
                fd.proto3_optional
                or fd.type == F.TYPE_MESSAGE
                or (fd.HasField("oneof_index") and fd.oneof_index in real_oneofs)
                or (f.syntax == "proto2" and fd.label == F.LABEL_OPTIONAL)
            )
            fields.append(Field(fd.name, ftype, type_name, repeated, presence))
        self.messages[full] = Message(full, f.name, py, tuple(fields))
        for nested in m.nested_type:
            if nested.options.map_entry:
                continue
            self._add_message(f, nested, full + ".", py + ".")
        for e in m.enum_type:
            self._add_enum(f, e, full + ".", py + ".")

    def _add_enum(
        self, f: descriptor_pb2.FileDescriptorProto, e: descriptor_pb2.EnumDescriptorProto, prefix: str, py_prefix: str
    ) -> None:
        full = prefix + e.name
        self.enums[full] = Enum(full, f.name, py_prefix + e.name, tuple((v.name, v.number) for v in e.value))


_Location = descriptor_pb2.SourceCodeInfo.Location
# id(file) -> (file, its source_code_info by path). Built once per file: looking a path up by
# scanning every location made each RPC cost O(file size), so codegen grew quadratically.
# A path can have several locations: `location` reports the last, `leading_comment` the first.
_LocationIndex = tuple[dict[tuple[int, ...], _Location], dict[tuple[int, ...], _Location]]
_LOCATIONS: dict[int, tuple[descriptor_pb2.FileDescriptorProto, _LocationIndex]] = {}


def _locations(file: descriptor_pb2.FileDescriptorProto) -> _LocationIndex:
    cached = _LOCATIONS.get(id(file))
    if cached is None or cached[0] is not file:
        first: dict[tuple[int, ...], _Location] = {}
        last: dict[tuple[int, ...], _Location] = {}
        for loc in file.source_code_info.location:
            key = tuple(loc.path)
            first.setdefault(key, loc)
            last[key] = loc
        if len(_LOCATIONS) >= 64:  # a long-lived process (tests) must not keep every file alive
            _LOCATIONS.clear()
        cached = _LOCATIONS[id(file)] = (file, (first, last))
    return cached[1]


def location(file: descriptor_pb2.FileDescriptorProto, *paths: list[int]) -> tuple[int, int]:
    """1-based line and column of the first of `paths` that source_code_info records."""
    spans = _locations(file)[1]
    for path in paths:
        loc = spans.get(tuple(path))
        if loc is not None and loc.span:
            return loc.span[0] + 1, loc.span[1] + 1
    return 1, 1


def location_span(file: descriptor_pb2.FileDescriptorProto, *paths: list[int]) -> list[int] | None:
    """protoc's 0-based span of the first of `paths` recorded: [line, col, (end line,) end col]."""
    spans = _locations(file)[1]
    for path in paths:
        loc = spans.get(tuple(path))
        if loc is not None and loc.span:
            return list(loc.span)
    return None


def leading_comment(file: descriptor_pb2.FileDescriptorProto, path: list[int]) -> str:
    loc = _locations(file)[0].get(tuple(path))
    if loc is None:
        return ""
    return " ".join(line.strip() for line in loc.leading_comments.strip().splitlines())
