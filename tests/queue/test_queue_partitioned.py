"""The generated queue on generation.tasks partitioned (tests/support/queue_layouts.py), against a real
PostgreSQL: what runs unchanged, and PostgreSQL's own error where it cannot.

- `by_tool` (HASH (tool_id)): every handler but the two enqueues runs as generated, including
  under real concurrent claimers; QueueTask/QueueTasks fail with 42P10 (their
  `ON CONFLICT (billing_idempotency_key)` needs a unique index on that column alone, which a
  partitioned table cannot have), and the plugin refuses task.proto against that schema with
  the same message at both RPCs.
- `by_status` (LIST (status)): completing a task moves its row to the terminal partition, and a
  claim whose snapshot still saw the row as queued fails with 40001 instead of skipping it (the
  runtime answers ABORTED); on the plain table the same interleaving skips to the next row.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from generation.task.v1 import task_pb2, task_pydb
from psycopg import AsyncConnection, errors
from support import queue_layouts
from support.pg import Cluster, schema_statements, scratch_database
from support.plugin_harness import compile_protos, run_plugin

pytestmark = pytest.mark.slow

PROTO_DIR = queue_layouts.SCHEMA.parent
ON_CONFLICT = "there is no unique or exclusion constraint matching the ON CONFLICT specification"
MOVED = "tuple to be locked was already moved to another partition due to concurrent update"


@contextlib.contextmanager
def layout_database(server: str, layout: str) -> Iterator[str]:
    with scratch_database(server, None) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            for statement in schema_statements(queue_layouts.schema_sql(layout)):
                conn.execute(statement)
        yield url


def seed(url: str, tool_names: list[str], per_tool: int) -> list[str]:
    """The tools (their ids) and `per_tool` queued tasks each, one second apart (FIFO order)."""
    with psycopg.connect(url, autocommit=True) as conn:
        ids = []
        for name in tool_names:
            row = conn.execute("INSERT INTO generation.tools (name) VALUES (%s) RETURNING id::text", (name,)).fetchone()
            assert row is not None
            ids.append(row[0])
            conn.execute(
                "INSERT INTO generation.tasks (tool_id, created_at, run_at) "
                "SELECT %s, now() - interval '1 day' + g * interval '1 second', now() - interval '1 day' + g * interval '1 second' "
                "FROM generate_series(1, %s) AS g",
                (row[0], per_tool),
            )
    return ids


def test_the_layouts_are_partitioned_as_documented(pg_server: tuple[str, Cluster | None]) -> None:
    expected = {"by_tool": ("h", 8, "tool_id"), "by_status": ("l", 2, "status")}
    for layout, (strategy, parts, column) in expected.items():
        with layout_database(pg_server[0], layout) as url, psycopg.connect(url) as conn:
            row = conn.execute(
                "SELECT p.partstrat, (SELECT count(*) FROM pg_inherits WHERE inhparent = p.partrelid), a.attname "
                "FROM pg_partitioned_table AS p JOIN pg_attribute AS a "
                "  ON a.attrelid = p.partrelid AND a.attnum = p.partattrs[0] "
                "WHERE p.partrelid = 'generation.tasks'::regclass"
            ).fetchone()
            assert row == (strategy, parts, column)
            # The claim index exists on every partition.
            n = conn.execute(
                "SELECT count(*) FROM pg_partition_tree('generation.idx_gen_tasks_queue') WHERE isleaf"
            ).fetchone()
            assert n == (parts,)


async def test_generated_handlers_run_on_the_tool_partitioned_queue(pg_server: tuple[str, Cluster | None]) -> None:
    with layout_database(pg_server[0], "by_tool") as url:
        tool, other = seed(url, ["a", "b"], 10)
        async with await AsyncConnection.connect(url, autocommit=True) as conn:
            registered = await task_pydb.register_tool(conn, task_pb2.RegisterToolRequest(name="a"))
            assert registered.tool.id == tool
            claimed = (await task_pydb.claim_next_task(conn, task_pb2.ClaimNextTaskRequest(tool_id=tool))).task
            assert claimed.status == task_pb2.TASK_STATUS_PROCESSING and claimed.tool_id == tool
            beat = await task_pydb.heartbeat_task(
                conn, task_pb2.HeartbeatTaskRequest(task_id=claimed.id, lease_token=claimed.lease_token)
            )
            assert beat.task.claim_expires_at.seconds >= claimed.claim_expires_at.seconds
            done = await task_pydb.complete_task(
                conn,
                task_pb2.CompleteTaskRequest(task_id=claimed.id, lease_token=claimed.lease_token, output='{"ok": 1}'),
            )
            assert done.task.status == task_pb2.TASK_STATUS_COMPLETED
            got = await task_pydb.get_task(conn, task_pb2.GetTaskRequest(task_id=claimed.id))
            assert got.task.status == task_pb2.TASK_STATUS_COMPLETED and got.task.output == '{"ok": 1}'
            batch = (await task_pydb.claim_tasks(conn, task_pb2.ClaimTasksRequest(tool_id=other, limit=4))).tasks
            assert len(batch) == 4 and {t.tool_id for t in batch} == {other}
            completed = await task_pydb.complete_tasks(
                conn,
                task_pb2.CompleteTasksRequest(
                    task_ids=[t.id for t in batch[:2]], lease_tokens=[t.lease_token for t in batch[:2]]
                ),
            )
            assert len(completed.tasks) == 2
            failed = await task_pydb.fail_tasks(
                conn,
                task_pb2.FailTasksRequest(
                    task_ids=[batch[2].id],
                    lease_tokens=[batch[2].lease_token],
                    errors=["try again"],
                    retry_after_seconds=[0],
                ),
            )
            assert [t.status for t in failed.tasks] == [task_pb2.TASK_STATUS_QUEUED]
            dead = await task_pydb.fail_task(
                conn,
                task_pb2.FailTaskRequest(task_id=batch[3].id, lease_token=batch[3].lease_token, error="no"),
            )
            assert dead.task.status == task_pb2.TASK_STATUS_FAILED
            await conn.execute(
                "UPDATE generation.tasks SET completed_at = now() - interval '30 days' WHERE completed_at IS NOT NULL"
            )
            pruned = await task_pydb.prune_tasks(conn, task_pb2.PruneTasksRequest(limit=10))
            assert pruned.deleted == 4  # 3 completed + 1 failed
            stale = await task_pydb.list_stale_tasks(conn, task_pb2.ListStaleTasksRequest(queued_max_age_seconds=60))
            # Every queued row is a day old, but for the one FailTasks just re-queued: due since now.
            assert len(stale.tasks) == 9 + 6


async def claim_until_empty(url: str, tools: list[str], completions: Counter[str]) -> int:
    """A worker: claim and complete through the generated handlers until every tool is empty.
    A claim PostgreSQL aborts (40001) is retried, as a worker retries ABORTED; returns how many."""
    aborted = 0
    async with await AsyncConnection.connect(url, autocommit=True) as conn:
        empty: set[str] = set()
        i = 0
        while len(empty) < len(tools):
            tool_id = tools[i % len(tools)]
            i += 1
            try:
                task = (await task_pydb.claim_next_task(conn, task_pb2.ClaimNextTaskRequest(tool_id=tool_id))).task
            except errors.SerializationFailure as e:
                assert e.diag.message_primary == MOVED
                aborted += 1
                continue
            if not task.id:
                empty.add(tool_id)
                continue
            empty.discard(tool_id)
            await task_pydb.complete_task(
                conn, task_pb2.CompleteTaskRequest(task_id=task.id, lease_token=task.lease_token)
            )
            completions[task.id] += 1
    return aborted


@pytest.mark.parametrize("layout", ["by_tool", "by_status"])
async def test_concurrent_claimers_complete_every_task_once(pg_server: tuple[str, Cluster | None], layout: str) -> None:
    """Six connections claiming and completing 3 tools' 150 tasks each at once: every task is
    completed exactly once. On by_status some claims may abort with 40001 (counted, retried)."""
    with layout_database(pg_server[0], layout) as url:
        tools = seed(url, ["a", "b", "c"], 150)
        completions: Counter[str] = Counter()
        aborted = await asyncio.gather(*(claim_until_empty(url, tools[k:] + tools[:k], completions) for k in range(6)))
        assert len(completions) == 450 and set(completions.values()) == {1}
        with psycopg.connect(url) as conn:
            rows = conn.execute("SELECT status::text, count(*) FROM generation.tasks GROUP BY 1").fetchall()
        assert rows == [("completed", 450)]
        if layout == "by_tool":  # no claim or completion moves a row between partitions there
            assert sum(aborted) == 0


def cursor_claim(conn: psycopg.Connection[Any], tool_id: str) -> None:
    """The claim's own row-locking query (the `picked` CTE of CLAIM_NEXT_TASK_SQL, after the CTEs
    it reads) as a cursor: its snapshot is taken now, its row is locked at FETCH, which is the
    window in which a concurrent claim+complete commits in a real race, made deterministic."""
    sql = task_pydb.CLAIM_NEXT_TASK_SQL
    head = sql.index("), picked AS MATERIALIZED (\n")
    start = head + len("), picked AS MATERIALIZED (\n")
    end = sql.index("FOR UPDATE SKIP LOCKED", start) + len("FOR UPDATE SKIP LOCKED")
    query = sql[:head] + ")\n" + sql[start:end]
    conn.execute("DECLARE claim CURSOR FOR " + query, {"tool_id": tool_id, "max_bytes": 0, "request_id": ""})


@pytest.mark.parametrize("layout", queue_layouts.LAYOUTS)
def test_a_claim_meeting_a_moved_row(pg_server: tuple[str, Cluster | None], layout: str) -> None:
    with layout_database(pg_server[0], layout) as url:
        (tool,) = seed(url, ["a"], 2)
        with psycopg.connect(url, autocommit=True) as other, psycopg.connect(url) as claimer:
            cursor_claim(claimer, tool)  # sees the first task queued
            params = {"tool_id": tool, "max_bytes": 0, "request_id": ""}
            first = other.execute(task_pydb.CLAIM_NEXT_TASK_SQL, params).fetchone()
            assert first is not None
            other.execute(
                task_pydb.COMPLETE_TASK_SQL,
                {"task_id": first[0], "lease_token": first[13], "output": None, "reported_usage": None},
            )
            if layout == "by_status":
                # Completed, the row now lives in tasks_terminal: PostgreSQL refuses to follow it.
                with pytest.raises(errors.SerializationFailure) as caught:
                    claimer.execute("FETCH claim")
                assert caught.value.sqlstate == "40001" and caught.value.diag.message_primary == MOVED
            else:
                # The row was updated in place: PostgreSQL rechecks it, finds it completed and
                # skips to the next queued task.
                got = claimer.execute("FETCH claim").fetchone()
                assert got is not None and got[0] != first[0]


@pytest.mark.parametrize("layout", ["by_tool", "by_status"])
async def test_enqueue_cannot_run_on_a_partitioned_queue(pg_server: tuple[str, Cluster | None], layout: str) -> None:
    with layout_database(pg_server[0], layout) as url:
        (tool,) = seed(url, ["a"], 0)
        async with await AsyncConnection.connect(url, autocommit=True) as conn:
            with pytest.raises(errors.InvalidColumnReference) as one:
                await task_pydb.queue_task(conn, task_pb2.QueueTaskRequest(tool_id=tool, billing_idempotency_key="k"))
            with pytest.raises(errors.InvalidColumnReference) as many:
                await task_pydb.queue_tasks(conn, task_pb2.QueueTasksRequest(tool_ids=[tool]))
        for caught in (one, many):
            assert caught.value.sqlstate == "42P10" and caught.value.diag.message_primary == ON_CONFLICT


@pytest.mark.parametrize("layout", ["by_tool", "by_status"])
def test_the_plugin_refuses_the_enqueues_against_a_partitioned_schema(tmp_path: Path, layout: str) -> None:
    """task.proto compiled against the partitioned schema: QueueTask and QueueTasks are refused
    with PostgreSQL's message, at their ON CONFLICT, and so is EnqueuePeriodicTask (its slot key
    widened by the partition key); ListTasks' pages too: the primary key is (id, <partition key>),
    so (created_at, id) no longer provably orders the rows totally. Nothing else is."""
    target = tmp_path / "generation" / "task" / "v1"
    target.mkdir(parents=True)
    shutil.copy(PROTO_DIR / "task.proto", target / "task.proto")
    (target / "schema.sql").write_text(queue_layouts.schema_sql(layout))
    name = "generation/task/v1/task.proto"
    outcome = run_plugin(compile_protos(tmp_path, [name]), [name], cwd=tmp_path)
    errors_shown = [line for line in outcome.error.splitlines() if ": error: " in line]
    assert len(errors_shown) == 4, outcome.error
    keys = ("(billing_idempotency_key)", "(billing_idempotency_key)", "(periodic_name, periodic_slot_at)")
    for rpc, key, line in zip(("QueueTask", "QueueTasks", "EnqueuePeriodicTask"), keys, errors_shown, strict=False):
        assert line.startswith(f"{name}:") and f"error: {rpc}: {ON_CONFLICT} {key}" in line
    assert "error: ListTasks: page: the ORDER BY keys must include the primary key (id, " in errors_shown[3]
