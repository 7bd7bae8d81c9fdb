"""docs/adding-an-rpc.md, followed literally on a temporary copy of the repository: its code
blocks are read out of the document and applied in order (only the listen port and the
database URL are swapped for this test's own)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from support.pg import Cluster, scratch_database

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "adding-an-rpc.md"
PROTO = Path("example_protos/generation/task/v1/task.proto")
VENV = Path(sys.executable).parent.parent
MAKE = ["make", "--no-print-directory", f"VENV={VENV}", "-o", f"{VENV}/.installed"]


def walkthrough() -> list[tuple[str, str]]:
    """(step, code) for every `<!-- walkthrough: step -->` marker and the fenced block after it."""
    text = DOC.read_text()
    found = re.findall(r"<!-- walkthrough: ([a-z-]+) -->\n```[a-z]*\n(.*?)```", text, flags=re.S)
    return [(step, code) for step, code in found]


def service_end(proto: str, service: str) -> int:
    """The offset of the closing brace of `service NAME {`, skipping strings and // comments."""
    i = proto.index(f"service {service} {{") + len(f"service {service} {{")
    depth, in_string = 1, False
    while depth:
        ch = proto[i]
        if in_string:
            if ch == "\\":
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif proto.startswith("//", i):
            i = proto.index("\n", i)
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        i += 1
    return i - 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def copy_repo(dst: Path) -> None:
    for rel in ("Makefile", "example_protos", "generated", "protoc-gen-pydb/pydb/v1"):
        subprocess.run(["mkdir", "-p", str((dst / rel).parent)], check=True)
        subprocess.run(["cp", "-rp", str(ROOT / rel), str(dst / rel)], check=True)


async def serving(address: str, deadline: float) -> None:
    async with grpc.aio.insecure_channel(address) as ch:
        health = health_pb2_grpc.HealthStub(ch)
        while True:
            try:
                resp = await health.Check(health_pb2.HealthCheckRequest(), timeout=1)
                if resp.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.aio.AioRpcError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("the server never became SERVING")
            await asyncio.sleep(0.05)


@pytest.mark.slow
async def test_adding_an_rpc_walkthrough(tmp_path: Path, pg_server: tuple[str, Cluster | None]) -> None:
    steps = walkthrough()
    assert [s for s, _ in steps] == ["messages", "rpc", "generate", "error", "rpc-fixed", "generate", "serve", "call"]
    code = dict(steps)
    repo = tmp_path / "repo"
    copy_repo(repo)
    proto = repo / PROTO

    # 1-2. The messages at the end of task.proto, the RPC before the service's closing brace.
    text = proto.read_text()
    end = service_end(text, "GenerationDataService")
    proto.write_text(text[:end] + code["rpc"] + text[end:].rstrip("\n") + "\n\n" + code["messages"])

    # 3. make generate fails with the error the document shows.
    assert code["generate"].strip() == "make generate"
    before = (repo / "generated/generation/task/v1/task_pydb.py").read_bytes()
    failed = subprocess.run([*MAKE, "generate"], cwd=repo, capture_output=True, text=True, timeout=120)
    assert failed.returncode != 0
    said = re.sub(r"\.proto:\d+:\d+:", ".proto:L:C:", failed.stderr)  # the line moves as task.proto grows
    for line in code["error"].strip().splitlines():
        shown = re.sub(r"\.proto:\d+:\d+:", ".proto:L:C:", line)
        assert shown in said, f"the document shows {line!r}; make generate said:\n{failed.stderr}"

    assert (repo / "generated/generation/task/v1/task_pydb.py").read_bytes() == before, "the last good output stays"

    # 4. The fix, and make generate succeeds.
    text = proto.read_text()
    assert text.count(code["rpc"]) == 1
    proto.write_text(text.replace(code["rpc"], code["rpc-fixed"]))
    done = subprocess.run([*MAKE, "generate"], cwd=repo, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    handlers = (repo / "generated/generation/task/v1/task_pydb.py").read_text()
    assert "async def count_queued_tasks(" in handlers and "async def CountQueuedTasks(" in handlers

    # 5. make serve, with the document's environment (our database and a free port).
    port = free_port()
    serve = code["serve"].strip()
    env_part, _, command = serve.partition(" make ")
    assert command == "serve"
    env = dict(kv.split("=", 1) for kv in env_part.split())
    assert set(env) == {"DATABASE_URL", "LISTEN_ADDR"}
    with scratch_database(pg_server[0]) as url:
        env = {**os.environ, **env, "DATABASE_URL": url, "LISTEN_ADDR": f"127.0.0.1:{port}"}
        server = subprocess.Popen(
            [*MAKE, "serve"], cwd=repo, env=env, start_new_session=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            await serving(f"127.0.0.1:{port}", time.monotonic() + 30)
            # 6. The document's client, as a script run with generated/ on PYTHONPATH.
            script = repo / "call.py"
            script.write_text(code["call"].replace("127.0.0.1:50051", f"127.0.0.1:{port}"))
            call = subprocess.run(
                [sys.executable, str(script)], cwd=repo, env={**os.environ, "PYTHONPATH": "generated"},
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert call.returncode == 0, call.stderr
            expected = re.search(r"print\(resp\.count\)\s+# (\d+)", code["call"])
            assert expected is not None
            assert call.stdout.strip() == expected.group(1) == "3"
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            output, _ = server.communicate(timeout=30)
    assert "event=stopped" in output, output
