"""The wake signal without Redis: the schema's NOTIFY trigger, relayed by the generated
WatchTaskWakes stream ((pydb.v1.listen)), consumed by ListenWakeSubscriber."""

from __future__ import annotations

import asyncio
import statistics
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import psycopg
import pytest
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from google.protobuf.duration_pb2 import Duration
from support.plugin_harness import Outcome, compile_protos, run_plugin
from support.worker_support import Pickups, sql, wait_until
from taskworker import ListenWakeSubscriber, WorkerFleet

# Re-queued claimable at once (not after the tool's backoff): these tests re-claim right away.
AT_ONCE = Duration()

if TYPE_CHECKING:
    Stub = task_pb2_grpc.GenerationDataServiceAsyncStub


async def new_tool(stub: Stub, name: str) -> pb.Tool:
    return (await stub.RegisterTool(pb.RegisterToolRequest(name=f"{name}-{time.monotonic_ns()}"))).tool


async def open_stream(stub: Stub, *tool_ids: str) -> Any:
    call = stub.WatchTaskWakes(pb.WatchTaskWakesRequest(tool_ids=list(tool_ids)))
    metadata = await asyncio.wait_for(call.initial_metadata(), 10)
    assert ("pydb-listening", "task_wake") in list(metadata)  # LISTEN is in place from here on
    return call


async def next_wake(call: Any) -> str:
    wake = await asyncio.wait_for(call.read(), 10)
    assert isinstance(wake, pb.WatchTaskWakesResponse), "stream ended"
    return str(wake.tool_id)


async def test_stream_relays_committed_enqueues_filtered_by_tool(stub: Stub) -> None:
    a, b = await new_tool(stub, "listen-a"), await new_tool(stub, "listen-b")
    only_a = await open_stream(stub, a.id)
    every = await open_stream(stub)
    try:
        await stub.QueueTask(pb.QueueTaskRequest(tool_id=b.id))
        await stub.QueueTask(pb.QueueTaskRequest(tool_id=a.id))
        assert await next_wake(only_a) == a.id  # b's wake was filtered out
        seen: list[str] = []
        while a.id not in seen:  # an unfiltered stream gets every tool's wakes, in commit order
            seen.append(await next_wake(every))
        assert b.id in seen and seen.index(b.id) < seen.index(a.id)
    finally:
        only_a.cancel()
        every.cancel()


async def test_notify_is_sent_only_on_commit(stub: Stub, database_url: str) -> None:
    rolled_back, committed = await new_tool(stub, "listen-rb"), await new_tool(stub, "listen-commit")
    call = await open_stream(stub, rolled_back.id, committed.id)
    try:
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            await conn.execute("INSERT INTO generation.tasks (tool_id) VALUES (%s)", (rolled_back.id,))
            await conn.rollback()
            async with conn.transaction():
                await conn.execute("INSERT INTO generation.tasks (tool_id) VALUES (%s)", (committed.id,))
        # Streams are ordered: had the rolled-back insert notified, its wake would come first.
        assert await next_wake(call) == committed.id
    finally:
        call.cancel()


async def test_requeue_by_fail_task_wakes_again(stub: Stub) -> None:
    tool = await new_tool(stub, "listen-requeue")
    call = await open_stream(stub, tool.id)
    try:
        await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id))
        assert await next_wake(call) == tool.id
        task = (await stub.ClaimNextTask(pb.ClaimNextTaskRequest(tool_id=tool.id))).task
        await stub.HeartbeatTask(pb.HeartbeatTaskRequest(task_id=task.id, lease_token=task.lease_token))
        await stub.FailTask(
            pb.FailTaskRequest(
                task_id=task.id, lease_token=task.lease_token, error="x", increment_retry=True, retry_after=AT_ONCE
            )
        )
        assert await next_wake(call) == tool.id  # queued again: claimable, so a wake
    finally:
        call.cancel()


async def measure(stub: Stub, tool: pb.Tool, pickups: Pickups, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        task = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id))).task
        await wait_until(partial(pickups.at.__contains__, task.id), timeout=15, what="pickup")
        out.append(pickups.at[task.id] - t0)
    return out


@pytest.mark.serial
async def test_listen_wake_pickup_latency_and_reconnect(stub: Stub, database_url: str) -> None:
    tool = await new_tool(stub, "listen-latency")
    pickups = Pickups()
    fleet = WorkerFleet(stub, poll_interval=5.0)  # any pickup well under 5 s is the wake's doing
    fleet.add_tool(tool.id, pickups)
    sub = ListenWakeSubscriber(stub, fleet.wake, [tool.id], reconnect_max=0.2)
    fleet.add_background(sub.run())
    run = asyncio.create_task(fleet.run())
    try:
        await asyncio.wait_for(sub.subscribed.wait(), 10)
        latencies = await measure(stub, tool, pickups, 40)
        p50 = statistics.median(latencies)
        p99 = sorted(latencies)[round(0.99 * (len(latencies) - 1))]
        print(f"\nLISTEN/NOTIFY wake pickup (40 samples): p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms")
        assert p50 < 0.1, latencies
        assert max(latencies) < 4.5, latencies
        # The data plane loses its listening connection: the stream ends, the worker reconnects.
        killed = await sql(
            database_url,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND query LIKE 'LISTEN %%'",
        )
        assert killed and all(k[0] for k in killed)
        await wait_until(lambda: sub.subscriptions >= 2 and sub.subscribed.is_set(), what="resubscribed")
        assert statistics.median(await measure(stub, tool, pickups, 7)) < 0.3
    finally:
        fleet.drain()
        await asyncio.wait_for(run, 10)


LISTEN_PROTO = """
syntax = "proto3";
package demo.v1;
import "pydb/v1/options.proto";
message Req { repeated string ids = 1; string one = 2; }
message Resp { string id = 1; int32 n = 2; }
message GetReq { string id = 1; }
message GetResp { string id = 1; }
service Demo {
  rpc Get(GetReq) returns (GetResp) {
    option (pydb.v1.sql) = { query: "SELECT id::text AS id FROM demo.things WHERE id::text = @id"
                             cardinality: CARDINALITY_ONE };
  }
  %s
}
"""


def run_listen_plugin(tmp_path: Path, rpc: str) -> Outcome:
    """protoc (grpc_tools) parses the proto; the plugin runs in-process on the request."""
    (tmp_path / "demo.proto").write_text(LISTEN_PROTO % rpc)
    (tmp_path / "schema.sql").write_text("CREATE SCHEMA demo;\nCREATE TABLE demo.things (id uuid PRIMARY KEY);\n")
    descriptors = compile_protos(tmp_path, ["demo.proto"])
    return run_plugin(descriptors, ["demo.proto"], parameter=f"proto_path={tmp_path}")


def test_plugin_compiles_a_listen_rpc(tmp_path: Path) -> None:
    out = run_listen_plugin(
        tmp_path,
        "rpc Watch(Req) returns (stream Resp) { option (pydb.v1.listen) = "
        '{ channel: "things" payload_field: "id" filter_field: "ids" }; }',
    )
    assert out.error == ""
    code = out.files["demo_pydb.py"]
    assert 'rt.listen(self.db.pool, context, "Watch", "things")' in code
    assert "wanted = frozenset(request.ids)" in code and "demo_pb2.Resp(id=payload)" in code


def test_plugin_checks_listen_filter_values_by_payload_type(tmp_path: Path) -> None:
    out = run_listen_plugin(
        tmp_path,
        "rpc Watch(Req) returns (stream Resp) { option (pydb.v1.listen) = "
        '{ channel: "things" payload_field: "id" filter_field: "ids" payload_type: "uuid" }; }',
    )
    assert out.error == ""
    assert 'wanted = frozenset(rt.parse_uuids(request.ids, "ids"))' in out.files["demo_pydb.py"]


def test_plugin_rejects_misused_listen_options(tmp_path: Path) -> None:
    cases = {
        'rpc W(Req) returns (Resp) { option (pydb.v1.listen) = { channel: "c" payload_field: "id" }; }':
            "needs a server-streaming RPC",
        'rpc W(Req) returns (stream Resp) { option (pydb.v1.listen) = { channel: "Bad-Name" payload_field: "id" }; }':
            "channel must be a lower-case identifier",
        'rpc W(Req) returns (stream Resp) { option (pydb.v1.listen) = { channel: "c" payload_field: "n" }; }':
            "payload_field must name a singular string field",
        'rpc W(Req) returns (stream Resp) { option (pydb.v1.listen) = { channel: "c" payload_field: "id" '
        'filter_field: "one" }; }': "filter_field must name a repeated string field",
        'rpc W(Req) returns (stream Resp) { option (pydb.v1.listen) = { channel: "c" payload_field: "id" '
        'filter_field: "ids" payload_type: "jsonb" }; }': "payload_type must be one of 'text', 'uuid', 'int4', 'int8'",
    }  # fmt: skip
    for rpc, message in cases.items():
        out = run_listen_plugin(tmp_path, rpc)
        assert message in out.error, (rpc, out.error)
        assert out.files == {}


async def test_server_shutdown_ends_streams_promptly_and_workers_reconnect(stub: Stub, database_url: str) -> None:
    from conftest import server_config, start_server

    tool = await new_tool(stub, "listen-restart")
    server = await start_server(server_config(database_url, grace_seconds=10.0))
    channel = grpc.aio.insecure_channel(server.address)
    own: Stub = task_pb2_grpc.GenerationDataServiceStub(channel)
    pickups = Pickups()
    fleet = WorkerFleet(own, poll_interval=5.0)
    fleet.add_tool(tool.id, pickups)
    sub = ListenWakeSubscriber(own, fleet.wake, [tool.id], reconnect_max=0.2)
    fleet.add_background(sub.run())
    run = asyncio.create_task(fleet.run())
    restarted = None
    try:
        await asyncio.wait_for(sub.subscribed.wait(), 10)
        t0 = time.perf_counter()
        await server.close()
        # The open stream is ended at once, not after the 10 s grace period.
        assert time.perf_counter() - t0 < 5.0
        await wait_until(lambda: not sub.subscribed.is_set(), what="stream ended")
        restarted = await start_server(server_config(database_url, listen_addr=server.address))
        await wait_until(lambda: sub.subscribed.is_set() and sub.subscriptions >= 2, timeout=15, what="resubscribed")
        assert statistics.median(await measure(stub, tool, pickups, 5)) < 0.3
    finally:
        fleet.drain()
        await asyncio.wait_for(run, 10)
        await channel.close(None)
        if restarted is not None:
            await restarted.close()
