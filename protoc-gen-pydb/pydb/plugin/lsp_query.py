"""What the language server answers about a place in a .proto: hover on a `@param` or a result
column (its PostgreSQL type and nullability, as the compiler inferred them) and the definition
of a column (its line in the schema file's CREATE TABLE). Pure functions over a `Checker`'s last
check, so they are tested without an editor."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pydb.v1 import options_pb2

from .bind.positions import SourceMap
from .bind.report import method_path
from .check import Checker
from .protos import location_span
from .sql import Analysis, Catalog

_WORD = re.compile(r"@?[A-Za-z_][A-Za-z0-9_$]*")


@dataclass(frozen=True)
class Place:
    """The statement under the cursor: its SQL, the cursor's offset in it, what was inferred."""

    rpc: str
    sql: str
    offset: int
    analysis: Analysis
    catalog: Catalog
    schema_files: tuple[Path, ...]


def place(checker: Checker, name: str, text: str, line: int, character: int) -> Place | None:
    """The statement whose literal holds 0-based (line, character) of `name`'s buffer `text`."""
    state = checker.states().get(name)
    if state is None:
        return None
    file = state.index.files[name]
    source = SourceMap(text)
    catalog_entry = next(iter(state.catalogs.items()), None)
    if catalog_entry is None or catalog_entry[1][0] is None:
        return None
    schema_rel, (catalog, _) = catalog_entry
    assert catalog is not None
    found = checker.roots().find(schema_rel)
    schema_files = (
        (found,) if found is not None and found.is_file() else tuple(sorted(found.glob("*.sql"))) if found else ()
    )
    for si, svc in enumerate(file.service):
        for mi, method in enumerate(svc.method):
            if not method.options.HasExtension(options_pb2.sql):
                continue
            sql = method.options.Extensions[options_pb2.sql].query
            option = [*method_path(si, mi), 4, options_pb2.sql.number]
            span = location_span(file, [*option, 1], option)
            positions = source.query_positions(span, sql) if span is not None else None
            if positions is None or not positions[0] <= (line, character) <= positions[-1]:
                continue
            offset = next((i for i, p in enumerate(positions) if p >= (line, character)), len(sql))
            if positions[min(offset, len(positions) - 1)] != (line, character):
                offset = max(offset - 1, 0)
            request = state.index.messages[method.input_type.lstrip(".")]
            nullable = frozenset(f.name for f in request.fields if f.has_presence)
            analysis, _ = checker.cache.analyze(sql, catalog, nullable)
            if analysis is None:
                return None
            return Place(method.name, sql, offset, analysis, catalog, schema_files)
    return None


def _word(sql: str, offset: int) -> str | None:
    for m in _WORD.finditer(sql):
        if m.start() <= offset < m.end():
            return m[0]
    return None


def hover(p: Place) -> str | None:
    """`@name: type` for a parameter, `column: type NOT NULL | NULL` for a result column."""
    for param in p.analysis.params:
        if any(s.start <= p.offset <= s.end for s in param.spans):
            return f"@{param.name}: {param.type} (the parameter's PostgreSQL type)"
    for col in p.analysis.columns or ():
        if col.span is not None and col.span.start <= p.offset <= col.span.end:
            return f"result column {col.name}: {col.type} {'NULL' if col.nullable else 'NOT NULL'}"
    word = _word(p.sql, p.offset)
    for col in p.analysis.columns or ():
        if word is not None and col.name == word:
            return f"result column {col.name}: {col.type} {'NULL' if col.nullable else 'NOT NULL'}"
    return None


def definition(p: Place) -> tuple[Path, int, int] | None:
    """(schema file, 0-based line, character) of the column under the cursor in its CREATE TABLE:
    among the tables the statement names, the one with a column of that name."""
    word = _word(p.sql, p.offset)
    if word is None or word.startswith("@"):
        return None
    lowered = p.sql.lower()
    for table in p.catalog.tables.values():
        if table.column(word) is None or not re.search(rf"\b{re.escape(table.name)}\b", lowered):
            continue
        for path in p.schema_files:
            text = path.read_text(encoding="utf-8")
            head = re.search(
                rf"create\s+table\s+(if\s+not\s+exists\s+)?({re.escape(table.schema)}\.)?{re.escape(table.name)}\s*\(",
                text,
                re.IGNORECASE,
            )
            if head is None:
                continue
            col = re.compile(rf"(^|[(,])\s*\"?{re.escape(word)}\"?\s", re.IGNORECASE | re.MULTILINE)
            m = col.search(text, head.end() - 1)
            if m is None:
                continue
            at = m.start() + m[0].lower().index(word.lower())
            line = text.count("\n", 0, at)
            return path, line, at - (text.rfind("\n", 0, at) + 1)
    return None
