"""The statement's top level as PostgreSQL's grammar reads it (pglast), for the few binding
checks that depend on how the SQL is written rather than on its types: which parameter is
stored as is in which column, which output column is a NULL literal."""

from __future__ import annotations

from dataclasses import dataclass

from pglast import ast

from ..sql import Analysis, pgparse


@dataclass(frozen=True)
class Parsed:
    node: ast.Node
    #: `$n` -> the parameter's name (PostgreSQL's grammar reads `@name` as a prefix operator).
    params: tuple[str, ...]

    def param(self, value: ast.Node | None) -> str | None:
        """The parameter `value` is, casts aside; None if it is anything else."""
        while isinstance(value, ast.TypeCast):
            value = value.arg
        if isinstance(value, ast.ParamRef) and isinstance(value.number, int) and 0 < value.number <= len(self.params):
            return self.params[value.number - 1]
        return None

    def null_columns(self) -> frozenset[str]:
        """The names of the output columns that are a NULL literal (`NULL::int AS age`)."""
        node = self.node
        if isinstance(node, ast.SelectStmt):
            targets = node.targetList or ()
        elif isinstance(node, (ast.InsertStmt, ast.UpdateStmt, ast.DeleteStmt)) and node.returningClause is not None:
            targets = node.returningClause.exprs or ()
        else:
            targets = ()
        out = set()
        for target in targets:
            value = target.val if isinstance(target, ast.ResTarget) else None
            while isinstance(value, ast.TypeCast):
                value = value.arg
            if isinstance(target, ast.ResTarget) and target.name and isinstance(value, ast.A_Const) and value.isnull:
                out.add(target.name)
        return frozenset(out)


def parse(sql: str, analysis: Analysis) -> Parsed | None:
    """`sql`'s single statement, or None when PostgreSQL's grammar does not take it as one
    (the analyzer reports syntax)."""
    names: list[str] = []
    pieces, pos = [], 0
    for start, end, name in sorted((s.start, s.end, p.name) for p in analysis.params for s in p.spans):
        names.append(name)
        pieces += [sql[pos:start], f"${len(names)}"]
        pos = end + 1
    pieces.append(sql[pos:])
    try:
        statements = pgparse.parse("".join(pieces))
    except pgparse.PgSyntaxError:
        return None
    return Parsed(statements[0].node, tuple(names)) if len(statements) == 1 else None
