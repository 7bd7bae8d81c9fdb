"""The worker fleet end to end, side by side with the batched path, and bulk enqueue.

- fleet: one worker process (WorkerFleet, no-op tool, concurrency 128, LISTEN wake) drains
  20,000 tasks queued beforehand; tasks/s from its first claim to its last report. Twice: with
  batched reports (the default: CompleteTasks / FailTasks coalesced) and with one report per task
  (report_batch=1 with as many in flight as tasks: what the fleet did before), so the gain is
  measured in the same run.
- batched path: ClaimTasks(100) + CompleteTasks loops (bench_throughput's client, 8 loops in two
  processes) for the same minutes: the ceiling the fleet is compared with.
- enqueue: QueueTasks in batches of 500 (4 calls in flight) vs QueueTask one by one (32 in
  flight), tasks/s through gRPC.

Server, worker, clients and PostgreSQL share the machine: read the ratios, not the absolutes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_throughput as tp
import common
from common import Json

#: The worker and enqueue processes (a module of their own: they import only what a worker
#: needs, not this harness).
PROCS = Path(__file__).resolve().parent / "fleet_procs.py"


def run_fleet(url: str, address: str, tool_id: str, count: int, concurrency: int, report_batch: int) -> Json:
    tp.refill(url, tool_id, count)
    argv = [common.PYTHON, str(PROCS), "worker", address, tool_id, str(count), str(concurrency), str(report_batch)]
    out = subprocess.run(argv, env=common.env_with_path(), capture_output=True, timeout=900, check=True).stdout
    result: Json = json.loads(out)
    result["verified_completed_rows"] = tp.completed_count(url)
    return result


def run_enqueue(url: str, address: str, tool_id: str, mode: str, count: int) -> Json:
    tp.refill(url, tool_id, 0)
    argv = [common.PYTHON, str(PROCS), "enqueue", address, tool_id, mode, str(count)]
    out = subprocess.run(argv, env=common.env_with_path(), capture_output=True, timeout=900, check=True).stdout
    result: Json = json.loads(out)
    result["verified_rows"] = _count(url)
    return result


def _count(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM generation.tasks").fetchone()
        return int(row[0]) if row else 0


def measure(url: str, quick: bool) -> Json:
    count = 2_000 if quick else 20_000
    concurrency = 128
    batched_seconds = 1.0 if quick else 5.0
    tool_id = tp.make_tool(url)
    result: Json = {"tasks": count, "concurrency": concurrency, "worker_processes": 1}
    server, address = tp.start_server(url, pool=16)
    try:
        result["fleet_batched"] = run_fleet(url, address, tool_id, count, concurrency, report_batch=500)
        result["fleet_one_report_per_task"] = run_fleet(url, address, tool_id, count, concurrency, report_batch=1)
        tp.refill(url, tool_id, 60_000 if quick else 200_000)
        batched = tp.run_tool(address, tool_id, "batched", 8, batched_seconds, processes=2, server_pid=server.pid)
        result["batched_path"] = {"clients": 8, "batch": tp.BATCH, **batched}
        result["ratio_fleet_to_batched_path"] = result["fleet_batched"]["tasks_per_s"] / batched["tasks_per_s"]
        result["enqueue_bulk_500"] = run_enqueue(url, address, tool_id, "bulk", 10_000 if quick else 100_000)
        result["enqueue_single"] = run_enqueue(url, address, tool_id, "single", 2_000 if quick else 10_000)
    finally:
        tp.stop_server(server)
    result["loadavg"] = common.loadavg()
    return result


def run(server: str, quick: bool = False) -> Json:
    with common.queue_database(server) as url:
        return measure(url, quick)


def main() -> int:
    p: argparse.ArgumentParser = common.arg_parser(__doc__ or "")
    args = p.parse_args()
    with common.server_url() as (server, _):
        common.write_json(run(server, quick=args.quick), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
