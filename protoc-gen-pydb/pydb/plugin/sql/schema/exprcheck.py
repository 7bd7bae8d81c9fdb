"""What PostgreSQL resolves when it stores a column's DEFAULT, a generated column's expression
or a CHECK (transformExpr at CREATE/ALTER TABLE time), as far as the catalog can tell without
typing the expression: a function whose name no function has is PostgreSQL's "function f()
does not exist" (uuidv7() on 15, uuid_generate_v4() without its extension). A name some
function has is taken as resolving (its overloads are the analyzer's business: refusing a schema
PostgreSQL applies is the worse mistake), and nothing is refused while an extension the catalog
has no data for is installed (it may define the function)."""

from __future__ import annotations

from pglast import ast

from ..catalog.builtins import load_builtins
from ..syntax.pgtree import nodes_of
from .state import PgNode, State, strings

#: An argument's type as PostgreSQL's message spells it, for the constants whose type is fixed.
_CONST_TYPES: dict[type, str] = {
    ast.Integer: "integer",
    ast.Float: "numeric",
    ast.String: "unknown",
    ast.Boolean: "boolean",
}


def check_functions(state: State, expr: PgNode) -> bool:
    """Reports the first call in `expr` to a function no name resolves; False when it did."""
    if expr is None or state.unknown_extensions:
        return True
    builtins = load_builtins().with_extensions(state.extensions)
    for call in nodes_of(expr, ast.FuncCall):
        names = strings(call.funcname)
        name = names[-1]
        if name in builtins.function_names or _user_function(state, names):
            continue
        args = ", ".join(_arg_type(arg) for arg in call.args or ())
        state.error(f"function {'.'.join(names)}({args}) does not exist", call.location, len(names[0]))
        return False
    return True


def _user_function(state: State, names: list[str]) -> bool:
    if len(names) > 1:
        return f"{names[-2]}.{names[-1]}" in state.routines
    return any(key.rsplit(".", 1)[-1] == names[-1] for key in state.routines)


def _arg_type(arg: PgNode) -> str:
    if isinstance(arg, ast.A_Const) and not arg.isnull:
        return _CONST_TYPES.get(type(arg.val), "unknown")
    if isinstance(arg, ast.TypeCast) and arg.typeName is not None:
        return ".".join(strings(arg.typeName.names)).removeprefix("pg_catalog.")
    return "unknown"


def check_on_conflict(state: State, node: PgNode) -> None:
    """An INSERT of a migration (seed data) with `ON CONFLICT (a, b)`: PostgreSQL infers a unique
    index whose keys are exactly those columns, else refuses the statement. Checked only when the
    target is plain (columns, no WHERE, no ON CONSTRAINT) on a table the catalog holds without an
    exclusion constraint, partitions or children; anything else is left to PostgreSQL."""
    clause = node.onConflictClause
    infer = clause.infer if clause is not None else None
    if infer is None or infer.conname or infer.whereClause is not None or not infer.indexElems:
        return
    names = [elem.name for elem in infer.indexElems]
    if any(not isinstance(name, str) for name in names):
        return
    key = state.relation_key(node.relation)
    table = state.tables.get(key) if key is not None else None
    if key is None or table is None or table.kind != "table" or state.children(key):
        return
    if any(info.kind == "x" for info in state.constraints.get(key, {}).values()):
        return
    wanted = set(names)
    if not any(
        i.table == key and i.unique and not i.partial and set(i.columns) == wanted for i in state.indexes.values()
    ):
        state.error("there is no unique or exclusion constraint matching the ON CONFLICT specification", infer.location)
