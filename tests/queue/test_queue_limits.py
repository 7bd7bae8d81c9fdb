"""Fair and bounded claims, through the generated RPCs on a real PostgreSQL, with 16 claimers spread
over three server processes: a tool's global concurrency limit is never exceeded (sampled
continuously, in the database and by the claimers), a killed worker's slot comes back after its
lease, a per-key limit holds, the token-bucket rate limit holds within one period; keys are served
round-robin within a priority; ClaimNextTask ranks a due scheduled task with queued ones, as
ClaimTasks does; a claim retried with its request_id returns the tasks its lost answer held."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime as dt
import os
import random
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from conftest import as_service_role
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from google.protobuf.timestamp_pb2 import Timestamp
from support.queue_support import (
    Stub,
    WorkerProcess,
    claim_next,
    enqueue,
    execute,
    fetch,
    new_tool,
    row,
    wait_until,
)
from support.server_proc import serving, wait_serving

ROOT = Path(__file__).resolve().parents[2]
SERVERS = 3
CLAIMERS = 16


@pytest.fixture(scope="module")
async def servers(database_url: str) -> AsyncIterator[list[tuple[str, Stub]]]:
    """SERVERS server processes as the service role: (address, a stub on its own channel)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "generated")}
    argv = [
        sys.executable,
        "-m",
        "generation.task.v1.task_pydb_server",
        "--database-url",
        as_service_role(database_url),
        "--pool-max",
        "8",
        "--no-reflection",
    ]
    async with contextlib.AsyncExitStack() as stack:
        started = await asyncio.gather(*(stack.enter_async_context(serving(argv, env)) for _ in range(SERVERS)))
        out = []
        for address, _ in started:
            channel = await stack.enter_async_context(grpc.aio.insecure_channel(address))
            await wait_serving(channel)
            out.append((address, task_pb2_grpc.GenerationDataServiceStub(channel)))
        yield out


@pytest.fixture
def stubs(servers: list[tuple[str, Stub]]) -> list[Stub]:
    return [stub for _, stub in servers]


async def enqueue_many(stub: Stub, tool_id: str, keys: list[str], priority: int = 0) -> list[pb.Task]:
    resp = await stub.QueueTasks(
        pb.QueueTasksRequest(tool_ids=[tool_id] * len(keys), concurrency_keys=keys, priorities=[priority] * len(keys))
    )
    return list(resp.tasks)


class Held:
    """What the claimers hold right now, as they see it (from a claim's answer until its report
    is sent): never more than the database counts, so its peak bounds the limit from below."""

    def __init__(self) -> None:
        self.now: collections.Counter[str] = collections.Counter()
        self.peak: collections.Counter[str] = collections.Counter()

    def take(self, key: str) -> None:
        self.now[key] += 1
        self.now["*"] += 1
        self.peak[key] = max(self.peak[key], self.now[key])
        self.peak["*"] = max(self.peak["*"], self.now["*"])

    def drop(self, key: str) -> None:
        self.now[key] -= 1
        self.now["*"] -= 1


async def complete_all(stub: Stub, tasks: list[pb.Task]) -> None:
    """CompleteTasks, retrying the entries it left out as a worker does (SKIP LOCKED within the
    batch: a row a concurrent claim had locked, e.g. one whose lock outlived its recheck); each
    left-out task must still be processing under the caller's lease, or its lease was lost."""
    pending = list(tasks)
    for _ in range(200):
        resp = await stub.CompleteTasks(
            pb.CompleteTasksRequest(
                task_ids=[t.id for t in pending],
                lease_tokens=[t.lease_token for t in pending],
                outputs=["{}"] * len(pending),
                reported_usages=[""] * len(pending),
            )
        )
        settled = {t.id for t in resp.tasks}
        pending = [t for t in pending if t.id not in settled]
        if not pending:
            return
        for t in pending:
            now = (await stub.GetTask(pb.GetTaskRequest(task_id=t.id))).task
            assert now.status == pb.TASK_STATUS_PROCESSING and now.lease_token == t.lease_token, (
                "a claimed task's lease was lost"
            )
        await asyncio.sleep(0.01)  # the claim holding the row lock ends within milliseconds
    pytest.fail(f"{len(pending)} tasks never completed: their rows stayed locked")


async def run_claimers(
    stubs: list[Stub], tool_id: str, total: int, held: Held, *, batch: int = 3, done: asyncio.Event
) -> list[pb.Task]:
    """CLAIMERS claimers over the servers claim, hold each task a moment and complete it, until
    `total` tasks are completed."""
    completed: list[pb.Task] = []

    async def claimer(i: int) -> None:
        stub = stubs[i % len(stubs)]
        while len(completed) < total:
            tasks = list((await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool_id, limit=batch))).tasks)
            for t in tasks:
                held.take(t.concurrency_key)
            if not tasks:
                await asyncio.sleep(0.01)  # a worker's poll interval: the queue decides what it gets
                continue
            await asyncio.sleep(random.uniform(0.005, 0.03))  # the work
            for t in tasks:
                held.drop(t.concurrency_key)
            await complete_all(stub, tasks)
            completed.extend(tasks)

    try:
        await asyncio.gather(*(claimer(i) for i in range(CLAIMERS)))
    finally:
        done.set()
    return completed


async def sample(database_url: str, query: str, params: dict[str, object], done: asyncio.Event) -> list[int]:
    """`query`'s first column, sampled continuously until `done`."""
    seen: list[int] = []
    while not done.is_set():
        seen.extend(int(r["n"]) for r in await fetch(database_url, query, params))
    return seen


RUNNING = (
    "SELECT count(*) AS n FROM generation.tasks"
    " WHERE tool_id = %(tool)s AND status = 'processing' AND claim_expires_at >= now()"
)
RUNNING_PER_KEY = (
    "SELECT count(*) AS n FROM generation.tasks"
    " WHERE tool_id = %(tool)s AND status = 'processing' AND claim_expires_at >= now() GROUP BY concurrency_key"
)


async def test_the_global_limit_holds_under_16_claimers_over_3_servers(stubs: list[Stub], database_url: str) -> None:
    tool = await new_tool(stubs[0], "limit")
    limited = (await stubs[1].SetToolConcurrency(pb.SetToolConcurrencyRequest(tool_id=tool.id, max_running=5))).tool
    assert limited.max_running == 5
    await enqueue_many(stubs[0], tool.id, [""] * 240)
    held, done = Held(), asyncio.Event()
    samples, completed = await asyncio.gather(
        sample(database_url, RUNNING, {"tool": tool.id}, done),
        run_claimers(stubs, tool.id, 240, held, done=done),
    )
    assert len({t.id for t in completed}) == 240
    assert len(samples) > 20, "sampled continuously"
    assert max(samples) <= 5, f"the database saw {max(samples)} running"
    assert held.peak["*"] == 5, f"the claimers held at most {held.peak['*']} at once (limit 5)"
    # Every task took a slot, and no slot is taken twice at once: 5 slots, each now free.
    assert {t.claim_slot for t in completed} <= {1, 2, 3, 4, 5}
    slots = await fetch(database_url, "SELECT * FROM generation.claim_slots WHERE tool_id = %s", (tool.id,))
    assert len(slots) == 5 and all(s["expires_at"] is None for s in slots)


async def test_a_killed_workers_slot_comes_back_after_its_lease(
    servers: list[tuple[str, Stub]], stubs: list[Stub]
) -> None:
    tool = await new_tool(stubs[0], "limit-kill")
    await stubs[0].SetToolLease(pb.SetToolLeaseRequest(tool_id=tool.id, lease_seconds=2))
    await stubs[0].SetToolConcurrency(pb.SetToolConcurrencyRequest(tool_id=tool.id, max_running=2))
    await enqueue_many(stubs[0], tool.id, [""] * 4)
    worker = await WorkerProcess.start("hold", "--addr", servers[0][0], "--tools", tool.id, "--claim", "4")
    try:
        holding = await worker.message()
        assert len(holding["held"]) == 2, "the limit of 2 held for one worker asking for 4"
        await worker.kill()
        # The dead worker's slots are taken until its leases lapse: no claimer gets a task.
        batch = await stubs[1].ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=4))
        assert not batch.tasks, "claimed past the limit while the dead worker's leases live"
        got: list[pb.Task] = []

        async def slots_back() -> bool:
            got.extend((await stubs[2].ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=4))).tasks)
            return len(got) >= 2

        await wait_until(slots_back, timeout=20, what="the dead worker's slots after its lease")
        assert len(got) == 2, "both slots came back, and only those"
        # Zombies first: the dead worker's tasks are reclaimed (one retry burnt) in its slots.
        assert {t.id for t in got} == {h["id"] for h in holding["held"]}
        assert all(t.retry_count == 1 for t in got)
    finally:
        await worker.ensure_dead()


async def test_the_per_key_limit_holds_and_keys_are_served_round_robin(stubs: list[Stub], database_url: str) -> None:
    tool = await new_tool(stubs[0], "limit-key")
    await stubs[0].SetToolKeyConcurrency(pb.SetToolKeyConcurrencyRequest(tool_id=tool.id, key_max_running=2))
    keys = ["noisy"] * 90 + [f"quiet-{i}" for i in range(6) for _ in range(5)]
    await enqueue_many(stubs[0], tool.id, keys)
    held, done = Held(), asyncio.Event()
    samples, completed = await asyncio.gather(
        sample(database_url, RUNNING_PER_KEY, {"tool": tool.id}, done),
        run_claimers(stubs, tool.id, len(keys), held, batch=2, done=done),
    )
    assert len({t.id for t in completed}) == len(keys)
    assert len(samples) > 20 and max(samples) <= 2, f"a key ran {max(samples)} tasks at once (limit 2)"
    assert max(n for k, n in held.peak.items() if k != "*") == 2
    # Fairness: every quiet key's tasks are done long before the noisy key's backlog is.
    order = [t.concurrency_key for t in completed]
    last_quiet = max(i for i, k in enumerate(order) if k != "noisy")
    assert last_quiet < len(order) - 40, f"the quiet keys waited behind the noisy one (last at {last_quiet})"


async def test_the_rate_limit_holds_within_one_period(stubs: list[Stub], database_url: str) -> None:
    tool = await new_tool(stubs[0], "limit-rate")
    await enqueue_many(stubs[0], tool.id, [""] * 400)
    rate, period = 20, 1.0
    limited = (
        await stubs[0].SetToolRateLimit(
            pb.SetToolRateLimitRequest(tool_id=tool.id, rate_limit=rate, period_seconds=period)
        )
    ).tool
    start = limited.rate_updated_at.ToDatetime(dt.UTC)
    claimed: list[pb.Task] = []
    stop = asyncio.get_running_loop().time() + 3.5

    async def claimer(i: int) -> None:
        stub = stubs[i % len(stubs)]
        while asyncio.get_running_loop().time() < stop:
            claimed.extend((await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=5))).tasks)

    await asyncio.gather(*(claimer(i) for i in range(CLAIMERS)))
    times = sorted(t.attempted_at.ToDatetime(dt.UTC) for t in claimed)
    span = (times[-1] - start).total_seconds()
    # The bucket starts empty and refills at rate/period: never more than that since it was set...
    assert len(times) <= rate * span / period + 1, f"{len(times)} claims in {span:.2f}s at {rate}/{period}s"
    # ... nor more than its capacity plus a period's refill in any one period...
    for i, t in enumerate(times):
        within = sum(1 for u in times[i:] if (u - t).total_seconds() < period)
        assert within <= 2 * rate, f"{within} claims within one period"
    # ... and the claimers were not starved either (one period's tolerance).
    assert len(times) >= rate * span / period - rate, f"only {len(times)} claims in {span:.2f}s"


async def test_claim_next_task_ranks_a_due_scheduled_task_with_queued_ones(stub: Stub, database_url: str) -> None:
    """Issue 22: ClaimNextTask took a due scheduled task only when nothing queued was claimable."""
    tool = await new_tool(stub, "next-rank")
    low = await enqueue(stub, tool.id, priority=0)
    later = Timestamp()
    later.FromDatetime(dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))
    high = await enqueue(stub, tool.id, priority=5, run_at=later)
    assert high.status == pb.TASK_STATUS_SCHEDULED
    # Move time: the scheduled task is due now (no PromoteDueTasks ran, it is still `scheduled`).
    await execute(
        database_url, "UPDATE generation.tasks SET run_at = now() - interval '1 second' WHERE id = %s", (high.id,)
    )
    first = await claim_next(stub, tool.id)
    assert first is not None and first.id == high.id, "the due, higher-priority task comes first"
    second = await claim_next(stub, tool.id)
    assert second is not None and second.id == low.id


async def test_priority_keeps_its_meaning_within_a_key(stub: Stub) -> None:
    tool = await new_tool(stub, "key-priority")
    await enqueue(stub, tool.id, concurrency_key="k", priority=0)
    urgent = await enqueue(stub, tool.id, concurrency_key="k", priority=3)
    other = await enqueue(stub, tool.id, concurrency_key="j", priority=0)
    first = await claim_next(stub, tool.id)
    assert first is not None and first.id == urgent.id and first.concurrency_key == "k"
    batch = await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=5))
    assert other.id in {t.id for t in batch.tasks} and len(batch.tasks) == 2


@pytest.mark.parametrize("rpc", ["ClaimTasks", "ClaimNextTask"])
async def test_a_claim_retried_with_its_request_id_returns_what_the_lost_answer_held(
    stub: Stub, database_url: str, rpc: str
) -> None:
    tool = await new_tool(stub, "request-id")
    await enqueue_many(stub, tool.id, [""] * 6)

    async def claim(request_id: str) -> list[pb.Task]:
        if rpc == "ClaimTasks":
            return list(
                (await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=2, request_id=request_id))).tasks
            )
        resp = await stub.ClaimNextTask(pb.ClaimNextTaskRequest(tool_id=tool.id, request_id=request_id))
        return [resp.task] if resp.HasField("task") else []

    first_id = uuid.uuid4().hex
    lost = await claim(first_id)  # committed; its answer never reached the worker (dropped here)
    assert lost
    retried = await claim(first_id)
    # The same tasks (in no particular order), as they are: same lease tokens, no retry burnt.
    assert sorted((t.id, t.lease_token, t.retry_count) for t in retried) == sorted(
        (t.id, t.lease_token, t.retry_count) for t in lost
    )
    for t in lost:
        stored = await row(database_url, t.id)
        assert str(stored["lease_token"]) == t.lease_token and stored["retry_count"] == 0
        assert stored["claim_request_id"] == first_id
    fresh = await claim(uuid.uuid4().hex)
    assert fresh and not {t.id for t in fresh} & {t.id for t in lost}, "a new id claims new tasks"
    # Once the held tasks are reported, the old id claims anew (a new attempt, not a replay).
    await stub.CompleteTasks(
        pb.CompleteTasksRequest(
            task_ids=[t.id for t in lost],
            lease_tokens=[t.lease_token for t in lost],
            outputs=["{}"] * len(lost),
            reported_usages=[""] * len(lost),
        )
    )
    again = await claim(first_id)
    assert again and not {t.id for t in again} & {t.id for t in lost + fresh}
