"""Run protoc-gen-pydb on the diagnostics corpus in-process: protoc (grpc_tools) only parses the
.proto files into descriptors once; each case is then one CodeGeneratorRequest handed to
`pydb.plugin.main.generate`. No subprocess, no files written.

`python tests/annotation_corpus/runner.py --update` rewrites every bad case's `.expected` file from what the
plugin prints now; review the diff before committing it.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc_tools  # type: ignore[import-untyped]
from google.protobuf import descriptor_pb2
from google.protobuf.compiler import plugin_pb2
from grpc_tools import protoc
from pydb import include_dir
from pydb.plugin.main import generate

CORPUS = Path(__file__).resolve().parent
#: The -I root: the corpus' files are `annotation_corpus/...` in it, names no other test's
#: protos use (generated modules of two same-named .proto files would clash in one process).
ROOT = CORPUS.parent
WELL_KNOWN = Path(grpc_tools.__file__).resolve().parent / "_proto"


@dataclass(frozen=True)
class Outcome:
    """What protoc would show: the error text (empty when generation succeeded), the warnings
    written to stderr, and the generated files."""

    error: str
    warnings: str
    files: dict[str, str]

    def transcript(self) -> str:
        """The text an `.expected` file holds."""
        out = self.error
        if self.warnings:
            out += "\n--- warnings ---\n" + self.warnings
        return out.rstrip("\n") + "\n"


def case_names(kind: str) -> list[str]:
    return sorted(p.stem for p in (CORPUS / kind).glob("*.proto"))


def compile_protos(root: Path, files: list[str]) -> descriptor_pb2.FileDescriptorSet:
    """Parse `files` (relative to `root`) with protoc, source info and imports included."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "set.pb"
        args = [
            "protoc",
            f"-I{root}",
            f"-I{include_dir()}",
            f"-I{WELL_KNOWN}",
            "--include_imports",
            "--include_source_info",
            f"--descriptor_set_out={out}",
            *files,
        ]
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            code = protoc.main(args)
        if code != 0:
            raise RuntimeError(f"protoc failed on {files}: {stderr.getvalue()}")
        return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())


@contextlib.contextmanager
def chdir(path: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def run_plugin(descriptors: descriptor_pb2.FileDescriptorSet, target: str, root: Path) -> Outcome:
    """Generate `target` as protoc would, with `proto_path=.` from inside `root` so that
    paths in the diagnostics are relative to it."""
    request = plugin_pb2.CodeGeneratorRequest(file_to_generate=[target], parameter="proto_path=.")
    request.proto_file.extend(descriptors.file)
    stderr = io.StringIO()
    with chdir(root), contextlib.redirect_stderr(stderr):
        response = generate(request)
    return Outcome(response.error, stderr.getvalue(), {f.name: f.content for f in response.file})


class Corpus:
    """Every corpus .proto parsed once; outcomes per case on demand."""

    def __init__(self) -> None:
        self.files = [proto_name(kind, name) for kind in ("bad", "valid") for name in case_names(kind)]
        self.descriptors = compile_protos(ROOT, self.files)

    def run(self, kind: str, name: str) -> Outcome:
        return run_plugin(self.descriptors, proto_name(kind, name), ROOT)


def proto_name(kind: str, name: str) -> str:
    """The name protoc knows a case by, e.g. `annotation_corpus/bad/unknown_table.proto`."""
    return f"{CORPUS.name}/{kind}/{name}.proto"


def update_expected() -> None:
    corpus = Corpus()
    for name in case_names("bad"):
        outcome = corpus.run("bad", name)
        (CORPUS / "bad" / f"{name}.expected").write_text(outcome.transcript(), encoding="utf-8")
        print(f"--- {name}\n{outcome.transcript()}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--update"]:
        update_expected()
    else:
        print(__doc__)
