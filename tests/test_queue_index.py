"""The index does the work: with 100,000 queued rows of mixed priority for one tool, the claim
statements (the generated SQL, as served) are an ordered scan of idx_gen_tasks_queue with no
Sort node, for the custom plan and for the generic plan a prepared statement may switch to;
and executing the claim reads a handful of index entries, not the backlog."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from generation.task.v1 import task_pydb
from pg import Cluster, scratch_database

BACKLOG = 100_000
INDEX = "idx_gen_tasks_queue"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def backlog(pg_server: tuple[str, Cluster | None]) -> Iterator[tuple[str, str]]:
    """A database of its own: 100,000 queued rows (priority 0-9) for one tool, 20,000 more rows of
    other tools, 5,000 finished rows of the same tool; analyzed. (url, tool id)."""
    with scratch_database(pg_server[0]) as url, psycopg.connect(url, autocommit=True) as conn:
        tool = conn.execute("INSERT INTO generation.tools (name) VALUES ('deep') RETURNING id::text").fetchone()
        assert tool is not None
        conn.execute("INSERT INTO generation.tools (name) SELECT 'other-' || i FROM generate_series(1, 4) i")
        conn.execute(
            """
            INSERT INTO generation.tasks (tool_id, priority, created_at)
            SELECT %s, (i * 7919) %% 10, now() - interval '1 day' + ((i::bigint * 104729) %% 100000) * interval '1 second'
            FROM generate_series(1, %s) i
            """,
            (tool[0], BACKLOG),
        )
        conn.execute(
            """
            INSERT INTO generation.tasks (tool_id, priority)
            SELECT t.id, i % 3 FROM generation.tools t, generate_series(1, 5000) i WHERE t.name LIKE 'other-%'
            """
        )
        conn.execute(
            """
            INSERT INTO generation.tasks (tool_id, status, priority, completed_at)
            SELECT %s, 'completed', 50, now() FROM generate_series(1, 5000)
            """,
            (tool[0],),
        )
        conn.execute("ANALYZE generation.tasks")
        yield url, tool[0]


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def positional(sql: str) -> tuple[str, list[str]]:
    """The generated %(name)s placeholders as $1, $2, ... (for PREPARE)."""
    names: list[str] = []

    def sub(m: re.Match[str]) -> str:
        if m.group(1) not in names:
            names.append(m.group(1))
        return f"${names.index(m.group(1)) + 1}"

    return re.sub(r"%\((\w+)\)s", sub, sql), names


def explain(url: str, sql: str, params: dict[str, Any], *, generic: bool, analyze: bool = False) -> dict[str, Any]:
    body, names = positional(sql)
    with psycopg.connect(url) as conn:  # a transaction, rolled back: EXPLAIN ANALYZE really claims
        if generic:
            conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE claim AS {body}")  # generated, trusted SQL
        args = ", ".join(psycopg.sql.quote(params[n]) for n in names)
        opts = "ANALYZE, BUFFERS, FORMAT JSON" if analyze else "FORMAT JSON"
        row = conn.execute(f"EXPLAIN ({opts}) EXECUTE claim({args})").fetchone()
        conn.rollback()
    assert row is not None
    return row[0][0]["Plan"]  # type: ignore[no-any-return]


def assert_index_ordered(plan: dict[str, Any], what: str) -> list[dict[str, Any]]:
    all_nodes = list(nodes(plan))
    kinds = [n["Node Type"] for n in all_nodes]
    # ClaimTasks' byte budget orders the claimed rows (at most `limit`, a CTE) for its running
    # sum: a sort of the picked handful, never of the backlog.
    backlog_sorts = [
        n
        for n in all_nodes
        if "Sort" in n["Node Type"] and [c["Node Type"] for c in n.get("Plans", [])] != ["CTE Scan"]
    ]
    assert not backlog_sorts, f"{what}: the plan sorts: {kinds}"
    scans = [n for n in all_nodes if n["Node Type"] in ("Index Scan", "Index Only Scan")]
    assert any(n.get("Index Name") == INDEX for n in scans), f"{what}: no scan of {INDEX}: {kinds}"
    assert "Seq Scan" not in kinds and "Bitmap Heap Scan" not in kinds, f"{what}: {kinds}"
    return [n for n in scans if n.get("Index Name") == INDEX]


@pytest.mark.parametrize("generic", [False, True], ids=["custom-plan", "generic-plan"])
@pytest.mark.parametrize(
    ("rpc", "sql", "extra"),
    [
        ("ClaimNextTask", task_pydb.CLAIM_NEXT_TASK_SQL, {"max_bytes": 0}),
        ("ClaimTasks", task_pydb.CLAIM_TASKS_SQL, {"limit": 50, "max_bytes": 0}),
    ],
)
def test_claim_is_an_index_ordered_top_n(
    backlog: tuple[str, str], rpc: str, sql: str, extra: dict[str, Any], generic: bool
) -> None:
    url, tool = backlog
    plan = explain(url, sql, {"tool_id": tool, **extra}, generic=generic)
    assert_index_ordered(plan, f"{rpc} ({'generic' if generic else 'custom'} plan)")


def test_claim_reads_a_handful_of_rows_not_the_backlog(backlog: tuple[str, str]) -> None:
    url, tool = backlog
    plan = explain(url, task_pydb.CLAIM_NEXT_TASK_SQL, {"tool_id": tool, "max_bytes": 0}, generic=False, analyze=True)
    scans = assert_index_ordered(plan, "ClaimNextTask (executed)")
    assert sum(n["Actual Rows"] for n in scans) <= 5
    assert plan.get("Actual Rows", 1) == 1, "the claim updated exactly one row"
    touched = sum(n.get("Shared Hit Blocks", 0) + n.get("Shared Read Blocks", 0) for n in nodes(plan))
    assert touched < 200, f"{touched} buffers for one claim out of {BACKLOG:,}"
