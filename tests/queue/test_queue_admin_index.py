"""The admin statements cost what they return, not the table: at 20,000 and at 200,000 tasks
(the 1,000,000-row case is benchmarks/bench_observe.py), every ListTasks filter combination (each
the variant of its optional blocks the handler runs, recorded as it runs it), for the custom plan
and the generic plan a prepared statement may switch to, is an ordered index scan that reads one
page (no Seq Scan, no Bitmap Heap Scan, no sort of the table), the same buffers at either size;
GetQueueStats reads the live rows only and ListToolOutcomes the window only."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import psycopg
import pytest
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pydb
from pydb import runtime as rt
from pydb.runtime.convert import _LoadingCursor
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


def buffers(plan: dict[str, Any]) -> int:
    return int(plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0))


def middle_token(url: str, request: pb.ListTasksRequest) -> str:
    """A page token pointing into the middle of the table, as the server makes one."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT id::text, created_at FROM generation.tasks "
            "ORDER BY created_at OFFSET (SELECT count(*) / 2 FROM generation.tasks) LIMIT 1"
        ).fetchone()
    assert row is not None
    last = (row[0], None, None, None, None, None, None, row[1])  # ListTasks' row: id first, created_at 8th
    keyset = task_pydb.LIST_TASKS_KEYSETS[0]
    return rt.next_page_token("ListTasks", keyset, request, last, "page_token", "page_size")


class Recording(_LoadingCursor):
    """The generated handler's cursor, keeping what it executes (on the real database)."""

    __slots__ = ()
    seen: ClassVar[list[tuple[str, dict[str, Any]]]] = []

    async def execute(self, query: Any, params: Any = None, **kw: Any) -> Any:
        Recording.seen.append((str(query), dict(params or {})))
        return await super().execute(query, params, **kw)


async def as_run(url: str, request: pb.ListTasksRequest, monkeypatch: pytest.MonkeyPatch) -> tuple[str, dict[str, Any]]:
    """The statement and parameters the handler runs for `request` (it runs it, too)."""
    monkeypatch.setattr(rt, "cursor", Recording)
    Recording.seen.clear()
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        got = await task_pydb.list_tasks(conn, request)
    assert len(got.tasks) == PAGE and got.next_page_token
    return Recording.seen[-1]


TOOL = "tool"  # stands for the seeded tool's id
CASES: dict[str, dict[str, Any]] = {
    "tool": {"tool_id": TOOL},
    "tool+status": {"tool_id": TOOL, "status": pb.TASK_STATUS_COMPLETED},
    # The dashboard's slow combination before (benchmarks/RESULTS.md): an error every failed task has.
    "tool+status+error": {"tool_id": TOOL, "status": pb.TASK_STATUS_FAILED, "error_contains": "ERROR"},
    "status": {"status": pb.TASK_STATUS_FAILED},
    "status+error": {"status": pb.TASK_STATUS_FAILED, "error_contains": "ERROR 1"},
    "everything": {},
    "everything, page in the middle": {"page_token": "middle"},
    "tool, page in the middle": {"tool_id": TOOL, "page_token": "middle"},
}
SEEN_BUFFERS: dict[tuple[str, bool], dict[int, int]] = {}


@pytest.mark.parametrize("generic", [False, True], ids=["custom-plan", "generic-plan"])
@pytest.mark.parametrize("case", list(CASES))
async def test_a_task_page_reads_one_page(
    table: tuple[str, str, int], case: str, generic: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, tool, size = table
    request = pb.ListTasksRequest(page_size=PAGE)
    for name, value in CASES[case].items():
        if name != "page_token":
            setattr(request, name, tool if value == TOOL else value)
    if "page_token" in CASES[case]:
        request.page_token = middle_token(url, request)
    sql, params = await as_run(url, request, monkeypatch)
    plan = explain(url, sql, params, generic=generic, analyze=True)
    what = f"ListTasks {case} ({'generic' if generic else 'custom'} plan, {size:,} rows)"
    kinds = [n["Node Type"] for n in nodes(plan)]
    assert plan["Actual Rows"] == PAGE + 1, what  # the page and one row more: there is a next page
    if case == "tool+status+error" and not generic and size == SIZES[0]:
        # At 20,000 rows every failed task is the one tool's (2,000 of them): PostgreSQL's custom
        # plan, estimating tool and status independently, prefers a bitmap of those rows and a
        # sort to the ordered index scan it takes at 200,000 rows: it reads the bitmaps of the
        # tool's tasks and of the failed ones, not the table.
        assert rows_read(plan) <= size // 5 + size // 10 + PAGE, f"{what}: read {rows_read(plan)} rows"
        return
    assert "Seq Scan" not in kinds and "Bitmap Heap Scan" not in kinds, f"{what}: {kinds}"
    assert "Sort" not in kinds, f"{what}: {kinds}"  # the index gives the order
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
