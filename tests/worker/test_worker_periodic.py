"""Periodic tasks: UpsertPeriodicTask / ListPeriodicTasks / DeletePeriodicTask, and the
reconciler enqueuing each cron slot exactly once (EnqueuePeriodicTask's unique slot key): in
process, racing in one event loop, after downtime (bounded catch-up, resumed from last_slot_at),
and with 3 reconciler processes racing while one is SIGKILLed."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from conftest import RunningServer
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from google.protobuf.timestamp_pb2 import Timestamp
from support.worker_support import sql, wait_until
from taskworker import Reconciler
from test_worker_reconciler import channel, database_url, private

if TYPE_CHECKING:
    Stub = task_pb2_grpc.GenerationDataServiceAsyncStub

ROOT = Path(__file__).resolve().parents[2]


# The reconciler also promotes, reaps and sweeps every tool's rows: the database and server of
# test_worker_reconciler.py's fixtures, one per module.
__all__ = ["channel", "database_url", "private"]


async def schedule(stub: Stub, tool: pb.Tool, cron: str, **kw: Any) -> pb.PeriodicTask:
    req = pb.UpsertPeriodicTaskRequest(name=f"p-{uuid.uuid4().hex[:10]}", tool_id=tool.id, cron=cron, **kw)
    return (await stub.UpsertPeriodicTask(req)).periodic_task


async def slots(database_url: str, name: str) -> list[dt.datetime]:
    rows = await sql(
        database_url,
        "SELECT periodic_slot_at FROM generation.tasks WHERE periodic_name = %s ORDER BY periodic_slot_at",
        name,
    )
    return [r[0] for r in rows]


async def test_upsert_list_delete_and_bad_schedules_refused(stub: Stub, tool: pb.Tool) -> None:
    made = await schedule(stub, tool, "0 9 * * 1-5", timezone="Europe/Paris", input='{"report": 1}', priority=3)
    assert (made.cron, made.timezone, made.input, made.priority, made.max_retries) == (
        "0 9 * * 1-5", "Europe/Paris", '{"report": 1}', 3, 3,
    )  # fmt: skip
    changed = (
        await stub.UpsertPeriodicTask(
            pb.UpsertPeriodicTaskRequest(name=made.name, tool_id=tool.id, cron="@hourly", max_retries=1)
        )
    ).periodic_task
    assert (changed.cron, changed.timezone, changed.max_retries) == ("@hourly", "UTC", 1)
    listed = (await stub.ListPeriodicTasks(pb.ListPeriodicTasksRequest())).periodic_tasks
    assert made.name in {p.name for p in listed}
    for bad in (
        pb.UpsertPeriodicTaskRequest(name="bad-zone", tool_id=tool.id, cron="* * * * *", timezone="Mars/Olympus"),
        pb.UpsertPeriodicTaskRequest(name="bad-cron", tool_id=tool.id, cron="every minute"),
        pb.UpsertPeriodicTaskRequest(name="", tool_id=tool.id, cron="* * * * *"),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.UpsertPeriodicTask(bad)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, bad
    gone = (await stub.DeletePeriodicTask(pb.DeletePeriodicTaskRequest(name=made.name))).periodic_task
    assert gone.name == made.name
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.DeletePeriodicTask(pb.DeletePeriodicTaskRequest(name=made.name))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


async def test_racing_enqueues_of_one_slot_create_one_task(stub: Stub, tool: pb.Tool, database_url: str) -> None:
    made = await schedule(stub, tool, "*/5 * * * *")
    slot = Timestamp()
    slot.FromDatetime(dt.datetime(2030, 1, 1, 12, 5, tzinfo=dt.UTC))
    answers = await asyncio.gather(
        *(stub.EnqueuePeriodicTask(pb.EnqueuePeriodicTaskRequest(name=made.name, slot_at=slot)) for _ in range(20))
    )
    created = [a.task for a in answers if a.HasField("task")]
    assert len(created) == 1 and created[0].status == pb.TASK_STATUS_SCHEDULED  # a future slot waits
    assert await slots(database_url, made.name) == [dt.datetime(2030, 1, 1, 12, 5, tzinfo=dt.UTC)]
    after = (await stub.ListPeriodicTasks(pb.ListPeriodicTasksRequest(after_name=made.name[:-1]))).periodic_tasks
    assert next(p for p in after if p.name == made.name).last_slot_at == slot


async def test_catch_up_is_bounded_and_a_restart_resumes_after_the_last_slot(
    stub: Stub, tool: pb.Tool, database_url: str
) -> None:
    made = await schedule(stub, tool, "* * * * *", timezone="Asia/Kolkata")
    # The schedule has existed for an hour and no reconciler ran: 60 missed slots.
    await sql(
        database_url,
        "UPDATE generation.periodic_tasks SET created_at = now() - interval '1 hour' WHERE name = %s",
        made.name,
    )
    now = dt.datetime.now(dt.UTC)
    first = Reconciler(stub, max_catch_up=3)
    assert await first.enqueue_periodic(now) >= 3
    got = await slots(database_url, made.name)
    minute = now.replace(second=0, microsecond=0)
    assert got == [minute - dt.timedelta(minutes=2), minute - dt.timedelta(minutes=1), minute]
    # A fresh reconciler (a restart) resumes from last_slot_at: nothing twice, nothing new yet.
    again = Reconciler(stub, max_catch_up=3)
    await again.enqueue_periodic(now)
    assert await slots(database_url, made.name) == got
    await again.enqueue_periodic(now + dt.timedelta(minutes=2))
    assert await slots(database_url, made.name) == [
        *got,
        minute + dt.timedelta(minutes=1),
        minute + dt.timedelta(minutes=2),
    ]


def reconciler_process(address: str, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "generated"), str(ROOT / "worker")]),
        "DATA_PLANE_ADDR": address,
        "RECONCILE_TICK_SECONDS": "0.2",
        "PERIODIC_MAX_CATCH_UP": "1000",
    }
    with log.open("wb") as out:
        return subprocess.Popen([sys.executable, "-m", "taskworker", "reconcile"], env=env, stdout=out, stderr=out)


async def test_three_reconcilers_racing_one_killed_enqueue_each_slot_exactly_once(
    stub: Stub, tool: pb.Tool, database_url: str, private: tuple[str, RunningServer], tmp_path: Path
) -> None:
    made = await schedule(stub, tool, "* * * * * *")  # every second (cron with a seconds field)
    procs = [reconciler_process(private[1].address, tmp_path / f"r{i}.log") for i in range(3)]
    try:
        await wait_until(lambda: _at_least(database_url, made.name, 3), timeout=60, what="slots from 3 reconcilers")
        procs[0].send_signal(signal.SIGKILL)  # mid-race, no goodbye
        assert procs[0].wait(10) == -signal.SIGKILL
        killed_at = len(await slots(database_url, made.name))
        await wait_until(
            lambda: _at_least(database_url, made.name, killed_at + 3), timeout=60, what="slots after the kill"
        )
    finally:
        for p in procs[1:]:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    got = await slots(database_url, made.name)
    assert len(got) == len(set(got)), "a slot was enqueued twice"
    # Every second from the first slot to the last has its task: none lost to the race or the kill.
    span = int((got[-1] - got[0]).total_seconds())
    assert got == [got[0] + dt.timedelta(seconds=i) for i in range(span + 1)]
    assert all(s.microsecond == 0 for s in got)


async def _at_least(database_url: str, name: str, n: int) -> bool:
    return len(await slots(database_url, name)) >= n
