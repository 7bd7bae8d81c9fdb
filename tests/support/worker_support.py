"""Helpers for the worker tests: a private redis-server, worker subprocesses, waiting on conditions.

Importing this module puts `worker/` on sys.path so `taskworker` imports like an installed package.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from generation.task.v1 import task_pb2 as pb
from taskworker import TaskContext

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "worker"))

REDIS_SERVER = shutil.which("redis-server")
requires_redis = pytest.mark.skipif(
    REDIS_SERVER is None, reason="redis-server is not installed: the Redis wake cases need it (polling cases still run)"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """A throwaway redis-server on a loopback port; `stop()`/`start()` simulate an outage."""

    def __init__(self) -> None:
        assert REDIS_SERVER is not None
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="taskworker-redis-")
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        assert REDIS_SERVER is not None
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.02)  # polling a condition with a deadline: the server is starting
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed")
    server = RedisServer()
    yield server
    server.destroy()


async def wait_until(
    cond: Callable[[], bool | Awaitable[bool]], timeout: float = 10.0, what: str = "condition"
) -> None:
    """Poll `cond` until it holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if not isinstance(got, bool):
            got = await got
        if got:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.01)


async def sql(database_url: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cur = await conn.execute(query, params)
        return await cur.fetchall() if cur.description else []


class WorkerProcess:
    """tests/support/worker_proc.py in a subprocess: a real fleet we can SIGKILL or SIGTERM."""

    def __init__(self, address: str, tool_id: str, events: Path, **opts: object) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "generated"), str(ROOT / "worker")])}
        argv = [sys.executable, str(ROOT / "tests" / "support" / "worker_proc.py"), "--address", address, "--tool-id", tool_id,
                "--events", str(events)]  # fmt: skip
        for k, v in opts.items():
            argv += [f"--{k.replace('_', '-')}", str(v)]
        self.events = events
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def signal(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)

    async def wait(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"worker {self.pid} still running after {timeout}s")
            await asyncio.sleep(0.02)
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stderr(self) -> str:
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode(errors="replace") if self.proc.poll() is not None else ""


def read_events(path: Path) -> list[tuple[str, str, int]]:
    """(event, task_id, pid) lines written by worker_proc.py."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:
            out.append((parts[0], parts[1], int(parts[2])))
    return out


class Pickups:
    """A `process` that records when each task's work began."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}

    async def __call__(self, task: pb.Task, ctx: TaskContext) -> Any:
        self.at[task.id] = time.perf_counter()
        return None
