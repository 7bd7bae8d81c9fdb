"""`run_worker` wires live task events from the environment (EVENTS, REDIS_ADDR, ENVIRONMENT,
EVENTS_RETENTION_SECONDS): a real worker process emits, this test reads, then SIGTERMs it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import redis.asyncio as aioredis
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from support.worker_support import REDIS_SERVER, RedisServer, redis_server
from taskworker import PostgresEventSource, RedisEventSource
from taskworker.events import EventSource, events_key
from test_events_transports import collect, delete_env_keys

if TYPE_CHECKING:
    Stub = task_pb2_grpc.GenerationDataServiceAsyncStub

__all__ = ["redis_server"]  # the fixture, re-exported for pytest

ROOT = Path(__file__).resolve().parents[2]

WORKER = """
import asyncio, sys
from taskworker import run_worker

async def work(task, ctx):
    ctx.emit_url("https://example.test/" + task.id)
    ctx.emit_progress(1.0, "done")
    return {"ok": True}

asyncio.run(run_worker(sys.argv[1], {sys.argv[2]: work}, wake="none", poll_interval=0.2))
"""


async def run_one_task(stub: Stub, service: Any, tmp_path: Path, env: dict[str, str], source: EventSource) -> str:
    script = tmp_path / "events_worker.py"
    script.write_text(WORKER)
    name = f"events-{uuid.uuid4().hex[:8]}"
    full_env = {**os.environ, **env, "PYTHONPATH": os.pathsep.join([str(ROOT / "generated"), str(ROOT / "worker")])}
    proc = subprocess.Popen([sys.executable, str(script), service.address, name], env=full_env, stderr=subprocess.PIPE)
    try:
        tool = (await stub.RegisterTool(pb.RegisterToolRequest(name=name))).tool
        task = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id))).task
        events = await collect(task.id, source, timeout=30)
        assert [(e.seq, e.kind) for e in events] == [(1, "url"), (2, "progress"), (3, "terminal")]
        assert events[0].data == {"url": "https://example.test/" + task.id}
        assert events[-1].data == {"outcome": "completed", "retrying": False}
        proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        while proc.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert proc.returncode == 0, proc.stderr.read().decode() if proc.stderr else ""
        return task.id
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
async def test_run_worker_with_events_postgres(stub: Stub, service: Any, tmp_path: Path) -> None:
    await run_one_task(stub, service, tmp_path, {"EVENTS": "postgres"}, PostgresEventSource(stub))


@pytest.mark.slow
@pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed")
async def test_run_worker_with_events_redis_from_the_environment(
    stub: Stub, service: Any, tmp_path: Path, redis_server: RedisServer
) -> None:
    env_name = f"evtest{time.monotonic_ns()}"
    env = {
        "EVENTS": "redis",
        "REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/2",
        "ENVIRONMENT": env_name,
        "EVENTS_RETENTION_SECONDS": "30",
    }
    url = env["REDIS_URL"]
    try:
        # REDIS_ADDR empty: REDIS_URL, its alias, is read (with the DB index from its path).
        task_id = await run_one_task(
            stub, service, tmp_path, {**env, "REDIS_ADDR": ""}, RedisEventSource(url, environment=env_name)
        )
        client = aioredis.Redis.from_url(url)
        try:
            assert 0 < await client.ttl(events_key(task_id, env_name)) <= 30
        finally:
            await client.aclose()
    finally:
        await delete_env_keys(url, env_name)
