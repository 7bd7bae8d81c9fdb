"""PostgreSQL operators sqlglot cannot read (`addr <<= net`, `a @@@ b`, `box ## point`): the text
sqlglot is given has a stand-in of the same length in their place, one sqlglot reads as a plain
binary node (`-|-`, `&<`). Offsets are kept, so every span still points into the statement; the
analyzer reads the operator written from the statement itself (`written_operator`) and resolves it
over the catalog as PostgreSQL does.

Which operators need one is asked of sqlglot (`a OP b` must parse to a node over `a` and `b`),
where they stand of PostgreSQL's tree (binary `A_Expr`s). Prefix operators (`|/ x`, `@-@ path`)
have no stand-in yet: sqlglot still reports them."""

from __future__ import annotations

import functools

import sqlglot
from pglast import ast
from pglast.enums import A_Expr_Kind
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from ..syntax.grammar import GrammarCheck
from ..syntax.pgtree import nodes_of

#: Binary nodes sqlglot makes of operators it reads but has no meaning for: typed by the operator
#: written (`written_operator`), whatever stood in the text sqlglot was given.
GENERIC_OPERATORS = (
    exp.Adjacent,
    exp.ExtendsLeft,
    exp.ExtendsRight,
    exp.Distance,
    exp.BitwiseLeftShift,
    exp.BitwiseRightShift,
    exp.BitwiseAnd,
    exp.BitwiseOr,
    exp.BitwiseXor,
)


@functools.cache
def sqlglot_reads(symbol: str) -> bool:
    """Whether sqlglot parses `a symbol b` into an expression over the columns a and b."""
    try:
        parsed = sqlglot.parse_one(f"SELECT a {symbol} b", read="postgres")
    except (ParseError, TokenError):
        return False
    if not isinstance(parsed, exp.Select) or len(parsed.expressions) != 1:
        return False
    return {c.name for c in parsed.expressions[0].find_all(exp.Column)} == {"a", "b"}


def _standin(length: int) -> str | None:
    if length == 2:
        return "&<"
    if length >= 3:
        return "-|-" + " " * (length - 3)
    return None


def sqlglot_text(grammar: GrammarCheck) -> str:
    """The statement as sqlglot is given it: each binary operator it cannot read replaced by a
    stand-in of the same length."""
    sql = grammar.sql
    if grammar.tree is None:
        return sql
    chars = list(sql)
    for item in nodes_of(grammar.tree, ast.A_Expr):
        binary = item.kind == A_Expr_Kind.AEXPR_OP and item.lexpr is not None and len(item.name or ()) == 1
        if binary and item.location is not None:
            symbol = str(next(iter(item.name or ())).sval)
            start = grammar.original_offset(item.location)
            standin = _standin(len(symbol))
            if sql[start : start + len(symbol)] == symbol and standin is not None and not sqlglot_reads(symbol):
                chars[start : start + len(symbol)] = standin
    return "".join(chars)


def written_operator(sql: str, left_end: int, right_start: int) -> str | None:
    """The operator written between two operands (`left_end`: the left one's last character):
    the first word between them but parentheses (a right operand may be placed after a word of
    its own, as `point '(1,2)'`). None when nothing is written there."""
    words = sql[left_end + 1 : right_start].replace("(", " ").replace(")", " ").split()
    return words[0] if words else None
