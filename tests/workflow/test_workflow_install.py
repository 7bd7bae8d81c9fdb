"""The README's install step on fresh virtualenvs, and its commands after it:

- `pip install .` (the runtime only): the compiler's dependencies are not importable, the
  `protoc-gen-pydb` command says what to install, and the committed generated server serves a call;
- `pip install '.[compiler]'`: protoc-gen-pydb is on PATH with its templates and options.proto,
  and the README's `python -m grpc_tools.protoc ... --mypy_out ... --pydb_out ...` command
  makes generated/ byte for byte.

Bounded and frugal: the dependencies come from a wheelhouse in the development virtualenv
(`.venv/wheelhouse`, pinned by requirements-dev.txt), filled from the package index only
with what it lacks; the installs themselves run with `--no-index`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import psycopg
import pytest
from generation.task.v1 import task_pb2, task_pb2_grpc
from support.pg import Cluster, scratch_database
from support.server_proc import serving, wait_serving

ROOT = Path(__file__).resolve().parents[2]
WHEELHOUSE = Path(sys.prefix) / "wheelhouse"
#: What the compiler extra brings and the runtime must do without.
COMPILER_ONLY = ("sqlglot", "pglast", "jinja2", "grpc_tools", "mypy_protobuf")


def readme_section(title: str) -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def readme_command(section: str, prefix: str) -> str:
    """The first shell command in `section` that starts with `prefix`, continuation lines joined."""
    lines = section.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(prefix))
    command = [lines[first]]
    while command[-1].endswith("\\"):
        command.append(lines[first + len(command)])
    return "\n".join(command)


INSTALL_SECTION = readme_section("Using the plugin in your build")


def run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, **kwargs)  # type: ignore[call-overload]
    assert isinstance(done, subprocess.CompletedProcess)
    return done


def requirements() -> list[str]:
    """Everything either install needs: the runtime, the compiler extra, the build backend."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return [
        *project["project"]["dependencies"],
        *project["project"]["optional-dependencies"]["compiler"],
        *project["build-system"]["requires"],
    ]


@pytest.fixture(scope="module")
def wheelhouse() -> Path:
    """Wheels for both installs, pinned by requirements-dev.txt: offline when they are all
    there already, else pip fetches only the missing ones."""
    WHEELHOUSE.mkdir(exist_ok=True)
    base = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "-d", str(WHEELHOUSE),
            "-c", str(ROOT / "requirements-dev.txt"), "--only-binary", ":all:"]  # fmt: skip
    offline = run([*base, "--no-index", "--find-links", str(WHEELHOUSE), *requirements()])
    if offline.returncode != 0:
        online = run([*base, *requirements()])
        assert online.returncode == 0, online.stdout + online.stderr
    return WHEELHOUSE


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """What `pip install .` is run in: a copy of the files the package is built from (so the
    build leaves nothing in the repository), with the README's example protos and generated/."""
    src = tmp_path / "checkout"
    src.mkdir()
    for rel in ("pyproject.toml", "README.md", "protoc-gen-pydb", "templates", "example_protos"):
        if (ROOT / rel).is_dir():
            shutil.copytree(ROOT / rel, src / rel, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(ROOT / rel, src / rel)
    (src / "generated").mkdir()
    return src


def fresh_venv(tmp_path: Path, wheelhouse: Path, checkout: Path, install: str) -> tuple[Path, dict[str, str]]:
    """A new virtualenv, "activated" (its bin/ first on PATH), in which the README's `install`
    command has run in `checkout`, the package index replaced by the wheelhouse."""
    venv = tmp_path / "venv"
    made = run([sys.executable, "-m", "venv", str(venv)])
    assert made.returncode == 0, made.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_", "VIRTUAL_ENV"))}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}/usr/bin:/bin", VIRTUAL_ENV=str(venv))
    pip_env = {**env, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheelhouse), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    done = run(["bash", "-c", install], cwd=checkout, env=pip_env)
    assert done.returncode == 0, f"{install}\n{done.stdout}{done.stderr}"
    return venv, env


def tree(root: Path) -> dict[str, bytes]:
    """The generated files under `root` by relative path (bytecode caches left out)."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.fixture
def queue_db(pg_server: tuple[str, Cluster | None]) -> Iterator[str]:
    with scratch_database(pg_server[0]) as url:
        yield url


@pytest.mark.slow
async def test_runtime_only_install_serves_the_generated_server(
    tmp_path: Path, wheelhouse: Path, checkout: Path, queue_db: str
) -> None:
    install = readme_command(INSTALL_SECTION, "pip install . ")
    venv, env = fresh_venv(tmp_path, wheelhouse, checkout, install)
    python = str(venv / "bin" / "python")

    present = run([python, "-c", f"import importlib.util; print([m for m in {COMPILER_ONLY!r} if importlib.util.find_spec(m)])"], env=env)  # fmt: skip
    assert present.returncode == 0 and present.stdout.strip() == "[]", present.stdout + present.stderr

    plugin = shutil.which("protoc-gen-pydb", path=env["PATH"])
    assert plugin == str(venv / "bin" / "protoc-gen-pydb")
    for command in ([plugin], [python, "-m", "pydb"]):
        refused = run(command, env=env, stdin=subprocess.DEVNULL)
        assert refused.returncode == 1, refused.stderr
        assert "pip install 'protoc-gen-pydb[compiler]'" in refused.stderr
        assert "missing: sqlglot, pglast, jinja2" in refused.stderr and "Traceback" not in refused.stderr

    # The committed generated server, imported from generated/ by the runtime-only install.
    server_env = {**env, "PYTHONPATH": str(ROOT / "generated"), "DATABASE_URL": queue_db}
    async with (
        serving([python, "-m", "generation.task.v1.task_pydb_server"], server_env) as (address, lines),
        grpc.aio.insecure_channel(address) as channel,
    ):
        await wait_serving(channel)
        name = f"fresh-{uuid.uuid4().hex[:8]}"
        stub = task_pb2_grpc.GenerationDataServiceStub(channel)
        tool = (await stub.RegisterTool(task_pb2.RegisterToolRequest(name=name), timeout=10)).tool
        assert tool.name == name
    with psycopg.connect(queue_db, autocommit=True) as conn:
        assert conn.execute("SELECT name FROM generation.tools WHERE id = %s", (tool.id,)).fetchone() == (name,)
    assert f"services={task_pb2.DESCRIPTOR.services_by_name['GenerationDataService'].full_name} " in lines[0]


@pytest.mark.slow
def test_compiler_extra_runs_the_readme_protoc_command(tmp_path: Path, wheelhouse: Path, checkout: Path) -> None:
    install = readme_command(INSTALL_SECTION, "pip install '.[compiler]'")
    venv, env = fresh_venv(tmp_path, wheelhouse, checkout, install)

    plugin = shutil.which("protoc-gen-pydb", path=env["PATH"])
    assert plugin == str(venv / "bin" / "protoc-gen-pydb")
    version = run([plugin, "--version"], env=env)
    assert version.returncode == 0 and version.stdout.startswith("protoc-gen-pydb "), version.stderr
    include = run([plugin, "--include-dir"], env=env)
    site = Path(include.stdout.strip())
    assert include.returncode == 0 and site.is_relative_to(venv), include.stdout + include.stderr
    assert (site / "pydb" / "v1" / "options.proto").is_file()
    for template in ("handlers.py.j2", "shapes.py.j2", "server.py.j2"):
        assert (site / "pydb" / "templates" / template).is_file()

    command = readme_command(INSTALL_SECTION, "python -m grpc_tools.protoc")
    assert re.search(r"--mypy_out=\S+ ", command) and "--pydb_out=generated" in command, command
    done = run(["bash", "-c", command], cwd=checkout, env=env)
    assert done.returncode == 0, f"{command}\n{done.stderr}"
    # The README's command generates the task queue (generated/ also holds the other examples).
    made = tree(checkout / "generated")
    committed = {name: content for name, content in tree(ROOT / "generated").items() if name.startswith("generation/")}
    assert sorted(made) == sorted(committed)
    for name, content in committed.items():
        assert made[name] == content, f"{name} differs from generated/"
