"""A generated server run as a process, the way it is deployed: started on a free port
(`--listen-addr 127.0.0.1:0`, the port read from its `event=serving` log line), stopped with
SIGTERM, which must end it with status 0 after `event=stopped`. And what such servers answered,
as a client saw it: `CallLedger`."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import re
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


@contextlib.asynccontextmanager
async def serving(
    argv: Sequence[str], env: Mapping[str, str], pid: list[int] | None = None
) -> AsyncIterator[tuple[str, list[str]]]:
    """Run `argv` (a server command, to which `--listen-addr 127.0.0.1:0` is added): yields
    (address, its stderr lines, extended as it logs and complete once it has stopped) once it
    listens; its process id is appended to `pid` when given (to read /proc/<pid>/status)."""
    # No bytecode written next to the modules it imports: generated/ must stay what the plugin makes.
    env = {**env, "PYTHONDONTWRITEBYTECODE": "1"}
    proc = await asyncio.create_subprocess_exec(
        *argv, "--listen-addr", "127.0.0.1:0", env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert proc.stderr is not None
    if pid is not None:
        pid.append(proc.pid)
    lines: list[str] = []
    reading: asyncio.Task[None] | None = None
    try:
        port = None
        while port is None:
            raw = await asyncio.wait_for(proc.stderr.readline(), timeout=30)
            assert raw, f"the server ended before it served: {lines}"
            lines.append(raw.decode().rstrip("\n"))
            if " event=serving " in lines[-1]:
                found = re.search(r" port=(\d+) ", lines[-1])
                assert found, lines[-1]
                port = int(found.group(1))
        # Read on while it serves: a server logging a line per call (--log-level debug) would
        # otherwise fill the pipe and block on its next log line.
        reading = asyncio.create_task(_read_lines(proc.stderr, lines))
        yield f"127.0.0.1:{port}", lines
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        if reading is None:
            rest = await asyncio.wait_for(proc.stderr.read(), timeout=30)
            lines.extend(rest.decode().splitlines())
        else:
            await asyncio.wait_for(reading, timeout=30)
        assert await asyncio.wait_for(proc.wait(), timeout=30) == 0, lines
    assert lines[-1].endswith("event=stopped"), lines


async def _read_lines(stream: asyncio.StreamReader, lines: list[str]) -> None:
    """Every line of `stream` into `lines`, until its end."""
    async for raw in stream:
        lines.append(raw.decode().rstrip("\n"))


async def wait_serving(channel: grpc.aio.Channel) -> None:
    """Until the overall health is SERVING (the first database probe has answered)."""
    watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""), timeout=20)
    async for update in watch:
        if update.status == health_pb2.HealthCheckResponse.SERVING:
            watch.cancel()
            return
    raise AssertionError("health never turned SERVING")


def rss_bytes(pid: int, field: str = "VmRSS") -> int:
    """A process's resident memory now (VmRSS) or at its peak so far (VmHWM), from /proc."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@dataclasses.dataclass
class Answered:
    method: str
    started: float  # time.monotonic() when the call was sent
    answered: float


# The queue's RPCs whose OK answer carries tasks, by what the answer says happened to them.
_TASK_ANSWERS = {
    "QueueTask": "enqueued",
    "QueueTasks": "enqueued",
    "ClaimNextTask": "claimed",
    "ClaimTasks": "claimed",
    "CompleteTask": "completed",
    "CompleteTasks": "completed",
}


class CallLedger(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[type-arg]
    """A client interceptor keeping the books of every unary call on its channel, whoever makes
    it (a WorkerFleet's batched reports too): how often each task id came back in an OK answer of
    an enqueue, a claim and a completion (a batch's answer lists the tasks that landed), when
    each call was sent and answered, the calls in flight by method, and the failures by status."""

    def __init__(self) -> None:
        self.enqueued: collections.Counter[str] = collections.Counter()
        self.claimed: collections.Counter[str] = collections.Counter()
        self.completed: collections.Counter[str] = collections.Counter()
        self.answers: list[Answered] = []
        self.in_flight: collections.Counter[str] = collections.Counter()
        self.failed: collections.Counter[tuple[str, str]] = collections.Counter()
        # (task id, lease token) of each heartbeat the lease fence refused.
        self.refused_heartbeats: set[tuple[str, str]] = set()

    async def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        raw = client_call_details.method
        method = (raw.decode() if isinstance(raw, bytes) else raw).rsplit("/", 1)[-1]
        started = time.monotonic()
        self.in_flight[method] += 1
        try:
            call = await continuation(client_call_details, request)
            response = await call
        except grpc.aio.AioRpcError as err:
            self.failed[(method, err.code().name)] += 1
            if method == "HeartbeatTask" and err.code() in (
                grpc.StatusCode.FAILED_PRECONDITION,
                grpc.StatusCode.NOT_FOUND,
            ):
                self.refused_heartbeats.add((request.task_id, request.lease_token))
            raise
        finally:
            self.in_flight[method] -= 1
        self.answers.append(Answered(method, started, time.monotonic()))
        book = _TASK_ANSWERS.get(method)
        if book is not None:
            if hasattr(response, "tasks"):
                tasks = list(response.tasks)
            else:  # one task, or none (a claim that found nothing)
                tasks = [response.task] if response.HasField("task") else []
            getattr(self, book).update(t.id for t in tasks)
        return call

    def first_ok(self, methods: tuple[str, ...], sent_after: float) -> float:
        """When the first call of `methods` sent after `sent_after` was answered OK."""
        return min(a.answered for a in self.answers if a.method in methods and a.started >= sent_after)
