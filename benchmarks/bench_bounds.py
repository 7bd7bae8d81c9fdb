"""Latency of authenticated calls while the server is abused (issue 27, rows 5 and 7), measured
side by side in one run against one server process on a scratch database:

- flood: authenticated GetTask p50 idle, then while 100 unauthenticated 3.9 MB QueueTasks
  requests (a connection each) are sent over and over; the server's RSS growth from /proc.
- hot row: HeartbeatTask p50 on 40 rows of their own, idle, then while 100 callers hammer one
  row a transaction of the benchmark holds locked (pool of 10, --lock-timeout 1 s).

Targets (docs/security.md): flood p50 within 3x of idle; other rows within 2x of idle.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python benchmarks/bench_bounds.py
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import grpc
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "generated"))

from generation.task.v1 import task_pb2 as pb  # noqa: E402
from generation.task.v1 import task_pb2_grpc  # noqa: E402

TOKEN = "bench-token-" + uuid.uuid4().hex
AUTH = (("authorization", f"Bearer {TOKEN}"),)
MB = 1024 * 1024
SCHEMA = ROOT / "example_protos" / "generation" / "task" / "v1" / "schema.sql"


def rss(pid: int, field: str = "VmRSS") -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(field)


async def start_server(url: str, *extra: str) -> tuple[asyncio.subprocess.Process, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "generated"), "AUTH_TOKENS": TOKEN}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "generation.task.v1.task_pydb_server", "--database-url", url,
        "--listen-addr", "127.0.0.1:0", "--no-reflection", *extra,
        env=env, stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stderr is not None
    while True:
        line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
        assert line, "the server ended before it served"
        found = re.search(r" event=serving .* addr=\S+ port=(\d+) ", line)
        if found:
            _readers.append(asyncio.ensure_future(_drain(proc.stderr)))
            return proc, f"127.0.0.1:{found.group(1)}"


_readers: list[asyncio.Future[None]] = []


async def _drain(stream: asyncio.StreamReader) -> None:
    async for _ in stream:
        pass


async def p50(call: Any, n: int) -> float:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        await call()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def flood(address: str, stop: asyncio.Event) -> int:
    body = b"\x0a" + b"\xff" * (39 * MB // 10)
    sent = 0
    channels = [grpc.aio.insecure_channel(address) for _ in range(100)]

    async def one(ch: grpc.aio.Channel) -> None:
        nonlocal sent
        while not stop.is_set():
            with contextlib.suppress(grpc.aio.AioRpcError):  # UNAUTHENTICATED, as every one is
                await ch.unary_unary("/generation.task.v1.GenerationDataService/QueueTasks", None, None)(
                    body, timeout=30
                )
            sent += 1

    await asyncio.gather(*(one(c) for c in channels))
    await asyncio.gather(*(c.close(None) for c in channels))
    return sent


async def bench_flood(url: str) -> dict[str, Any]:
    proc, address = await start_server(url)
    try:
        async with grpc.aio.insecure_channel(address) as ch:
            stub = task_pb2_grpc.GenerationDataServiceStub(ch)
            await ch.channel_ready()
            tool = (await stub.RegisterTool(pb.RegisterToolRequest(name=f"b-{uuid.uuid4()}"), metadata=AUTH)).tool
            task = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id), metadata=AUTH)).task

            async def get() -> None:
                await stub.GetTask(pb.GetTaskRequest(task_id=task.id), metadata=AUTH, timeout=30)

            await p50(get, 50)
            before = rss(proc.pid)
            idle = await p50(get, 300)
            # The flood from a process of its own: its client work must not delay this one's calls.
            flooder = await asyncio.create_subprocess_exec(
                sys.executable, __file__, "--flood", address, stdout=asyncio.subprocess.PIPE
            )
            await asyncio.sleep(1.0)  # the flood under way
            loaded = await p50(get, 300)
            flooder.terminate()
            out, _ = await flooder.communicate()
            sent = int(out or b"0")
            growth = rss(proc.pid, "VmHWM") - before
        return {"idle_p50_ms": idle, "flood_p50_ms": loaded, "ratio": loaded / idle,
                "unauthenticated_sent": sent, "rss_growth_mb": growth / MB}  # fmt: skip
    finally:
        proc.terminate()
        await proc.wait()


async def bench_hot_row(url: str) -> dict[str, Any]:
    proc, address = await start_server(url, "--pool-max", "10", "--lock-timeout", "1")
    try:
        async with grpc.aio.insecure_channel(address) as ch, await psycopg.AsyncConnection.connect(url) as holder:
            stub = task_pb2_grpc.GenerationDataServiceStub(ch)
            await ch.channel_ready()
            tool = (await stub.RegisterTool(pb.RegisterToolRequest(name=f"h-{uuid.uuid4()}"), metadata=AUTH)).tool
            n = 41
            await stub.QueueTasks(pb.QueueTasksRequest(tool_ids=[tool.id] * n), metadata=AUTH)
            tasks = list((await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool.id, limit=n), metadata=AUTH)).tasks)
            hot, others = tasks[0], tasks[1:]

            async def beat_others() -> None:
                await asyncio.gather(*(stub.HeartbeatTask(pb.HeartbeatTaskRequest(
                    task_id=t.id, lease_token=t.lease_token), metadata=AUTH, timeout=30) for t in others))  # fmt: skip

            async def beat_one() -> None:
                t = others[0]
                await stub.HeartbeatTask(
                    pb.HeartbeatTaskRequest(task_id=t.id, lease_token=t.lease_token), metadata=AUTH, timeout=30
                )

            await p50(beat_others, 5)
            idle_one = await p50(beat_one, 100)
            idle_batch = await p50(beat_others, 20)
            await holder.execute("SELECT 1 FROM generation.tasks WHERE id = %s FOR UPDATE", (hot.id,))
            stop = asyncio.Event()
            refused: dict[str, int] = {}

            async def hammer() -> None:
                while not stop.is_set():
                    try:
                        await stub.HeartbeatTask(pb.HeartbeatTaskRequest(task_id=hot.id, lease_token=hot.lease_token),
                                                 metadata=AUTH, timeout=30)  # fmt: skip
                    except grpc.aio.AioRpcError as err:
                        refused[err.code().name] = refused.get(err.code().name, 0) + 1

            hammering = [asyncio.ensure_future(hammer()) for _ in range(100)]
            await asyncio.sleep(0.5)
            hot_one = await p50(beat_one, 100)
            hot_batch = await p50(beat_others, 20)
            stop.set()
            await asyncio.gather(*hammering)
            await holder.rollback()
        return {"idle_p50_ms": idle_one, "hot_p50_ms": hot_one, "ratio": hot_one / idle_one,
                "idle_40_p50_ms": idle_batch, "hot_40_p50_ms": hot_batch, "ratio_40": hot_batch / idle_batch,
                "hot_row_answers": refused}  # fmt: skip
    finally:
        proc.terminate()
        await proc.wait()


async def main() -> None:
    server_url = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    name = f"bench_bounds_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = psycopg.conninfo.make_conninfo(server_url, dbname=name)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(SCHEMA.read_text().encode())
        out = {"flood": await bench_flood(url), "hot_row": await bench_hot_row(url), "loadavg": os.getloadavg()}
        print(json.dumps(out, indent=2))
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


async def flood_until_stopped(address: str) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(15, stop.set)
    sent = await flood(address, stop)
    print(sent, flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--flood"]:
        asyncio.run(flood_until_stopped(sys.argv[2]))
    else:
        asyncio.run(main())
