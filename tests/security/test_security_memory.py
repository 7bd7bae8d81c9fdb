"""Bounded memory before authentication (issue 27, row 5) and for callers that never read their
answers (row 6): a refused call is answered before its body is received, so a hundred
unauthenticated 3.9 MB requests cost the server almost nothing; answers a caller does not read
are bounded per connection and dropped with the connection when its keepalive goes unanswered.
The server runs as a process of its own; its memory is read from /proc."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from conftest import as_service_role
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from support.pg import Cluster, scratch_database
from support.server_proc import rss_bytes, serving, wait_serving

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "t0ken-for-the-memory-tests-0123456789"
MB = 1024 * 1024
QUEUE_TASKS = "/generation.task.v1.GenerationDataService/QueueTasks"


@pytest.fixture
def queue_db(pg_server: tuple[str, Cluster | None]) -> Iterator[str]:
    with scratch_database(pg_server[0]) as url:
        yield url


def server_argv(url: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "generation.task.v1.task_pydb_server",
        "--database-url",
        as_service_role(url),
        "--pool-max",
        "4",
        "--no-reflection",
        *extra,
    ]


def server_env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT / "generated"), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "AUTH_TOKENS": TOKEN}


AUTH = (("authorization", f"Bearer {TOKEN}"),)


async def test_a_hundred_unauthenticated_big_requests_are_refused_before_they_are_buffered(queue_db: str) -> None:
    pid: list[int] = []
    async with (
        serving(server_argv(queue_db), server_env(), pid) as (address, _),
        grpc.aio.insecure_channel(address) as ch,
    ):
        await wait_serving(ch)
        stub = task_pb2_grpc.GenerationDataServiceStub(ch)
        tool = (await stub.RegisterTool(pb.RegisterToolRequest(name="memory"), metadata=AUTH)).tool
        task = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id), metadata=AUTH)).task
        for _ in range(20):  # warm: the answer path allocated once
            await stub.GetTask(pb.GetTaskRequest(task_id=task.id), metadata=AUTH)
        before = rss_bytes(pid[0])

        body = b"\x0a" + b"\xff" * (39 * MB // 10)  # 3.9 MB, never decoded
        # Each on a channel of its own, as a hundred clients would be (one connection each).
        channels = [grpc.aio.insecure_channel(address) for _ in range(100)]
        try:
            calls = [c.unary_unary(QUEUE_TASKS, None, None)(body, timeout=60) for c in channels]
            outcomes = await asyncio.gather(*calls, return_exceptions=True)
            # Authenticated calls are still answered meanwhile and after.
            got = await stub.GetTask(pb.GetTaskRequest(task_id=task.id), metadata=AUTH, timeout=30)
            assert got.task.id == task.id
        finally:
            await asyncio.gather(*(c.close(None) for c in channels))
        peak = rss_bytes(pid[0], "VmHWM")
        codes = {o.code() if isinstance(o, grpc.aio.AioRpcError) else o for o in outcomes}
        assert codes <= {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.UNAVAILABLE}, codes
        assert grpc.StatusCode.UNAUTHENTICATED in codes, codes
        growth = max(peak, rss_bytes(pid[0])) - before
        assert growth < 100 * MB, f"the server grew by {growth / MB:.0f} MB for 100 refused 3.9 MB requests"
        print(f"rss before {before / MB:.0f} MB, growth {growth / MB:.1f} MB")
