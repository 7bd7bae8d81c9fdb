"""A statement in parts (optional blocks, a sort chosen by an enum, a page's keyset predicate) as
Python: the constant parts, the condition under which each is joined in, the page's keysets.
Only constant text is ever joined; every value stays a bound parameter."""

from __future__ import annotations

from typing import Protocol

from ..bind import ir
from ..sql import quote_ident
from . import model
from .text import py_block, py_str


class Types(Protocol):
    def type(self, ref: ir.TypeRef) -> str: ...


def _literal(text: str) -> str:
    """A part's text: one line as a plain literal, several as a triple-quoted block."""
    if "\n" not in text.strip("\n") and len(text) < 90:
        return py_str(text)
    return '"""\\\n' + py_block(text) + '"""'


def condition(m: Types, c: ir.Condition) -> str:
    field = py_str(c.field.name)
    if not c.values:
        return f"request.HasField({field})"
    assert c.enum is not None
    scope = m.type(c.enum).rsplit(".", 1)[0]
    values = ", ".join(f"{scope}.{v}" for v in c.values)
    return f"request.{c.field.name} in ({values}{',' if len(c.values) == 1 else ''})"


def _cast(pg_type: str) -> str:
    return ".".join(quote_ident(p) for p in pg_type.split("."))


def predicate(k: ir.Keyset) -> str:
    """`AND (a, b) < (…)` after a token's row (psycopg text): a row comparison when every key goes
    the same way (an index scan reads it as a range), else the expanded OR form."""
    values = [f"%(_page_{i})s::{_cast(t)}" for i, t in enumerate(k.types)]
    if len(set(k.descending)) == 1:
        op = "<" if k.descending[0] else ">"
        cond = f"({', '.join(k.exprs)}) {op} ({', '.join(values)})"
    else:
        ors = []
        for i, (expr, desc) in enumerate(zip(k.exprs, k.descending, strict=True)):
            equal = [f"{k.exprs[j]} = {values[j]}" for j in range(i)]
            ors.append("(" + " AND ".join([*equal, f"{expr} {'<' if desc else '>'} {values[i]}"]) + ")")
        cond = "(" + " OR ".join(ors) + ")"
    return f"\n  {'AND' if k.where else 'WHERE'} {cond}"


def _tuple(items: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, items)) + ("," if len(items) == 1 else "") + ")"


def lower_parts(m: Types, rpc: ir.Rpc, const: str, sql: list[str]) -> model.Shaped:
    """The model of a statement in parts (rpc.parts non-empty; `sql`: each part as psycopg takes it). Only whitespace between tokens
    changes: a conditional part (and the page's predicate) starts a line of its own."""
    page = rpc.page
    texts: list[str] = []
    items: list[str] = []
    for i, (text, part) in enumerate(zip(sql, rpc.parts, strict=True)):
        if page is not None:
            here = tuple(n for n, ks in enumerate(page.keysets) if ks.slot == i)
            if len(here) == len(page.keysets):
                items.append("predicate")
            elif here:
                items.append(f'predicate if keyset.number in {_tuple(here)} else ""')
        if part.when is not None:
            text = "\n  " + text.strip()
        elif i == 0:
            text = text.rstrip()
        elif text.strip():
            text = "\n" + text.strip()
        else:
            continue
        item = f"{const}[{len(texts)}]"
        texts.append(text)
        items.append(item if part.when is None else f'{item} if {condition(m, part.when)} else ""')
    checks: list[str] = []
    selectors: dict[str, ir.Condition] = {}
    for part in rpc.parts:
        if part.when is not None and part.when.values:
            selectors.setdefault(part.when.field.name, part.when)
    for name, c in selectors.items():
        assert c.enum is not None
        checks.append(
            f"if request.{name} not in {m.type(c.enum)}.values():\n"
            f'        raise rt.InvalidArgument(f"{name}: unknown value {{request.{name}}}")'
        )
    paged = None
    if page is not None:
        keysets_const = const.removesuffix("_SQL") + "_KEYSETS"
        if len(page.keysets) == 1:
            choose = f"keyset = {keysets_const}[0]"
        else:
            lines = []
            for k, ks in enumerate(page.keysets):
                assert ks.when is not None  # several keysets: one per sort
                if k == len(page.keysets) - 1:
                    lines.append("else:")
                else:
                    lines.append(f"{'if' if k == 0 else 'elif'} {condition(m, ks.when)}:")
                lines.append(f"    keyset = {keysets_const}[{k}]")
            choose = "\n    ".join(lines)
        rpc_name = py_str(rpc.name)
        fields = f"{py_str(page.token_field)}, {py_str(page.size_field)}"
        paged = model.Paged(
            keysets_const=keysets_const,
            keysets=tuple(
                f"rt.Keyset({n}, {py_str(predicate(ks))}, {_tuple(ks.positions)})" for n, ks in enumerate(page.keysets)
            ),
            size=f"rt.page_size(request.{page.size_field}, {page.default_size}, {page.max_size}, {py_str(page.size_field)})",
            keyset=choose,
            after=f"rt.page_after({rpc_name}, keyset, request, {fields})",
            next_token=f"rt.next_page_token({rpc_name}, keyset, request, rows[size - 1], {fields})",
            next_field=page.next_field,
        )
    return model.Shaped(parts=tuple(_literal(t) for t in texts), items=tuple(items), checks=tuple(checks), page=paged)
