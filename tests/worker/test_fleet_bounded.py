"""Report batches bounded by bytes (issue 27, rows 1 and 2), against the generated server run as
a process with its default 4 MiB limits, on a real PostgreSQL: results that no count-bounded
batch could carry all land; a result that can never be stored and read back is failed once, for
good, with an error saying so, and never sent again. Calls are counted by the server's own
metrics (pydb_rpc_calls_total), not timed."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from conftest import as_service_role
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from prometheus_client import generate_latest
from support.observe_support import free_port, scrape
from support.pg import Cluster, scratch_database
from support.server_proc import serving, wait_serving
from support.worker_support import sql, wait_until
from taskworker import TaskContext, WorkerFleet, retry
from taskworker.metrics import new_registry
from taskworker.retry import Backoff

if TYPE_CHECKING:
    Stub = task_pb2_grpc.GenerationDataServiceAsyncStub

ROOT = Path(__file__).resolve().parents[2]
MB = 1_000_000


@pytest.fixture(scope="module")
async def server(pg_server: tuple[str, Cluster | None]) -> AsyncIterator[tuple[Stub, int, str]]:
    """The queue's server process (defaults: gRPC's 4 MiB limits) on a database of its own."""
    with scratch_database(pg_server[0]) as url:
        metrics = free_port()
        argv = [sys.executable, "-m", "generation.task.v1.task_pydb_server", "--database-url", as_service_role(url),
                "--metrics-addr", f"127.0.0.1:{metrics}", "--health-interval", "0.2"]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(ROOT / "generated")}
        options = [("grpc.max_receive_message_length", 64 * MB), ("grpc.max_send_message_length", 64 * MB)]
        async with serving(argv, env) as (address, _lines), grpc.aio.insecure_channel(address, options=options) as ch:
            await wait_serving(ch)
            yield task_pb2_grpc.GenerationDataServiceStub(ch), metrics, url


async def calls(port: int, *methods: str) -> dict[str, float]:
    samples = await scrape(port)
    return {m: sum(v for (name, labels), v in samples.items() if name == "pydb_rpc_calls_total" and ("method", m) in labels)
            for m in methods}  # fmt: skip


async def run_fleet(stub: Stub, tool_id: str, outputs: dict[str, Any], done: int, **opts: Any) -> WorkerFleet:
    """A fleet returning outputs[input's key] for each task, until `done` outcomes landed."""

    async def process(task: pb.Task, ctx: TaskContext) -> Any:
        return outputs[json.loads(task.input)["k"]]

    fleet = WorkerFleet(stub, poll_interval=0.2, drain_timeout=5, **opts)
    fleet.add_tool(tool_id, process, concurrency=1000)
    run = asyncio.create_task(fleet.run())
    try:
        await wait_until(
            lambda: fleet.stats.completed + fleet.stats.failed >= done, timeout=60, what=f"{done} outcomes"
        )
    finally:
        fleet.drain()
        await asyncio.wait_for(run, 30)
    return fleet


async def queue(stub: Stub, keys: list[str], inputs_pad: int = 0) -> tuple[str, list[str]]:
    tool = (await stub.RegisterTool(pb.RegisterToolRequest(name=f"bounded-{os.urandom(4).hex()}"))).tool
    if inputs_pad:  # the big one alone: two such inputs are over the receive limit together
        inputs = [json.dumps({"k": keys[0], "pad": "i" * inputs_pad})]
        task = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id, input=inputs[0]))).task
        return tool.id, [task.id, *(await queue_into(stub, tool.id, keys[1:]))]
    return tool.id, await queue_into(stub, tool.id, keys)


async def queue_into(stub: Stub, tool_id: str, keys: list[str]) -> list[str]:
    inputs = [json.dumps({"k": k}) for k in keys]
    tasks = (await stub.QueueTasks(pb.QueueTasksRequest(tool_ids=[tool_id] * len(keys), inputs=inputs))).tasks
    return [t.id for t in tasks]


async def test_results_over_the_receive_limit_together_all_land(server: tuple[Stub, int, str]) -> None:
    """2 x 2.2 MB and 600 x 10 KB: each count-bounded batch of them is over 4 MiB."""
    stub, port, url = server
    before = await calls(port, "CompleteTasks")
    tool_id, _ids = await queue(stub, ["big"] * 2 + ["small"] * 600)
    outputs = {"big": "b" * (2_200_000), "small": "s" * 10_000}
    # A window long enough that every finished task waits for one batch: without a byte bound,
    # the two big ones travel together, and 500 small ones too.
    fleet = await run_fleet(stub, tool_id, outputs, 602, report_window=0.2)
    assert fleet.stats.completed == 602 and fleet.stats.failed == 0
    rows = await sql(
        url, "SELECT status::text, octet_length(output::text) FROM generation.tasks WHERE tool_id = %s", tool_id
    )
    assert collections.Counter(rows) == {("completed", 2_200_002): 2, ("completed", 10_002): 600}
    assert fleet.reports.stats.retried_batches == 0 and fleet.reports.stats.byte_bounded >= 2
    after = await calls(port, "CompleteTasks")
    assert after["CompleteTasks"] - before["CompleteTasks"] == fleet.reports.stats.batches


@pytest.mark.parametrize(
    ("input_pad", "output_bytes", "limit"),
    [(0, 5 * MB, "receive limit"), (2_200_000, 2_200_000, "send limit")],
    ids=["output-over-the-receive-limit", "row-over-the-send-limit"],
)
async def test_a_result_that_can_never_fit_is_failed_once(
    server: tuple[Stub, int, str], input_pad: int, output_bytes: int, limit: str
) -> None:
    """An output over 4 MiB can never be sent; 2.2 MB of input plus 2.2 MB of output can be
    stored, but the completed row could never be sent back (CompleteTasks' answer, GetTask)."""
    stub, port, url = server
    methods = ("CompleteTasks", "CompleteTask", "GetTask", "FailTask", "FailTasks")
    before = await calls(port, *methods)
    tool_id, (task_id, small_id) = await queue(stub, ["big", "small"], inputs_pad=input_pad)
    fleet = await run_fleet(stub, tool_id, {"big": "x" * output_bytes, "small": "fine"}, 2, report_window=0.05)
    assert fleet.stats.completed == 1 and fleet.stats.failed == 1 and fleet.stats.refused_too_large == 1
    [(status, error, retries, output)] = await sql(
        url, "SELECT status::text, error, retry_count, output FROM generation.tasks WHERE id = %s", task_id
    )
    assert (status, retries, output) == ("failed", 0, None)
    assert error.startswith("output refused:") and limit in error, error
    assert (await sql(url, "SELECT status::text FROM generation.tasks WHERE id = %s", small_id)) == [("completed",)]
    after = await calls(port, *methods)
    delta = {m: after[m] - before[m] for m in methods}
    # Settled once: one FailTask; the small task's one CompleteTasks; nothing sent again.
    assert delta == {"CompleteTasks": 1, "CompleteTask": 0, "GetTask": 0, "FailTask": 1, "FailTasks": 0}, delta


async def test_a_size_refusal_is_permanent_and_counted(stub: Stub, tool: pb.Tool) -> None:
    """What the server answers a request over its receive limit, told apart from the transient
    RESOURCE_EXHAUSTED of a busy database, and counted where the worker's metrics read it."""
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id, input=json.dumps("x" * 5 * MB)))
    err = refused.value
    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and retry.too_large(err) and not retry.transient(err)
    before = retry.COUNTS[("test enqueue", "RESOURCE_EXHAUSTED", "permanent")]
    assert retry.record("test enqueue", err) == "permanent"
    assert retry.COUNTS[("test enqueue", "RESOURCE_EXHAUSTED", "permanent")] == before + 1
    text = generate_latest(new_registry()).decode()
    assert f'taskworker_permanent_errors_total{{code="RESOURCE_EXHAUSTED",what="test enqueue"}} {before + 1}.0' in text


def test_the_back_off_is_exponential_jittered_and_capped() -> None:
    backoff = Backoff("test", base=0.1, cap=1.0)
    delays = [backoff.next_delay() for _ in range(8)]
    for n, d in enumerate(delays):
        ceiling = min(1.0, 0.1 * 2**n)
        assert ceiling / 2 <= d <= ceiling, (n, d)
    assert len(set(delays)) > 1  # jittered
    backoff.reset()
    assert backoff.next_delay() <= 0.1


async def test_a_row_over_a_send_limit_the_worker_was_not_told_is_settled_once(server: tuple[Stub, int, str]) -> None:
    """A fleet told the server sends up to 64 MB: the completion's answer would be over the
    server's real send limit, so the server refuses it before COMMIT ("answer too large ...
    nothing was changed"). Each call is tried once: the batch, the entry alone (refused the same
    way), then the task is failed for good with an error naming the refusal; nothing is sent
    again and nothing is left processing."""
    stub, port, url = server
    methods = ("CompleteTasks", "CompleteTask", "GetTask", "FailTask", "FailTasks")
    before = await calls(port, *methods)
    tool_id, (task_id,) = await queue(stub, ["big"], inputs_pad=2_200_000)
    fleet = await run_fleet(stub, tool_id, {"big": "x" * 2_200_000}, 1, server_send_bytes=64 * MB)
    assert (fleet.stats.completed, fleet.stats.failed, fleet.stats.lease_lost) == (0, 1, 0)
    [(status, output, error)] = await sql(
        url, "SELECT status::text, output, error FROM generation.tasks WHERE id = %s", task_id
    )
    assert status == "failed" and output is None and error.startswith("output refused: "), error
    assert "answer too large" in error
    after = await calls(port, *methods)
    delta = {m: after[m] - before[m] for m in methods}
    assert delta == {"CompleteTasks": 1, "CompleteTask": 1, "GetTask": 0, "FailTask": 1, "FailTasks": 0}, delta
