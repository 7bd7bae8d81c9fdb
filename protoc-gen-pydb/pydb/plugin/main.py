"""protoc-gen-pydb's entry point: CodeGeneratorRequest on stdin -> CodeGeneratorResponse on stdout.

Hermetic: reads only the request, and under the `proto_path=` roots the schema files and the
annotated .proto files' own text (to place a diagnostic on the SQL token inside the literal).
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

from google.protobuf.compiler import plugin_pb2
from google.protobuf.message import DecodeError

from pydb import __version__, include_dir

# The options extension must be registered before the request is parsed, or protobuf keeps
# (pydb.v1.sql) as an unknown field and every RPC looks unannotated.
from pydb.v1 import options_pb2  # noqa: F401  (import for its side effect)

from .bind.compiler import compile_request
from .diagnostics import format_all
from .pygen.render import render
from .sql import SchemaRoots

# proto3 `optional` is handled (presence becomes HasField / None). Editions are not declared:
# field presence under editions features is not modelled, so protoc refuses an editions file
# for --pydb_out with a clear message rather than getting a silently wrong handler.
_FEATURES = plugin_pb2.CodeGeneratorResponse.FEATURE_PROTO3_OPTIONAL

USAGE = """usage: protoc-gen-pydb [--version | --include-dir | --help]
       protoc-gen-pydb {check,diff,vet,verify,lsp,snapshot} ...   (each with --help; docs/workflow.md)

A protoc plugin; protoc runs it. For example:
  python -m grpc_tools.protoc -I example_protos -I "$(protoc-gen-pydb --include-dir)" \\
      --python_out=gen --grpc_python_out=gen --pydb_out=gen --pydb_opt=proto_path=example_protos \\
      generation/task/v1/task.proto

Parameters (--pydb_opt=KEY=VALUE, comma-separated):
  proto_path=DIR   a root to look schema files up in (repeatable; default: the working directory)
  schema=PATH      the default schema under those roots: a .sql file (hand-written or a pg_dump
                   --schema-only) or a migrations directory (default: schema.sql beside each proto;
                   option (pydb.v1.schema) in a proto overrides it)

  --include-dir    print the directory to pass to protoc with -I for pydb/v1/options.proto
  --version        print the version"""


#: `protoc-gen-pydb COMMAND ...`: the developer loop beside the plugin (docs/workflow.md).
SUBCOMMANDS = ("check", "diff", "vet", "verify", "lsp", "snapshot")


def run_subcommand(name: str, argv: list[str]) -> int:
    """Each command's module is imported only when it runs: the plugin's start-up stays lean."""
    import importlib

    module = importlib.import_module(f"pydb.plugin.{name}")
    result: int = module.main(argv)
    return result


class ParameterError(Exception):
    pass


def parse_parameters(raw: str) -> SchemaRoots:
    """`proto_path=DIR` (repeatable) -> the roots to look schema files up in; `schema=PATH` -> the
    default schema under them. Strict: an unknown key or a malformed entry is an error."""
    roots: list[str] = []
    schema: str | None = None
    for item in filter(None, (p.strip() for p in raw.split(","))):
        key, sep, value = item.partition("=")
        if key == "proto_path":
            if not sep or not value:
                raise ParameterError(f"bad parameter {item!r}: proto_path needs a directory, proto_path=DIR")
            if not Path(value).is_dir():
                raise ParameterError(
                    f"bad parameter {item!r}: {value} is not a directory (relative paths are taken from "
                    f"the directory protoc runs in, {os.getcwd()})"
                )
            roots.append(value)
        elif key == "schema":
            if not sep or not value:
                raise ParameterError(f"bad parameter {item!r}: schema needs a path, schema=FILE_OR_DIRECTORY")
            if schema is not None:
                raise ParameterError(f"bad parameter {item!r}: schema is given twice")
            schema = value
        else:
            raise ParameterError(
                f"unknown parameter {key!r} in {raw!r}; protoc-gen-pydb accepts proto_path=DIR (repeatable) "
                "and schema=PATH"
            )
    return SchemaRoots(tuple(roots or ["."]), schema)


def generate(request: plugin_pb2.CodeGeneratorRequest) -> plugin_pb2.CodeGeneratorResponse:
    response = plugin_pb2.CodeGeneratorResponse(supported_features=_FEATURES)
    try:
        schema_roots = parse_parameters(request.parameter)
    except ParameterError as err:
        response.error = f"protoc-gen-pydb: {err}"
        return response
    try:
        files, diagnostics = compile_request(list(request.proto_file), list(request.file_to_generate), schema_roots)
        rendered = render(files) if not any(d.severity == "error" for d in diagnostics) else []
    except Exception:  # an internal error: say so, and ask for a report
        response.error = (
            "protoc-gen-pydb internal error (this is a bug, not a problem in your proto; please report it "
            "with the .proto and schema.sql):\n" + traceback.format_exc()
        )
        return response
    errors = [d for d in diagnostics if d.severity == "error"]
    warnings = [d for d in diagnostics if d.severity == "warning"]
    if warnings:
        sys.stderr.write(format_all(warnings) + "\n")
    if errors:
        count = f"{len(errors)} error{'s' if len(errors) != 1 else ''}"
        response.error = f"{count} in SQL annotations:\n" + format_all(errors)
        return response
    for path, content in rendered:
        response.file.add(name=path, content=content)
    return response


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args:
        if args[0] in ("--version", "-V"):
            print(f"protoc-gen-pydb {__version__}")
            return 0
        if args[0] == "--include-dir":
            print(include_dir())
            return 0
        if args[0] in SUBCOMMANDS:
            return run_subcommand(args[0], args[1:])
        if args[0] in ("-h", "--help"):
            print(USAGE)
            return 0
        print(f"protoc-gen-pydb: unknown argument {args[0]!r}\n{USAGE}", file=sys.stderr)
        return 2
    if sys.stdin.isatty():
        print(f"protoc-gen-pydb reads a CodeGeneratorRequest from protoc on stdin.\n{USAGE}", file=sys.stderr)
        return 2
    try:
        request = plugin_pb2.CodeGeneratorRequest.FromString(sys.stdin.buffer.read())
    except DecodeError:
        print("protoc-gen-pydb: stdin is not a CodeGeneratorRequest; run it through protoc", file=sys.stderr)
        return 1
    response = generate(request)
    sys.stdout.buffer.write(response.SerializeToString(deterministic=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
