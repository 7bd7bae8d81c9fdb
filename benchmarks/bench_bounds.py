"""Latency of authenticated calls while the server is abused (issue 27, rows 5 and 7), measured
side by side in one run against one server process on a scratch database:

- flood: authenticated GetTask p50 idle, then while 100 unauthenticated 3.9 MB QueueTasks
  requests (a connection each) are sent over and over; the server's RSS growth from /proc.
- hot row: HeartbeatTask p50 on 40 rows of their own, idle, then while 100 callers hammer one
  row a transaction of the benchmark holds locked (pool of 10, --lock-timeout 1 s).

Targets (docs/security.md): flood p50 within 3x of idle; other rows within 2x of idle.

    python benchmarks/run.py --only bounds   # or: python benchmarks/bench_bounds.py [--quick]
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import common
import grpc
import psycopg
from common import Json

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "generated"))

from generation.task.v1 import task_pb2 as pb  # noqa: E402
from generation.task.v1 import task_pb2_grpc  # noqa: E402

TOKEN = "bench-token-" + uuid.uuid4().hex
AUTH = (("authorization", f"Bearer {TOKEN}"),)
MB = 1024 * 1024
FLOOD_TARGET, HOT_ROW_TARGET = 3.0, 2.0


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


async def flood(address: str, stop: asyncio.Event, clients: int, under_way: asyncio.Event) -> int:
    """Unauthenticated 3.9 MB QueueTasks calls on `clients` channels until `stop`; `under_way` is set
    once the server has refused the first of them."""
    body = b"\x0a" + b"\xff" * (39 * MB // 10)
    sent = 0
    channels = [grpc.aio.insecure_channel(address) for _ in range(clients)]

    async def one(ch: grpc.aio.Channel) -> None:
        nonlocal sent
        while not stop.is_set():
            with contextlib.suppress(grpc.aio.AioRpcError):  # UNAUTHENTICATED, as every one is
                await ch.unary_unary("/generation.task.v1.GenerationDataService/QueueTasks", None, None)(
                    body, timeout=30
                )
            sent += 1
            under_way.set()

    await asyncio.gather(*(one(c) for c in channels))
    await asyncio.gather(*(c.close(None) for c in channels))
    return sent


async def bench_flood(url: str, clients: int, calls: int) -> dict[str, Any]:
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
            idle = await p50(get, calls)
            # The flood from a process of its own: its client work must not delay this one's calls.
            flooder = await asyncio.create_subprocess_exec(
                sys.executable, __file__, "--flood", address, str(clients), stdout=asyncio.subprocess.PIPE
            )
            assert flooder.stdout is not None
            # The flood under way: the flooder says so once the server has refused its first call.
            assert (await flooder.stdout.readline()).strip() == b"flooding"
            loaded = await p50(get, calls)
            flooder.terminate()
            out, _ = await flooder.communicate()
            sent = int(out or b"0")
            growth = rss(proc.pid, "VmHWM") - before
        return {"clients": clients, "calls": calls, "idle_p50_ms": idle, "flood_p50_ms": loaded,
                "ratio": loaded / idle, "unauthenticated_sent": sent, "rss_growth_mb": growth / MB}  # fmt: skip
    finally:
        proc.terminate()
        await proc.wait()


async def bench_hot_row(url: str, hammers: int, calls: int) -> dict[str, Any]:
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
            idle_one = await p50(beat_one, calls)
            idle_batch = await p50(beat_others, max(calls // 5, 5))
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

            hammering = [asyncio.ensure_future(hammer()) for _ in range(hammers)]
            await asyncio.sleep(0.5)
            hot_one = await p50(beat_one, calls)
            hot_batch = await p50(beat_others, max(calls // 5, 5))
            stop.set()
            await asyncio.gather(*hammering)
            await holder.rollback()
        return {"hammers": hammers, "calls": calls, "idle_p50_ms": idle_one, "hot_p50_ms": hot_one, "ratio": hot_one / idle_one,
                "idle_40_p50_ms": idle_batch, "hot_40_p50_ms": hot_batch, "ratio_40": hot_batch / idle_batch,
                "hot_row_answers": refused}  # fmt: skip
    finally:
        proc.terminate()
        await proc.wait()


def run(server: str, quick: bool = False) -> Json:
    result: Json = {}
    with common.queue_database(server) as url:
        result["flood"] = asyncio.run(bench_flood(url, 10 if quick else 100, 20 if quick else 300))
    with common.queue_database(server) as url:
        result["hot_row"] = asyncio.run(bench_hot_row(url, 10 if quick else 100, 20 if quick else 100))
    result["targets"] = {"flood_ratio": FLOOD_TARGET, "hot_row_ratio": HOT_ROW_TARGET}
    return result


def _met(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def headline(r: Json) -> list[tuple[str, str, str, str]]:
    """report.py's headline rows: (what, measured, target, verdict)."""
    f, h = r["flood"], r["hot_row"]
    return [
        (f"Authenticated GetTask p50 under {f['clients']} unauthenticated 3.9 MB calls vs idle",
         f"{f['flood_p50_ms']:.2f} vs {f['idle_p50_ms']:.2f} ms = {f['ratio']:.2f}x (RSS +{f['rss_growth_mb']:.0f} MB)",
         f"≤ {FLOOD_TARGET:g}x", _met(f["ratio"] <= FLOOD_TARGET)),
        (f"HeartbeatTask p50 on another row while {h['hammers']} callers wait on one locked row vs idle",
         f"{h['hot_p50_ms']:.2f} vs {h['idle_p50_ms']:.2f} ms = {h['ratio']:.2f}x (40 rows at once: {h['ratio_40']:.2f}x)",
         f"≤ {HOT_ROW_TARGET:g}x", _met(h["ratio"] <= HOT_ROW_TARGET)),
    ]  # fmt: skip


def section(r: Json) -> list[str]:
    """report.py's section for RESULTS.md."""
    f, h = r["bounds"]["flood"], r["bounds"]["hot_row"]
    answers = ", ".join(f"{k} {v:,}" for k, v in sorted(h["hot_row_answers"].items())) or "none refused"
    return [
        "## 18. Bounded under abuse: unauthenticated floods and a hot row (issue 27)",
        "",
        (__doc__ or "").split("\n\n", 1)[1].split("\n\n")[0].strip(),
        "",
        "| measure | idle p50 ms | under load p50 ms | ratio | target |",
        "|---|---|---|---|---|",
        f"| GetTask, {f['clients']} unauthenticated 3.9 MB callers | {f['idle_p50_ms']:.3f} | {f['flood_p50_ms']:.3f} | **{f['ratio']:.2f}x** | ≤ {FLOOD_TARGET:g}x |",
        f"| HeartbeatTask on another row, {h['hammers']} callers on a locked row | {h['idle_p50_ms']:.3f} | {h['hot_p50_ms']:.3f} | **{h['ratio']:.2f}x** | ≤ {HOT_ROW_TARGET:g}x |",
        f"| 40 HeartbeatTasks at once on other rows, same | {h['idle_40_p50_ms']:.3f} | {h['hot_40_p50_ms']:.3f} | {h['ratio_40']:.2f}x | - |",
        "",
        f"Flood: {f['unauthenticated_sent']:,} unauthenticated calls sent ({f['calls']} timed GetTasks per phase); "
        f"server peak RSS growth **{f['rss_growth_mb']:.1f} MB** (target < 100 MB, tests/server/). "
        f"Hot row ({h['calls']} timed calls per phase): the locked row's callers were answered {answers}.",
        "",
    ]  # fmt: skip


def main() -> int:
    args = common.arg_parser(__doc__ or "").parse_args()
    with common.server_url() as (server, _):
        common.write_json(run(server, quick=args.quick), args.out)
    return 0


async def flood_until_stopped(address: str, clients: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(15, stop.set)
    under_way = asyncio.Event()

    async def announce() -> None:
        await under_way.wait()
        print("flooding", flush=True)

    announcing = asyncio.create_task(announce())
    sent = await flood(address, stop, clients, under_way)
    await announcing
    print(sent, flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--flood"]:
        asyncio.run(flood_until_stopped(sys.argv[2], int(sys.argv[3])))
    else:
        raise SystemExit(main())
