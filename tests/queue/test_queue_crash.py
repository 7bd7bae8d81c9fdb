"""Crash: worker processes killed with SIGKILL mid-task. Their tasks stay leased until the lease
lapses, are then reclaimed (ahead of fresh work) with an exact retry_count, and every task is
completed exactly once; nothing is lost."""

from __future__ import annotations

import pytest
from conftest import RunningServer
from support.queue_support import Stub, WorkerProcess, claim_next, enqueue, expire_leases, fetch, new_tool

TASKS = 12


@pytest.mark.slow
async def test_sigkilled_workers_lose_nothing(stub: Stub, database_url: str, service: RunningServer) -> None:
    tool = await new_tool(stub, "crash")
    ids = [(await enqueue(stub, tool.id)).id for _ in range(TASKS)]

    # Worker A claims 5, completes 2, and dies (SIGKILL) holding 3 mid-task.
    a = await WorkerProcess.start(
        "hold", "--addr", service.address, "--tools", tool.id, "--claim", "5", "--complete", "2"
    )
    try:
        a_report = await a.message()
        await a.kill()
    finally:
        await a.ensure_dead()
    a_held = {t["id"]: t for t in a_report["held"]}
    assert len(a_held) == 3 and len(a_report["completed"]) == 2
    assert all(t["retry_count"] == 0 for t in a_held.values())

    # While the dead worker's leases run, its tasks are not handed out again.
    rows = {
        str(r["id"]): r
        for r in await fetch(database_url, "SELECT * FROM generation.tasks WHERE tool_id = %s", (tool.id,))
    }
    for task_id, held in a_held.items():
        assert rows[task_id]["status"] == "processing" and str(rows[task_id]["lease_token"]) == held["lease_token"]
    # Worker B claims 2 and dies as well; before that, the 3 orphans' leases lapse (moved by SQL).
    await expire_leases(database_url, list(a_held))
    b = await WorkerProcess.start("hold", "--addr", service.address, "--tools", tool.id, "--claim", "2")
    try:
        b_report = await b.message()
        await b.kill()
    finally:
        await b.ensure_dead()
    b_held = {t["id"]: t for t in b_report["held"]}
    assert set(b_held) <= set(a_held), "zombies are reclaimed before fresh work"
    assert all(t["retry_count"] == 1 for t in b_held.values())

    # Worker C drains the queue after B's leases lapse too.
    await expire_leases(database_url, list(b_held))
    c = await WorkerProcess.start("drain", "--addr", service.address, "--tools", tool.id)
    try:
        c_report = await c.finish()
    finally:
        await c.ensure_dead()
    drained = [t["id"] for t in c_report["completed"]]
    assert len(drained) == len(set(drained)) == TASKS - 2
    assert set(drained[:3]) == set(a_held), "the three orphans come first"
    assert await claim_next(stub, tool.id) is None

    final = {
        str(r["id"]): r
        for r in await fetch(database_url, "SELECT * FROM generation.tasks WHERE tool_id = %s", (tool.id,))
    }
    assert set(final) == set(ids), "a task was lost or duplicated"
    assert all(r["status"] == "completed" for r in final.values())
    expected_retries = {i: (2 if i in b_held else 1 if i in a_held else 0) for i in ids}
    assert {i: r["retry_count"] for i, r in final.items()} == expected_retries
    by = {i: r["output"]["by"] for i, r in final.items()}
    assert {i for i, who in by.items() if who == "hold"} == set(a_report["completed"])
    pid_c = {r["output"]["by"] for i, r in final.items() if i in drained}
    assert len(pid_c) == 1 and pid_c != {"hold"}, "everything else was completed by the one surviving worker"
