"""Page tokens (AIP-158): `(pydb.v1.sql).page` on a CARDINALITY_MANY SELECT whose request has
`int32 page_size` and `string page_token` and whose response has `string next_page_token` beside
the repeated rows. The keyset is derived from the statement's ORDER BY: every key a column of the
FROM table that the rows carry (by name), NOT NULL, the keys covering the table's primary key
(so they order the rows totally). The generator inserts `AND (keys) > (…)` (or `<`, or the
expanded form for mixed directions) before ORDER BY and a LIMIT after it; the token holds the last
row's keys, authenticated by the server (pydb/runtime/paging.py)."""

from __future__ import annotations

from dataclasses import dataclass

from pglast import ast, parse_sql, parser
from pglast.enums.primnodes import BoolExprType

from ..diagnostics import Problem, SqlSpan
from ..protos import Message
from ..sql import Analysis, Catalog, quote_ident
from .variants import Block, Condition

SIZE, TOKEN, NEXT = "page_size", "page_token", "next_page_token"


@dataclass(frozen=True)
class Keyset:
    """The ORDER BY of one sort: key expressions, directions, types, and row positions."""

    exprs: tuple[str, ...]
    descending: tuple[bool, ...]
    types: tuple[str, ...]
    positions: tuple[int, ...]
    #: The statement has a top-level WHERE (the predicate is ANDed to it), else it adds one.
    where: bool
    #: The offset of the top-level ORDER BY keyword: the predicate goes just before it.
    insert_at: int
    #: The block holding the ORDER BY (a sort chosen by an enum field), None when it is unconditional.
    when: Condition | None


def check_fields(request: Message, response: Message, result_field: str) -> list[str]:
    """What the request and response lack for paging (messages at the option)."""
    out = []
    size, token, nxt = request.field(SIZE), request.field(TOKEN), response.field(NEXT)
    if size is None or size.type != "int32" or size.repeated or size.has_presence:
        out.append(f"page: {request.full_name} needs the field `int32 {SIZE}` (AIP-158)")
    if token is None or token.type != "string" or token.repeated or token.has_presence:
        out.append(f"page: {request.full_name} needs the field `string {TOKEN}` (AIP-158)")
    if nxt is None or nxt.type != "string" or nxt.repeated:
        out.append(f"page: {response.full_name} needs the field `string {NEXT}` beside {result_field} (AIP-158)")
    return out


def _same_length_params(text: str, analysis: Analysis) -> str:
    """`@name` as `$n` padded with spaces, so PostgreSQL's offsets are the statement's."""
    chars = list(text)
    for n, p in enumerate(analysis.params, start=1):
        for span in p.spans:
            start = span.start - 1 if span.start > 0 and text[span.start - 1] == "@" else span.start
            width = span.end + 1 - start
            chars[start : span.end + 1] = list(f"${n}".ljust(width))
    return "".join(chars)


def keyset(text: str, analysis: Analysis, catalog: Catalog, blocks: tuple[Block, ...]) -> Keyset | Problem:
    """The keyset of one variant, or why the variant cannot be paged."""
    positional = _same_length_params(text, analysis)
    try:
        stmt = parse_sql(positional)[0].stmt
    except Exception:
        return Problem("page: the statement does not parse")
    if not isinstance(stmt, ast.SelectStmt):
        return Problem("page: a paged statement is a SELECT")
    if stmt.valuesLists or (stmt.op is not None and int(stmt.op) != 0):
        return Problem("page: a paged statement is one SELECT (no UNION, INTERSECT, EXCEPT or VALUES)")
    limit = stmt.limitCount if stmt.limitCount is not None else stmt.limitOffset
    at = getattr(limit, "location", None)
    for what, present in (
        ("LIMIT", stmt.limitCount is not None),
        ("OFFSET", stmt.limitOffset is not None),
        ("FOR UPDATE/SHARE", bool(stmt.lockingClause)),
        ("GROUP BY", bool(stmt.groupClause)),
        ("HAVING", stmt.havingClause is not None),
        ("DISTINCT", bool(stmt.distinctClause)),
    ):
        if present:
            hint = " (the page's size is page_size)" if what in ("LIMIT", "OFFSET") else ""
            span = SqlSpan(at, at) if hint and isinstance(at, int) and at >= 0 else None
            return Problem(f"page: a paged statement has no {what}{hint}", span)
    if not stmt.sortClause:
        return Problem("page: a paged statement needs an ORDER BY (its keys are the page token)")
    if isinstance(stmt.whereClause, ast.BoolExpr) and stmt.whereClause.boolop == BoolExprType.OR_EXPR:
        return Problem("page: the WHERE clause's top level is an OR: put it in parentheses")
    columns = analysis.columns or ()
    position: dict[str, tuple[int, bool, str]] = {}
    pos = 0
    for c in columns:
        if c.embedded is None and c.type is not None:
            position.setdefault(c.name, (pos, c.nullable, str(c.type)))
        pos += len(c.embedded) if c.embedded is not None else 1
    item = _from_item(stmt)
    table = catalog.table(item.schemaname or None, item.relname) if item is not None else None
    alias = (item.alias.aliasname if item.alias is not None else item.relname) if item is not None else None
    exprs, descending, types, positions, names = [], [], [], [], set()
    first = None
    for sort in stmt.sortClause or ():
        node = sort.node
        start = getattr(node, "location", None)
        span = SqlSpan(start, start) if isinstance(start, int) and start >= 0 else None
        first = span.start if first is None and span is not None else first
        if not isinstance(node, ast.ColumnRef) or not all(isinstance(f, ast.String) for f in node.fields or ()):
            return Problem("page: each ORDER BY key must be a column (the token holds the last row's keys)", span)
        fields = [f.sval for f in node.fields or ()]
        if span is not None:  # the column as written (unquoted names: the usual case)
            span = SqlSpan(span.start, span.start + len(".".join(fields)) - 1)
        if int(sort.sortby_nulls) != 0 or int(sort.sortby_dir) == 3:
            return Problem("page: ORDER BY keys take ASC or DESC only (no NULLS FIRST/LAST, no USING)", span)
        found = position.get(fields[-1])
        if found is None:
            return Problem(
                f"page: ORDER BY key {'.'.join(fields)} must also be a result column (named {fields[-1]})", span
            )
        if found[1]:
            return Problem(f"page: ORDER BY key {'.'.join(fields)} may be NULL: keyset pages need NOT NULL keys", span)
        if len(fields) == 1 or fields[-2] == alias:
            names.add(fields[-1])
        exprs.append(".".join(quote_ident(f) for f in fields))
        descending.append(int(sort.sortby_dir) == 2)
        types.append(found[2])
        positions.append(found[0])
    if table is None or not table.primary_key or not set(table.primary_key) <= names:
        key = f" ({', '.join(table.primary_key)})" if table is not None and table.primary_key else ""
        return Problem(
            f"page: the ORDER BY keys must include the primary key{key} of the FROM table, so they order the rows "
            "totally (else a page could skip or repeat rows)",
            SqlSpan(first, first) if first is not None else None,
        )
    at = _order_by_offset(positional, first or len(positional))
    # The sort's block: the one holding the ORDER BY, or its keys (`ORDER BY /*@if ...*/ keys`).
    when = next((b.condition for b in blocks if b.open_end <= at < b.close_start), None) or next(
        (b.condition for b in blocks if first is not None and b.open_end <= first < b.close_start), None
    )
    return Keyset(
        tuple(exprs), tuple(descending), tuple(types), tuple(positions), stmt.whereClause is not None, at, when
    )


def _from_item(stmt: ast.SelectStmt) -> ast.RangeVar | None:
    """The first FROM item's table (the leftmost of a join)."""
    item = stmt.fromClause[0] if stmt.fromClause else None
    while isinstance(item, ast.JoinExpr):
        item = item.larg
    return item if isinstance(item, ast.RangeVar) else None


def _order_by_offset(text: str, before: int) -> int:
    """The offset of the last top-level ORDER keyword before `before`."""
    depth, found = 0, 0
    for tok in parser.scan(text):
        if tok.start >= before:
            break
        if tok.name == "ASCII_40":
            depth += 1
        elif tok.name == "ASCII_41":
            depth -= 1
        elif tok.name == "ORDER" and depth == 0:
            found = tok.start
    return found
