"""Claim order within a tool: reclaimable zombies first, then higher priority, then FIFO by
created_at; rows that are not claimable are never returned; tools never see each other's rows."""

from __future__ import annotations

import random
from dataclasses import dataclass

from generation.task.v1 import task_pb2 as pb
from support.queue_support import Stub, claim_next, claim_one, enqueue, execute, expire_leases, fetch, new_tool, row


@dataclass
class Board:
    """A tool's queue in a known shape; `expected` is the order claims must follow."""

    tool: pb.Tool
    expected: list[str]
    never: list[str]
    label: dict[str, str]


async def set_created(url: str, ages: dict[str, float]) -> None:
    """created_at = now() - age seconds, per task."""
    for task_id, age in ages.items():
        await execute(
            url,
            "UPDATE generation.tasks SET created_at = now() - make_interval(secs => %s) WHERE id = %s",
            (age, task_id),
        )


async def build_board(stub: Stub, url: str) -> Board:
    tool = await new_tool(stub, "order")
    label: dict[str, str] = {}

    async def add(name: str, **kw: object) -> str:
        task = await enqueue(stub, tool.id, **kw)
        label[task.id] = name
        return task.id

    # A zombie whose retries are used up: claimed, lapsed, reclaimed (retry 1 of 1), lapsed again.
    exhausted_zombie = await add("exhausted-zombie", priority=100, max_retries=1)
    first = await claim_one(stub, tool.id)
    await expire_leases(url, [first.id])
    again = await claim_one(stub, tool.id)
    assert (again.id, again.retry_count) == (exhausted_zombie, 1)
    await expire_leases(url, [exhausted_zombie], 3600)

    # Rows that get claimed now: two become zombies, one stays live, two end terminal.
    zombie_high = await add("zombie-high", priority=9)
    zombie_low = await add("zombie-low", priority=0)
    live = await add("live", priority=100)
    completed = await add("completed", priority=100)
    failed = await add("failed", priority=100)
    held = {t.id: t for t in (await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=10))).tasks}
    assert set(held) == {zombie_high, zombie_low, live, completed, failed}
    await stub.CompleteTask(pb.CompleteTaskRequest(task_id=completed, lease_token=held[completed].lease_token))
    await stub.FailTask(pb.FailTaskRequest(task_id=failed, lease_token=held[failed].lease_token, error="x"))
    await expire_leases(url, [zombie_high, zombie_low], 10)
    # A lease with 20 seconds left is still live (not one second: a loaded CI box must not let it lapse).
    await execute(
        url, "UPDATE generation.tasks SET claim_expires_at = now() + interval '20 seconds' WHERE id = %s", (live,)
    )

    # Queued work: priorities 5, 3, 1, 0; within priority 1, created_at order differs from
    # insertion order (and from id order), so only a real FIFO on created_at passes.
    high_old = await add("p5-old", priority=5)
    high_new = await add("p5-new", priority=5)
    mid = await add("p3", priority=3)
    fifo = [await add(f"p1-#{i}", priority=1) for i in range(8)]
    low = await add("p0", priority=0)
    trapped = await add("max-retries-0", priority=100, max_retries=0)
    dispatched = await add("dispatched", priority=100)
    # `dispatched` is a legacy state no RPC sets: only the reaper handles such rows.
    await execute(url, "UPDATE generation.tasks SET status = 'dispatched' WHERE id = %s", (dispatched,))

    ages: dict[str, float] = {zombie_high: 1, zombie_low: 500, high_old: 300, high_new: 200, mid: 900, low: 1000}
    shuffled = fifo[:]
    random.Random(7).shuffle(shuffled)
    for rank, task_id in enumerate(shuffled):  # shuffled[0] is the oldest
        ages[task_id] = 800 - rank
    await set_created(url, ages)
    expected = [zombie_high, zombie_low, high_old, high_new, mid, *shuffled, low]
    never = [exhausted_zombie, live, completed, failed, trapped, dispatched]
    return Board(tool, expected, never, label)


async def snapshot(url: str, ids: list[str]) -> list[dict[str, object]]:
    return await fetch(url, "SELECT * FROM generation.tasks WHERE id = ANY(%s::uuid[]) ORDER BY id", (ids,))


async def test_claim_next_follows_zombies_priority_fifo(stub: Stub, database_url: str) -> None:
    board = await build_board(stub, database_url)
    untouchable = await snapshot(database_url, board.never)
    got: list[str] = []
    while (task := await claim_next(stub, board.tool.id)) is not None:
        got.append(task.id)
        assert len(got) <= len(board.expected), "claimed more rows than are claimable"
    assert [board.label[i] for i in got] == [board.label[i] for i in board.expected]
    assert await snapshot(database_url, board.never) == untouchable, "a non-claimable row was touched"
    zombie = await row(database_url, board.expected[0])
    assert zombie["retry_count"] == 1, "reclaiming a zombie burns one retry"


async def test_claim_tasks_takes_the_top_n(stub: Stub, database_url: str) -> None:
    board = await build_board(stub, database_url)
    untouchable = await snapshot(database_url, board.never)
    got: list[set[str]] = []
    for limit in (2, 3, 4, 100):
        batch = (await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=board.tool.id, limit=limit))).tasks
        got.append({t.id for t in batch})
    exp = board.expected
    want = [set(exp[:2]), set(exp[2:5]), set(exp[5:9]), set(exp[9:])]
    assert [sorted(board.label[i] for i in g) for g in got] == [sorted(board.label[i] for i in w) for w in want]
    assert (await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=board.tool.id, limit=100))).tasks == []
    assert await snapshot(database_url, board.never) == untouchable, "a non-claimable row was touched"


async def test_tools_never_see_each_others_rows(stub: Stub, database_url: str) -> None:
    a = await new_tool(stub, "iso-a")
    b = await new_tool(stub, "iso-b")
    a_ids = []
    b_ids = []
    for i in range(6):
        a_ids.append((await enqueue(stub, a.id, priority=i % 2)).id)
        b_ids.append((await enqueue(stub, b.id, priority=50 + i)).id)
    # B also has an old zombie, which would sort first if tool_id were not respected.
    b_zombie = await claim_one(stub, b.id)
    await expire_leases(database_url, [b_zombie.id], 3600)
    await set_created(database_url, dict.fromkeys(b_ids, 5000.0))
    before = await fetch(database_url, "SELECT * FROM generation.tasks WHERE tool_id = %s ORDER BY id", (b.id,))

    got = [t.id for t in (await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=a.id, limit=4))).tasks]
    while (task := await claim_next(stub, a.id)) is not None:
        got.append(task.id)
    assert sorted(got) == sorted(a_ids)
    assert (await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=a.id, limit=100))).tasks == []
    after = await fetch(database_url, "SELECT * FROM generation.tasks WHERE tool_id = %s ORDER BY id", (b.id,))
    assert after == before, "claiming for tool A touched tool B's rows"
    # And B's claims see only B: its zombie first.
    first_b = await claim_one(stub, b.id)
    assert first_b.id == b_zombie.id and first_b.tool_id == b.id
