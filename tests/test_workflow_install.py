"""`pip install .` (not editable) into a fresh virtualenv: protoc-gen-pydb lands on PATH with
its templates and options.proto inside the installed package, and generates generated/'s
handlers byte for byte from there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


@pytest.mark.slow
def test_pip_install_into_a_fresh_virtualenv(tmp_path: Path) -> None:
    # A copy of what the package is built from, so the build leaves nothing in the repository.
    src = tmp_path / "src"
    src.mkdir()
    for rel in ("pyproject.toml", "README.md", "protoc-gen-pydb", "templates"):
        if (ROOT / rel).is_dir():
            shutil.copytree(ROOT / rel, src / rel, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        elif (ROOT / rel).exists():
            shutil.copy2(ROOT / rel, src / rel)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    # Offline: pip, setuptools (to build) and the dependencies come from this virtualenv's
    # site-packages as a plain path entry; its editable pydb is a .pth finder there, which a
    # path entry does not run, so `pydb` can only come from the new install.
    fresh_site = Path(
        subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
    )  # fmt: skip
    (fresh_site / "deps-from-dev-venv.pth").write_text(sysconfig.get_path("purelib") + "\n")
    install = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--no-index", "--no-build-isolation",
         "--disable-pip-version-check", "-q", "."],
        cwd=src, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr

    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}/usr/bin:/bin"}
    env.pop("PYTHONPATH", None)
    plugin = shutil.which("protoc-gen-pydb", path=env["PATH"])
    assert plugin == str(venv / "bin" / "protoc-gen-pydb")
    version = subprocess.run([plugin, "--version"], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("protoc-gen-pydb "), version.stderr

    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import pydb, pydb.templates; print(pydb.__file__)"],
        env=env, capture_output=True, text=True, cwd=tmp_path, check=True,
    ).stdout.strip()  # fmt: skip
    package = Path(where).parent
    assert package == fresh_site / "pydb", where
    assert (package / "templates" / "handlers.py.j2").is_file()
    assert (package / "templates" / "server.py.j2").is_file()
    assert (package / "v1" / "options.proto").is_file()
    include = subprocess.run([plugin, "--include-dir"], env=env, capture_output=True, text=True, check=True)
    assert Path(include.stdout.strip()) == fresh_site

    # The installed plugin (templates from the wheel) makes generated/'s files.
    out = tmp_path / "out"
    out.mkdir()
    gen = subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"--plugin=protoc-gen-pydb={plugin}",
         f"-I{ROOT / 'example_protos'}", f"-I{include.stdout.strip()}", f"--pydb_out={out}",
         f"--pydb_opt=proto_path={ROOT / 'example_protos'}", "generation/task/v1/task.proto"],
        env=env, capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert gen.returncode == 0, gen.stderr
    for name in ("task_pydb.py", "task_pydb_server.py"):
        made = out / "generation/task/v1" / name
        assert made.read_bytes() == (ROOT / "generated/generation/task/v1" / name).read_bytes()
