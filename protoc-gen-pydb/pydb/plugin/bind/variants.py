"""Optional clauses: `/*@if field*/ ... /*@end*/` marks SQL present only when a request field is
set (a field with presence: proto3 `optional`, a message or a wrapper), `/*@if field = A, B*/`
SQL present only when an enum field holds one of the named values (a sort chosen by the caller).

The markers are SQL comments, so the statement as written is still SQL. The binder checks every
variant: each combination of the conditions is the statement with the inactive blocks (and the
markers) blanked out by spaces, so every offset, and with it every diagnostic's position, is the
one of the statement as written; each variant is analysed as a statement of its own, and all must
agree on their parameters' types and their result columns. At run time the handler joins the
blocks that apply, constant text only: the values are bound parameters, and PostgreSQL plans each
variant as the statement it is (with its own index), not one generic plan of ORs.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from pglast import parser

from ..diagnostics import Problem, SqlSpan
from ..protos import Message, ProtoIndex
from ..sql import closest

#: At most this many variants (each one is analysed): 8 independent optional clauses.
MAX_VARIANTS = 256

_MARKER = re.compile(r"/\*@\s*(?:(if)\s+([A-Za-z_]\w*)\s*(?:=\s*([A-Za-z_][\w\s,]*?))?|(end))\s*\*/")


@dataclass(frozen=True)
class Condition:
    """When a block applies: `field` is set (`values` empty), or the enum field holds one of `values`."""

    field: str
    values: tuple[str, ...] = ()

    def describe(self) -> str:
        return f"{self.field} = {' or '.join(self.values)}" if self.values else f"{self.field} set"


@dataclass(frozen=True)
class Block:
    """`/*@if ...*/` at [open_start, open_end), its SQL in [open_end, close_start), `/*@end*/`
    at [close_start, close_end)."""

    condition: Condition
    open_start: int
    open_end: int
    close_start: int
    close_end: int


@dataclass(frozen=True)
class Variant:
    """One combination: the text PostgreSQL would run (inactive blocks blanked) and its choices."""

    text: str
    #: Per dimension (field), the choice: True/False for a set/unset field, an enum value name.
    choice: tuple[tuple[str, bool | str], ...]

    def describe(self) -> str:
        return ", ".join(
            (f"{f} set" if c else f"{f} unset") if isinstance(c, bool) else f"{f} = {c}" for f, c in self.choice
        )

    def active(self, block: Block) -> bool:
        chosen = dict(self.choice)[block.condition.field]
        return chosen in block.condition.values if block.condition.values else chosen is True


def _comments(sql: str) -> list[int]:
    """The offsets of the `/*@` comments PostgreSQL's scanner reads (not those inside a string
    literal or a quoted identifier)."""
    try:
        tokens = parser.scan(sql)
    except Exception:  # a scanner error: the grammar check reports it on the variant
        return []
    return [t.start for t in tokens if t.name == "C_COMMENT" and sql.startswith("/*@", t.start)]


def find_blocks(sql: str, request: Message, index: ProtoIndex) -> tuple[tuple[Block, ...], list[Problem]]:
    """The blocks of `sql`, checked against the request: the field exists, has presence (or is an
    enum whose values are named), blocks are closed and not nested."""
    if "/*@" not in sql:
        return (), []
    problems: list[Problem] = []
    blocks: list[Block] = []
    opened: tuple[Condition, int, int] | None = None
    seen: dict[str, bool] = {}  # field -> used with values
    for start in _comments(sql):
        marker = _MARKER.match(sql, start)
        span = SqlSpan(start, (marker.end() if marker else sql.index("*/", start) + 2) - 1)
        if marker is None:
            problems.append(
                Problem("not a block marker: write /*@if field*/, /*@if field = VALUE, ...*/ or /*@end*/", span)
            )
            continue
        if marker.group(4):
            if opened is None:
                problems.append(Problem("/*@end*/ without a /*@if ...*/ before it", span))
                continue
            blocks.append(Block(opened[0], opened[1], opened[2], marker.start(), marker.end()))
            opened = None
            continue
        if opened is not None:
            problems.append(Problem("blocks do not nest: close the previous /*@if*/ with /*@end*/ first", span))
            continue
        name = marker.group(2)
        values = tuple(v.strip() for v in (marker.group(3) or "").split(",") if v.strip())
        # Opened even when refused below, so its /*@end*/ is not reported as well.
        opened = (Condition(name, values), marker.start(), marker.end())
        f = request.field(name)
        if f is None:
            close = closest(name, [x.name for x in request.fields])
            hint = f"; did you mean {close}?" if close else ""
            problems.append(Problem(f"/*@if {name}*/: {name} is not a field of {request.full_name}{hint}", span))
            continue
        if f.repeated:
            problems.append(
                Problem(f"/*@if {name}*/: {request.full_name}.{name} is repeated; a block needs a singular field", span)
            )
            continue
        if values:
            enum = index.enums.get(f.type_name) if f.type == "enum" else None
            if enum is None:
                problems.append(
                    Problem(f"/*@if {name} = ...*/: {request.full_name}.{name} is {f.describe()}, not an enum", span)
                )
                continue
            known = [v for v, _ in enum.values]
            unknown = [v for v in values if v not in known]
            if unknown:
                close = closest(unknown[0], known)
                hint = f"; did you mean {close}?" if close else ""
                problems.append(
                    Problem(f"/*@if {name} = ...*/: {unknown[0]} is not a value of {enum.full_name}{hint}", span)
                )
                continue
        elif not f.has_presence:
            problems.append(
                Problem(
                    f"/*@if {name}*/: {request.full_name}.{name} cannot tell unset from {f.describe()}'s zero value; "
                    f"declare it `optional {f.describe()} {name}` (or use a wrapper type)",
                    span,
                )
            )
            continue
        if seen.setdefault(name, bool(values)) != bool(values):
            problems.append(
                Problem(f"/*@if {name}*/: a field is tested either for being set or for its values, not both", span)
            )
            continue
    if opened is not None:
        problems.append(Problem("/*@if ...*/ without its /*@end*/", SqlSpan(opened[1], opened[2] - 1)))
    return (() if problems else tuple(blocks)), problems


def variants(sql: str, blocks: tuple[Block, ...], index: ProtoIndex, request: Message) -> list[Variant] | Problem:
    """Every combination of the blocks' conditions (set/unset per field, each value per enum
    field), as text; a Problem when there are more than MAX_VARIANTS."""
    fields: dict[str, tuple[bool | str, ...]] = {}
    for b in blocks:
        if b.condition.field in fields:
            continue
        f = request.field(b.condition.field)
        assert f is not None
        if b.condition.values:
            fields[b.condition.field] = tuple(v for v, _ in index.enums[f.type_name].values)
        else:
            fields[b.condition.field] = (True, False)
    count = 1
    for options in fields.values():
        count *= len(options)
    if count > MAX_VARIANTS:
        return Problem(f"{count} variants of the statement (at most {MAX_VARIANTS}): fewer optional blocks, please")
    out = []
    for combo in itertools.product(*fields.values()):
        v = Variant("", tuple(zip(fields, combo, strict=True)))
        chars = list(sql)
        for b in blocks:
            _blank(chars, b.open_start, b.open_end)
            _blank(chars, b.close_start, b.close_end)
            if not v.active(b):
                _blank(chars, b.open_end, b.close_start)
        out.append(Variant("".join(chars), v.choice))
    return out


def _blank(chars: list[str], start: int, end: int) -> None:
    for i in range(start, end):
        if chars[i] != "\n":
            chars[i] = " "


def segments(
    sql: str, blocks: tuple[Block, ...], cuts: tuple[int, ...] = ()
) -> list[tuple[int, int, Condition | None]]:
    """The statement as [start, end) ranges of constant text with the condition each needs (the
    markers themselves left out), also cut at `cuts` (where a generator inserts text)."""
    out: list[tuple[int, int, Condition | None]] = []
    pos = 0
    for b in sorted(blocks, key=lambda b: b.open_start):
        out += _cut(pos, b.open_start, None, cuts)
        out += _cut(b.open_end, b.close_start, b.condition, cuts)
        pos = b.close_end
    out += _cut(pos, len(sql), None, cuts)
    return [s for s in out if s[0] < s[1]]


def _cut(
    start: int, end: int, cond: Condition | None, cuts: tuple[int, ...]
) -> list[tuple[int, int, Condition | None]]:
    inside = sorted(c for c in cuts if start <= c <= end)
    bounds = [start, *inside, end]
    return [(a, b, cond) for a, b in itertools.pairwise(bounds)]
