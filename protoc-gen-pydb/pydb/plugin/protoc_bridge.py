"""`python -m pydb.plugin.protoc_bridge GENERATOR`: one of grpcio-tools' built-in generators
(`python`, `pyi`, `grpc_python`) as a protoc plugin, for `buf generate` without a protoc binary.

buf hands plugins its own compiled descriptors, which spell out every field's default
`json_name`; protoc records only the ones written in the .proto, and the Python generator
embeds the descriptor in `_pb2.py`. The bridge drops the defaulted ones, hands the request to
grpcio-tools' protoc (`--descriptor_set_in`) and returns what it writes: byte for byte what
`python -m grpc_tools.protoc --GENERATOR_out` makes from the .proto files.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from google.protobuf import descriptor_pb2
from google.protobuf.compiler import plugin_pb2

GENERATORS = ("python", "pyi", "grpc_python")


def _json_name(name: str) -> str:
    """protoc's default json_name: lowerCamelCase, dropping underscores."""
    out, upper = [], False
    for ch in name:
        if ch == "_":
            upper = True
        else:
            out.append(ch.upper() if upper else ch)
            upper = False
    return "".join(out)


def _drop_default_json_names(message: descriptor_pb2.DescriptorProto) -> None:
    for field in (*message.field, *message.extension):
        if field.json_name == _json_name(field.name):
            field.ClearField("json_name")
    for nested in message.nested_type:
        _drop_default_json_names(nested)


def generate(generator: str, request: plugin_pb2.CodeGeneratorRequest) -> plugin_pb2.CodeGeneratorResponse:
    from grpc_tools import protoc  # type: ignore[import-untyped]

    response = plugin_pb2.CodeGeneratorResponse(
        supported_features=plugin_pb2.CodeGeneratorResponse.FEATURE_PROTO3_OPTIONAL
    )
    files = descriptor_pb2.FileDescriptorSet(file=request.proto_file)
    for f in files.file:
        for message in f.message_type:
            _drop_default_json_names(message)
    with tempfile.TemporaryDirectory(prefix="pydb-protoc-bridge-") as tmp:
        descriptors = Path(tmp) / "request.binpb"
        descriptors.write_bytes(files.SerializeToString())
        out = Path(tmp) / "out"
        out.mkdir()
        option = f"{request.parameter}:" if request.parameter else ""
        args = ["grpc_tools.protoc", f"--descriptor_set_in={descriptors}", f"--{generator}_out={option}{out}"]
        if protoc.main([*args, *request.file_to_generate]) != 0:
            response.error = f"grpc_tools.protoc --{generator}_out failed (its message is above)"
            return response
        for path in sorted(p for p in out.rglob("*") if p.is_file()):
            response.file.add(name=path.relative_to(out).as_posix(), content=path.read_text(encoding="utf-8"))
    return response


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] not in GENERATORS:
        print(
            f"usage: python -m pydb.plugin.protoc_bridge {{{','.join(GENERATORS)}}}  (a protoc plugin)", file=sys.stderr
        )
        return 2
    request = plugin_pb2.CodeGeneratorRequest.FromString(sys.stdin.buffer.read())
    sys.stdout.buffer.write(generate(args[0], request).SerializeToString(deterministic=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
