"""The scheduling features keep the queue index-driven, at two table sizes: with N queued rows,
N scheduled far in the future, N failed and N completed ones for one tool (N = 10,000, then 100,000), the claim
is an ordered scan of idx_gen_tasks_queue plus one empty range of idx_gen_tasks_scheduled_tool (the
future rows are outside the claim index), PromoteDueTasks reads the due rows of
idx_gen_tasks_scheduled and RetryTasks an ordered range of the tool's terminal rows: the rows each reads
are the same at both sizes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from generation.task.v1 import task_pydb
from support.pg import Cluster, scratch_database
from test_queue_index import explain, nodes, rows_read

pytestmark = pytest.mark.slow

SIZES = (10_000, 100_000)


def grow(url: str, tool: str, n: int) -> None:
    """n more queued, n scheduled a day ahead, n failed and n completed rows for `tool`; 100
    scheduled rows due."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            """
            INSERT INTO generation.tasks (tool_id, status, priority, run_at, created_at, error, completed_at)
            SELECT %(tool)s, s.status::generation.task_status, (i * 7919) %% 10,
                   CASE WHEN s.status = 'scheduled' THEN now() + interval '1 day' + i * interval '1 ms' ELSE now() END,
                   now() - interval '1 day' + i * interval '1 ms',
                   CASE WHEN s.status = 'failed' THEN 'timeout' END,
                   CASE WHEN s.status IN ('failed', 'completed') THEN now() - i * interval '1 ms' END
            FROM generate_series(1, %(n)s) AS i,
                 (VALUES ('queued'), ('scheduled'), ('failed'), ('completed')) AS s (status)
            """,
            {"tool": tool, "n": n},
        )
        conn.execute(
            "UPDATE generation.tasks SET run_at = now() - interval '1 minute' WHERE id IN "
            "(SELECT id FROM generation.tasks WHERE status = 'scheduled' ORDER BY run_at LIMIT 100)"
        )
        conn.execute("ANALYZE generation.tasks")


@pytest.fixture(scope="module")
def sized(pg_server: tuple[str, Cluster | None]) -> Iterator[tuple[str, str]]:
    with scratch_database(pg_server[0]) as url, psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("INSERT INTO generation.tools (name) VALUES ('sched') RETURNING id::text").fetchone()
        assert row is not None
        yield url, row[0]


def index_scans(plan: dict[str, Any]) -> dict[str, int]:
    """Rows read per index; fails on a sequential scan, or a bitmap scan but of the primary key (the
    batch's ids, gathered into an array, looked up by key)."""
    kinds = [n["Node Type"] for n in nodes(plan)]
    assert "Seq Scan" not in kinds, kinds
    bitmaps = {n.get("Index Name") for n in nodes(plan) if n["Node Type"] == "Bitmap Index Scan"}
    assert bitmaps <= {"tasks_pkey"}, bitmaps
    read: dict[str, int] = {}
    for n in nodes(plan):
        if n["Node Type"] in ("Index Scan", "Index Only Scan", "Bitmap Index Scan"):
            read[n["Index Name"]] = read.get(n["Index Name"], 0) + int(
                n.get("Actual Rows", 0) * n.get("Actual Loops", 1)
            )
    return read


def test_claim_promotion_and_redrive_stay_index_driven_at_two_sizes(sized: tuple[str, str]) -> None:
    url, tool = sized
    seen: list[tuple[int, dict[str, int], dict[str, int], dict[str, int]]] = []
    total = 0
    for size in SIZES:
        grow(url, tool, size - total)
        total = size
        claim = explain(
            url,
            task_pydb.CLAIM_TASKS_SQL,
            {"tool_id": tool, "limit": 50, "max_bytes": 0, "request_id": ""},
            generic=False,
            analyze=True,
        )
        for generic in (False, True):  # the plan, whichever the prepared statement settles on
            planned = explain(
                url,
                task_pydb.CLAIM_TASKS_SQL,
                {"tool_id": tool, "limit": 50, "max_bytes": 0, "request_id": ""},
                generic=generic,
            )
            names = {n.get("Index Name") for n in nodes(planned)}
            assert {"idx_gen_tasks_queue", "idx_gen_tasks_scheduled_tool"} <= names, names
        claim_reads = index_scans(claim)
        # 50 from the claim index; the 100 due scheduled rows compete in the same top-50.
        assert claim_reads["idx_gen_tasks_queue"] <= 50 and claim_reads["idx_gen_tasks_scheduled_tool"] <= 50
        assert claim.get("Actual Rows") == 50
        promote = explain(url, task_pydb.PROMOTE_DUE_TASKS_SQL, {"limit": 0}, generic=False, analyze=True)
        promote_reads = index_scans(promote)
        assert promote_reads["idx_gen_tasks_scheduled"] <= 100, promote_reads
        redrive = explain(
            url,
            task_pydb.RETRY_TASKS_SQL,
            {"tool_id": tool, "error_contains": "timeout", "ended_after": None, "ended_before": None, "limit": 100},
            generic=False,
            analyze=True,
        )
        redrive_reads = index_scans(redrive)
        # One tool only, so the planner may walk the terminal rows by completed_at (skipping the
        # completed ones) instead of idx_gen_tasks_redrive: either way an ordered range that stops
        # at the batch.
        ordered = {"idx_gen_tasks_redrive", "idx_gen_tasks_terminal"} & set(redrive_reads)
        assert len(ordered) == 1 and redrive_reads[ordered.pop()] <= 300, redrive_reads
        seen.append((size, claim_reads, promote_reads, redrive_reads))
        assert rows_read(claim) < 300 and rows_read(promote) < 500 and rows_read(redrive) < 700

    # Ten times the rows, the same rows read from each ordered index (primary-key lookups also
    # step over the dead versions earlier rolled-back EXPLAIN ANALYZE runs left).
    def ordered_reads(run: tuple[int, dict[str, int], dict[str, int], dict[str, int]]) -> list[dict[str, int]]:
        return [{k: v for k, v in reads.items() if not k.endswith("_pkey")} for reads in run[1:]]

    assert ordered_reads(seen[0]) == ordered_reads(seen[1]), seen
