"""Replication and many servers: recovery time after a failover, and claim throughput with one
vs three server processes.

- failover: a synchronous primary and hot standby (tests/pg_replication.py, their own throwaway
  clusters whatever DATABASE_URL says), the generated server on a two-host URL
  (`target_session_attrs=read-write`), 8 concurrent enqueue loops. The primary is killed
  (`pg_ctl stop -m immediate`) and the standby promoted straight away: an HA manager's detection
  delay comes on top and is not measured. Measured per round: promote → the first enqueue sent
  after the promotion answered OK, and kill → that answer; calls answered UNAVAILABLE.
- servers: the single path (ClaimNextTask + CompleteTask, bench_throughput's client, 16 blocking
  clients in 2 processes) against 1 server process and against 3 behind client-side round_robin
  (one channel over the three addresses), same database, alternated. On a 2-core machine the
  servers, clients and PostgreSQL share the cores: read the ratio, not the absolutes.
"""

from __future__ import annotations

import asyncio
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
    from pg_replication import replicated_pair

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


def servers(server: str, quick: bool) -> Json:
    seconds = 1.0 if quick else 6.0
    clients = 4 if quick else 16
    depth = 20_000 if quick else 200_000
    repeats = 1 if quick else 2
    runs: dict[str, list[float]] = {"1": [], "3": []}
    with common.queue_database(server) as url:
        tool_id = tp.make_tool(url)
        started = [tp.start_server(url, pool=8) for _ in range(3)]
        try:
            for _ in range(repeats):
                for count in ("1", "3"):
                    tp.refill(url, tool_id, depth)
                    address = ",".join(a for _, a in started[: int(count)])
                    result = tp.run_tool(address, tool_id, "single", clients, seconds, 2, started[0][0].pid)
                    runs[count].append(result["tasks_per_s"])
        finally:
            for proc, _ in started:
                tp.stop_server(proc)
    one, three = (common.summary(runs[c]) for c in ("1", "3"))
    return {
        "clients": clients,
        "seconds": seconds,
        "one_server_tasks_per_s": one,
        "three_servers_tasks_per_s": three,
        "ratio_three_to_one": three["median"] / one["median"] if one["median"] else None,
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
