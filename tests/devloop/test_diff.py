"""`protoc-gen-pydb diff`: the drift check for a user's CI, on a project laid out unlike this
repository (protos under api/proto, the schema in db/, generated code in src/gen), with the
user's own protoc invocation and with buf generate."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pydb import include_dir

PROTO = """syntax = "proto3";
package acme.shop.v1;
import "pydb/v1/options.proto";
option (pydb.v1.schema) = "../../../db/schema.sql";
message Id { int64 id = 1; }
message Item { int64 id = 1; string name = 2; }
service Shop {
  rpc Get(Id) returns (Item) {
    option (pydb.v1.sql) = { query: "SELECT id, name FROM items WHERE id = @id" cardinality: CARDINALITY_ONE };
  }
}
"""
SCHEMA = "CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL);\n"
BIN = Path(sys.executable).parent
PROTOC = [
    sys.executable, "-m", "grpc_tools.protoc", "-I", "api/proto", "-I", include_dir(),
    "--python_out=src/gen", "--pydb_out=proto_path=api/proto,proto_path=.:src/gen", "acme/shop/v1/shop.proto",
]  # fmt: skip


def env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}


def run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "protoc-gen-pydb"), *args], cwd=root, env=env(), capture_output=True, text=True, check=False
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "api/proto/acme/shop/v1").mkdir(parents=True)
    (tmp_path / "api/proto/acme/shop/v1/shop.proto").write_text(PROTO)
    (tmp_path / "db").mkdir()
    (tmp_path / "db/schema.sql").write_text(SCHEMA)
    (tmp_path / "src/gen").mkdir(parents=True)
    subprocess.run(PROTOC, cwd=tmp_path, env=env(), check=True)
    return tmp_path


def test_clean_output_passes(project: Path) -> None:
    done = run(project, "diff", "--", *PROTOC)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""


def test_tampered_output_fails_with_a_unified_diff(project: Path) -> None:
    [handler] = (project / "src/gen").rglob("*_pydb.py")
    handler.write_text(handler.read_text().replace("SELECT id, name", "SELECT id, name, 1", 1))
    done = run(project, "diff", "--", *PROTOC)
    assert done.returncode == 1
    rel = handler.relative_to(project)
    assert f"--- a/{rel}\n+++ b/{rel}\n" in done.stdout
    assert "-" in done.stdout and "SELECT id, name, 1" in done.stdout
    assert "differs" in done.stderr


def test_a_changed_proto_and_a_stale_file_are_drift(project: Path) -> None:
    stale = project / "src/gen/acme/shop/v1/old_pydb.py"
    stale.write_text("# from a proto since deleted\n")
    done = run(project, "diff", "--", *PROTOC)
    assert done.returncode == 1 and "(no longer generated)" in done.stdout
    stale.unlink()
    proto = project / "api/proto/acme/shop/v1/shop.proto"
    proto.write_text(PROTO.replace("WHERE id = @id", "WHERE id = @id AND name <> ''"))
    done = run(project, "diff", "--", *PROTOC)
    assert done.returncode == 1 and "+" in done.stdout and "name <> ''" in done.stdout


def test_a_failing_generation_is_not_a_pass(project: Path) -> None:
    proto = project / "api/proto/acme/shop/v1/shop.proto"
    proto.write_text(PROTO.replace("FROM items", "FROM itemz"))
    done = run(project, "diff", "--", *PROTOC)
    assert done.returncode == 2 and "itemz" in done.stderr


@pytest.mark.skipif(shutil.which("buf", path=str(BIN)) is None, reason="buf-bin is in requirements-dev.txt")
def test_buf_generate(project: Path) -> None:
    # buf modules are relative: a buf user vendors pydb's options.proto into the project.
    vendored = project / "third_party/pydb/v1/options.proto"
    vendored.parent.mkdir(parents=True)
    shutil.copy(Path(include_dir()) / "pydb/v1/options.proto", vendored)
    (project / "buf.yaml").write_text("version: v2\nmodules:\n  - path: api/proto\n  - path: third_party\n")
    (project / "buf.gen.yaml").write_text(
        "version: v2\ninputs:\n  - directory: api/proto\nplugins:\n"
        "  - local: protoc-gen-pydb\n    out: src/gen\n    opt: [proto_path=api/proto, proto_path=.]\n"
    )
    done = run(project, "diff", "--", "buf", "generate")
    assert done.returncode == 0, done.stdout + done.stderr
    [handler] = (project / "src/gen").rglob("*_pydb.py")
    handler.write_text(handler.read_text() + "# edited by hand\n")
    done = run(project, "diff", "--", "buf", "generate")
    assert done.returncode == 1 and "-# edited by hand" in done.stdout
