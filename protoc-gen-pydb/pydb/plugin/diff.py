"""`protoc-gen-pydb diff -- COMMAND...`: is the committed generated code what the protos make?

For a user's CI, like `sqlc diff`: the user's own generation command runs again, its output sent
into a temporary directory, and every file it writes is compared with the committed copy.
Prints a unified diff of each difference; exit status 0 when all match, 1 on drift, 2 when the
command itself fails.

- a protoc command (`protoc ...`, `python -m grpc_tools.protoc ...`): every `--NAME_out=[OPTS:]DIR`
  is pointed at the same DIR under the temporary directory; the options are kept. A file under
  an output DIR that looks generated (`*_pb2.py`, `*_pb2_grpc.py`, `.pyi`, `*_pydb*.py`) but is
  no longer written is reported as stale.
- `buf generate ...`: run with `--output TMP`, so each plugin's `out:` of buf.gen.yaml lands under
  the temporary directory.

Output directories are relative to the working directory (where the command runs).
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

USAGE = """usage: protoc-gen-pydb diff -- COMMAND [ARG...]

Re-runs COMMAND (your protoc, python -m grpc_tools.protoc or buf generate invocation) into a
temporary directory and prints a unified diff against the committed output; exit 1 on drift.
  protoc-gen-pydb diff -- python -m grpc_tools.protoc -I proto --python_out=gen --pydb_out=gen shop/v1/shop.proto
  protoc-gen-pydb diff -- buf generate"""

_OUT = re.compile(r"^--(?P<name>[A-Za-z0-9_]+)_out=(?P<opts>[^:]*:)?(?P<dir>.+)$")
_GENERATED = re.compile(r"(_pb2(_grpc)?\.pyi?|_pydb\w*\.py)$")


class UsageError(Exception):
    pass


def _relative(directory: str) -> str:
    path = Path(directory)
    if path.is_absolute():
        try:
            return str(path.resolve().relative_to(Path.cwd().resolve()))
        except ValueError:
            raise UsageError(f"output directory {directory} is outside the working directory") from None
    norm = os.path.normpath(directory)
    if norm == ".." or norm.startswith(".." + os.sep):
        raise UsageError(f"output directory {directory} is outside the working directory")
    return norm


def redirect(command: Sequence[str], tmp: Path) -> tuple[list[str], list[str]]:
    """The command writing into `tmp` instead, and the output directories it names."""
    if len(command) >= 2 and Path(command[0]).name == "buf" and command[1] == "generate":
        return [*command, "--output", str(tmp)], []
    out: list[str] = []
    dirs: list[str] = []
    for arg in command:
        m = _OUT.match(arg)
        if m is None:
            out.append(arg)
            continue
        rel = _relative(m["dir"])
        (tmp / rel).mkdir(parents=True, exist_ok=True)
        dirs.append(rel)
        out.append(f"--{m['name']}_out={m['opts'] or ''}{tmp / rel}")
    if not dirs:
        raise UsageError("the command has no --NAME_out=DIR and is not `buf generate`: nothing to compare")
    return out, dirs


def _read(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return [f"<binary file, {path.stat().st_size} bytes>\n"]


def compare(tmp: Path, dirs: Sequence[str]) -> list[str]:
    """Unified diffs of every generated file against the committed one, plus stale files."""
    out: list[str] = []
    generated = sorted(p.relative_to(tmp) for p in tmp.rglob("*") if p.is_file())
    for rel in generated:
        committed = Path(rel)
        new = _read(tmp / rel)
        old = _read(committed) if committed.is_file() else []
        if old != new:
            label = str(rel) if committed.is_file() else f"{rel} (not committed)"
            out += difflib.unified_diff(old, new, f"a/{label}", f"b/{rel}")
            if out and not out[-1].endswith("\n"):
                out[-1] += "\n"
    written = {str(p) for p in generated}
    for d in sorted(set(dirs)):
        for path in sorted(Path(d).rglob("*")) if Path(d).is_dir() else []:
            name = os.path.normpath(str(path))
            if path.is_file() and _GENERATED.search(path.name) and name not in written:
                out += difflib.unified_diff(_read(path), [], f"a/{name}", f"b/{name} (no longer generated)")
    return out


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    if args[:1] in (["-h"], ["--help"]) or "--" not in args or args.index("--") == len(args) - 1:
        print(USAGE, file=sys.stderr if args[:1] not in (["-h"], ["--help"]) else sys.stdout)
        return 0 if args[:1] in (["-h"], ["--help"]) else 2
    command = args[args.index("--") + 1 :]
    with tempfile.TemporaryDirectory(prefix="pydb-diff-") as name:
        tmp = Path(name) / "out"
        tmp.mkdir()
        try:
            redirected, dirs = redirect(command, tmp)
        except UsageError as err:
            print(f"protoc-gen-pydb diff: {err}", file=sys.stderr)
            return 2
        try:
            done = subprocess.run(redirected, check=False)
        except OSError as err:
            print(f"protoc-gen-pydb diff: cannot run {command[0]}: {err}", file=sys.stderr)
            return 2
        if done.returncode != 0:
            print(f"protoc-gen-pydb diff: the generation command failed (exit {done.returncode})", file=sys.stderr)
            return 2
        drift = compare(tmp, dirs)
    if drift:
        sys.stdout.writelines(drift)
        print("protoc-gen-pydb diff: the committed generated code differs from what the protos make", file=sys.stderr)
        return 1
    return 0
