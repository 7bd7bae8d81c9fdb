"""Read replicas, decided by the compiler: a read-only statement (a plain SELECT: no FOR UPDATE,
no data-modifying CTE, no volatile function) runs on the replica pool when the server has one
(DATABASE_REPLICA_URL), every other on the primary, and `(pydb.v1.sql).primary` keeps a reader on
the primary. The route is written in each generated servicer method; on a real primary and hot
standby, the readers answer from the standby and the writers never run there."""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import psycopg
import pytest
from conftest import SERVICE_ROLE, server_config, start_server
from generation.task.v1 import task_pb2, task_pb2_grpc
from pg import scratch_database
from pg_replication import ReplicatedPair, replicated_pair
from plugin_harness import compile_protos, run_plugin
from psycopg.conninfo import make_conninfo
from pydb.runtime import server as pydb_server

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
    calls = re.findall(r'self\.db\.run\(context, "(\w+)", \w+, request, replica=(True|False)\)', handlers_source)
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
    generated = Path(__file__).resolve().parent.parent / "generated" / "generation" / "task" / "v1" / "task_pydb.py"
    route = routes(generated.read_text())
    assert {name for name, replica in route.items() if replica} == {"GetTask", "ListStaleTasks", "ListTaskEvents"}
    assert not route["ClaimNextTask"] and not route["QueueTask"] and not route["CompleteTask"]


@pytest.fixture(scope="module")
def pair() -> Iterator[ReplicatedPair]:
    with replicated_pair() as found:
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
