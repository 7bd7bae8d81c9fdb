"""The generated server behind a real PgBouncer (tests/support/pgbouncer.py; Debian's 1.18, which does not
track prepared statements) in transaction mode, as most PostgreSQL at scale is deployed.

- Without its pooler detection the queue stops: psycopg prepares each statement server-side, and
  the next client connection that lands on the same server session prepares the same name there
  (42P05, answered INTERNAL). `test_forced_prepared_statements_break_behind_transaction_pooling`
  shows it with DATABASE_PREPARE=on (what main did); with the default (auto) the server sees the
  pooler and stops preparing.
- The queue's semantics tests run through it unchanged: this module imports them (exactly-once
  claims, fencing, leases, retries, bulk enqueue and its idempotency, the WorkerFleet, the wake
  streams) and overrides the `service` fixture they share with a server whose DATABASE_URL is the
  transaction-mode PgBouncer and whose DATABASE_LISTEN_URL (LISTEN needs a session) is a second
  PgBouncer in session mode.
- A PgBouncer restart under load: calls in flight fail UNAVAILABLE (retryable), nothing answered
  OK is lost, calls and health come back.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

import grpc
import psycopg
import pytest
from conftest import ROOT, RunningServer, server_config, start_server
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from grpc_health.v1 import health_pb2
from pydb.runtime.pooling import session_setup
from support.pg import Cluster
from support.pgbouncer import PgBouncer, pgbouncer, pgbouncer_binary
from support.queue_support import Stub
from support.server_proc import CallLedger

# The queue's semantics tests, imported from their subject folders and collected here against
# this module's fixtures (`service` behind PgBouncer).
for _subject in ("queue", "worker", "replication"):
    sys.path.insert(0, str(ROOT / "tests" / _subject))

from test_queue_bulk import (  # noqa: E402, F401
    test_defaults_and_values_match_queue_task,
    test_idempotency_holds_under_concurrent_retries,
    test_idempotent_within_and_across_batches,
    test_one_wake_per_tool_per_batch,
)
from test_queue_dispatch import test_no_double_dispatch_mixed_priority_several_tools  # noqa: E402, F401
from test_queue_fencing import (  # noqa: E402, F401
    test_lease_dies_when_the_task_is_requeued,
    test_old_holder_is_fenced_after_reclaim,
    test_old_holders_racing_reclaimers_never_both_win,
)
from test_queue_idempotency import (  # noqa: E402, F401
    test_concurrent_enqueues_with_one_key_make_one_row,
    test_retried_enqueue_returns_the_task_as_it_is_now,
)
from test_queue_leases import (  # noqa: E402, F401
    test_batch_claim_reclaims_zombies_with_a_retry_and_fresh_rows_without,
    test_heartbeat_extends_the_lease_and_keeps_the_task,
    test_lapsed_lease_is_reclaimed_with_one_more_retry,
)
from test_queue_retries import test_failures_and_lapsed_leases_share_one_retry_budget  # noqa: E402, F401
from test_replication_failover import wait_health  # noqa: E402
from test_worker_fleet import (  # noqa: E402, F401
    fleets,
    test_completes_with_output_and_usage,
    test_concurrency_lanes_and_fast_drain,
    test_failure_is_retried_then_failed,
    test_lease_lost_cancels_work_and_never_completes,
)
from test_worker_listen import (  # noqa: E402, F401
    test_listen_wake_pickup_latency_and_reconnect,
    test_requeue_by_fail_task_wakes_again,
    test_stream_relays_committed_enqueues_filtered_by_tool,
)

# .ci/run installs Debian's pgbouncer; without it (not root, no apt) these cannot run.
pytestmark = pytest.mark.skipif(pgbouncer_binary() is None, reason="pgbouncer not installed (.ci/run installs it)")


@pytest.fixture(scope="module")
def transaction_pool(pg_server: tuple[str, Cluster | None]) -> Iterator[PgBouncer]:
    with pgbouncer(pg_server[0], "transaction") as bouncer:
        yield bouncer


@pytest.fixture(scope="module")
def session_pool(pg_server: tuple[str, Cluster | None]) -> Iterator[PgBouncer]:
    with pgbouncer(pg_server[0], "session") as bouncer:
        yield bouncer


def behind(transaction_pool: PgBouncer, session_pool: PgBouncer, database_url: str, **overrides: Any) -> Any:
    """The server's configuration behind the two PgBouncers: its pool through the transaction-mode
    one, its LISTEN connections through the session-mode one."""
    return server_config(
        transaction_pool.url(database_url), database_listen_url=session_pool.url(database_url), **overrides
    )


@pytest.fixture(scope="module")
async def service(
    transaction_pool: PgBouncer, session_pool: PgBouncer, database_url: str
) -> AsyncIterator[RunningServer]:
    running = await start_server(behind(transaction_pool, session_pool, database_url))
    yield running
    await running.close()


@pytest.fixture(scope="module")
async def second_service(
    transaction_pool: PgBouncer, session_pool: PgBouncer, database_url: str
) -> AsyncIterator[RunningServer]:
    """test_queue_dispatch's second server, behind the same PgBouncer."""
    running = await start_server(behind(transaction_pool, session_pool, database_url))
    yield running
    await running.close()


@pytest.fixture(scope="module")
async def channel(service: RunningServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(service.address) as ch:
        yield ch


async def _bulk_round(stub: Stub, tool_id: str, rounds: int) -> None:
    """Bulk enqueues and claims, one after another: each lands on the next pooled connection."""
    for _ in range(rounds):
        await stub.QueueTasks(pb.QueueTasksRequest(tool_ids=[tool_id] * 5))
        await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool_id, limit=5))


async def test_forced_prepared_statements_break_behind_transaction_pooling(
    transaction_pool: PgBouncer, database_url: str
) -> None:
    """The failure the default avoids (main's behaviour: every statement prepared): a few bulk
    enqueues, then INTERNAL, SQLSTATE 42P05 in the server's log."""
    cfg = server_config(transaction_pool.url(database_url), database_prepare="on", pool_min=2)
    running = await start_server(cfg)
    try:
        async with grpc.aio.insecure_channel(running.address) as ch:
            stub = task_pb2_grpc.GenerationDataServiceStub(ch)
            tool = (await stub.RegisterTool(pb.RegisterToolRequest(name=f"pgb-on-{uuid.uuid4().hex[:8]}"))).tool
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await _bulk_round(stub, tool.id, 20)
            assert failed.value.code() == grpc.StatusCode.INTERNAL
    finally:
        await running.close()


async def test_default_detects_the_pooler_and_the_queue_keeps_going(
    transaction_pool: PgBouncer, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The same calls with DATABASE_PREPARE unset (auto): the server sees the pooler, says so, and
    every call succeeds, from several clients at once."""
    caplog.set_level(logging.INFO, logger="pydb.server")
    running = await start_server(server_config(transaction_pool.url(database_url), pool_min=2))
    try:
        async with grpc.aio.insecure_channel(running.address) as ch:
            stub = task_pb2_grpc.GenerationDataServiceStub(ch)
            tool = (await stub.RegisterTool(pb.RegisterToolRequest(name=f"pgb-auto-{uuid.uuid4().hex[:8]}"))).tool
            await asyncio.gather(*(_bulk_round(stub, tool.id, 20) for _ in range(4)))
            got = await stub.GetTask(
                pb.GetTaskRequest(task_id=(await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id))).task.id)
            )
            assert got.task.tool_id == tool.id
    finally:
        await running.close()
    detected = [r.getMessage() for r in caplog.records if "event=pooler_detected" in r.getMessage()]
    assert any("prepared_statements=off" in m for m in detected), detected
    # No DATABASE_LISTEN_URL: the server warns that listen streams would go through the pooler.
    assert any("listen=through_pooler" in m for m in detected), detected


@pytest.mark.parametrize("mode", ["direct", "transaction", "session"])
async def test_detection_per_connection(
    mode: str, transaction_pool: PgBouncer, session_pool: PgBouncer, database_url: str
) -> None:
    """auto prepares on a direct connection and not through either PgBouncer mode; off never does."""
    url = {"direct": database_url, "transaction": transaction_pool.url(database_url)}.get(
        mode, session_pool.url(database_url)
    )
    for prepare, expected in (("auto", 5 if mode == "direct" else None), ("off", None), ("on", 5)):
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            configure = session_setup(0.0, prepare, listen_url=True)
            if configure is not None:
                await configure(conn)
            assert conn.prepare_threshold == expected, (mode, prepare)


async def test_a_pgbouncer_restart_under_load_loses_nothing_and_calls_come_back(
    pg_server: tuple[str, Cluster | None], database_url: str, session_pool: PgBouncer
) -> None:
    """A PgBouncer of its own, killed (SIGTERM: immediate shutdown) and started again while
    enqueuers run: every call either answers OK or UNAVAILABLE (retried by the client), every task
    answered OK is in the table once, health comes back SERVING, and enqueues succeed again within
    seconds of the restart."""
    with pgbouncer(pg_server[0], "transaction") as bouncer:
        cfg = dataclasses.replace(
            behind(bouncer, session_pool, database_url), pool_min=4, pool_max=8, pool_timeout=1.0, health_interval=0.1
        )
        running = await start_server(cfg)
        ledger = CallLedger()
        stop = asyncio.Event()
        try:
            async with grpc.aio.insecure_channel(running.address, interceptors=[cast(Any, ledger)]) as ch:
                stub = task_pb2_grpc.GenerationDataServiceStub(ch)
                tool = (await stub.RegisterTool(pb.RegisterToolRequest(name=f"pgb-rs-{uuid.uuid4().hex[:8]}"))).tool

                async def enqueue() -> None:
                    while not stop.is_set():
                        keys = [uuid.uuid4().hex for _ in range(4)]
                        req = pb.QueueTasksRequest(tool_ids=[tool.id] * 4, billing_idempotency_keys=keys)
                        while True:
                            try:
                                await stub.QueueTasks(req, timeout=5)
                                break
                            except grpc.aio.AioRpcError as err:
                                assert err.code() == grpc.StatusCode.UNAVAILABLE, err
                                await asyncio.sleep(0.05)  # a client's retry backoff

                load = [asyncio.create_task(enqueue()) for _ in range(6)]
                while len(ledger.enqueued) < 400:
                    await asyncio.sleep(0.01)  # watching the run's progress
                before = len(ledger.enqueued)
                restarted_at = time.monotonic()
                await asyncio.to_thread(bouncer.restart)
                back_at = time.monotonic()
                serving_after = await wait_health(running.address, health_pb2.HealthCheckResponse.SERVING)
                while len(ledger.enqueued) < before + 400:
                    await asyncio.sleep(0.01)
                stop.set()
                await asyncio.wait_for(asyncio.gather(*load), 30)
            first_ok = ledger.first_ok(("QueueTasks",), back_at) - back_at
            print(
                f"\nPgBouncer restart ({back_at - restarted_at:.2f} s down): first enqueue OK {first_ok:.3f} s after it "
                f"listened again, health SERVING after {serving_after:.3f} s, failed calls {dict(ledger.failed)}"
            )
            assert first_ok < 5.0
            assert set(code for _, code in ledger.failed) <= {"UNAVAILABLE"}
            with psycopg.connect(database_url) as conn:
                rows = conn.execute("SELECT id::text FROM generation.tasks WHERE tool_id = %s", (tool.id,)).fetchall()
            assert sorted(r[0] for r in rows) == sorted(ledger.enqueued)  # none lost, none twice
        finally:
            stop.set()
            with contextlib.suppress(Exception):
                await running.close()
