"""The statement's top level as PostgreSQL's grammar reads it (pglast), for the few binding
checks that depend on how the SQL is written rather than on its types: which parameter is
stored as is in which column, which output column is a NULL literal."""

from __future__ import annotations

from dataclasses import dataclass

from pglast import ast

from ..sql import Analysis


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


def parse(analysis: Analysis) -> Parsed | None:
    """The statement as PostgreSQL's grammar read it when it was analysed (the analysis carries
    that parse: it is not parsed again), or None when it is not one statement."""
    if analysis.tree is None:
        return None
    return Parsed(analysis.tree, analysis.positional_names)
