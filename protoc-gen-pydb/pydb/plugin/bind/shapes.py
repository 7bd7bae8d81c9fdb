"""The statement's shapes beyond one constant text: optional blocks (variants.py) and pages
(paging.py), checked variant by variant and merged into the one Analysis bind checks against the
messages, and then cut into the IR's parts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from pydb.v1 import options_pb2

from ..diagnostics import Problem, SqlSpan
from ..protos import Message, ProtoIndex
from ..sql import Analysis, Catalog
from . import ir, paging
from .params import field_ref
from .variants import Block, Condition, Variant, find_blocks, segments, variants

Analyze = Callable[[str], tuple[Analysis | None, list[Problem]]]
Pieces = Callable[[str, Analysis, int, int], ir.Statement]


@dataclass(frozen=True)
class Shape:
    sql: str  # as written, markers included
    blocks: tuple[Block, ...]
    variants: tuple[tuple[Variant, Analysis], ...]
    keysets: tuple[paging.Keyset, ...] = ()

    @property
    def text(self) -> str:
        """The statement as written, markers blanked: every block present."""
        return blank_markers(self.sql, self.blocks)


def blank_markers(text: str, blocks: tuple[Block, ...]) -> str:
    chars = list(text)
    for b in blocks:
        for a, z in ((b.open_start, b.open_end), (b.close_start, b.close_end)):
            chars[a:z] = [" "] * (z - a)
    return "".join(chars)


def analyze_shaped(
    sql: str, request: Message, index: ProtoIndex, analyze: Analyze, catalog: Catalog, paged: bool
) -> tuple[Analysis | None, list[Problem], Shape | None]:
    """Every variant analysed; their merge (parameters of all, the columns they agree on)."""
    blocks, problems = find_blocks(sql, request, index)
    if problems:
        return None, problems, None
    if not blocks:
        analysis, problems = analyze(sql)
        if analysis is None or not paged:
            return analysis, problems, Shape(sql, (), ((Variant(sql, ()), analysis),)) if analysis else None
        found = [(Variant(sql, ()), analysis)]
    else:
        listed = variants(sql, blocks, index, request)
        if isinstance(listed, Problem):
            return None, [listed], None
        seen: dict[Problem, list[str]] = {}
        found = []
        for v in listed:
            analysis, got = analyze(v.text)
            for p in got:
                seen.setdefault(p, []).append(v.describe())
            if analysis is not None:
                found.append((v, analysis))
        problems = [
            p if len(where) == len(listed) else replace(p, message=f"{p.message} (when {where[0]})")
            for p, where in seen.items()
        ]
        if len(found) < len(listed) or any(p.severity == "error" for p in problems):
            return None, problems, None
    merged = _merge(found, problems)
    if merged is None:
        return None, problems, None
    keysets: list[paging.Keyset] = []
    if paged:
        for v, a in found:
            k = paging.keyset(v.text, a, catalog, blocks)
            if isinstance(k, Problem):
                return (
                    None,
                    [*problems, replace(k, message=k.message + (f" (when {v.describe()})" if v.choice else ""))],
                    None,
                )
            if k not in keysets:
                keysets.append(k)
        by_when = [k.when for k in keysets]
        if len(set(by_when)) < len(by_when):
            problems.append(
                Problem("page: the ORDER BY must not change with the optional blocks, only with a sort's enum")
            )
            return None, problems, None
    return merged, problems, Shape(sql, blocks, tuple(found), tuple(keysets))


def _merge(found: list[tuple[Variant, Analysis]], problems: list[Problem]) -> Analysis | None:
    first = found[0][1]
    params: dict[str, object] = {}
    spans: dict[str, list[SqlSpan]] = {}
    for v, a in found:
        for p in a.params:
            if p.name in params and params[p.name] != p.type:
                problems.append(
                    Problem(
                        f"@{p.name} is {params[p.name]} in one variant and {p.type} when {v.describe()}; cast it",
                        p.spans[0] if p.spans else None,
                    )
                )
                return None
            params.setdefault(p.name, p.type)
            spans.setdefault(p.name, [])
            spans[p.name] += [s for s in p.spans if s not in spans[p.name]]
        if [(c.name, c.type) for c in a.columns or ()] != [(c.name, c.type) for c in first.columns or ()]:
            problems.append(
                Problem(f"the result columns differ when {v.describe()}: every variant must return the same columns")
            )
            return None
    by_name = {p.name: p for _, a in found for p in a.params}
    merged_params = tuple(replace(by_name[n], spans=tuple(sorted(spans[n], key=lambda s: s.start))) for n in params)
    columns = first.columns
    if columns is not None:
        columns = tuple(
            replace(c, nullable=any((a.columns or ())[i].nullable for _, a in found)) for i, c in enumerate(columns)
        )
    expansions = tuple(sorted({e for _, a in found for e in a.expansions}, key=lambda e: e.span.start))
    return replace(
        first,
        params=merged_params,
        columns=columns,
        expansions=expansions,
        read_only=all(a.read_only for _, a in found),
    )


def page_option(opt: options_pb2.Sql) -> options_pb2.Page | None:
    return opt.page if opt.HasField("page") else None


def parts(
    shape: Shape, merged: Analysis, pieces: Pieces, request: Message, index: ProtoIndex, page: options_pb2.Page | None
) -> tuple[tuple[ir.Part, ...], ir.Page | None]:
    """The IR's parts (constant text under conditions) and the page's keysets placed in them."""
    text = shape.text
    cuts = tuple(sorted({k.insert_at for k in shape.keysets}))
    segs = segments(text, shape.blocks, cuts)
    out = tuple(ir.Part(pieces(text, merged, a, z), _condition(c, request, index)) for a, z, c in segs)
    if page is None:
        return out, None
    starts = [a for a, _, _ in segs]
    keysets = tuple(
        ir.Keyset(
            k.exprs,
            k.descending,
            k.types,
            k.positions,
            k.where,
            starts.index(k.insert_at),
            _condition(k.when, request, index),
        )
        for k in shape.keysets
    )
    return out, ir.Page(paging.SIZE, paging.TOKEN, paging.NEXT, page.default_size or 50, page.max_size or 1000, keysets)


def _condition(c: Condition | None, request: Message, index: ProtoIndex) -> ir.Condition | None:
    if c is None:
        return None
    f = request.field(c.field)
    assert f is not None
    enum = index.enums.get(f.type_name) if c.values else None
    ref = ir.TypeRef(enum.full_name, enum.file, enum.python_path) if enum is not None else None
    return ir.Condition(field_ref(f, index), c.values, ref)


def selector_fields(shape: Shape | None) -> frozenset[str]:
    """Request fields the blocks test (used, though no parameter binds them)."""
    return frozenset(b.condition.field for b in shape.blocks) if shape is not None else frozenset()
