"""Re-checking one edited statement without re-parsing the whole .proto.

`check --watch` and the language server see a file change again and again, most often inside one
RPC's SQL. A full check parses the file with protoc and binds every RPC (about 0.4 s for 1,000
RPCs); when the edit lies wholly inside one `(pydb.v1.sql)` query's string literal(s) and keeps
the number of lines, nothing protoc checks can have changed but that string. Then only that
RPC is compiled again, against the catalog already built, and the other RPCs' diagnostics are
kept: `FileCompiler` is run with each RPC's contributions recorded (its own diagnostics and the
message-field problems it shares), so they can be recombined. Any other edit takes the full path.
tests/devloop/test_incremental.py checks that both paths report the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from google.protobuf import descriptor_pb2

from pydb.v1 import options_pb2

from .bind import ir
from .bind.cache import CompileCache
from .bind.compiler import FileCompiler, dedupe
from .bind.positions import SourceMap, query_literals, query_offsets
from .bind.report import Reporter, method_path
from .diagnostics import Diagnostic
from .protos import ProtoIndex, location_span
from .sql import Catalog, SchemaRoots

FieldKey = tuple[str, str, str]
_SQL_OPTION = [4, options_pb2.sql.number]


@dataclass
class RpcResult:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    fields: list[FieldKey] = field(default_factory=list)


@dataclass
class FileState:
    """One target file as last checked: its text, descriptors and per-RPC contributions."""

    name: str
    text: str
    files: list[descriptor_pb2.FileDescriptorProto]
    index: ProtoIndex
    catalogs: dict[str, tuple[Catalog | None, list[Diagnostic]]]
    file_diagnostics: list[Diagnostic]
    rpcs: dict[tuple[int, int], RpcResult]
    rpc_names: dict[tuple[int, int], str]

    def diagnostics(self, roots: SchemaRoots) -> list[Diagnostic]:
        """The file's diagnostics, recombined: as one FileCompiler run reports them."""
        file = self.index.files[self.name]
        report = Reporter(file, self.index)
        for key in sorted(self.rpcs):
            for fk in self.rpcs[key].fields:
                report.at_field(*fk, self.rpc_names[key])
        report.flush()
        out = list(self.file_diagnostics)
        for key in sorted(self.rpcs):
            out += self.rpcs[key].diagnostics
        return dedupe(out + report.diagnostics)


class RecordingCompiler(FileCompiler):
    """A FileCompiler that keeps what each RPC contributed."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.per_rpc: dict[tuple[int, int], RpcResult] = {}

    def compile_method_guarded(
        self, si: int, mi: int, method: descriptor_pb2.MethodDescriptorProto, catalog: Catalog
    ) -> ir.Rpc | None:
        before = len(self.diagnostics)
        shared = {k: len(v) for k, v in self.report.at_fields.items()}
        result = super().compile_method_guarded(si, mi, method, catalog)
        fields = [k for k, v in self.report.at_fields.items() if len(v) > shared.get(k, 0)]
        self.per_rpc[si, mi] = RpcResult(self.diagnostics[before:], fields)
        return result


def full_check(
    name: str,
    text: str,
    files: list[descriptor_pb2.FileDescriptorProto],
    roots: SchemaRoots,
    cache: CompileCache,
) -> FileState:
    """Compile one target file, recording each RPC's contributions."""
    index = ProtoIndex(files)
    catalogs: dict[str, tuple[Catalog | None, list[Diagnostic]]] = {}
    compiler = RecordingCompiler(index.files[name], index, roots, catalogs, text, cache)
    compiler.report.flush = lambda: None  # type: ignore[method-assign]  # recombined by FileState
    compiler.compile()
    per_rpc = [d for r in compiler.per_rpc.values() for d in r.diagnostics]
    file_level = [d for d in compiler.diagnostics if not any(d is p for p in per_rpc)]
    file = index.files[name]
    names = {(si, mi): m.name for si, s in enumerate(file.service) for mi, m in enumerate(s.method)}
    return FileState(name, text, files, index, catalogs, file_level, compiler.per_rpc, names)


def _common_prefix(a: str, b: str) -> int:
    """Length of the common prefix, by bisection on slice comparisons (C speed, not per char)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _edit(old: str, new: str) -> tuple[int, int, int] | None:
    """The one changed region: (start, end in old, end in new), or None if equal."""
    if old == new:
        return None
    start = _common_prefix(old, new)
    tail = _common_prefix(old[start:][::-1], new[start:][::-1])
    return start, len(old) - tail, len(new) - tail


def recheck(state: FileState, new_text: str, roots: SchemaRoots, cache: CompileCache) -> FileState | None:
    """The state after `new_text` replaced the file's text, when the edit lies inside one
    statement's literals (same line count); None: take the full path."""
    edit = _edit(state.text, new_text)
    if edit is None:
        return state
    start, end_old, end_new = edit
    if state.text.count("\n", start, end_old) != new_text.count("\n", start, end_new):
        return None
    file = state.index.files[state.name]
    old_map = SourceMap(state.text)
    for key in state.rpcs:
        si, mi = key
        method = file.service[si].method[mi]
        option = [*method_path(si, mi), *_SQL_OPTION]
        span = location_span(file, [*option, 1], option)
        if span is None:
            continue
        o_start = old_map.offset(span[0], span[1])
        o_end = old_map.offset(span[2] if len(span) == 4 else span[0], span[-1])
        if not o_start <= start <= end_old <= o_end:
            continue
        query = method.options.Extensions[options_pb2.sql].query
        old_offsets = query_offsets(state.text, o_start, o_end, query)
        if old_offsets is None:
            return None
        first_quote = old_offsets[0] - 1 if query else old_offsets[-1] - 1
        if not first_quote < start or end_old > old_offsets[-1]:
            return None  # not strictly inside the literals
        delta = end_new - end_old
        found = query_literals(new_text, o_start, o_end + delta)
        if found is None or found[1][-1] != old_offsets[-1] + delta:
            return None  # a quote was added or removed: no longer the same literals
        return _replace(state, key, found[0], new_text, span, delta, roots, cache)
    return None


def _replace(
    state: FileState,
    key: tuple[int, int],
    query: str,
    new_text: str,
    span: list[int],
    delta: int,
    roots: SchemaRoots,
    cache: CompileCache,
) -> FileState | None:
    """RPC `key` compiled again with its new query; the other RPCs' results kept."""
    si, mi = key
    file = state.index.files[state.name]
    method = file.service[si].method[mi]
    method.options.Extensions[options_pb2.sql].query = query
    if len(span) == 3:  # a one-line option: its end moved with the edit
        for loc in file.source_code_info.location:
            if list(loc.path[:4]) == method_path(si, mi) and list(loc.span) == span:
                loc.span[-1] += delta
    compiler = RecordingCompiler(file, state.index, roots, state.catalogs, new_text, cache)
    catalog = compiler.catalog()
    if catalog is None:
        return None
    compiler.compile_method_guarded(si, mi, method, catalog)
    rpcs = {**state.rpcs, key: compiler.per_rpc[key]}
    return FileState(
        state.name, new_text, state.files, state.index, state.catalogs, state.file_diagnostics, rpcs, state.rpc_names
    )
