"""Bad input, for every RPC: malformed UUIDs, unknown ids, negative limits, empty ids, invalid
JSON, values Postgres cannot store, huge payloads. Always INVALID_ARGUMENT / NOT_FOUND /
FAILED_PRECONDITION with a message that says what is wrong; never INTERNAL, never SQL text or
a traceback in the status details. A refused mutation changes nothing."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from generation.task.v1 import task_pb2 as pb
from support.queue_support import Stub, assert_clean_details, claim_one, enqueue, new_tool, row, rpc_error

INVALID, NOT_FOUND, PRECONDITION = (
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
)
NO_SUCH = "7d3c1f0e-0000-4000-8000-000000000000"  # a well-formed UUID no row has


@dataclass
class Ctx:
    """Real rows the cases point at: a tool and a task held under a lease."""

    tool: str
    task: str
    lease: str


@dataclass
class Case:
    rpc: str
    name: str
    request: Callable[[Ctx], Any]
    code: grpc.StatusCode
    says: str  # the message must mention this (case-insensitive)


def incompressible(n: int) -> str:
    return os.urandom(n // 2).hex()


CASES = [
    Case("RegisterTool", "NUL byte in name", lambda c: pb.RegisterToolRequest(name="tool\x00x"), INVALID, "NUL"),
    # The schema caps names at 200 characters (a CHECK) long before the index's size limit.
    Case("RegisterTool", "name too long", lambda c: pb.RegisterToolRequest(name=incompressible(20_000)), INVALID, "tools_name_check"),
    Case("QueueTask", "empty tool_id", lambda c: pb.QueueTaskRequest(tool_id=""), INVALID, "tool_id"),
    Case("QueueTask", "malformed tool_id", lambda c: pb.QueueTaskRequest(tool_id="tool-1"), INVALID, "tool_id"),
    Case("QueueTask", "unknown tool", lambda c: pb.QueueTaskRequest(tool_id=NO_SUCH), NOT_FOUND, "tool_id"),
    Case("QueueTask", "input not JSON", lambda c: pb.QueueTaskRequest(tool_id=c.tool, input="{prompt: hi"), INVALID, "json"),
    Case("QueueTask", "input with \\u0000", lambda c: pb.QueueTaskRequest(tool_id=c.tool, input='{"a": "\\u0000"}'), INVALID, "unicode"),
    Case("QueueTask", "input nested too deep", lambda c: pb.QueueTaskRequest(tool_id=c.tool, input="[" * 100_000 + "]" * 100_000), INVALID, "depth"),
    Case("QueueTask", "negative max_retries", lambda c: pb.QueueTaskRequest(tool_id=c.tool, max_retries=-1), INVALID, "max_retries"),
    Case("QueueTask", "idempotency key too large to index", lambda c: pb.QueueTaskRequest(tool_id=c.tool, billing_idempotency_key=incompressible(20_000)), INVALID, "index"),
    Case("QueueTask", "NUL byte in traceparent", lambda c: pb.QueueTaskRequest(tool_id=c.tool, w3c_traceparent="00-\x00"), INVALID, "NUL"),
    Case("ClaimNextTask", "empty tool_id", lambda c: pb.ClaimNextTaskRequest(tool_id=""), INVALID, "tool_id is required"),
    Case("ClaimNextTask", "malformed tool_id", lambda c: pb.ClaimNextTaskRequest(tool_id="' OR 1=1 --"), INVALID, "tool_id must be a UUID"),
    Case("ClaimTasks", "negative limit", lambda c: pb.ClaimTasksRequest(tool_id=c.tool, limit=-1), INVALID, "LIMIT must not be negative"),
    Case("ClaimTasks", "malformed tool_id", lambda c: pb.ClaimTasksRequest(tool_id="x", limit=5), INVALID, "tool_id"),
    Case("HeartbeatTask", "unknown task", lambda c: pb.HeartbeatTaskRequest(task_id=NO_SUCH, lease_token=NO_SUCH), NOT_FOUND, "does not exist"),
    Case("HeartbeatTask", "empty lease_token", lambda c: pb.HeartbeatTaskRequest(task_id=c.task), INVALID, "lease_token is required"),
    Case("HeartbeatTask", "wrong lease", lambda c: pb.HeartbeatTaskRequest(task_id=c.task, lease_token=NO_SUCH), PRECONDITION, "current state"),
    Case("CompleteTask", "unknown task", lambda c: pb.CompleteTaskRequest(task_id=NO_SUCH, lease_token=NO_SUCH), NOT_FOUND, "does not exist"),
    Case("CompleteTask", "output not JSON", lambda c: pb.CompleteTaskRequest(task_id=c.task, lease_token=c.lease, output="done!"), INVALID, "json"),
    Case("CompleteTask", "malformed task_id", lambda c: pb.CompleteTaskRequest(task_id="12", lease_token=c.lease), INVALID, "task_id"),
    Case("CompleteTasks", "malformed id in the batch", lambda c: pb.CompleteTasksRequest(task_ids=[c.task, "nope"], lease_tokens=[c.lease, c.lease]), INVALID, "task_ids[1]"),
    Case("CompleteTasks", "output not JSON", lambda c: pb.CompleteTasksRequest(task_ids=[c.task], lease_tokens=[c.lease], outputs=["{"], reported_usages=["{}"]), INVALID, "json"),
    Case("FailTask", "unknown task", lambda c: pb.FailTaskRequest(task_id=NO_SUCH, lease_token=NO_SUCH, error="e"), NOT_FOUND, "does not exist"),
    Case("FailTask", "malformed lease_token", lambda c: pb.FailTaskRequest(task_id=c.task, lease_token="lease", error="e"), INVALID, "lease_token"),
    Case("FailTask", "re-queue without a lease", lambda c: pb.FailTaskRequest(task_id=c.task, error="e", increment_retry=True), PRECONDITION, "current state"),
    Case("FailTask", "NUL byte in error", lambda c: pb.FailTaskRequest(task_id=c.task, lease_token=c.lease, error="bad\x00"), INVALID, "NUL"),
    Case("ListStaleTasks", "negative limit", lambda c: pb.ListStaleTasksRequest(limit=-5), INVALID, "LIMIT must not be negative"),
    Case("SetToolLease", "lease of 0 seconds", lambda c: pb.SetToolLeaseRequest(tool_id=c.tool, lease_seconds=0), INVALID, "tools_lease_seconds_check"),
    Case("SetToolLease", "unknown tool", lambda c: pb.SetToolLeaseRequest(tool_id=NO_SUCH, lease_seconds=10), NOT_FOUND, "does not exist"),
    Case("QueueTasks", "malformed tool_id in the batch", lambda c: pb.QueueTasksRequest(tool_ids=[c.tool, "x"]), INVALID, "tool_ids[1]"),
    Case("QueueTasks", "unknown tool", lambda c: pb.QueueTasksRequest(tool_ids=[c.tool, NO_SUCH]), NOT_FOUND, "tool_id"),
    Case("QueueTasks", "input not JSON", lambda c: pb.QueueTasksRequest(tool_ids=[c.tool], inputs=["{"]), INVALID, "json"),
    Case("QueueTasks", "negative max_retries", lambda c: pb.QueueTasksRequest(tool_ids=[c.tool], max_retries=[-1]), INVALID, "max_retries"),
    Case("ClaimTasks", "empty tool_id with a byte budget", lambda c: pb.ClaimTasksRequest(tool_id="", limit=5, max_bytes=1000), INVALID, "tool_id"),
    Case("FailTasks", "malformed lease in the batch", lambda c: pb.FailTasksRequest(task_ids=[c.task], lease_tokens=["x"], errors=["e"]), INVALID, "lease_tokens[0]"),
    Case("FailTasks", "NUL byte in error", lambda c: pb.FailTasksRequest(task_ids=[c.task], lease_tokens=[c.lease], errors=["bad\x00"]), INVALID, "NUL"),
    Case("PruneTasks", "negative limit", lambda c: pb.PruneTasksRequest(limit=-1), INVALID, "LIMIT must not be negative"),
    Case("GetTask", "empty task_id", lambda c: pb.GetTaskRequest(), INVALID, "task_id is required"),
    Case("GetTask", "malformed task_id", lambda c: pb.GetTaskRequest(task_id="1; DROP TABLE generation.tasks"), INVALID, "task_id must be a UUID"),
    Case("GetTask", "unknown task", lambda c: pb.GetTaskRequest(task_id=NO_SUCH), NOT_FOUND, ""),
    Case("AppendTaskEvents", "malformed task id", lambda c: pb.AppendTaskEventsRequest(task_ids=["nope"], kinds=["progress"], data=["{}"], emitted_at_unix=[1.0]), INVALID, "task_ids[0]"),
    Case("AppendTaskEvents", "data not JSON", lambda c: pb.AppendTaskEventsRequest(task_ids=[c.task], kinds=["progress"], data=["{"], emitted_at_unix=[1.0]), INVALID, "json"),
    Case("AppendTaskEvents", "lists of unequal length", lambda c: pb.AppendTaskEventsRequest(task_ids=[c.task, c.task], kinds=["progress"], data=["{}"], emitted_at_unix=[1.0]), INVALID, "kind"),
    Case("ListTaskEvents", "malformed task_id", lambda c: pb.ListTaskEventsRequest(task_id="x", limit=5), INVALID, "task_id"),
    Case("ListTaskEvents", "negative limit", lambda c: pb.ListTaskEventsRequest(task_id=c.task, limit=-1), INVALID, "LIMIT must not be negative"),
    Case("SetToolRetryPolicy", "cap below base", lambda c: pb.SetToolRetryPolicyRequest(tool_id=c.tool, retry_base_seconds=10, retry_cap_seconds=1), INVALID, "tools_check"),
    Case("SetToolRetryPolicy", "unknown tool", lambda c: pb.SetToolRetryPolicyRequest(tool_id=NO_SUCH, retry_base_seconds=1, retry_cap_seconds=2), NOT_FOUND, "does not exist"),
    Case("SetToolMaxRuntime", "zero seconds", lambda c: pb.SetToolMaxRuntimeRequest(tool_id=c.tool, max_runtime_seconds=0), INVALID, "max_runtime_seconds"),
    Case("SetToolConcurrency", "zero slots", lambda c: pb.SetToolConcurrencyRequest(tool_id=c.tool, max_running=0), INVALID, "max_running"),
    Case("SetToolConcurrency", "unknown tool", lambda c: pb.SetToolConcurrencyRequest(tool_id=NO_SUCH, max_running=3), NOT_FOUND, "does not exist"),
    Case("SetToolKeyConcurrency", "zero per key", lambda c: pb.SetToolKeyConcurrencyRequest(tool_id=c.tool, key_max_running=0), INVALID, "key_max_running"),
    Case("SetToolRateLimit", "zero rate", lambda c: pb.SetToolRateLimitRequest(tool_id=c.tool, rate_limit=0), INVALID, "rate_limit"),
    Case("SetToolRateLimit", "negative period", lambda c: pb.SetToolRateLimitRequest(tool_id=c.tool, rate_limit=5, period_seconds=-1), INVALID, "rate_period_seconds"),
    Case("PauseTool", "malformed tool_id", lambda c: pb.PauseToolRequest(tool_id="x"), INVALID, "tool_id"),
    Case("PauseTool", "unknown tool", lambda c: pb.PauseToolRequest(tool_id=NO_SUCH), NOT_FOUND, "does not exist"),
    Case("ResumeTool", "empty tool_id", lambda c: pb.ResumeToolRequest(), INVALID, "tool_id is required"),
    Case("SnoozeTask", "wrong lease", lambda c: pb.SnoozeTaskRequest(task_id=c.task, lease_token=NO_SUCH), PRECONDITION, "current state"),
    Case("SnoozeTask", "malformed lease_token", lambda c: pb.SnoozeTaskRequest(task_id=c.task, lease_token="l"), INVALID, "lease_token"),
    Case("CancelTask", "unknown task", lambda c: pb.CancelTaskRequest(task_id=NO_SUCH), NOT_FOUND, "does not exist"),
    Case("CancelTask", "NUL byte in reason", lambda c: pb.CancelTaskRequest(task_id=c.task, reason="\x00"), INVALID, "NUL"),
    Case("CancelTasks", "malformed id in the batch", lambda c: pb.CancelTasksRequest(task_ids=[c.task, "x"]), INVALID, "task_ids[1]"),
    Case("RetryTask", "a running task", lambda c: pb.RetryTaskRequest(task_id=c.task), PRECONDITION, "current state"),
    Case("RetryTask", "unknown task", lambda c: pb.RetryTaskRequest(task_id=NO_SUCH), NOT_FOUND, "does not exist"),
    Case("RetryTasks", "malformed tool_id", lambda c: pb.RetryTasksRequest(tool_id="x"), INVALID, "tool_id"),
    Case("UpsertPeriodicTask", "unknown time zone", lambda c: pb.UpsertPeriodicTaskRequest(name="p", tool_id=c.tool, cron="* * * * *", timezone="Nowhere/City"), INVALID, "time zone"),
    Case("UpsertPeriodicTask", "not a cron expression", lambda c: pb.UpsertPeriodicTaskRequest(name="p", tool_id=c.tool, cron="often"), INVALID, "cron"),
    Case("UpsertPeriodicTask", "unknown tool", lambda c: pb.UpsertPeriodicTaskRequest(name="p", tool_id=NO_SUCH, cron="* * * * *"), NOT_FOUND, "tool_id"),
    Case("DeletePeriodicTask", "unknown schedule", lambda c: pb.DeletePeriodicTaskRequest(name="no such schedule"), NOT_FOUND, ""),
    Case("ListPeriodicTasks", "negative limit", lambda c: pb.ListPeriodicTasksRequest(limit=-1), INVALID, "LIMIT must not be negative"),
    Case("EnqueuePeriodicTask", "NUL byte in name", lambda c: pb.EnqueuePeriodicTaskRequest(name="\x00"), INVALID, "NUL"),
]  # fmt: skip

# The server-streaming RPCs have their bad-input cases below (test_watch_task_wakes_...) and in
# test_events_postgres.py (WatchTaskEvents); PurgeTaskEvents takes only integers, where 0 or less
# means the default (test_events_postgres.py checks a negative window purges nothing fresh); so do
# PromoteDueTasks and ReapOverdueTasks (test_queue_schedule.py). WatchTaskCancels: test_queue_cancel.py.
# ListTasks' bad input (a tampered page token, an oversized page) is test_queue_admin.py's; ListTools,
# GetQueueStats and ListToolOutcomes take no field that can be wrong (a window of 0 or less is the default).
COVERED_ELSEWHERE = {
    "WatchTaskWakes", "WatchTaskEvents", "PurgeTaskEvents", "WatchTaskCancels", "PromoteDueTasks", "ReapOverdueTasks",
    "ListTasks", "ListTools", "GetQueueStats", "ListToolOutcomes",
}  # fmt: skip


@pytest.fixture
async def ctx(stub: Stub) -> Ctx:
    tool = await new_tool(stub, "bad-input")
    await enqueue(stub, tool.id)
    task = await claim_one(stub, tool.id)
    return Ctx(tool.id, task.id, task.lease_token)


@pytest.mark.parametrize("case", CASES, ids=[f"{c.rpc}-{c.name}" for c in CASES])
async def test_bad_input(stub: Stub, database_url: str, ctx: Ctx, case: Case) -> None:
    before = await row(database_url, ctx.task)
    err = await rpc_error(getattr(stub, case.rpc), case.request(ctx))
    details = assert_clean_details(err)
    assert err.code() == case.code, f"{case.rpc} ({case.name}): {err.code().name} {details!r}"
    assert case.says.lower() in details.lower(), f"{case.rpc} ({case.name}): unclear message {details!r}"
    assert len(details) < 600, "a status message is a sentence, not a dump"
    assert await row(database_url, ctx.task) == before, "a refused call changed the held task"


def test_every_rpc_has_a_bad_input_case() -> None:
    methods = {m.name for m in pb.DESCRIPTOR.services_by_name["GenerationDataService"].methods}
    assert methods - COVERED_ELSEWHERE <= {c.rpc for c in CASES}


async def test_huge_valid_payloads_round_trip(stub: Stub) -> None:
    """A 1.5 MB input and output are just data: stored and returned intact."""
    tool = await new_tool(stub, "huge")
    big = json.dumps({"blob": "x" * 1_500_000, "n": 1})
    queued = await enqueue(stub, tool.id, input=big)
    task = await claim_one(stub, tool.id)
    assert task.id == queued.id and json.loads(task.input) == json.loads(big)
    done = await stub.CompleteTask(pb.CompleteTaskRequest(task_id=task.id, lease_token=task.lease_token, output=big))
    assert json.loads(done.task.output)["n"] == 1 and len(done.task.output) >= 1_500_000


async def test_oversized_message_is_refused_by_the_transport(stub: Stub) -> None:
    """Beyond gRPC's 4 MiB receive limit the server's transport refuses the call before any
    handler runs: RESOURCE_EXHAUSTED (gRPC's code for it), never INTERNAL, nothing stored."""
    tool = await new_tool(stub, "oversized")
    err = await rpc_error(stub.QueueTask, pb.QueueTaskRequest(tool_id=tool.id, input=json.dumps("y" * 5_000_000)))
    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than max" in (err.details() or "")
    assert (await stub.ClaimNextTask(pb.ClaimNextTaskRequest(tool_id=tool.id))).HasField("task") is False


async def test_watch_task_wakes_rejects_malformed_tool_ids(stub: Stub) -> None:
    call = stub.WatchTaskWakes(pb.WatchTaskWakesRequest(tool_ids=["not-a-uuid"]), timeout=2)
    try:
        async for _ in call:
            pass
        code = grpc.StatusCode.OK
    except grpc.aio.AioRpcError as err:
        code = err.code()
    assert code == INVALID, f"got {code.name}"
