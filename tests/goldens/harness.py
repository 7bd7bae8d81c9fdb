"""Generate and import a proto + schema the way a user would: protoc (grpc_tools) for the
_pb2/_pb2_grpc modules (and mypy-protobuf's stubs), protoc-gen-pydb in-process for the handlers.
Used by tests/bind/, tests/pygen/ and the feature goldens."""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from support.plugin_harness import Outcome, compile_protos, protoc, run_plugin

BIN = Path(sys.executable).parent


def write_tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def generate(root: Path, proto: str, out: Path | None = None, *, stubs: bool = False) -> Outcome:
    """Run protoc-gen-pydb on `proto` (relative to `root`, its schema looked up under `root`);
    with `out`, also write protoc's Python modules (and, with `stubs`, their .pyi) and the
    plugin's files there."""
    outcome = run_plugin(compile_protos(root, [proto]), [proto], cwd=root)
    if out is not None and not outcome.error:
        out.mkdir(parents=True, exist_ok=True)
        protoc(root, *python_out(out, stubs=stubs), proto)
        write_tree(out, outcome.files)
    return outcome


def python_out(out: Path, *, stubs: bool) -> list[str]:
    """protoc's flags writing the _pb2/_pb2_grpc modules (and, with `stubs`, mypy-protobuf's
    .pyi for them) into `out`."""
    args = [f"--python_out={out}", f"--grpc_python_out={out}"]
    if stubs:
        args += [
            f"--plugin=protoc-gen-mypy={BIN / 'protoc-gen-mypy'}",
            f"--plugin=protoc-gen-mypy_grpc={BIN / 'protoc-gen-mypy_grpc'}",
            f"--mypy_out=quiet:{out}",
            f"--mypy_grpc_out=quiet:{out}",
        ]
    return args


@contextlib.contextmanager
def importable(out: Path, module: str) -> Iterator[ModuleType]:
    """`module` imported from `out` (removed from sys.modules and sys.path afterwards)."""
    sys.path.insert(0, str(out))
    before = set(sys.modules)
    try:
        yield importlib.import_module(module)
    finally:
        sys.path.remove(str(out))
        for name in set(sys.modules) - before:
            if not name.startswith(("google", "grpc", "psycopg", "pydb")):
                del sys.modules[name]
