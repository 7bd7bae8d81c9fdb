"""Editions (`edition = "2023"`) are refused, not half supported (docs/workflow.md says why):
by buf generate (as grpc_tools' protoc refuses them: tests/workflow/test_workflow_generate.py)
and by `protoc-gen-pydb check`, which has no protoc feature negotiation to lean on."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pydb import include_dir
from pydb.plugin.check import Checker

PROTO = """edition = "2023";
package ed.v1;
import "pydb/v1/options.proto";
message Id { int64 id = 1; }
message Item { int64 id = 1; string name = 2; }
service Ed {
  rpc Get(Id) returns (Item) {
    option (pydb.v1.sql) = { query: "SELECT id, name FROM items WHERE id = @id" cardinality: CARDINALITY_ONE };
  }
}
"""
BIN = Path(sys.executable).parent


def project(root: Path) -> Path:
    (root / "proto/ed/v1").mkdir(parents=True)
    (root / "proto/ed/v1/api.proto").write_text(PROTO)
    (root / "proto/ed/v1/schema.sql").write_text("CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL);\n")
    return root


def test_check_refuses_editions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project(tmp_path))
    [found] = Checker(("proto",)).check(["ed/v1/api.proto"])
    assert found.path == "ed/v1/api.proto" and "does not support editions" in found.message
    (tmp_path / "proto/ed/v1/api.proto").write_text(PROTO.replace('edition = "2023";', 'syntax = "proto3";'))
    assert Checker(("proto",)).check(["ed/v1/api.proto"]) == []


@pytest.mark.skipif(shutil.which("buf", path=str(BIN)) is None, reason="buf-bin is in requirements-dev.txt")
def test_buf_generate_refuses_editions(tmp_path: Path) -> None:
    root = project(tmp_path)
    vendored = root / "third_party/pydb/v1/options.proto"
    vendored.parent.mkdir(parents=True)
    shutil.copy(Path(include_dir()) / "pydb/v1/options.proto", vendored)
    (root / "buf.yaml").write_text("version: v2\nmodules:\n  - path: proto\n  - path: third_party\n")
    (root / "buf.gen.yaml").write_text(
        "version: v2\ninputs:\n  - directory: proto\nplugins:\n"
        "  - local: protoc-gen-pydb\n    out: gen\n    opt: proto_path=proto\n"
    )
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [str(BIN / "buf"), "generate"], cwd=root, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode != 0
    assert "edition" in done.stderr.lower() and "protoc-gen-pydb" in done.stderr, done.stderr
    assert not (root / "gen").exists() or not any((root / "gen").rglob("*_pydb.py"))
