"""Shared helpers for the queue-semantics tests (tests/queue/).

Everything a test does to the queue goes through the generated gRPC service; SQL is used
only to seed volume, to move time (claim_expires_at / created_at into the past) and to
read the rows back for assertions.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import psycopg
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from google.protobuf.duration_pb2 import Duration
from psycopg.rows import dict_row

ROOT = Path(__file__).resolve().parents[2]
WORKER_SCRIPT = Path(__file__).resolve().parent / "queue_worker_proc.py"

if TYPE_CHECKING:
    Stub = task_pb2_grpc.GenerationDataServiceAsyncStub
else:
    Stub = task_pb2_grpc.GenerationDataServiceStub
Row = dict[str, Any]

#: FailTask(retry_after=AT_ONCE): re-queued claimable at once, not after the tool's backoff.
AT_ONCE = Duration()

# Words that would mean SQL text or a Python traceback leaked into a status message.
LEAK_MARKERS = ("SELECT ", "UPDATE ", "INSERT ", "RETURNING", "WHERE ", "Traceback", 'File "', "psycopg", "%(")


async def new_tool(stub: Stub, prefix: str = "q") -> pb.Tool:
    resp = await stub.RegisterTool(pb.RegisterToolRequest(name=f"{prefix}-{uuid.uuid4().hex[:12]}"))
    return resp.tool


async def enqueue(stub: Stub, tool_id: str, **kw: Any) -> pb.Task:
    return (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool_id, **kw))).task


async def claim_next(stub: Stub, tool_id: str) -> pb.Task | None:
    resp = await stub.ClaimNextTask(pb.ClaimNextTaskRequest(tool_id=tool_id))
    return resp.task if resp.HasField("task") else None


async def claim_one(stub: Stub, tool_id: str) -> pb.Task:
    task = await claim_next(stub, tool_id)
    assert task is not None, "expected a claimable task"
    return task


async def rpc_error(call: Any, request: Any) -> grpc.aio.AioRpcError:
    """The AioRpcError `call(request)` ends with (fails the test if it succeeds)."""
    try:
        resp = await call(request)
    except grpc.aio.AioRpcError as err:
        return err
    raise AssertionError(f"expected an error, got {resp!r}")


def assert_clean_details(err: grpc.aio.AioRpcError) -> str:
    details = err.details() or ""
    assert err.code() != grpc.StatusCode.INTERNAL, details
    for marker in LEAK_MARKERS:
        assert marker not in details, f"status details leak {marker!r}: {details!r}"
    assert "Traceback" not in str(err.trailing_metadata())
    return details


@asynccontextmanager
async def connect(url: str) -> AsyncIterator[psycopg.AsyncConnection[Row]]:
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True, row_factory=dict_row)
    try:
        yield conn
    finally:
        await conn.close()


async def execute(url: str, query: str, params: Sequence[Any] | dict[str, Any] | None = None) -> int:
    """Run one statement; the number of rows it touched."""
    async with connect(url) as conn:
        cur = await conn.execute(query, params)
        return cur.rowcount


async def fetch(url: str, query: str, params: Sequence[Any] | dict[str, Any] | None = None) -> list[Row]:
    async with connect(url) as conn:
        cur = await conn.execute(query, params)
        return await cur.fetchall()


async def row(url: str, task_id: str) -> Row:
    rows = await fetch(url, "SELECT * FROM generation.tasks WHERE id = %s", (task_id,))
    assert len(rows) == 1, f"task {task_id} not found"
    return rows[0]


async def expire_leases(url: str, task_ids: Sequence[str], seconds_ago: int = 1) -> int:
    """Move the leases of `task_ids` into the past: the lease lapsed without a minute of waiting."""
    return await execute(
        url,
        "UPDATE generation.tasks SET claim_expires_at = now() - make_interval(secs => %s) WHERE id = ANY(%s::uuid[])",
        (seconds_ago, list(task_ids)),
    )


async def seed(url: str, tool_id: str, count: int, *, priorities: int = 1, max_retries: int = 3) -> None:
    """`count` queued tasks for `tool_id` in one INSERT ... SELECT; priority cycles over 0..priorities-1
    (scrambled), created_at strictly increasing with the series."""
    await execute(
        url,
        """
        INSERT INTO generation.tasks (tool_id, priority, max_retries, input, created_at)
        SELECT %(tool)s, (i * 7919) %% %(prios)s, %(max)s, jsonb_build_object('n', i),
               now() - interval '1 hour' + i * interval '1 millisecond'
        FROM generate_series(1, %(count)s) AS i
        """,
        {"tool": tool_id, "prios": priorities, "max": max_retries, "count": count},
    )


async def wait_until(predicate: Any, *, timeout: float = 30.0, what: str = "condition") -> None:
    """Poll an async predicate until it is true; fail after `timeout` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    delay = 0.02
    while True:
        if await predicate():
            return
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(delay)  # polling interval, not synchronisation: the predicate decides
        delay = min(delay * 2, 0.25)


class WorkerProcess:
    """tests/support/queue_worker_proc.py in a child process, speaking JSON lines on stdout."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, *args: str) -> WorkerProcess:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "generated"), str(ROOT / "protoc-gen-pydb")])}
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(WORKER_SCRIPT),
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        return cls(proc)

    async def message(self, timeout: float = 60.0) -> Any:
        """The next JSON line the worker printed."""
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not line:
            await self.proc.wait()
            err = await self.proc.stderr.read() if self.proc.stderr else b""
            raise AssertionError(f"worker exited ({self.proc.returncode}) without a message: {err.decode()[-2000:]}")
        return json.loads(line)

    async def finish(self, timeout: float = 120.0) -> Any:
        """Wait for a worker that ends by itself; its last message."""
        out, err = await asyncio.wait_for(self.proc.communicate(), timeout)
        assert self.proc.returncode == 0, f"worker failed ({self.proc.returncode}): {err.decode()[-2000:]}"
        lines = out.decode().strip().splitlines()
        assert lines, "worker printed nothing"
        return json.loads(lines[-1])

    async def kill(self) -> None:
        """SIGKILL: no cleanup code of the worker runs."""
        self.proc.kill()
        await self.proc.wait()

    async def ensure_dead(self) -> None:
        if self.proc.returncode is None:
            await self.kill()
