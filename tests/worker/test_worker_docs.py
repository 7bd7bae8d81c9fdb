"""The ten-line worker of docs/worker.md, run as written against the generated server."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from support.worker_support import ROOT, wait_until

if TYPE_CHECKING:
    Stub = task_pb2_grpc.GenerationDataServiceAsyncStub


def ten_line_example() -> str:
    text = (ROOT / "docs" / "worker.md").read_text()
    section = text.split("## A worker in ten lines", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None
    return match.group(1)


def test_example_is_at_most_ten_lines() -> None:
    assert len([line for line in ten_line_example().splitlines() if line.strip()]) <= 10


@pytest.mark.slow
async def test_ten_line_worker_runs_against_the_server(stub: Stub, service: Any, tmp_path: Path) -> None:
    code = ten_line_example()
    assert '"127.0.0.1:50051"' in code  # what `make serve` listens on; the test server's port differs
    script = tmp_path / "echo_worker.py"
    script.write_text(code.replace('"127.0.0.1:50051"', repr(service.address)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "generated"), str(ROOT / "worker")])}
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stderr=subprocess.PIPE)
    try:
        tool = (await stub.RegisterTool(pb.RegisterToolRequest(name="echo"))).tool
        task = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id, input='{"prompt": "hi"}'))).task

        async def done() -> bool:
            return (await stub.GetTask(pb.GetTaskRequest(task_id=task.id))).task.status == pb.TASK_STATUS_COMPLETED

        await wait_until(done, timeout=30, what="the example worker completed the task")
        row = (await stub.GetTask(pb.GetTaskRequest(task_id=task.id))).task
        assert json.loads(row.output) == {"echo": task.input}
        assert json.loads(row.reported_usage) == {"tokens": len(task.input)}
        proc.send_signal(signal.SIGTERM)
        for _ in range(300):
            if proc.poll() is not None:
                break
            await asyncio.sleep(0.05)
        assert proc.returncode == 0, proc.stderr.read().decode() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
