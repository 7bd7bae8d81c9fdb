"""A client of the generated stubs type-checks under `mypy --strict` with the compiler extra's
stubs (grpc-stubs, types-protobuf): without grpc-stubs mypy reports errors inside the generated
`_pb2_grpc.pyi`, which reads as broken codegen (README, "Type-checking a client")."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CLIENT = """import grpc

from generation.task.v1 import task_pb2, task_pb2_grpc


async def register(target: str, name: str) -> str:
    async with grpc.aio.insecure_channel(target) as channel:
        stub = task_pb2_grpc.GenerationDataServiceAsyncStub(channel)
        reply = await stub.RegisterTool(task_pb2.RegisterToolRequest(name=name), timeout=5.0)
        return reply.tool.name
"""


def test_compiler_extra_brings_the_stubs() -> None:
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["compiler"]
    names = {req.split(">")[0].split("=")[0].split("<")[0].strip() for req in extra}
    assert {"grpc-stubs", "types-protobuf"} <= names


def test_a_client_passes_mypy_strict(tmp_path: Path) -> None:
    (tmp_path / "client.py").write_text(CLIENT)
    env = {"MYPYPATH": str(ROOT / "generated"), "PATH": str(Path(sys.executable).parent)}
    argv = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", str(tmp_path / "c")]
    done = subprocess.run([*argv, "client.py"], cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    # and mypy does check it: a wrong field type is an error
    (tmp_path / "client.py").write_text(CLIENT.replace("name=name", "name=1"))
    done = subprocess.run([*argv, "client.py"], cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 1 and "RegisterToolRequest" in done.stdout
