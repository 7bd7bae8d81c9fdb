"""A long transaction elsewhere holding back the xmin horizon while the fleet churns.

Three runs of the same load, each in a fresh queue database on the benchmark's own cluster
(autovacuum on, `autovacuum_naptime` 5 s so vacuum can keep up within a short run; the rest
PostgreSQL's defaults), the generated server as its own process:

- load: an enqueuer (QueueTasks of RATE/10 every 100 ms), a WorkerFleet (64 lanes, no-op tool,
  batched claims and reports) completing them, and the reconciler's retention (PruneTasks of
  rows finished over 1 s ago, every second): the table stays the size of the live queue when
  vacuum can reclaim what is deleted and updated.
- baseline: nothing else.
- held: from HOLD_AT seconds on, a session of another role (`bench_reporter`,
  application_name `nightly-report`) runs `BEGIN ISOLATION LEVEL REPEATABLE READ` and a SELECT,
  then sits idle in transaction to the end: its snapshot holds the horizon, so no row version
  deleted or updated after it can be vacuumed.
- mitigated: the same session, with the guidance of docs/deploy.md applied to its role
  (`ALTER ROLE bench_reporter SET idle_in_transaction_session_timeout = TIMEOUT`): PostgreSQL ends
  it after TIMEOUT seconds idle, the horizon moves on, autovacuum catches up.

Every WINDOW seconds: the fleet's ClaimTasks latency (p50/p99, client side, from a CallLedger
interceptor on its channel), tasks completed per second, the heap and index sizes of
generation.tasks (and of the claim index idx_gen_tasks_queue), dead tuples, and the age in
transactions of the oldest backend xmin (what holds the horizon), and whether the holder's
session is still there (pg_stat_activity: pid, application_name, transaction age).
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_throughput as tp
import common
from common import Json

ROOT = Path(__file__).resolve().parent.parent
RATE = 600  # tasks enqueued per second
WINDOW = 10.0
TIMEOUT_S = 20  # the mitigation's idle_in_transaction_session_timeout
HOLDER_ROLE = "bench_reporter"

SIZES_SQL = """
SELECT pg_relation_size('generation.tasks'), pg_indexes_size('generation.tasks'),
       pg_relation_size('generation.idx_gen_tasks_queue'), s.n_live_tup, s.n_dead_tup,
       (SELECT max(age(backend_xmin)) FROM pg_stat_activity WHERE datname = current_database()),
       s.autovacuum_count,
       (SELECT extract(epoch FROM now() - xact_start) FROM pg_stat_activity
        WHERE datname = current_database() AND application_name = 'nightly-report')
FROM pg_stat_user_tables s WHERE s.relid = 'generation.tasks'::regclass
"""


class LongTxCluster(common.BenchCluster):
    """The benchmark cluster with autovacuum waking every 5 s (the default is 1 min)."""

    def start(self) -> None:
        opts = (
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c max_connections=200 "
            "-c autovacuum_naptime=5s"
        )
        self._run(common.pg_bin("pg_ctl"), "-D", str(self.data), "-o", opts, "-l", str(self.dir / "log"), "-w", "start")


def _hold(url: str, role: str) -> Any:
    """A session of `role` idle in a REPEATABLE READ transaction whose snapshot is taken."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    conn = psycopg.connect(make_conninfo(url, user=role, application_name="nightly-report"))
    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    conn.execute("SELECT count(*) FROM generation.tools").fetchone()
    return conn


async def _scenario(url: str, name: str, seconds: float, hold_at: float) -> Json:
    import grpc
    import psycopg
    from generation.task.v1 import task_pb2 as pb
    from generation.task.v1 import task_pb2_grpc
    from support.server_proc import CallLedger

    sys.path.insert(0, str(ROOT / "worker"))
    from taskworker import WorkerFleet

    with psycopg.connect(url, autocommit=True) as admin:
        if admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (HOLDER_ROLE,)).fetchone() is None:
            admin.execute(f"CREATE ROLE {HOLDER_ROLE} LOGIN")
        admin.execute(f"GRANT USAGE ON SCHEMA generation TO {HOLDER_ROLE}")
        admin.execute(f"GRANT SELECT ON generation.tools TO {HOLDER_ROLE}")
        timeout = f"{TIMEOUT_S}s" if name == "mitigated" else "0"
        admin.execute(f"ALTER ROLE {HOLDER_ROLE} SET idle_in_transaction_session_timeout = '{timeout}'")
    proc, address = tp.start_server(url, pool=8)
    ledger = CallLedger()
    windows: list[Json] = []
    holder: Any = None
    held_until: float | None = None
    held_from = 0.0
    stop = asyncio.Event()
    try:
        async with grpc.aio.insecure_channel(address, interceptors=[cast(Any, ledger)]) as channel:
            stub = task_pb2_grpc.GenerationDataServiceStub(channel)
            tool = (await stub.RegisterTool(pb.RegisterToolRequest(name=f"longtx-{uuid.uuid4().hex[:8]}"))).tool
            await stub.SetToolLease(pb.SetToolLeaseRequest(tool_id=tool.id, lease_seconds=60))

            async def enqueue() -> None:
                per = RATE // 10
                next_at = time.monotonic()
                while not stop.is_set():
                    await stub.QueueTasks(pb.QueueTasksRequest(tool_ids=[tool.id] * per), timeout=30)
                    next_at += 0.1
                    await asyncio.sleep(max(0.0, next_at - time.monotonic()))  # pacing the offered load

            async def prune() -> None:
                while not stop.is_set():
                    while (await stub.PruneTasks(pb.PruneTasksRequest(older_than_seconds=1, limit=5000))).deleted:
                        pass
                    await asyncio.sleep(1.0)  # the reconciler's retention period

            async def noop(task: pb.Task, ctx: object) -> None:
                return None

            fleet = WorkerFleet(stub, poll_interval=0.05)
            fleet.add_tool(tool.id, noop, concurrency=64, lease_seconds=60)
            loops = [asyncio.create_task(enqueue()), asyncio.create_task(prune()), asyncio.create_task(fleet.run())]
            started = time.monotonic()
            with psycopg.connect(url, autocommit=True) as probe:
                for i in range(int(seconds / WINDOW)):
                    window_start = started + i * WINDOW
                    completed_before = len(ledger.completed)
                    if holder is None and name != "baseline" and window_start - started >= hold_at:
                        holder = await asyncio.to_thread(_hold, url, HOLDER_ROLE)
                        held_from = time.monotonic()
                    await asyncio.sleep(max(0.0, window_start + WINDOW - time.monotonic()))  # the window's end
                    end = time.monotonic()
                    window_start = max(window_start, end - WINDOW)
                    claims = [
                        a.answered - a.started
                        for a in ledger.answers
                        if a.method == "ClaimTasks" and a.started >= window_start
                    ]
                    done = len(ledger.completed)
                    sizes = probe.execute(SIZES_SQL).fetchone()
                    assert sizes is not None
                    if holder is not None and held_until is None and sizes[7] is None:
                        held_until = end  # PostgreSQL ended the session (the mitigation's timeout)
                    print(
                        f"longtx {name} t={end - started:.0f}s claims={len(claims)} done={done} sizes={sizes}",
                        file=sys.stderr,
                        flush=True,
                    )
                    windows.append(
                        {
                            "t_s": round(end - started, 1),
                            "claim": common.latency_summary(claims),
                            "claim_calls": len(claims),
                            "completed_per_s": (done - completed_before) / (end - window_start),
                            "heap_mb": sizes[0] / 2**20,
                            "indexes_mb": sizes[1] / 2**20,
                            "claim_index_mb": sizes[2] / 2**20,
                            "live_tuples": sizes[3],
                            "dead_tuples": sizes[4],
                            "oldest_xmin_age": sizes[5],
                            "autovacuums": sizes[6],
                            "holder_xact_age_s": None if sizes[7] is None else round(float(sizes[7]), 1),
                        }
                    )
            stop.set()
            fleet.drain()
            await asyncio.wait_for(asyncio.gather(*loops), 60)
            completed = len(ledger.completed)
            enqueued = len(ledger.enqueued)
    finally:
        stop.set()
        tp.stop_server(proc)
        if holder is not None:
            holder.close()
    # Throughput per window from the ledger's completions (tasks, not calls).
    return {
        "seconds": seconds,
        "hold_at_s": hold_at if name != "baseline" else None,
        "held_for_s": None if holder is None else round((held_until or time.monotonic()) - held_from, 1),
        "enqueued": enqueued,
        "completed": completed,
        "tasks_per_s": completed / seconds,
        "windows": windows,
    }


def run(server: str = "", quick: bool = False) -> Json:
    """`server` is unused: the run needs a cluster of its own (its autovacuum settings)."""
    seconds, hold_at = (30.0, 10.0) if quick else (150.0, 10.0)
    cluster = LongTxCluster()
    try:
        out: Json = {"rate": RATE, "window_s": WINDOW, "timeout_s": TIMEOUT_S, "scenarios": {}}
        for name in ("baseline", "held", "mitigated"):
            with common.queue_database(cluster.url) as url:
                out["scenarios"][name] = asyncio.run(_scenario(url, name, seconds, hold_at))
        return out
    finally:
        cluster.destroy()


def main() -> int:
    p = common.arg_parser(__doc__ or "")
    args = p.parse_args()
    common.write_json(run("", quick=args.quick), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
