"""The processes bench_fleet and bench_peers start: one fleet worker draining a queue, and a bulk
(or one-by-one) enqueuer. Run as `fleet_procs.py worker ADDRESS TOOL COUNT CONCURRENCY
REPORT_BATCH` or `fleet_procs.py enqueue ADDRESS TOOL MODE COUNT`; prints a JSON line.

Only what a worker needs is imported here (grpc, the generated stubs, taskworker): a worker
process's CPU is measured whole (its rusage), start-up included, as each peer's is, so the
benchmark harness (and the plugin it imports) stays out of it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
Json = dict[str, Any]


def worker_main(address: str, tool_id: str, count: int, concurrency: int, report_batch: int) -> Json:
    """One worker process: drain `count` tasks, then print how long it took."""
    import grpc
    from generation.task.v1 import task_pb2 as pb
    from generation.task.v1 import task_pb2_grpc

    sys.path.insert(0, str(ROOT / "worker"))
    from taskworker import ListenWakeSubscriber, WorkerFleet

    async def main() -> Json:
        async with grpc.aio.insecure_channel(address) as channel:
            stub = task_pb2_grpc.GenerationDataServiceStub(channel)
            first: list[tuple[float, float]] = []  # (wall, CPU) at the first task

            async def noop(task: pb.Task, ctx: object) -> None:
                if not first:
                    first.append((time.perf_counter(), time.process_time()))

            batched = report_batch > 1
            knobs = {"claimers": int(os.environ["PYDB_FLEET_CLAIMERS"])} if "PYDB_FLEET_CLAIMERS" in os.environ else {}
            fleet = WorkerFleet(
                stub,
                **knobs,
                report_batch=report_batch,
                report_window=0.002 if batched else 0.0,
                report_in_flight=4 if batched else concurrency,  # unbatched: a report per task at once
            )
            fleet.add_tool(tool_id, noop, concurrency=concurrency)
            fleet.add_background(ListenWakeSubscriber(stub, fleet.wake, [tool_id]).run())
            run = asyncio.create_task(fleet.run())
            deadline = time.monotonic() + 600
            while fleet.stats.completed < count and time.monotonic() < deadline and not run.done():
                await asyncio.sleep(0.005)  # sampling the counter, not synchronisation
            done_at, done_cpu = time.perf_counter(), time.process_time()
            fleet.drain()
            await run
            elapsed = done_at - first[0][0] if first else float("nan")
            return {
                "completed": fleet.stats.completed,
                "seconds": elapsed,
                "tasks_per_s": fleet.stats.completed / elapsed if first else 0.0,
                "report_batches": fleet.reports.stats.batches,
                "claims": fleet.stats.sweeps,
                # From the first task to the last: the drain's own CPU, start-up and claim set-up left out.
                "cpu_seconds": done_cpu - first[0][1] if first else float("nan"),
            }

    return asyncio.run(main())


def enqueue_main(address: str, tool_id: str, mode: str, count: int) -> Json:
    import grpc
    from generation.task.v1 import task_pb2 as pb
    from generation.task.v1 import task_pb2_grpc

    async def main() -> Json:
        async with grpc.aio.insecure_channel(address) as channel:
            stub = task_pb2_grpc.GenerationDataServiceStub(channel)
            batch, in_flight = (500, 4) if mode == "bulk" else (1, 32)
            calls = count // batch
            sem = asyncio.Semaphore(in_flight)
            run_id = f"{time.time_ns()}"

            async def one(i: int) -> int:
                async with sem:
                    if mode == "bulk":
                        keys = [f"{run_id}-{i}-{j}" for j in range(batch)]
                        req = pb.QueueTasksRequest(tool_ids=[tool_id] * batch, billing_idempotency_keys=keys)
                        return len((await stub.QueueTasks(req)).tasks)
                    await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool_id, billing_idempotency_key=f"{run_id}-{i}"))
                    return 1

            t0, cpu0 = time.perf_counter(), time.process_time()
            queued = sum(await asyncio.gather(*(one(i) for i in range(calls))))
            elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            return {
                "queued": queued,
                "seconds": elapsed,
                "tasks_per_s": queued / elapsed,
                "batch": batch,
                "cpu_seconds": cpu,
            }

    return asyncio.run(main())


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        address, tool_id, count, concurrency, report_batch = sys.argv[2:7]
        sys.stdout.write(json.dumps(worker_main(address, tool_id, int(count), int(concurrency), int(report_batch))))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "enqueue":
        address, tool_id, mode, count = sys.argv[2:6]
        sys.stdout.write(json.dumps(enqueue_main(address, tool_id, mode, int(count))))
        return 0
    sys.stderr.write(__doc__ or "")
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
