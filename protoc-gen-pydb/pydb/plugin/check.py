"""`protoc-gen-pydb check`: the plugin's checks on .proto files without a protoc round trip.

grpcio-tools' protoc parses the files in-process into a FileDescriptorSet (source info and
imports included), which is what protoc would hand the plugin; the plugin's own compile then
runs on it and prints the same diagnostics. `--watch` polls the protos, their imports and the
schema files and re-checks on save, with a `CompileCache` (bind/cache.py) so that only what
changed is analysed again.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import descriptor_pb2

from pydb import include_dir
from pydb.v1 import options_pb2

from .bind.cache import CompileCache
from .bind.compiler import FileCompiler
from .bind.variants import find_blocks, variants
from .diagnostics import Diagnostic, Problem, Severity, SqlSpan, format_all
from .incremental import FileState, full_check, recheck
from .protos import ProtoIndex
from .sql import Analysis, Catalog, SchemaRoots, schema_path


def well_known_dir() -> str:
    """grpcio-tools' copy of google/protobuf/*.proto."""
    import grpc_tools  # type: ignore[import-untyped]

    return str(Path(grpc_tools.__file__).resolve().parent / "_proto")


def _protoc_diagnostics(text: str) -> list[Diagnostic]:
    """protoc's `path:line:col: message` lines as diagnostics (other lines kept as messages)."""
    out: list[Diagnostic] = []
    for raw in text.splitlines():
        parts = raw.split(":", 3)
        if len(parts) == 4 and parts[1].strip().isdigit() and parts[2].strip().isdigit():
            out.append(Diagnostic(parts[0], int(parts[1]), int(parts[2]), parts[3].strip()))
        elif raw.strip() and not any(raw.strip() in d.message for d in out):
            out.append(Diagnostic(raw.split(":", 1)[0] if ": " in raw else "protoc", 1, 1, raw.strip()))
    return out


def run_protoc(args: Sequence[str]) -> tuple[int, str]:
    """grpc_tools' protoc in-process, its stderr (written by C++ to fd 2) captured."""
    from grpc_tools import protoc

    with tempfile.TemporaryFile() as err:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(err.fileno(), 2)
        try:
            code = protoc.main(["protoc", *args])
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        return code, err.read().decode("utf-8", "replace")


def virtual_name(path: str, roots: Sequence[str]) -> str:
    """The name protoc knows `path` by: relative to the first -I root holding it."""
    absolute = os.path.abspath(path)
    for root in roots:
        base = os.path.abspath(root)
        if absolute.startswith(base.rstrip(os.sep) + os.sep):
            return os.path.relpath(absolute, base).replace(os.sep, "/")
    return path.replace(os.sep, "/")


@dataclass
class Checker:
    """Checks a set of protos again and again, keeping what did not change (watch, the LSP)."""

    includes: tuple[str, ...]
    schema: str | None = None
    cache: CompileCache = field(default_factory=CompileCache)
    #: After a check: every file it read (protos with their imports, schema files).
    inputs: set[Path] = field(default_factory=set)
    _states: dict[str, FileState] = field(default_factory=dict)
    _others: dict[Path, tuple[int, int]] = field(default_factory=dict)

    def roots(self) -> SchemaRoots:
        """Where schema files (and the protos' text) are looked up: the -I roots, then `.`."""
        roots = tuple(self.includes) or (".",)
        return SchemaRoots(roots if "." in roots else (*roots, "."), self.schema)

    def parse(
        self, targets: Sequence[str], overlays: Mapping[str, str] | None = None
    ) -> tuple[descriptor_pb2.FileDescriptorSet | None, list[Diagnostic]]:
        """protoc's parse of `targets` (virtual names); `overlays`: name -> text not yet on disk,
        seen through a root searched first."""
        with tempfile.TemporaryDirectory(prefix="pydb-check-") as tmp:
            overlay_root = Path(tmp) / "overlay"
            for name, text in (overlays or {}).items():
                (overlay_root / name).parent.mkdir(parents=True, exist_ok=True)
                (overlay_root / name).write_text(text, encoding="utf-8")
            out = Path(tmp) / "set.binpb"
            roots = [str(overlay_root)] if overlays else []
            roots += [*(self.includes or (".",)), include_dir(), well_known_dir()]
            code, err = run_protoc(
                [
                    *(f"-I{r}" for r in roots),
                    "--include_imports",
                    "--include_source_info",
                    f"--descriptor_set_out={out}",
                    # an overlaid target named by its overlay path: else protoc, finding the name
                    # as a file under the working directory too, calls it shadowed
                    *(str(overlay_root / t) if overlays and t in overlays else t for t in targets),
                ]
            )
            if code != 0:
                return None, _protoc_diagnostics(err.replace(str(overlay_root) + os.sep, ""))
            return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()), []

    def check(self, targets: Sequence[str], overlays: Mapping[str, str] | None = None) -> list[Diagnostic]:
        """The diagnostics of `targets`; after a first check, an edit inside one statement's
        literals is re-checked alone (incremental.py), anything else in full."""
        texts = {name: self._text(name, overlays) for name in targets}
        fast = self._incremental(targets, texts)
        if fast is not None:
            return fast
        files, problems = self.parse(targets, overlays)
        self._states = {}
        if files is None:
            return problems
        roots = self.roots()
        editions = [f for f in files.file if f.name in targets and f.syntax == "editions"]
        if editions:  # as protoc refuses them for --pydb_out (docs/workflow.md says why)
            return [
                Diagnostic(f.name, 1, 1, "protoc-gen-pydb does not support editions (edition = ...) yet; use proto3")
                for f in editions
            ]
        diagnostics: list[Diagnostic] = []
        for name in targets:
            state = full_check(name, texts[name], list(files.file), roots, self.cache)
            self._states[name] = state
            diagnostics += state.diagnostics(roots)
        self.inputs = set(self._inputs(files, roots))
        self._others = _stamp(self.inputs - {p for p in (roots.find(t) for t in targets) if p is not None})
        return diagnostics

    def states(self) -> Mapping[str, FileState]:
        """Per target file, what the last check found (the language server's hover and definition)."""
        return self._states

    def _text(self, name: str, overlays: Mapping[str, str] | None) -> str:
        if overlays and name in overlays:
            return overlays[name]
        found = self.roots().find(name)
        try:
            return found.read_text(encoding="utf-8") if found is not None else ""
        except (OSError, UnicodeDecodeError):
            return ""

    def _incremental(self, targets: Sequence[str], texts: Mapping[str, str]) -> list[Diagnostic] | None:
        if set(targets) != set(self._states) or _stamp(self._others) != self._others:
            return None
        changed = [t for t in targets if texts[t] != self._states[t].text]
        if len(changed) > 1:
            return None
        roots = self.roots()
        if changed:
            state = recheck(self._states[changed[0]], texts[changed[0]], roots, self.cache)
            if state is None:
                return None
            self._states[changed[0]] = state
        return [d for t in targets for d in self._states[t].diagnostics(roots)]

    def _inputs(self, files: descriptor_pb2.FileDescriptorSet, roots: SchemaRoots) -> Iterable[Path]:
        for f in files.file:
            found = roots.find(f.name)
            if found is not None:
                yield found
            opts = f.options
            option = opts.Extensions[options_pb2.schema] if opts.HasExtension(options_pb2.schema) else None
            schema = roots.find(schema_path(f.name, option, roots)) if f.service else None
            if schema is not None:
                yield from ([schema] if schema.is_file() else sorted(p for p in schema.rglob("*") if p.is_file()))


@dataclass(frozen=True)
class Statement:
    """One annotated RPC's statement as compiled: where to report, what the analyzer found."""

    compiler: FileCompiler
    si: int
    mi: int
    method: descriptor_pb2.MethodDescriptorProto
    sql: str
    analysis: Analysis | None
    problems: tuple[Problem, ...]

    def report(self, message: str, span: SqlSpan | None = None, severity: Severity = "error") -> None:
        """A diagnostic at the statement (at `span`'s token inside the .proto's literal)."""
        self.compiler.at_method(self.si, self.mi, f"{self.method.name}: {message}", self.sql, span, severity)


def each_statement(
    checker: Checker, files: descriptor_pb2.FileDescriptorSet, targets: Sequence[str]
) -> Iterator[Statement | FileCompiler]:
    """Every `(pydb.v1.sql)` statement of `targets`, analysed against its catalog (cached); after
    each file's statements, its FileCompiler (whose `diagnostics` hold what was reported)."""
    index = ProtoIndex(list(files.file))
    roots = checker.roots()
    catalogs: dict[str, tuple[Catalog | None, list[Diagnostic]]] = {}
    for name in targets:
        compiler = FileCompiler(index.files[name], index, roots, catalogs, None, checker.cache)
        catalog = compiler.catalog()
        for si, svc in enumerate(index.files[name].service):
            for mi, method in enumerate(svc.method):
                if catalog is None or not method.options.HasExtension(options_pb2.sql):
                    continue
                sql = method.options.Extensions[options_pb2.sql].query
                request = index.messages[method.input_type.lstrip(".")]
                nullable = frozenset(f.name for f in request.fields if f.has_presence)
                # Optional blocks: each variant is a statement of its own (same offsets as written).
                blocks = find_blocks(sql, request, index)[0]
                listed = variants(sql, blocks, index, request) if blocks else None
                for text in [v.text for v in listed] if isinstance(listed, list) else [sql]:
                    analysis, problems = checker.cache.analyze(text, catalog, nullable)
                    yield Statement(compiler, si, mi, method, text, analysis, tuple(problems))
        yield compiler


def _stamp(paths: Iterable[Path]) -> dict[Path, tuple[int, int]]:
    """Per file its size and a checksum of its content: a save is seen even when it keeps the
    size and lands in the same mtime tick as the previous one."""
    out: dict[Path, tuple[int, int]] = {}
    for p in paths:
        try:
            data = p.read_bytes()
        except OSError:
            out[p] = (-1, -1)
        else:
            out[p] = (len(data), zlib.crc32(data))
    return out


def report(diagnostics: list[Diagnostic]) -> str:
    errors = sum(1 for d in diagnostics if d.severity == "error")
    warnings = len(diagnostics) - errors
    summary = f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}"
    return (format_all(diagnostics) + "\n" if diagnostics else "") + summary


def watch(checker: Checker, targets: Sequence[str], interval: float, out: Callable[[str], None]) -> int:
    """Check, then re-check whenever an input's mtime or size changes; Ctrl-C stops."""
    try:
        while True:
            # Stamped before the check reads them: a save during the check is not missed.
            before = _stamp(checker.inputs)
            started = time.perf_counter()
            diagnostics = checker.check(targets)
            elapsed = (time.perf_counter() - started) * 1000
            stamps = {p: before[p] if p in before else _stamp([p])[p] for p in checker.inputs}
            out(f"{report(diagnostics)} ({elapsed:.0f} ms; watching {len(stamps)} files)\n")
            while _stamp(stamps) == stamps:
                time.sleep(interval)
    except KeyboardInterrupt:
        return 0


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="protoc-gen-pydb check",
        description="Check the (pydb.v1.sql) statements of .proto files against their schema, without protoc.",
    )
    parser.add_argument("protos", nargs="+", help=".proto files (paths under an -I root, or names relative to one)")
    parser.add_argument("-I", "--proto_path", action="append", default=[], dest="includes", help="an import root")
    parser.add_argument(
        "--schema",
        help="the default schema: a .sql file or migrations directory, relative to an -I root or to . (as --pydb_opt=schema=)",
    )
    parser.add_argument("--watch", action="store_true", help="re-check whenever a proto or schema file changes")
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between polls in --watch (0.2)")
    args = parser.parse_args(argv)
    includes = tuple(args.includes) or (".",)
    checker = Checker(includes, args.schema)
    targets = [virtual_name(p, includes) for p in args.protos]
    if args.watch:
        return watch(checker, targets, args.interval, _write)
    diagnostics = checker.check(targets)
    print(report(diagnostics), file=sys.stderr)
    return 1 if any(d.severity == "error" for d in diagnostics) else 0
