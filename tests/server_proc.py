"""A generated server run as a process, the way it is deployed: started on a free port
(`--listen-addr 127.0.0.1:0`, the port read from its `event=serving` log line), stopped with
SIGTERM, which must end it with status 0 after `event=stopped`."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import subprocess
from collections.abc import AsyncIterator, Mapping, Sequence

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


@contextlib.asynccontextmanager
async def serving(argv: Sequence[str], env: Mapping[str, str]) -> AsyncIterator[tuple[str, list[str]]]:
    """Run `argv` (a server command, to which `--listen-addr 127.0.0.1:0` is added): yields
    (address, its stderr lines so far, extended with the rest when it has stopped) once it listens."""
    # No bytecode written next to the modules it imports: generated/ must stay what the plugin makes.
    env = {**env, "PYTHONDONTWRITEBYTECODE": "1"}
    proc = await asyncio.create_subprocess_exec(
        *argv, "--listen-addr", "127.0.0.1:0", env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert proc.stderr is not None
    lines: list[str] = []
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
        yield f"127.0.0.1:{port}", lines
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        rest = await asyncio.wait_for(proc.stderr.read(), timeout=30)
        lines.extend(rest.decode().splitlines())
        assert await asyncio.wait_for(proc.wait(), timeout=30) == 0, lines
    assert lines[-1].endswith("event=stopped"), lines


async def wait_serving(channel: grpc.aio.Channel) -> None:
    """Until the overall health is SERVING (the first database probe has answered)."""
    watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""), timeout=20)
    async for update in watch:
        if update.status == health_pb2.HealthCheckResponse.SERVING:
            watch.cancel()
            return
    raise AssertionError("health never turned SERVING")
