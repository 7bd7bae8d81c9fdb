"""DDL applied in order, as PostgreSQL would apply it, to build the Catalog.

Each file is read with PostgreSQL's own grammar (`pgparse.py`, libpg_query). A statement that
does not parse is an error at its position and the rest of the file still applies. What
PostgreSQL rejects (unknown type, duplicate object, conflicting inherited column, bad reference)
is an error at the statement's `file:line:col`; the statement's effect is kept where it can be,
so one mistake does not hide every table from the RPCs. Statements that do not change the
catalog (DML, transaction control, grants, roles, VACUUM, ...) are parsed and passed over
knowingly; statements the catalog cannot model (DDL inside a DO block, ...) are warnings naming
what may be missing, never a refusal of the schema.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pglast import ast
from pglast.enums import ObjectType, VariableSetKind

from ...diagnostics import Problem, SqlSpan
from ..catalog.builtins import setting_names
from ..catalog.identifiers import parse_search_path
from ..catalog.model import Catalog
from ..syntax.pgparse import PgSyntaxError, RawStatement, parse, scan
from . import alter, objects, tables
from .exprcheck import check_on_conflict
from .state import PgNode, QueryTyper, State, strings


def apply_schema(
    files: Sequence[tuple[str, str]], query_typer: QueryTyper
) -> tuple[Catalog, list[tuple[str, Problem]]]:
    """Apply each `(path, text)` in order; views' queries are typed by `query_typer`. Returns the
    catalog of everything that applied and the problems, each with the path of its file and a
    span into that file's text."""
    state = State(query_typer=query_typer)
    for path, text in files:
        state.path = path
        state.text = text
        _apply_text(state, skip_meta_lines(state, text))
    return state.freeze(), state.problems


def skip_meta_lines(state: State, text: str) -> str:
    """psql's meta-commands (`\\connect`, `\\restrict` in pg_dump output) are not SQL: blank
    them (keeping every offset) with a note each. A backslash line inside a string or a
    dollar-quoted body is SQL and stays."""
    starts: list[int] = []
    offset = 0
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith("\\"):
            starts.append(offset)
        offset += len(line)
    if not starts:
        return text
    chars = list(text)
    ends = {}
    for start in starts:
        end = text.find("\n", start)
        ends[start] = len(text) if end == -1 else end
        chars[start : ends[start]] = " " * (ends[start] - start)
    blanked = "".join(chars)
    try:
        tokens = scan(blanked)
    except Exception:  # an unterminated string: the parser reports it
        tokens = []
    inside = [t for t in tokens if t.end > t.start]
    kept = list(blanked)
    for start in starts:
        if any(t.start < start <= t.end for t in inside):
            kept[start : ends[start]] = text[start : ends[start]]
            continue
        command = text[start : ends[start]].strip().split()[0]
        state.problems.append(
            (
                state.path,
                Problem(
                    f"psql meta-command {command} skipped (it is not SQL; pg_dump writes it for psql)",
                    SqlSpan(start, max(start, ends[start] - 1)),
                    "warning",
                ),
            )
        )
    return "".join(kept)


def _apply_text(state: State, text: str) -> None:
    try:
        statements = parse(text)
    except PgSyntaxError:
        _apply_chunks(state, text)
        return
    state.base = 0
    for stmt in statements:
        _apply_statement(state, stmt)


def _apply_chunks(state: State, text: str) -> None:
    """The text has a syntax error: parse it statement by statement (split at the `;` tokens
    of PostgreSQL's lexer) so each error is reported where it is and the rest still applies."""
    try:
        tokens = scan(text)
    except Exception as err:
        offset = err.args[1] if len(err.args) > 1 and isinstance(err.args[1], int) else None
        state.stmt_start, state.stmt_end, state.base = 0, len(text), 0
        state.error(f"syntax error: {err.args[0] if err.args else err}", offset)
        return
    start = 0
    bounds: list[tuple[int, int]] = []
    for tok in tokens:
        if tok.name == "ASCII_59":
            bounds.append((start, tok.end + 1))
            start = tok.end + 1
    if text[start:].strip():
        bounds.append((start, len(text)))
    for begin, end in bounds:
        chunk = text[begin:end]
        state.base = begin
        try:
            statements = parse(chunk)
        except PgSyntaxError as err:
            lead = len(chunk) - len(chunk.lstrip())
            state.stmt_start, state.stmt_end = begin + lead, end
            state.error(err.message, err.offset if err.offset is not None else lead)
            continue
        for stmt in statements:
            _apply_statement(state, stmt)


def _apply_statement(state: State, raw: RawStatement) -> None:
    state.stmt_start = state.base + raw.start
    state.stmt_end = state.base + raw.end
    node = raw.node
    handler = _HANDLERS.get(type(node).__name__)
    if handler is not None:
        handler(state, node)
        return
    if type(node).__name__ in _PASSED:
        return
    state.warning(f"{_describe(node)} is not modelled by the catalog and was skipped")


def _describe(node: PgNode) -> str:
    """A statement's kind for messages: `CreateTrigStmt` -> `CREATE TRIG statement`."""
    name = type(node).__name__.removesuffix("Stmt")
    words = "".join(f" {c}" if c.isupper() else c for c in name).strip().upper()
    return f"{words} statement"


# -- session statements ---------------------------------------------------------------------
def _variable_set(state: State, node: PgNode) -> None:
    """SET search_path applies to the rest of the schema; other settings do not shape it, but a
    parameter PostgreSQL 15 does not have is its error (`transaction_timeout`, new in 17, is in
    pg_dump 17's output); a name with a dot is a placeholder PostgreSQL accepts."""
    settable = (VariableSetKind.VAR_SET_VALUE, VariableSetKind.VAR_SET_DEFAULT, VariableSetKind.VAR_SET_CURRENT)
    name = str(node.name or "").lower()
    if node.kind in (*settable, VariableSetKind.VAR_RESET) and "." not in name and name not in setting_names():
        state.error(f"unrecognized configuration parameter {name}", node.location, word=node.name)
        return
    if node.name != "search_path":
        return
    if node.kind in (VariableSetKind.VAR_SET_DEFAULT, VariableSetKind.VAR_RESET):
        state.search_path = parse_search_path('"$user", public')
        return
    values = [str(arg.val.sval) for arg in node.args or () if isinstance(arg.val, ast.String)]
    # Each SET argument is one identifier already (`SET search_path = a, "B"`).
    state.search_path = tuple(v for v in values if v != "$user")


def _select(state: State, node: PgNode) -> None:
    """`SELECT pg_catalog.set_config('search_path', '...', false)` (pg_dump) sets the search
    path; any other SELECT (setval, data checks) does not change the catalog."""
    for target in node.targetList or ():
        call: PgNode = target.val
        if not isinstance(call, ast.FuncCall) or strings(call.funcname)[-1] != "set_config":
            continue
        args: PgNode = call.args or ()
        if len(args) < 2:
            continue
        setting, value = (
            str(a.val.sval) if isinstance(a, ast.A_Const) and isinstance(a.val, ast.String) else None for a in args[:2]
        )
        if setting == "search_path" and value is not None:
            state.search_path = parse_search_path(value)


def _do(state: State, node: PgNode) -> None:
    """A DO block of the guarded shapes idempotent migrations use (`procedural.py`) is applied;
    otherwise the catalog does not run procedural code: DDL inside the block is a warning naming
    what may be missing; a DO block without DDL (data fixes, RAISE) passes."""
    body = "".join(str(opt.arg.sval) for opt in node.args or () if opt.defname == "as")
    language = next((str(opt.arg.sval) for opt in node.args or () if opt.defname == "language"), "plpgsql")
    from . import procedural  # DO blocks only: not imported by every run

    steps = procedural.plan(body) if language.lower() == "plpgsql" else None
    if steps is not None:
        procedural.run(steps, lambda sql: _apply_inner(state, sql), state.error)
        return
    try:
        words = [t.name for t in scan(body)]
    except Exception:
        words = []
    ddl = sorted(
        {
            f"{w} {words[i + 1]}"
            for i, w in enumerate(words[:-1])
            if w in ("CREATE", "ALTER", "DROP") and words[i + 1] not in ("ASCII_40", "IDENT")
        }
        | {w for w in words if w == "EXECUTE"}
    )
    if ddl:
        state.warning(
            f"DO block: the catalog does not run procedural code, so what it does ({', '.join(ddl)}) is not "
            "in the catalog; a statement using an object it creates or changes will say the object is missing. "
            "To have it, point schema= at the dump `protoc-gen-pydb snapshot` writes (docs/workflow.md)"
        )


def _apply_inner(state: State, sql: str) -> list[str]:
    """A statement of a DO block, applied in the session; returns its errors (the caller reports
    them at the DO statement). Warnings stay, placed at the DO statement."""
    saved = (state.text, state.base, state.stmt_start, state.stmt_end)
    before = len(state.problems)
    state.text = sql
    try:
        _apply_text(state, sql)
    finally:
        state.text, state.base, state.stmt_start, state.stmt_end = saved
    raised = state.problems[before:]
    del state.problems[before:]
    for _, problem in raised:
        if problem.severity != "error":
            state.warning(f"in the DO block: {problem.message}")
    return [problem.message for _, problem in raised if problem.severity == "error"]


def _create_schema(state: State, node: PgNode) -> None:
    name = node.schemaname or (node.authrole.rolename if node.authrole else None)
    if name is None:
        return
    if name in state.schemas:
        if not node.if_not_exists:
            state.error(f"schema {name} already exists")
        return
    state.schemas.add(name)
    if node.schemaElts:
        saved = state.search_path
        state.search_path = (name, *saved)
        for elt in node.schemaElts:
            handler = _HANDLERS.get(type(elt).__name__)
            if handler is not None:
                handler(state, elt)
        state.search_path = saved


def _comment(state: State, node: PgNode) -> None:
    """COMMENT ON a table or column: the object must exist."""
    if node.objtype in (ObjectType.OBJECT_TABLE, ObjectType.OBJECT_VIEW, ObjectType.OBJECT_MATVIEW):
        parts = [s.sval for s in node.object]
        key = state.find_key(parts[-2] if len(parts) > 1 else None, parts[-1], state.tables)
        if key is None:
            state.error(f"relation {'.'.join(parts)} does not exist (COMMENT ON)", word=parts[-1])
    elif node.objtype == ObjectType.OBJECT_COLUMN:
        parts = [s.sval for s in node.object]
        schema = parts[-3] if len(parts) > 2 else None
        key = state.find_key(schema, parts[-2], state.tables)
        if key is None:
            state.error(f"relation {'.'.join(parts[:-1])} does not exist (COMMENT ON COLUMN)", word=parts[-2])
        elif state.tables[key].column(parts[-1]) is None:
            state.error(
                f"column {parts[-1]} of relation {'.'.join(parts[:-1])} does not exist (COMMENT ON COLUMN)",
                word=parts[-1],
            )


_HANDLERS: dict[str, Callable[[State, PgNode], None]] = {
    "VariableSetStmt": _variable_set,
    "SelectStmt": _select,
    "DoStmt": _do,
    "CreateSchemaStmt": _create_schema,
    "CommentStmt": _comment,
    "InsertStmt": check_on_conflict,
    **tables.HANDLERS,
    **alter.HANDLERS,
    **objects.HANDLERS,
}

#: Statements that do not change the catalog: parsed by PostgreSQL's grammar, then passed over.
_PASSED = frozenset(
    [
        "TransactionStmt",
        "UpdateStmt",
        "DeleteStmt",
        "MergeStmt",
        "CopyStmt",
        "GrantStmt",
        "GrantRoleStmt",
        "CreateRoleStmt",
        "AlterRoleStmt",
        "AlterRoleSetStmt",
        "DropRoleStmt",
        "AlterOwnerStmt",
        "VacuumStmt",
        "NotifyStmt",
        "ListenStmt",
        "UnlistenStmt",
        "LockStmt",
        "AlterDefaultPrivilegesStmt",
        "CreatePolicyStmt",
        "AlterPolicyStmt",
        "CreateEventTrigStmt",
        "AlterEventTrigStmt",
        "RuleStmt",
        "CreatePublicationStmt",
        "AlterPublicationStmt",
        "CreateSubscriptionStmt",
        "AlterSubscriptionStmt",
        "DropSubscriptionStmt",
        "SecLabelStmt",
        "ClusterStmt",
        "ReindexStmt",
        "RefreshMatViewStmt",
        "CheckPointStmt",
        "DiscardStmt",
        "DeallocateStmt",
        "PrepareStmt",
        "ExecuteStmt",
        "ExplainStmt",
        "VariableShowStmt",
        "AlterSystemStmt",
        "CreateStatsStmt",
        "AlterStatsStmt",
        "CreateTableSpaceStmt",
        "DropTableSpaceStmt",
        "AlterTableSpaceOptionsStmt",
        "AlterDatabaseStmt",
        "AlterDatabaseSetStmt",
        "AlterDatabaseRefreshCollStmt",
        "CreatedbStmt",
        "DropdbStmt",
        "CreateCastStmt",
        "CreateOpClassStmt",
        "CreateOpFamilyStmt",
        "AlterOpFamilyStmt",
        "CreateConversionStmt",
        "CreateTransformStmt",
        "CreatePLangStmt",
        "AlterCollationStmt",
        "AlterFunctionStmt",
        "CallStmt",
        "CreateAmStmt",
        "CreateFdwStmt",
        "AlterFdwStmt",
        "CreateForeignServerStmt",
        "AlterForeignServerStmt",
        "CreateUserMappingStmt",
        "AlterUserMappingStmt",
        "DropUserMappingStmt",
        "AlterTSDictionaryStmt",
        "AlterTSConfigurationStmt",
        "AlterExtensionStmt",
        "AlterExtensionContentsStmt",
        "AlterOperatorStmt",
        "AlterTypeStmt",
        "DropOwnedStmt",
        "ReassignOwnedStmt",
        "LoadStmt",
        "ConstraintsSetStmt",
        "ClosePortalStmt",
        "DeclareCursorStmt",
        "FetchStmt",
        "ReturnStmt",
        "PLAssignStmt",
    ]
)
