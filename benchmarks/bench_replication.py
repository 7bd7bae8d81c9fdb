"""Replication and many servers: recovery time after a failover, and claim throughput with one
vs three server processes.

- failover: a synchronous primary and hot standby (tests/support/pg_replication.py, their own throwaway
  clusters whatever DATABASE_URL says), the generated server on a two-host URL
  (`target_session_attrs=read-write`), 8 concurrent enqueue loops. The primary is killed
  (`pg_ctl stop -m immediate`) and the standby promoted straight away: an HA manager's detection
  delay comes on top and is not measured. Measured per round: promote → the first enqueue sent
  after the promotion answered OK, and kill → that answer; calls answered UNAVAILABLE.
- servers: against 1 server process and against 3 behind client-side round_robin (one channel
  over the three addresses), same database, alternated, bench_throughput's blocking clients in 2
  processes, on two paths: single (ClaimNextTask + CompleteTask, 16 clients), where the server's
  CPU is the limit, and batched (ClaimTasks 100 + CompleteTasks, 8 clients), where PostgreSQL
  is. Each run also measures the servers' CPU (seconds of CPU per second of run: how many cores
  they kept busy, together and the busiest one) and per task. On a 2-core machine the servers,
  clients and PostgreSQL share the cores, so 3 processes cannot beat 1 there: what the extra
  processes buy shows in the CPU figures (one process is one core's worth of Python at most;
  `single_path_tasks_per_s_per_server_core` is that ceiling), not in tasks/s.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_throughput as tp
import common
from common import Json


def _failover_round(quick: bool) -> Json:
    import grpc
    from generation.task.v1 import task_pb2, task_pb2_grpc
    from support.pg_replication import replicated_pair

    with replicated_pair(synchronous=True) as pair, common.queue_database(pair.multi_host_url) as url:
        tool_id = tp.make_tool(url)
        proc, address = tp.start_server(url, pool=8)
        try:

            async def measure() -> Json:
                answered: list[tuple[float, float]] = []
                unavailable = 0
                stop = asyncio.Event()
                async with grpc.aio.insecure_channel(address) as channel:
                    stub = task_pb2_grpc.GenerationDataServiceStub(channel)

                    async def enqueue() -> None:
                        nonlocal unavailable
                        while not stop.is_set():
                            started = time.monotonic()
                            try:
                                await stub.QueueTask(task_pb2.QueueTaskRequest(tool_id=tool_id), timeout=5)
                                answered.append((started, time.monotonic()))
                            except grpc.aio.AioRpcError as err:
                                if err.code() != grpc.StatusCode.UNAVAILABLE:
                                    raise
                                unavailable += 1
                                await asyncio.sleep(0.02)  # a client's retry backoff

                    loops = [asyncio.create_task(enqueue()) for _ in range(8)]
                    await asyncio.sleep(0.5 if quick else 2.0)  # a steady enqueue rate before the kill
                    before = len(answered)
                    kill_at = time.monotonic()
                    await asyncio.to_thread(pair.primary.kill)
                    promote_at = time.monotonic()
                    await asyncio.to_thread(pair.standby.promote)
                    deadline = time.monotonic() + 60
                    while time.monotonic() < deadline and not any(s >= promote_at for s, _ in answered):
                        await asyncio.sleep(0.01)
                    stop.set()
                    await asyncio.gather(*loops)
                first_ok = min(done for started, done in answered if started >= promote_at)
                return {
                    "promote_to_first_ok_s": first_ok - promote_at,
                    "kill_to_first_ok_s": first_ok - kill_at,
                    "unavailable_answers": unavailable,
                    "enqueued_before_kill": before,
                }

            return asyncio.run(measure())
        finally:
            tp.stop_server(proc)


def failover(quick: bool) -> Json:
    rounds = [_failover_round(quick) for _ in range(1 if quick else 3)]
    return {
        "rounds": rounds,
        "promote_to_first_ok_s": common.summary([r["promote_to_first_ok_s"] for r in rounds]),
        "kill_to_first_ok_s": common.summary([r["kill_to_first_ok_s"] for r in rounds]),
    }


def _served(started: list[tuple[subprocess.Popen[bytes], str]], url: str, tool_id: str, mode: str, clients: int,
            seconds: float, depth: int) -> Json:  # fmt: skip
    """One run of `mode` through the server processes `started` (round_robin when several), from a
    queue refilled to `depth`: tasks/s, and the CPU the servers used (seconds of CPU per second
    of the run: 1.0 is one core kept busy), each and per task."""
    tp.refill(url, tool_id, depth)
    before = [tp.cpu_seconds(proc.pid) for proc, _ in started]
    address = ",".join(a for _, a in started)
    result = tp.run_tool(address, tool_id, mode, clients, seconds, 2, started[0][0].pid)
    # Over the whole call (the clients start 2 s in): the servers idle outside the run.
    cpu = [tp.cpu_seconds(proc.pid) - b for (proc, _), b in zip(started, before, strict=True)]
    done = result["tasks_per_s"] * seconds
    return {
        "tasks_per_s": result["tasks_per_s"],
        "server_cores": sum(cpu) / seconds,
        "busiest_server_cores": max(cpu) / seconds,
        "server_cpu_us_per_task": sum(cpu) / done * 1e6 if done else None,
    }


def _compare(runs: dict[str, list[Json]]) -> Json:
    """Medians (and spread) of each measure, for 1 and for 3 server processes."""
    return {
        count: {key: common.summary([r[key] for r in rs if r[key] is not None]) for key in rs[0]}
        for count, rs in runs.items()
    }


def servers(server: str, quick: bool) -> Json:
    """1 vs 3 server processes on the single path (the server's CPU the limit) and the batched
    path (PostgreSQL the limit), alternated on the same database."""
    # mode: (clients, seconds per run, queue depth). The quick smoke run leaves the batched path
    # out: the same code with another client loop (bench_throughput's smoke run covers that loop).
    paths = {"single": (4, 1.0, 20_000)} if quick else {"single": (16, 6.0, 200_000), "batched": (8, 5.0, 250_000)}
    repeats = 1 if quick else 2
    runs: dict[str, dict[str, list[Json]]] = {mode: {"1": [], "3": []} for mode in paths}
    with common.queue_database(server) as url:
        tool_id = tp.make_tool(url)
        started = [tp.start_server(url, pool=8) for _ in range(3)]
        try:
            for _ in range(repeats):
                for mode, (clients, seconds, depth) in paths.items():
                    for count in ("1", "3"):
                        used = started[: int(count)]
                        runs[mode][count].append(_served(used, url, tool_id, mode, clients, seconds, depth))
        finally:
            for proc, _ in started:
                tp.stop_server(proc)
    single = _compare(runs["single"])
    batched = _compare(runs["batched"]) if "batched" in runs else None
    one, three = single["1"]["tasks_per_s"], single["3"]["tasks_per_s"]
    per_task = single["1"]["server_cpu_us_per_task"]["median"]
    clients, seconds, _ = paths["single"]
    return {
        "clients": clients,
        "seconds": seconds,
        "one_server_tasks_per_s": one,
        "three_servers_tasks_per_s": three,
        "ratio_three_to_one": three["median"] / one["median"] if one["median"] else None,
        "single": single,
        "batched": batched,
        "batched_clients": paths["batched"][0] if batched else None,
        "batched_ratio_three_to_one": (
            batched["3"]["tasks_per_s"]["median"] / batched["1"]["tasks_per_s"]["median"] if batched else None
        ),
        # One server process is one Python thread's worth of CPU: the single path's ceiling per
        # process, which processes on cores of their own add up to (until PostgreSQL's limit).
        "single_path_tasks_per_s_per_server_core": 1e6 / per_task if per_task else None,
    }


def run(server: str, quick: bool = False) -> Json:
    return {"failover": failover(quick), "servers": servers(server, quick)}


def main() -> int:
    args = common.arg_parser(__doc__ or "").parse_args()
    with common.server_url() as (server, _):
        common.write_json(run(server, quick=args.quick), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
