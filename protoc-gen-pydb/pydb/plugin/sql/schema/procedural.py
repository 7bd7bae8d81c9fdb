"""DO blocks: the guarded shapes idempotent migrations use, applied as PostgreSQL would run them.

The catalog runs no procedural code, but three shapes only guard DDL against running twice, and
their effect on a schema applied once, in order, is the DDL's:

- `IF NOT EXISTS (SELECT ... FROM information_schema.* | pg_catalog.*) THEN <DDL> END IF`: the DDL,
  where what it creates already existing means the guard skipped it (an "already exists" is
  not an error);
- `IF EXISTS (SELECT ... FROM <catalog> ...) THEN <DDL> END IF`: the DDL, where what it changes
  being absent means the guard skipped it (a "does not exist" is not an error);
- `BEGIN <DDL> EXCEPTION WHEN duplicate_object | duplicate_table | ... THEN NULL; END`: the DDL,
  the error the handler catches not an error.

Plain statements of the block run as they are. Any other PL/pgSQL (loops, EXECUTE, assignments,
other conditions, handlers that do something) leaves the whole block unapplied: the caller warns.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pglast.parser import ParseError, parse_plpgsql_json

#: `[NOT] EXISTS (SELECT ... FROM information_schema.x | pg_catalog.x | pg_x ...)`.
_GUARD = re.compile(
    r"^\s*(?P<negated>NOT\s+)?EXISTS\s*\(\s*SELECT\b.*?\bFROM\s+"
    r"(?:\"?(?:information_schema|pg_catalog)\"?\s*\.\s*\"?\w+|\"?pg_\w+)",
    re.IGNORECASE | re.DOTALL,
)
#: Conditions a handler may catch, and the message class of the catalog's error it stands for.
_CAUGHT = {
    "duplicate_object": "already exists",
    "duplicate_table": "already exists",
    "duplicate_column": "already exists",
    "duplicate_schema": "already exists",
    "duplicate_function": "already exists",
    "undefined_object": "does not exist",
    "undefined_table": "does not exist",
    "undefined_column": "does not exist",
}
#: Statements that do nothing to the schema: RAISE (a notice), NULL, the implicit RETURN.
_INERT = {"PLpgSQL_stmt_raise", "PLpgSQL_stmt_return"}


@dataclass(frozen=True)
class Step:
    """One SQL statement of the block, and the errors its guard makes not errors (None: none)."""

    sql: str
    tolerated: str | None


def plan(source: str) -> list[Step] | None:
    """The DDL a DO block's body runs, or None when the block is not one of the guarded shapes."""
    try:
        tree = json.loads(parse_plpgsql_json(f"DO $pydb_do$ {source} $pydb_do$"))
    except (ParseError, ValueError):
        return None
    try:
        block = tree[0]["PLpgSQL_function"]["action"]["PLpgSQL_stmt_block"]
    except (KeyError, IndexError, TypeError):
        return None
    steps: list[Step] = []
    return steps if _block(block, None, steps) else None


def _block(block: dict[str, Any], tolerated: str | None, steps: list[Step]) -> bool:
    exceptions = block.get("exceptions")
    if exceptions is not None:
        handlers = exceptions["PLpgSQL_exception_block"]["exc_list"]
        caught: set[str] = set()
        for handler in handlers:
            body = handler["PLpgSQL_exception"].get("action") or []
            if any(next(iter(s)) not in (*_INERT, "PLpgSQL_stmt_null") for s in body):
                return False  # a handler that does something
            for condition in handler["PLpgSQL_exception"]["conditions"]:
                name = condition["PLpgSQL_condition"].get("condname", "")
                if name not in _CAUGHT:
                    return False
                caught.add(_CAUGHT[name])
        if len(caught) != 1 or tolerated not in (None, *caught):
            return False
        tolerated = caught.pop()
    return _statements(block.get("body") or [], tolerated, steps)


def _statements(body: list[dict[str, Any]], tolerated: str | None, steps: list[Step]) -> bool:
    for stmt in body:
        kind, node = next(iter(stmt.items()))
        if kind in _INERT or kind == "PLpgSQL_stmt_null":
            continue
        if kind == "PLpgSQL_stmt_execsql":
            steps.append(Step(node["sqlstmt"]["PLpgSQL_expr"]["query"], tolerated))
        elif kind == "PLpgSQL_stmt_block":
            if not _block(node, tolerated, steps):
                return False
        elif kind == "PLpgSQL_stmt_if":
            guard = _GUARD.match(node["cond"]["PLpgSQL_expr"]["query"])
            if guard is None or node.get("elsif_list") or node.get("else_body") or tolerated is not None:
                return False
            if not _statements(
                node.get("then_body") or [], "already exists" if guard["negated"] else "does not exist", steps
            ):
                return False
        else:
            return False
    return True


def run(steps: list[Step], apply_sql: Callable[[str], list[str]], report: Callable[[str], None]) -> None:
    """Applies each step (`apply_sql` returns its error messages); reports those its guard does
    not make expected."""
    for step in steps:
        for message in apply_sql(step.sql):
            if step.tolerated is None or step.tolerated not in message:
                report(f"in the DO block: {message}")
