"""Read replicas, decided by the compiler: a read-only statement (a plain SELECT: no FOR UPDATE,
no data-modifying CTE, no volatile function) runs on the replica pool when the server has one
(DATABASE_REPLICA_URL), every other on the primary, and `(pydb.v1.sql).primary` keeps a reader on
the primary. The route is written in each generated servicer method; on a real primary and hot
standby, the readers answer from the standby and the writers never run there: both nodes log
every statement they are sent (`log_statement=all`), and after every queue RPC has gone through a
server with DATABASE_REPLICA_URL, the service role's statements on the standby are exactly the
read-only RPCs' SQL, and on the primary every other RPC's."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from conftest import SERVICE_ROLE, server_config, start_server
from generation.task.v1 import task_pb2, task_pb2_grpc, task_pydb
from google.protobuf import duration_pb2, timestamp_pb2
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from pydb.runtime import server as pydb_server
from support.pg import scratch_database
from support.pg_replication import ReplicatedPair, replicated_pair
from support.plugin_harness import compile_protos, run_plugin

PROTO = """\
syntax = "proto3";
package routes.v1;
import "pydb/v1/options.proto";

message Id { int64 id = 1; }
message Note { int64 id = 1; string body = 2; }

service Routes {
  rpc PlainRead(Id) returns (Note) {
    option (pydb.v1.sql) = { query: "SELECT id, body FROM notes WHERE id = @id" cardinality: CARDINALITY_ONE };
  }
  rpc ReadYourWrites(Id) returns (Note) {
    option (pydb.v1.sql) = {
      query: "SELECT id, body FROM notes WHERE id = @id" cardinality: CARDINALITY_ONE primary: true
    };
  }
  rpc LockingRead(Id) returns (Note) {
    option (pydb.v1.sql) = {
      query: "SELECT id, body FROM notes WHERE id = @id FOR UPDATE" cardinality: CARDINALITY_ONE
    };
  }
  rpc VolatileRead(Id) returns (Note) {
    option (pydb.v1.sql) = {
      query: "SELECT nextval('note_ids') AS id, body FROM notes WHERE id = @id" cardinality: CARDINALITY_ONE
    };
  }
  rpc Write(Note) returns (Note) {
    option (pydb.v1.sql) = {
      query: "INSERT INTO notes (id, body) VALUES (@id, @body) RETURNING id, body" cardinality: CARDINALITY_ONE
    };
  }
  rpc WriteInCte(Id) returns (Note) {
    option (pydb.v1.sql) = {
      query: "WITH gone AS (DELETE FROM notes WHERE id = @id RETURNING id, body) SELECT id, body FROM gone"
      cardinality: CARDINALITY_ONE
    };
  }
}
"""

SCHEMA = """\
CREATE SEQUENCE note_ids;
CREATE TABLE notes (id bigint PRIMARY KEY, body text NOT NULL);
"""


def routes(handlers_source: str) -> dict[str, bool]:
    """RPC name -> whether its servicer method asks for the replica, read off the generated code."""
    # A call on one row by its key names the row too (`row=row`: its turn on the row, admission.py).
    calls = re.findall(
        r'self\.db\.run\(\s*context, "(\w+)", \w+, request, replica=(True|False)(?:, row=row)?,?\s*\)', handlers_source
    )
    return {name: on == "True" for name, on in calls}


def test_the_compiler_routes_only_plain_reads_to_the_replica(tmp_path: Path) -> None:
    (tmp_path / "routes").mkdir()
    (tmp_path / "routes" / "routes.proto").write_text(PROTO)
    (tmp_path / "routes" / "schema.sql").write_text(SCHEMA)
    outcome = run_plugin(compile_protos(tmp_path, ["routes/routes.proto"]), ["routes/routes.proto"], cwd=tmp_path)
    assert outcome.error == ""
    assert routes(outcome.files["routes/routes_pydb.py"]) == {
        "PlainRead": True,
        "ReadYourWrites": False,  # (pydb.v1.sql).primary
        "LockingRead": False,
        "VolatileRead": False,
        "Write": False,
        "WriteInCte": False,
    }


def test_the_queue_reads_on_the_replica_and_writes_on_the_primary() -> None:
    generated = Path(__file__).resolve().parents[2] / "generated" / "generation" / "task" / "v1" / "task_pydb.py"
    route = routes(generated.read_text())
    assert {name for name, replica in route.items() if replica} == READERS
    assert not route["ClaimNextTask"] and not route["QueueTask"] and not route["CompleteTask"]


@pytest.fixture(scope="module")
def pair() -> Iterator[ReplicatedPair]:
    with replicated_pair(log_statements=True) as found:
        yield found


def _service_role(url: str) -> str:
    return make_conninfo(url, user=SERVICE_ROLE)


async def test_reads_answer_from_the_standby_and_writes_never_run_there(pair: ReplicatedPair) -> None:
    with scratch_database(pair.primary.url) as primary_url:
        pair.wait_replayed()
        replica_url = make_conninfo(primary_url, port=str(pair.standby.port))
        cfg = dataclasses.replace(server_config(primary_url), database_replica_url=_service_role(replica_url))
        running = await start_server(cfg)
        try:
            async with grpc.aio.insecure_channel(running.address) as channel:
                stub = task_pb2_grpc.GenerationDataServiceStub(channel)
                tool_name = f"routing-{uuid.uuid4().hex[:8]}"
                tool = (await stub.RegisterTool(task_pb2.RegisterToolRequest(name=tool_name))).tool
                # The standby stops applying WAL: from now on it shows the state before the write.
                with psycopg.connect(replica_url, autocommit=True) as standby:
                    standby.execute("SELECT pg_wal_replay_pause()")
                    try:
                        queued = await stub.QueueTask(task_pb2.QueueTaskRequest(tool_id=tool.id))  # a writer: OK
                        task_id = queued.task.id
                        with pytest.raises(grpc.aio.AioRpcError) as missing:
                            await stub.GetTask(task_pb2.GetTaskRequest(task_id=task_id))  # a reader: the standby
                        assert missing.value.code() == grpc.StatusCode.NOT_FOUND
                        # pg_stat_activity on each node: the server's sessions on the standby are the
                        # replica pool's; it holds some, and the primary's are the service role's too.
                        sessions = standby.execute(
                            "SELECT count(*) FROM pg_stat_activity WHERE usename = %s", (SERVICE_ROLE,)
                        ).fetchone()
                        assert sessions is not None and sessions[0] >= 1
                    finally:
                        standby.execute("SELECT pg_wal_replay_resume()")
                pair.wait_replayed()
                got = await stub.GetTask(task_pb2.GetTaskRequest(task_id=task_id))
                assert got.task.id == task_id
                claimed = await stub.ClaimNextTask(task_pb2.ClaimNextTaskRequest(tool_id=tool.id))
                assert claimed.task.id == task_id  # a writer with FOR UPDATE SKIP LOCKED: the primary
        finally:
            await running.close()


def test_the_replica_url_is_a_setting_and_defaults_to_none() -> None:
    assert pydb_server.parse_config([], "srv", env={}).database_replica_url == ""
    multi_host = "host=db2,db3 dbname=q target_session_attrs=prefer-standby"
    env = {"DATABASE_REPLICA_URL": multi_host}
    assert pydb_server.parse_config([], "srv", env=env).database_replica_url == multi_host


def _normalised(sql: str) -> str:
    """A statement as the server log shows it, whether written with psycopg's placeholders
    (the generated module) or as sent ($n), whitespace folded."""
    return " ".join(re.sub(r"%\(\w+\)s|\$\d+", "$?", sql).replace("%%", "%").split())


def _statements_by_rpc() -> dict[str, tuple[str, list[str]]]:
    """RPC -> (its statement, every statement it may run: its own and any `..._EXISTS_SQL` that
    tells NOT_FOUND from a lost lease), from the generated module's constants."""
    constants = {name: value for name, value in vars(task_pydb).items() if name.endswith("_SQL")}
    found: dict[str, tuple[str, list[str]]] = {}
    for rpc in task_pb2.DESCRIPTOR.services_by_name["GenerationDataService"].methods_by_name:
        prefix = re.sub(r"(?<!^)(?=[A-Z])", "_", rpc).upper()
        own = [value for name, value in constants.items() if name == f"{prefix}_SQL" or name.startswith(f"{prefix}_")]
        if f"{prefix}_SQL" in constants:
            found[rpc] = (_pattern(constants[f"{prefix}_SQL"]), [_pattern(sql) for sql in own])
    return found


def _pattern(sql: str | tuple[str, ...]) -> str:
    """A statement constant as _runs matches it: its text, or for a statement in parts (optional
    blocks, pages: joined per request) `...` after its first part."""
    return _normalised(sql) if isinstance(sql, str) else _normalised(sql[0]) + " ..."


def _runs(pattern: str, sql: str) -> bool:
    """Whether `sql` (as the server ran it, normalised) is the statement of `pattern`."""
    return sql.startswith(pattern[: -len(" ...")]) if pattern.endswith(" ...") else sql == pattern


# The replica pool's per-session setup (pydb.runtime.pooling.session_setup: pooler detection and
# the lock timeout), sent once per connection it opens: the only statement there that is not an RPC's.
SESSION_SETTING = _normalised("SELECT pg_backend_pid(), set_config('lock_timeout', $1, false)")


#: The queue's read-only RPCs: the compiler routes exactly these to the replica.
READERS = {
    "GetTask", "ListStaleTasks", "ListTaskEvents", "ListPeriodicTasks",
    "ListTools", "ListTasks", "GetQueueStats", "ListToolOutcomes",
}  # fmt: skip


async def _listening(call: grpc.aio.UnaryStreamCall[Any, Any]) -> None:
    """Until the stream's LISTEN has run (its initial metadata says so), then end it."""
    metadata = await asyncio.wait_for(call.initial_metadata(), 10)
    assert dict(metadata).get("pydb-listening"), metadata
    call.cancel()


async def test_every_statement_on_the_standby_is_a_read_only_rpcs_and_no_writer_runs_there(
    pair: ReplicatedPair,
) -> None:
    statements = _statements_by_rpc()
    route = routes((Path(task_pydb.__file__)).read_text())
    readers = {rpc for rpc, replica in route.items() if replica}
    writers = set(route) - readers
    assert readers == READERS
    assert set(route) == set(statements)  # every unary RPC runs a statement of the module
    with scratch_database(pair.primary.url) as primary_url:
        pair.wait_replayed()
        replica_url = make_conninfo(primary_url, port=str(pair.standby.port))
        # The lock timeout at its default (on): its per-session setting is sent to both pools.
        cfg = dataclasses.replace(
            server_config(primary_url), database_replica_url=_service_role(replica_url), lock_timeout=1.0
        )
        running = await start_server(cfg)
        try:
            async with grpc.aio.insecure_channel(running.address) as channel:
                stub = task_pb2_grpc.GenerationDataServiceStub(channel)
                called = await _every_rpc(stub, pair)
        finally:
            await running.close()
        dbname = conninfo_to_dict(primary_url)["dbname"]
        on_standby = {_normalised(sql) for sql in pair.standby.statements(SERVICE_ROLE, str(dbname))}
        on_primary = {_normalised(sql) for sql in pair.primary.statements(SERVICE_ROLE, str(dbname))}
    assert called == set(task_pb2.DESCRIPTOR.services_by_name["GenerationDataService"].methods_by_name)
    # The standby: the read-only RPCs' statements, each of them, and nothing else.
    assert all(any(_runs(statements[r][0], sql) for r in readers) for sql in on_standby - {SESSION_SETTING})
    assert all(any(_runs(statements[r][0], sql) for sql in on_standby) for r in readers)
    assert not any(_runs(p, sql) for sql in on_standby for r in writers for p in statements[r][1])
    # The primary: every writer's statement and both streams' LISTEN; no reader's statement.
    assert all(any(_runs(statements[r][0], sql) for sql in on_primary) for r in writers)
    assert {'LISTEN "task_wake"', 'LISTEN "task_events"'} <= on_primary
    assert not any(_runs(p, sql) for sql in on_primary for r in readers for p in statements[r][1])
    # The node that served the reads is a standby; the one that took the writes is not.
    assert pair.standby.in_recovery() and not pair.primary.in_recovery()


async def _every_rpc(stub: task_pb2_grpc.GenerationDataServiceAsyncStub, pair: ReplicatedPair) -> set[str]:
    """Every RPC of the queue once (the reads after the standby has replayed the writes, so they
    answer with rows); the names of those called."""
    called: set[str] = set()

    def did(*rpcs: str) -> None:
        called.update(rpcs)

    tool = (await stub.RegisterTool(task_pb2.RegisterToolRequest(name=f"all-{uuid.uuid4().hex[:8]}"))).tool
    await stub.SetToolLease(task_pb2.SetToolLeaseRequest(tool_id=tool.id, lease_seconds=60))
    one = (await stub.QueueTask(task_pb2.QueueTaskRequest(tool_id=tool.id))).task
    more = (await stub.QueueTasks(task_pb2.QueueTasksRequest(tool_ids=[tool.id] * 3))).tasks
    did("RegisterTool", "SetToolLease", "QueueTask", "QueueTasks")
    first = (await stub.ClaimNextTask(task_pb2.ClaimNextTaskRequest(tool_id=tool.id))).task
    await stub.HeartbeatTask(task_pb2.HeartbeatTaskRequest(task_id=first.id, lease_token=first.lease_token))
    await stub.CompleteTask(task_pb2.CompleteTaskRequest(task_id=first.id, lease_token=first.lease_token))
    did("ClaimNextTask", "HeartbeatTask", "CompleteTask")
    a, b, c = (await stub.ClaimTasks(task_pb2.ClaimTasksRequest(tool_id=tool.id, limit=3))).tasks
    await stub.CompleteTasks(task_pb2.CompleteTasksRequest(task_ids=[a.id], lease_tokens=[a.lease_token]))
    await stub.FailTask(task_pb2.FailTaskRequest(task_id=b.id, lease_token=b.lease_token, error="x"))
    await stub.FailTasks(task_pb2.FailTasksRequest(task_ids=[c.id], lease_tokens=[c.lease_token], errors=["y"]))
    did("ClaimTasks", "CompleteTasks", "FailTask", "FailTasks")
    await stub.AppendTaskEvents(
        task_pb2.AppendTaskEventsRequest(
            task_ids=[one.id], kinds=["progress"], data=["{}"], emitted_at_unix=[time.time()]
        )
    )
    await stub.PurgeTaskEvents(task_pb2.PurgeTaskEventsRequest())
    await stub.PruneTasks(task_pb2.PruneTasksRequest(older_than_seconds=3600, limit=10))
    did("AppendTaskEvents", "PurgeTaskEvents", "PruneTasks")
    await _listening(stub.WatchTaskWakes(task_pb2.WatchTaskWakesRequest(tool_ids=[tool.id])))
    await _listening(stub.WatchTaskEvents(task_pb2.WatchTaskEventsRequest(task_ids=[one.id])))
    did("WatchTaskWakes", "WatchTaskEvents")
    await stub.SetToolRetryPolicy(
        task_pb2.SetToolRetryPolicyRequest(tool_id=tool.id, retry_base_seconds=1, retry_cap_seconds=10)
    )
    await stub.SetToolMaxRuntime(task_pb2.SetToolMaxRuntimeRequest(tool_id=tool.id, max_runtime_seconds=600))
    await stub.PauseTool(task_pb2.PauseToolRequest(tool_id=tool.id))
    await stub.ResumeTool(task_pb2.ResumeToolRequest(tool_id=tool.id))
    did("SetToolRetryPolicy", "SetToolMaxRuntime", "PauseTool", "ResumeTool")
    # Set, then cleared (unset: unlimited), so the claims below are not limited.
    for limited in (True, False):
        await stub.SetToolConcurrency(
            task_pb2.SetToolConcurrencyRequest(tool_id=tool.id, max_running=100 if limited else None)
        )
        await stub.SetToolKeyConcurrency(
            task_pb2.SetToolKeyConcurrencyRequest(tool_id=tool.id, key_max_running=10 if limited else None)
        )
        await stub.SetToolRateLimit(
            task_pb2.SetToolRateLimitRequest(tool_id=tool.id, rate_limit=1000 if limited else None)
        )
    did("SetToolConcurrency", "SetToolKeyConcurrency", "SetToolRateLimit")
    for _ in range(2):
        await stub.QueueTask(task_pb2.QueueTaskRequest(tool_id=tool.id))
    d, e = (await stub.ClaimTasks(task_pb2.ClaimTasksRequest(tool_id=tool.id, limit=2))).tasks
    delay = duration_pb2.Duration(seconds=60)
    await stub.SnoozeTask(task_pb2.SnoozeTaskRequest(task_id=d.id, lease_token=d.lease_token, delay=delay))
    await stub.CancelTask(task_pb2.CancelTaskRequest(task_id=e.id, reason="routing"))
    await stub.CancelTasks(task_pb2.CancelTasksRequest(task_ids=[d.id], reason="routing"))
    await stub.RetryTask(task_pb2.RetryTaskRequest(task_id=e.id))
    await stub.RetryTasks(task_pb2.RetryTasksRequest(tool_id=tool.id, limit=10))
    await stub.PromoteDueTasks(task_pb2.PromoteDueTasksRequest(limit=10))
    await stub.ReapOverdueTasks(task_pb2.ReapOverdueTasksRequest(limit=10))
    did("SnoozeTask", "CancelTask", "CancelTasks", "RetryTask", "RetryTasks", "PromoteDueTasks", "ReapOverdueTasks")
    name = f"routing-{uuid.uuid4().hex[:8]}"
    await stub.UpsertPeriodicTask(
        task_pb2.UpsertPeriodicTaskRequest(name=name, tool_id=tool.id, cron="* * * * *", timezone="UTC")
    )
    slot = timestamp_pb2.Timestamp(seconds=int(time.time()) // 60 * 60)
    await stub.EnqueuePeriodicTask(task_pb2.EnqueuePeriodicTaskRequest(name=name, slot_at=slot))
    await _listening(stub.WatchTaskCancels(task_pb2.WatchTaskCancelsRequest(task_ids=[d.id])))
    did("UpsertPeriodicTask", "EnqueuePeriodicTask", "WatchTaskCancels")
    pair.wait_replayed()
    assert [p.name for p in (await stub.ListPeriodicTasks(task_pb2.ListPeriodicTasksRequest(limit=100))).periodic_tasks]
    assert tool.id in {t.id for t in (await stub.ListTools(task_pb2.ListToolsRequest())).tools}
    listed = await stub.ListTasks(task_pb2.ListTasksRequest(tool_id=tool.id, page_size=100))
    assert listed.tasks
    await stub.GetQueueStats(task_pb2.GetQueueStatsRequest())
    await stub.ListToolOutcomes(task_pb2.ListToolOutcomesRequest(window_seconds=3600))
    did("ListPeriodicTasks", "ListTools", "ListTasks", "GetQueueStats", "ListToolOutcomes")
    await stub.DeletePeriodicTask(task_pb2.DeletePeriodicTaskRequest(name=name))
    did("DeletePeriodicTask")
    # The reads find what the writes made: they ran on a node that has it (the standby, replayed).
    assert (await stub.GetTask(task_pb2.GetTaskRequest(task_id=first.id))).task.status == task_pb2.TASK_STATUS_COMPLETED
    events = (await stub.ListTaskEvents(task_pb2.ListTaskEventsRequest(task_id=one.id, limit=10))).events
    assert [e.kind for e in events] == ["progress"]
    stale = await stub.ListStaleTasks(task_pb2.ListStaleTasksRequest(queued_max_age_seconds=3600, limit=10))
    assert not [t for t in stale.tasks if t.tool_id == tool.id]  # fresh tasks: none stale
    did("GetTask", "ListTaskEvents", "ListStaleTasks")
    assert {t.id for t in more} | {one.id} >= {first.id, a.id, b.id, c.id}
    return called
