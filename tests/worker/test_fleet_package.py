"""`pip install ./worker`: taskworker and the queue's client stubs install as a package (typed),
importable and working with no PYTHONPATH."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from generation.task.v1 import task_pb2 as pb
from taskworker import WorkerFleet

ROOT = Path(__file__).resolve().parents[2]

# Completes one task through the installed package against the server at argv[1].
SCRIPT = """
import asyncio, sys
import grpc
import taskworker
from generation.task.v1 import task_pb2 as pb, task_pb2_grpc

async def main():
    async with taskworker.open_channel(sys.argv[1], taskworker.ChannelSettings()) as ch:
        stub = task_pb2_grpc.GenerationDataServiceStub(ch)
        fleet = taskworker.WorkerFleet(stub, poll_interval=0.1)
        async def process(task, ctx):
            fleet.drain()
            return {"from": taskworker.__file__}
        fleet.add_tool(sys.argv[2], process)
        await fleet.run()
        print(fleet.stats.completed, taskworker.__file__, pb.__file__)

asyncio.run(main())
"""


@pytest.mark.slow
async def test_pip_install_worker(tmp_path: Path, service: object, stub: object, tool: pb.Tool) -> None:
    target = tmp_path / "site"
    # Built from a copy: a build leaves build/ and *.egg-info beside the sources.
    src = tmp_path / "src"
    shutil.copytree(
        ROOT / "worker", src / "worker", ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    )
    shutil.copytree(ROOT / "generated", src / "generated", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
         "--no-build-isolation", "--no-index", "--target", str(target), str(src / "worker")],
        check=True, timeout=300,
    )  # fmt: skip
    assert (target / "taskworker" / "py.typed").exists() and (target / "generation/task/v1/task_pb2.pyi").exists()
    task = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id))).task  # type: ignore[attr-defined]
    # Only the install target and the interpreter's own site-packages (grpcio, protobuf, redis):
    # neither worker/ nor generated/ is on the path.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(target)}
    # Asynchronously: the server runs in this test's event loop.
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", SCRIPT, service.address, tool.id,  # type: ignore[attr-defined]
        env=env, cwd=tmp_path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    completed, worker_file, stubs_file = out.decode().split()
    assert completed == "1" and worker_file.startswith(str(target)) and stubs_file.startswith(str(target))
    final = (await stub.GetTask(pb.GetTaskRequest(task_id=task.id))).task  # type: ignore[attr-defined]
    assert final.status == pb.TASK_STATUS_COMPLETED
    assert WorkerFleet.__module__ == "taskworker.fleet"
