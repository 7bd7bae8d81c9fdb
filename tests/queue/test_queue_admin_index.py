"""The admin statements cost what they return, not the table: at 20,000 and at 200,000 tasks
(the 1,000,000-row case is benchmarks/bench_dashboard.py), every ListTasks branch, for the custom
plan and the generic plan a prepared statement may switch to, is an ordered index scan that
reads one page (no Seq Scan, no Bitmap Heap Scan, no sort of the table), the same buffers at
either size; GetQueueStats reads the live rows only and ListToolOutcomes the window only."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from generation.task.v1 import task_pydb
from support.pg import Cluster, scratch_database
from test_queue_index import explain, nodes, rows_read

pytestmark = pytest.mark.slow

SIZES = (20_000, 200_000)
LIVE = 500  # queued rows of each size (the rest finished long ago, 1 in 10 failed)
PAGE = 50


@pytest.fixture(scope="module", params=SIZES, ids=[f"{n:,}-tasks" for n in SIZES])
def table(request: pytest.FixtureRequest, pg_server: tuple[str, Cluster | None]) -> Iterator[tuple[str, str, int]]:
    size: int = request.param
    with scratch_database(pg_server[0]) as url, psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO generation.tools (name) SELECT 'tool-' || i FROM generate_series(1, 5) i")
        conn.execute(
            """
            INSERT INTO generation.tasks (tool_id, status, error, created_at, completed_at)
            SELECT (ARRAY(SELECT id FROM generation.tools ORDER BY name))[1 + i %% 5],
                   CASE WHEN i %% 10 = 0 THEN 'failed' ELSE 'completed' END::generation.task_status,
                   CASE WHEN i %% 10 = 0 THEN 'error ' || i END,
                   now() - interval '30 days' + i * interval '1 second', now() - interval '10 days' + i * interval '1 second'
            FROM generate_series(1, %s) i
            """,
            (size - LIVE,),
        )
        conn.execute(
            "INSERT INTO generation.tasks (tool_id, created_at) "
            "SELECT (ARRAY(SELECT id FROM generation.tools ORDER BY name))[1 + i %% 5], now() - i * interval '1 second' "
            "FROM generate_series(1, %s) i",
            (LIVE,),
        )
        conn.execute("VACUUM ANALYZE generation.tasks")
        tool = conn.execute("SELECT id::text FROM generation.tools ORDER BY name LIMIT 1").fetchone()
        assert tool is not None
        yield url, tool[0], size


def list_params(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"tool_id": None, "status": None, "created_after": None, "created_before": None,
                            "error_contains": None, "page_size": PAGE, "page_token": ""}  # fmt: skip
    return {**base, **kw}


def buffers(plan: dict[str, Any]) -> int:
    return int(plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0))


def middle_token(url: str) -> str:
    """A page token pointing into the middle of the table, as the server writes one."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT (extract(epoch FROM created_at) * 1000000)::int8 || ',' || id FROM generation.tasks "
            "ORDER BY created_at OFFSET (SELECT count(*) / 2 FROM generation.tasks) LIMIT 1"
        ).fetchone()
    assert row is not None
    return base64.b64encode(row[0].encode()).decode()


CASES = {
    "tool": lambda tool, token: list_params(tool_id=tool),
    "tool+status": lambda tool, token: list_params(tool_id=tool, status="completed"),
    "status": lambda tool, token: list_params(status="failed"),
    "status+error": lambda tool, token: list_params(status="failed", error_contains="ERROR 1"),
    "everything": lambda tool, token: list_params(),
    "everything, page in the middle": lambda tool, token: list_params(page_token=token),
    "tool, page in the middle": lambda tool, token: list_params(tool_id=tool, page_token=token),
}
SEEN_BUFFERS: dict[tuple[str, bool], dict[int, int]] = {}


@pytest.mark.parametrize("generic", [False, True], ids=["custom-plan", "generic-plan"])
@pytest.mark.parametrize("case", list(CASES))
def test_a_task_page_reads_one_page(table: tuple[str, str, int], case: str, generic: bool) -> None:
    url, tool, size = table
    params = CASES[case](tool, middle_token(url))
    plan = explain(url, task_pydb.LIST_TASKS_SQL, params, generic=generic, analyze=True)
    what = f"ListTasks {case} ({'generic' if generic else 'custom'} plan, {size:,} rows)"
    kinds = [n["Node Type"] for n in nodes(plan)]
    assert "Seq Scan" not in kinds and "Bitmap Heap Scan" not in kinds, f"{what}: {kinds}"
    assert plan["Actual Rows"] == PAGE, what
    # The only sort is the page's own (row_number over at most PAGE + 1 rows), never the table's.
    for n in nodes(plan):
        if n["Node Type"] == "Sort":
            assert n["Actual Rows"] <= PAGE + 1, f"{what}: a sort of {n['Actual Rows']} rows"
    # The filters checked on the rows read (status, error text) skip at most a few rows per hit.
    assert rows_read(plan) <= 12 * (PAGE + 1), f"{what}: read {rows_read(plan)} rows"
    seen = SEEN_BUFFERS.setdefault((case, generic), {})
    seen[size] = buffers(plan)
    if len(seen) == len(SIZES):  # the larger table costs about the same buffers
        small, large = (seen[n] for n in SIZES)
        assert large <= 2 * small + 20, f"{what}: {small} buffers at {SIZES[0]:,}, {large} at {SIZES[1]:,}"


@pytest.mark.parametrize("generic", [False, True], ids=["custom-plan", "generic-plan"])
def test_queue_stats_read_the_live_rows_and_outcomes_the_window(table: tuple[str, str, int], generic: bool) -> None:
    url, _, size = table
    plan = explain(url, task_pydb.GET_QUEUE_STATS_SQL, {}, generic=generic, analyze=True)
    kinds = [n["Node Type"] for n in nodes(plan)]
    assert "Seq Scan" not in kinds and "Bitmap Heap Scan" not in kinds, kinds
    assert rows_read(plan) == LIVE, f"GetQueueStats read {rows_read(plan)} rows of {size:,}"
    # The window: the last 10 days minus the seeded offsets hold a known share of the finished rows.
    plan = explain(url, task_pydb.LIST_TOOL_OUTCOMES_SQL, {"window_seconds": 3600}, generic=generic, analyze=True)
    kinds = [n["Node Type"] for n in nodes(plan)]
    assert "Seq Scan" not in kinds and "Bitmap Heap Scan" not in kinds, kinds
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM generation.tasks WHERE status IN ('completed', 'failed') "
            "AND completed_at >= now() - interval '1 hour'"
        ).fetchone()
    assert row is not None
    assert rows_read(plan) <= row[0] + 1, f"ListToolOutcomes read {rows_read(plan)} rows for {row[0]} in the window"
