"""Type names in statements, resolved one way: from PostgreSQL's own parse (pglast's TypeName).

PostgreSQL's grammar already turns its SQL spellings into pg_type names (`integer`, `int` →
`pg_catalog.int4`, `character(3)` → `pg_catalog.bpchar`, `float(30)` → `pg_catalog.float8`,
`timestamp(3) with time zone` → `pg_catalog.timestamptz`, `int ARRAY` → int4 with array bounds),
while a quoted `"char"` stays the unqualified name `char`: the one-byte type. What is left is
catalog lookup through the search path (pg_catalog first), which `resolve_type_name` does.

sqlglot, whose tree the analyzer walks, reads types in its own vocabulary (`character` and
`"char"` both become CHAR) and cannot read some of PostgreSQL's (`national character`, `bit
varying`, `interval second(2)`, `int ARRAY[4]`), so its DataType is never resolved itself: the
text sqlglot is given has a stand-in of the same length for each cast's type name
(`with_type_standins`), `PositionedPostgres` records where each DataType starts in the text, and
the analyzer resolves the TypeName PostgreSQL's parser found there (`type_names_by_offset`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from pglast import ast, stream
from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.parsers.postgres import PostgresParser

from ..catalog.builtins import BUILTIN_RELATION_SCHEMAS
from ..catalog.identifiers import split_name
from ..catalog.model import Catalog
from ..catalog.types import PgType
from ..syntax.grammar import GrammarCheck
from ..syntax.pgparse import PgSyntaxError, parse, scan
from ..syntax.pgtree import nodes_of


class PositionedPostgres(Postgres):
    """sqlglot's PostgreSQL dialect, with the offset of the first token of every DataType it
    parses (`meta["start"]`), so that a cast's type is matched with PostgreSQL's TypeName."""

    class Parser(PostgresParser):
        def _parse_types(self, *args: Any, **kwargs: Any) -> exp.Expr | None:
            first = self._curr
            node: exp.Expr | None = super()._parse_types(*args, **kwargs)
            if isinstance(node, exp.DataType) and first is not None and "start" not in node.meta:
                node.meta["start"] = first.start
            return node


def type_names(tree: ast.Node | None) -> Iterator[ast.TypeName]:
    """Every TypeName of a pglast tree."""
    return nodes_of(tree, ast.TypeName)


def type_names_by_offset(grammar: GrammarCheck) -> dict[int, ast.TypeName]:
    """The statement's TypeNames by the offset (into the annotation as written) where each starts."""
    return {grammar.original_offset(tn.location or 0): tn for tn in type_names(grammar.tree)}


#: Tokens a type name can take: `interval day to second ( 3 ) [ ] [ ]`, `a . b ARRAY [ 4 ]`.
_MOST_TOKENS = 16
#: Tokens that end a type name: operators and the keywords that may follow a cast.
_TYPE_NAME_STOPS = frozenset(
    {"Op", "TYPECAST", "EQUALS_GREATER", "LESS_EQUALS", "GREATER_EQUALS", "NOT_EQUALS", "DOT_DOT", "COLON_EQUALS"}
    | {"AS", "FROM", "WHERE", "AND", "OR", "IS", "ISNULL", "NOTNULL", "IN_P", "BETWEEN", "LIKE", "ILIKE", "SIMILAR"}
    | {"ORDER", "GROUP", "HAVING", "LIMIT", "OFFSET", "THEN", "ELSE", "END_P", "WHEN", "ON", "USING", "JOIN"}
    | {"RETURNING", "UNION", "INTERSECT", "EXCEPT", "COLLATE", "AT", "FOR", "WINDOW", "SCONST", "ICONST", "FCONST"}
)
#: Token kinds of the string constant a typed literal (`"char" 'x'`, `bit '101'`) writes after its type.
_STRING_TOKENS = frozenset({"SCONST", "USCONST", "BCONST", "XCONST"})


def with_type_standins(text: str, grammar: GrammarCheck) -> str:
    """`text` (the statement as written, or with same-length edits) with every cast's type name
    replaced by `int` padded to its length, which sqlglot reads wherever a type stands (the cast
    is typed from PostgreSQL's TypeName at that place). Names of one or two characters are plain
    identifiers sqlglot reads already; an interval literal (`interval '1' year`) is sqlglot's own
    node and keeps its text."""
    if grammar.tree is None:
        return text
    spans: list[tuple[int, int]] = []
    tokens: list[tuple[str, int, int]] | None = None
    for node in nodes_of(grammar.tree, ast.TypeCast):
        tn = node.typeName
        if tn is None or tn.location is None:
            continue
        if tokens is None:
            tokens = [
                (tok.name, tok.start, tok.end) for tok in scan(text) if tok.name not in ("C_COMMENT", "SQL_COMMENT")
            ]
        start = grammar.original_offset(tn.location)
        end = _type_name_end(text, tokens, start, tn, literal=node.location is None)
        if end is not None and end - start + 1 >= 3:
            spans.append((start, end))
    chars = list(text)
    for start, end in spans:
        # `CAST(x AS"Kind"[])`: the stand-in keeps a word before it apart (` int`, one place on)
        glued = start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_") and end - start + 1 >= 4
        chars[start : end + 1] = (" int" if glued else "int").ljust(end - start + 1)
    return "".join(chars)


def _type_name_end(
    text: str, tokens: list[tuple[str, int, int]], start: int, tn: ast.TypeName, literal: bool
) -> int | None:
    """Where the type name starting at `start` ends (inclusive). A typed literal's name runs up
    to its string; a cast's is the longest run of tokens PostgreSQL's grammar reads as the same
    TypeName. None: not found, or an interval literal."""
    first = next((i for i, (_, tok_start, _) in enumerate(tokens) if tok_start == start), None)
    if first is None:
        return None
    if literal:
        string = next((i for i in range(first, len(tokens)) if tokens[i][0] in _STRING_TOKENS), None)
        if string is None or string == first or text[start : tokens[string - 1][2] + 1].lower() == "interval":
            return None
        return tokens[string - 1][2]
    wanted = _cast_of_null(stream.RawStream()(tn))
    if wanted is None:
        return None
    # Longest first: the first run that reads as the TypeName is the whole of it.
    for last in reversed(range(first, _run_end(tokens, first))):
        if _cast_of_null(text[start : tokens[last][2] + 1]) == wanted:
            return tokens[last][2]
    return None


def _run_end(tokens: list[tuple[str, int, int]], first: int) -> int:
    """One past the last token a type name starting at token `first` may reach: it stops before
    a token no type name holds outside its parentheses (`,`, an unmatched `)`, an operator, `;`,
    a clause keyword), or after `_MOST_TOKENS`."""
    depth = 0
    for i in range(first, min(first + _MOST_TOKENS, len(tokens))):
        name = tokens[i][0]
        if name in ("ASCII_40", "ASCII_91"):  # ( [
            depth += 1
        elif name in ("ASCII_41", "ASCII_93"):  # ) ]
            depth -= 1
            if depth < 0:
                return i
        elif depth == 0 and (name in _TYPE_NAME_STOPS or (name.startswith("ASCII_") and name != "ASCII_46")):
            return i  # `.` (ASCII_46) joins a qualified name
    return min(first + _MOST_TOKENS, len(tokens))


@functools.lru_cache(maxsize=4096)
def _cast_of_null(type_text: str) -> str | None:
    """`SELECT NULL::<type_text>` as PostgreSQL's parse deparses it: the same for two spellings of
    one TypeName, and for no text that holds more than a type name (`int AS v`, `int, $2`).
    Memoised for the process (a pure function of the text; a statement's casts repeat a few
    type names: one parse each, not one per cast and candidate)."""
    try:
        raw = parse(f"SELECT NULL::{type_text}")
    except PgSyntaxError:
        return None
    return stream.RawStream()(raw[0].node) if len(raw) == 1 else None


def parse_type_name(text: str) -> ast.TypeName | None:
    """PostgreSQL's TypeName for a type written as `text` (None when its grammar has no such type)."""
    try:
        raw = parse(f"SELECT NULL::{text}")
    except PgSyntaxError:
        return None
    stmt = raw[0].node if len(raw) == 1 else None
    if not isinstance(stmt, ast.SelectStmt) or not stmt.targetList:
        return None
    cast = stmt.targetList[0].val
    return cast.typeName if isinstance(cast, ast.TypeCast) else None


def unknown_type_message(tn: ast.TypeName, catalog: Catalog) -> str:
    """PostgreSQL's complaint about a TypeName that names no type: its schema when that does not
    exist, else the name as written (qualified as written; pydb writes names unquoted)."""
    names = [str(part.sval) for part in tn.names or () if isinstance(part, ast.String)]
    schema, _ = split_name(names)
    if schema is not None and schema not in catalog.schemas and schema not in BUILTIN_RELATION_SCHEMAS:
        return f'schema "{schema}" does not exist'
    return f"type {'.'.join(names)}{'[]' if tn.arrayBounds else ''} does not exist"


def resolve_type_name(tn: ast.TypeName, catalog: Catalog) -> PgType | None:
    """The type a TypeName names, as PostgreSQL's typenameType looks it up: a built-in
    (pg_catalog is searched first), an enum, a domain (its base type, `domain` naming it), a
    composite, range or extension type, or a table's row type, each along the search path;
    `_name` is the array of `name`; array bounds (`[]`, `ARRAY`) make an array. None: no such type
    (a %TYPE reference, which only function signatures take, is resolved by the DDL)."""
    names = [str(part.sval) for part in tn.names or () if isinstance(part, ast.String)]
    if not names or tn.pct_type:
        return None
    schema, name = split_name(names)
    found = _named(catalog, schema, name)
    if found is None and name.startswith("_"):
        element = _named(catalog, schema, name[1:])
        found = element.array() if element is not None and not element.is_array else None
    if found is not None and tn.arrayBounds and not found.is_array:
        return found.array()
    return found


def _named(catalog: Catalog, schema: str | None, name: str) -> PgType | None:
    found = catalog.type(schema, name)  # a domain's type names it (PgType.domain)
    if found is not None:
        return found
    table = catalog.table(schema, name)
    return PgType(table.qualified) if table is not None else None
