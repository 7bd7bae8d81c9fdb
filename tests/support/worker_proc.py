"""A worker process for the crash and drain tests: one WorkerFleet hosting one tool.

Each task appends `start <task_id> <pid>` to --events when its work begins and
`done <task_id> <pid>` when it finishes, taking --work-seconds in between. SIGTERM/SIGINT drain.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os

import grpc
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from taskworker import TaskContext, WorkerFleet


def record(path: str, event: str, task_id: str) -> None:
    with open(path, "a") as f:
        f.write(f"{event} {task_id} {os.getpid()}\n")
        f.flush()


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--address", required=True)
    p.add_argument("--tool-id", required=True)
    p.add_argument("--events", required=True)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--work-seconds", type=float, default=0.0)
    p.add_argument("--poll-interval", type=float, default=0.2)
    p.add_argument("--heartbeat-interval", type=float, default=60.0)
    p.add_argument("--drain-timeout", type=float, default=30.0)
    a = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")

    async def process(task: pb.Task, ctx: TaskContext) -> dict[str, int]:
        record(a.events, "start", task.id)
        await asyncio.sleep(a.work_seconds)  # the simulated work itself
        record(a.events, "done", task.id)
        ctx.report_usage(tokens=1)
        return {"pid": os.getpid()}

    async with grpc.aio.insecure_channel(a.address) as channel:
        fleet = WorkerFleet(
            task_pb2_grpc.GenerationDataServiceStub(channel),
            poll_interval=a.poll_interval,
            heartbeat_interval=a.heartbeat_interval,
            drain_timeout=a.drain_timeout,
        )
        fleet.add_tool(a.tool_id, process, concurrency=a.concurrency)
        fleet.install_signal_handlers()
        await fleet.run()
        print(f"stats {fleet.stats}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
