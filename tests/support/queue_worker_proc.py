"""A queue worker in its own process, driven by the queue tests (see queue_support.WorkerProcess).

Speaks JSON lines on stdout. Modes:

  claimers  N ClaimNextTask + M ClaimTasks claimers (one gRPC channel each) drain the given
            tools; prints every claim. Prints {"ready": ...} first and starts on a line on stdin,
            so several processes start claiming at the same moment.
  hold      claims up to --claim tasks, completes --complete of them, heartbeats the rest,
            prints what it holds and then blocks (the test SIGKILLs it mid-task).
  drain     claims one task at a time until none is left, completes each; prints them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "generated"))

import grpc  # noqa: E402
from generation.task.v1 import task_pb2 as pb  # noqa: E402
from generation.task.v1 import task_pb2_grpc  # noqa: E402

if TYPE_CHECKING:
    Stub = task_pb2_grpc.GenerationDataServiceAsyncStub
else:
    Stub = task_pb2_grpc.GenerationDataServiceStub


def emit(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def claimer(address: str, tools: list[str], batch: int, out: list[list[Any]], index: int) -> None:
    """Claim round-robin over `tools` until a whole pass claims nothing."""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = Stub(channel)
        idle = 0
        turn = index
        call = 0
        while idle < len(tools):
            call += 1
            tool = tools[turn % len(tools)]
            turn += 1
            if batch:
                tasks = list((await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=tool, limit=batch))).tasks)
            else:
                resp = await stub.ClaimNextTask(pb.ClaimNextTaskRequest(tool_id=tool))
                tasks = [resp.task] if resp.HasField("task") else []
            idle = 0 if tasks else idle + 1
            for t in tasks:
                out.append([index, t.id, t.lease_token, t.tool_id, t.priority, t.retry_count, call])


async def run_claimers(a: argparse.Namespace) -> None:
    tools = a.tools.split(",")
    kinds = [0] * a.next + [a.batch_size] * a.batch
    emit({"ready": os.getpid()})
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    out: list[list[Any]] = []
    await asyncio.gather(
        *(claimer(a.addr[i % len(a.addr)], tools, batch, out, a.index_base + i) for i, batch in enumerate(kinds))
    )
    emit({"claims": out})


async def run_hold(a: argparse.Namespace) -> None:
    async with grpc.aio.insecure_channel(a.addr[0]) as channel:
        stub = Stub(channel)
        claimed = list((await stub.ClaimTasks(pb.ClaimTasksRequest(tool_id=a.tools, limit=a.claim))).tasks)
        done, held = claimed[: a.complete], claimed[a.complete :]
        for t in done:
            await stub.CompleteTask(
                pb.CompleteTaskRequest(task_id=t.id, lease_token=t.lease_token, output='{"by": "hold"}')
            )
        for t in held:
            await stub.HeartbeatTask(pb.HeartbeatTaskRequest(task_id=t.id, lease_token=t.lease_token))
        emit(
            {
                "pid": os.getpid(),
                "completed": [t.id for t in done],
                "held": [{"id": t.id, "lease_token": t.lease_token, "retry_count": t.retry_count} for t in held],
            }
        )
        # Mid-task: the work never finishes; the test kills this process with SIGKILL.
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


async def run_drain(a: argparse.Namespace) -> None:
    done: list[dict[str, Any]] = []
    async with grpc.aio.insecure_channel(a.addr[0]) as channel:
        stub = Stub(channel)
        while True:
            resp = await stub.ClaimNextTask(pb.ClaimNextTaskRequest(tool_id=a.tools))
            if not resp.HasField("task"):
                break
            t = resp.task
            fin = await stub.CompleteTask(
                pb.CompleteTaskRequest(task_id=t.id, lease_token=t.lease_token, output=json.dumps({"by": os.getpid()}))
            )
            done.append({"id": t.id, "lease_token": t.lease_token, "retry_count": fin.task.retry_count})
    emit({"completed": done})


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["claimers", "hold", "drain"])
    p.add_argument("--addr", action="append", required=True)
    p.add_argument("--tools", required=True, help="comma-separated tool ids (one for hold/drain)")
    p.add_argument("--next", type=int, default=0, help="ClaimNextTask claimers")
    p.add_argument("--batch", type=int, default=0, help="ClaimTasks claimers")
    p.add_argument("--batch-size", type=int, default=25)
    p.add_argument("--index-base", type=int, default=0)
    p.add_argument("--claim", type=int, default=1)
    p.add_argument("--complete", type=int, default=0)
    a = p.parse_args()
    run = {"claimers": run_claimers, "hold": run_hold, "drain": run_drain}[a.mode]
    asyncio.run(run(a))


if __name__ == "__main__":
    main()
