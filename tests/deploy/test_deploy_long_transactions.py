"""A long transaction elsewhere holds back the xmin horizon: the row versions the queue's claims
and completions leave behind cannot be vacuumed while another session of the same database
sits idle in a REPEATABLE READ transaction with its snapshot taken. The mitigation
docs/deploy.md gives (`idle_in_transaction_session_timeout` on the other role) makes PostgreSQL
end that session, and VACUUM then removes them. benchmarks/bench_longtx.py measures what the
held horizon costs over minutes (RESULTS.md §10); this test pins the mechanism, with VACUUM run
by hand so nothing waits on autovacuum's schedule."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import grpc
import psycopg
import pytest
from conftest import private_service
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from psycopg.conninfo import make_conninfo
from support.pg import Cluster
from support.queue_support import Stub

REPORTER = "pydb_test_reporter"
TASKS = 200


@pytest.fixture
def reporter_role(pg_server: tuple[str, Cluster | None]) -> Iterator[str]:
    """A role of another application (a nightly report), with no settings of its own."""
    with psycopg.connect(pg_server[0], autocommit=True) as admin:
        if admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (REPORTER,)).fetchone() is None:
            admin.execute(f"CREATE ROLE {REPORTER} LOGIN")
        admin.execute(f"ALTER ROLE {REPORTER} RESET idle_in_transaction_session_timeout")
    yield REPORTER
    with psycopg.connect(pg_server[0], autocommit=True) as admin:
        admin.execute(f"ALTER ROLE {REPORTER} RESET idle_in_transaction_session_timeout")


def _hold(url: str) -> psycopg.Connection:
    """The reporter's session, idle in a REPEATABLE READ transaction with its snapshot taken."""
    conn = psycopg.connect(make_conninfo(url, user=REPORTER, application_name="nightly-report"))
    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    conn.execute("SELECT count(*) FROM generation.tools").fetchone()
    return conn


async def _churn(stub: Stub, tool_id: str) -> None:
    """TASKS tasks enqueued, claimed and completed: two dead row versions each."""
    await stub.QueueTasks(pb.QueueTasksRequest(tool_ids=[tool_id] * TASKS))
    done = 0
    while done < TASKS:
        claimed = (await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool_id, limit=100))).tasks
        assert claimed
        await stub.CompleteTasks(
            pb.CompleteTasksRequest(task_ids=[t.id for t in claimed], lease_tokens=[t.lease_token for t in claimed])
        )
        done += len(claimed)


def _wait_gone(url: str, pid: int, why: str) -> None:
    """Until backend `pid` has exited: a closed client's backend, or one PostgreSQL ends, leaves a
    moment later, and until then its transaction still holds the horizon."""
    deadline = time.monotonic() + 30
    with psycopg.connect(url, autocommit=True) as admin:
        while admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone() is not None:
            assert time.monotonic() < deadline, why
            time.sleep(0.05)  # polling for the backend to exit, bounded


def _dead_after_vacuum(url: str) -> int:
    """Dead tuples VACUUM could not remove (it sets n_dead_tup to what it left)."""
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("VACUUM generation.tasks")
        row = admin.execute(
            "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'generation.tasks'::regclass"
        ).fetchone()
    assert row is not None
    return int(row[0])


async def test_a_held_snapshot_keeps_dead_rows_and_the_session_timeout_frees_them(
    pg_server: tuple[str, Cluster | None], reporter_role: str
) -> None:
    async with private_service(pg_server[0]) as (url, running):
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"GRANT USAGE ON SCHEMA generation TO {reporter_role}")
            admin.execute(f"GRANT SELECT ON generation.tools TO {reporter_role}")
        async with grpc.aio.insecure_channel(running.address) as channel:
            stub = task_pb2_grpc.GenerationDataServiceStub(channel)
            tool = (await stub.RegisterTool(pb.RegisterToolRequest(name=f"longtx-{uuid.uuid4().hex[:8]}"))).tool

            # Held: nothing the churn leaves behind can go.
            holder = _hold(url)
            await _churn(stub, tool.id)
            held = _dead_after_vacuum(url)
            assert held >= TASKS, held
            pid = holder.info.backend_pid
            holder.close()  # the transaction ends: the horizon moves on
            _wait_gone(url, pid, "the closed session's backend never exited")
            assert _dead_after_vacuum(url) == 0

            # Mitigated: the reporter's role ends its own idle transactions after 1 s.
            with psycopg.connect(url, autocommit=True) as admin:
                admin.execute(f"ALTER ROLE {reporter_role} SET idle_in_transaction_session_timeout = '1s'")
            holder = _hold(url)
            pid = holder.info.backend_pid
            await _churn(stub, tool.id)
            _wait_gone(url, pid, "the idle transaction was never ended")
            assert _dead_after_vacuum(url) == 0
            with pytest.raises(psycopg.errors.IdleInTransactionSessionTimeout):  # the reporter learns it next
                holder.execute("SELECT 1")
            holder.close()
