"""Run protoc-gen-pydb in-process, the way the tests do: protoc (grpc_tools) only parses .proto
files into a FileDescriptorSet; the plugin then gets a CodeGeneratorRequest handed straight to
`pydb.plugin.main.generate`, with its stderr (the warnings) captured. No subprocess.

    descriptors = compile_protos(root, ["pkg/x.proto"])
    outcome = run_plugin(descriptors, ["pkg/x.proto"], cwd=root)  # proto_path=. is `root`
    outcome.error, outcome.warnings, outcome.files, outcome.transcript()
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc_tools  # type: ignore[import-untyped]
from google.protobuf import descriptor_pb2
from google.protobuf.compiler import plugin_pb2
from grpc_tools import protoc as grpc_protoc
from pydb import include_dir
from pydb.plugin.main import generate

#: The well-known types (google/protobuf/*.proto) that ship with grpc_tools.
WELL_KNOWN = Path(grpc_tools.__file__).resolve().parent / "_proto"

#: What a request may be built from: a parsed set, or the file descriptors themselves (in
#: dependency order, as protoc sends them).
Descriptors = descriptor_pb2.FileDescriptorSet | Iterable[descriptor_pb2.FileDescriptorProto]


@dataclass(frozen=True)
class Outcome:
    """What protoc would show for one run: the error (empty on success), the warnings the
    plugin wrote to stderr, and the generated files by name."""

    error: str
    warnings: str
    files: dict[str, str]

    def transcript(self) -> str:
        """The text an `.expected` file holds: the error block, then any warnings."""
        out = self.error
        if self.warnings:
            out += "\n--- warnings ---\n" + self.warnings
        return out.rstrip("\n") + "\n"


def protoc(root: Path, *args: str) -> None:
    """Run grpc_tools' protoc with `root`, pydb's options and the well-known types on the
    include path, followed by `args` (output flags and .proto files relative to `root`).
    Raises RuntimeError, with what protoc printed, if it fails."""
    command = ["protoc", f"-I{root}", f"-I{include_dir()}", f"-I{WELL_KNOWN}", *args]
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        code = grpc_protoc.main(command)
    if code != 0:
        raise RuntimeError(f"protoc failed on {list(args)}: {stderr.getvalue()}")


def compile_protos(root: Path, files: Sequence[str]) -> descriptor_pb2.FileDescriptorSet:
    """Parse `files` (relative to `root`) with protoc, source info and imports included."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "set.pb"
        protoc(root, "--include_imports", "--include_source_info", f"--descriptor_set_out={out}", *files)
        return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())


def plugin_request(
    descriptors: Descriptors, targets: Sequence[str], *, parameter: str = "proto_path=."
) -> plugin_pb2.CodeGeneratorRequest:
    """The request protoc would send to generate `targets` out of `descriptors`."""
    files = descriptors.file if isinstance(descriptors, descriptor_pb2.FileDescriptorSet) else descriptors
    request = plugin_pb2.CodeGeneratorRequest(file_to_generate=targets, parameter=parameter)
    request.proto_file.extend(files)
    return request


def run_request(request: plugin_pb2.CodeGeneratorRequest, *, cwd: Path | None = None) -> Outcome:
    """Hand `request` to the plugin, from inside `cwd` if given (a relative proto_path is
    relative to it, and so are the schema paths in the diagnostics)."""
    stderr = io.StringIO()
    where = contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext()
    with where, contextlib.redirect_stderr(stderr):
        response = generate(request)
    return Outcome(response.error, stderr.getvalue(), {f.name: f.content for f in response.file})


def run_plugin(
    descriptors: Descriptors, targets: Sequence[str], *, cwd: Path | None = None, parameter: str = "proto_path=."
) -> Outcome:
    """Generate `targets` as protoc would: `plugin_request` then `run_request`."""
    return run_request(plugin_request(descriptors, targets, parameter=parameter), cwd=cwd)
