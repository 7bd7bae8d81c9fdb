"""The build engineer's view of the plugin: grpc_tools, buf and (when installed) system protoc
produce generated/ byte for byte; output does not depend on the working directory, the order
of files on the command line or PYTHONHASHSEED; parameters are strict; `make
check-generated` explains drift; proto3 `optional` works and editions are refused clearly."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf.compiler import plugin_pb2
from pydb.plugin import main as plugin_main

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PLUGIN = BIN / "protoc-gen-pydb"
TASK = "generation/task/v1/task.proto"
SHAPES = "shapes/v1/shapes.proto"  # the streaming query shapes' example (docs/adding-an-rpc.md)

NOTES_SCHEMA = """\
CREATE SCHEMA notes;
CREATE TABLE notes.notes (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    body text NOT NULL,
    author text
);
"""
NOTES_PROTO = """\
syntax = "proto3";

package generation.notes.v1;

import "pydb/v1/options.proto";

message Note {
  int64 id = 1;
  string body = 2;
  optional string author = 3;
}
message AddNoteRequest {
  string body = 1;
  optional string author = 2;
}
message AddNoteResponse {
  Note note = 1;
}
message ListNotesRequest {
  int32 limit = 1;
}
message ListNotesResponse {
  repeated Note notes = 1;
}

service NotesService {
  rpc AddNote(AddNoteRequest) returns (AddNoteResponse) {
    option (pydb.v1.sql) = {
      query: "INSERT INTO notes.notes (body, author) VALUES (@body, @author) RETURNING id, body, author"
      cardinality: CARDINALITY_ONE
      result_field: "note"
    };
  }
  rpc ListNotes(ListNotesRequest) returns (ListNotesResponse) {
    option (pydb.v1.sql) = {
      query: "SELECT id, body, author FROM notes.notes ORDER BY id LIMIT @limit"
      cardinality: CARDINALITY_MANY
      result_field: "notes"
    };
  }
}
"""
NOTES = "generation/notes/v1/notes.proto"


def tree(root: Path) -> dict[str, bytes]:
    """Every file the plugin wrote under `root`; bytecode caches that importing left are not output."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **extra}


def grpc_tools(args: list[str], cwd: Path, **extra_env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"--plugin=protoc-gen-pydb={PLUGIN}", *args],
        cwd=cwd, env=env(**extra_env), capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def full_generation(proto_root: str, out: str, include: str) -> list[str]:
    """The Makefile's flags: every generator that writes into generated/."""
    return [
        f"-I{proto_root}", f"-I{include}",
        f"--python_out={out}", f"--grpc_python_out={out}", f"--mypy_out=quiet:{out}", f"--mypy_grpc_out=quiet:{out}",
        f"--pydb_out={out}", f"--pydb_opt=proto_path={proto_root}",
    ]  # fmt: skip


# -- the three front ends --------------------------------------------------------------------


def test_grpc_tools_protoc_reproduces_generated(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    done = grpc_tools([*full_generation("example_protos", str(out), "protoc-gen-pydb"), TASK, SHAPES], cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert tree(out) == tree(ROOT / "generated")


def repo_subset(tmp_path: Path, *paths: str) -> Path:
    copy = tmp_path / "repo"
    for rel in paths:
        src, dst = ROOT / rel, copy / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dst)
    return copy


def test_buf_generate_reproduces_generated(tmp_path: Path) -> None:
    """`buf generate` with the repository's buf.yaml and buf.gen.yaml, on a copy of the repo."""
    buf = shutil.which("buf", path=str(BIN)) or shutil.which("buf")
    assert buf, "buf is not installed: pip install -r requirements-dev.txt (buf-bin)"
    copy = repo_subset(tmp_path, "buf.yaml", "buf.gen.yaml", "example_protos", "protoc-gen-pydb/pydb/v1/options.proto")
    done = subprocess.run(
        [buf, "generate"], cwd=copy, env=env(BUF_CACHE_DIR=str(tmp_path / "cache")),
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert tree(copy / "generated") == tree(ROOT / "generated")


@pytest.mark.skipif(shutil.which("protoc") is None, reason="system protoc (Debian protobuf-compiler) not installed")
def test_system_protoc_makes_the_same_pydb_files(tmp_path: Path) -> None:
    """System protoc's own Python generator may be an older release than grpcio-tools', so
    only protoc-gen-pydb's files are compared."""
    done = subprocess.run(
        ["protoc", "-Iexample_protos", "-Iprotoc-gen-pydb", f"--plugin=protoc-gen-pydb={PLUGIN}",
         f"--pydb_out={tmp_path}", "--pydb_opt=proto_path=example_protos", TASK, SHAPES],
        cwd=ROOT, env=env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    ours = {k: v for k, v in tree(ROOT / "generated").items() if "_pydb" in k}
    assert tree(tmp_path) == ours


# -- determinism -----------------------------------------------------------------------------


@pytest.fixture
def two_protos(tmp_path: Path) -> Path:
    root = tmp_path / "protos"
    shutil.copytree(ROOT / "example_protos", root)
    (root / NOTES).parent.mkdir(parents=True)
    (root / NOTES).write_text(NOTES_PROTO)
    (root / NOTES).with_name("schema.sql").write_text(NOTES_SCHEMA)
    return root


def test_output_independent_of_cwd_file_order_and_hash_seed(two_protos: Path, tmp_path: Path) -> None:
    include = str(ROOT / "protoc-gen-pydb")
    runs = [
        # (working directory, relative or absolute paths, order, PYTHONHASHSEED)
        (two_protos, "protos-relative", [TASK, NOTES], "0"),
        (tmp_path, "absolute", [NOTES, TASK], "12345"),
        (Path("/"), "absolute", [TASK, NOTES], "random"),
    ]
    outputs = []
    for i, (cwd, style, files, seed) in enumerate(runs):
        out = tmp_path / f"out{i}"
        out.mkdir()
        proto_root = "." if style == "protos-relative" else str(two_protos)
        args = [f"-I{proto_root}", f"-I{include}", f"--pydb_out={out}", f"--pydb_opt=proto_path={proto_root}", *files]
        done = grpc_tools(args, cwd=cwd, PYTHONHASHSEED=seed)
        assert done.returncode == 0, done.stderr
        outputs.append(tree(out))
    assert sorted(outputs[0]) == [
        "generation/notes/v1/notes_pydb.py", "generation/notes/v1/notes_pydb_server.py",
        "generation/task/v1/task_pydb.py", "generation/task/v1/task_pydb_server.py",
    ]  # fmt: skip
    assert outputs[0] == outputs[1] == outputs[2]
    generated = tree(ROOT / "generated")
    assert outputs[0]["generation/task/v1/task_pydb.py"] == generated["generation/task/v1/task_pydb.py"]


def test_proto3_optional_is_declared_and_works(two_protos: Path, tmp_path: Path) -> None:
    response = plugin_main.generate(plugin_pb2.CodeGeneratorRequest(parameter="proto_path=."))
    assert response.supported_features == plugin_pb2.CodeGeneratorResponse.FEATURE_PROTO3_OPTIONAL
    include = str(ROOT / "protoc-gen-pydb")
    done = grpc_tools([f"-I{two_protos}", f"-I{include}", f"--pydb_out={tmp_path}",
                       f"--pydb_opt=proto_path={two_protos}", NOTES], cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    handlers = (tmp_path / "generation/notes/v1/notes_pydb.py").read_text()
    assert '"author": request.author if request.HasField("author") else None,' in handlers
    assert "author=row[2],  # author text (nullable)" in handlers


def test_editions_protos_are_refused_clearly(two_protos: Path, tmp_path: Path) -> None:
    text = (two_protos / NOTES).read_text().replace('syntax = "proto3";', 'edition = "2023";')
    (two_protos / NOTES).write_text(text.replace("optional string", "string"))
    done = grpc_tools([f"-I{two_protos}", f"-I{ROOT / 'protoc-gen-pydb'}", f"--pydb_out={tmp_path}",
                       f"--pydb_opt=proto_path={two_protos}", NOTES], cwd=tmp_path)  # fmt: skip
    assert done.returncode != 0
    assert "editions" in done.stderr and "pydb" in done.stderr, done.stderr


# -- parameters and the executable ------------------------------------------------------------


@pytest.mark.parametrize(
    ("opt", "message"),
    [
        ("verbose=true", "unknown parameter 'verbose'"),
        ("proto_path", "proto_path needs a directory"),
        ("proto_path=", "proto_path needs a directory"),
        ("proto_path=no/such/dir", "no/such/dir is not a directory"),
        ("proto_path=example_protos,prot_path=x", "unknown parameter 'prot_path'"),
    ],
)
def test_parameters_are_strict(opt: str, message: str, tmp_path: Path) -> None:
    args = ["-Iexample_protos", "-Iprotoc-gen-pydb", f"--pydb_out={tmp_path}", f"--pydb_opt={opt}", TASK]
    done = grpc_tools(args, cwd=ROOT)
    assert done.returncode != 0
    assert message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_executable_version_help_include_dir() -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(PLUGIN), *args], capture_output=True, text=True, stdin=subprocess.DEVNULL)

    from pydb import __version__

    assert run("--version").stdout.strip() == f"protoc-gen-pydb {__version__}"
    helped = run("--help")
    assert helped.returncode == 0 and "proto_path=DIR" in helped.stdout and "--include-dir" in helped.stdout
    include = Path(run("--include-dir").stdout.strip())
    assert (include / "pydb" / "v1" / "options.proto").is_file()
    bad = run("--frobnicate")
    assert bad.returncode == 2 and "unknown argument '--frobnicate'" in bad.stderr
    garbage = subprocess.run([str(PLUGIN)], input=b"\xff\xff not a request", capture_output=True)
    assert garbage.returncode == 1 and b"not a CodeGeneratorRequest" in garbage.stderr


# -- make check-generated ---------------------------------------------------------------------


def test_check_generated_shows_a_diff_and_a_fix_hint(tmp_path: Path) -> None:
    """On a copy of the repository (the real generated/ is never touched), using this
    virtualenv and never reinstalling into it."""
    copy = repo_subset(tmp_path, "Makefile", "example_protos", "generated", "protoc-gen-pydb/pydb/v1")
    venv = BIN.parent
    make = ["make", "--no-print-directory", f"VENV={venv}", "-o", f"{venv}/.installed", "check-generated"]
    clean = subprocess.run(make, cwd=copy, capture_output=True, text=True, timeout=120)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "generated/ is up to date" in clean.stdout

    handlers = copy / "generated/generation/task/v1/task_pydb.py"
    text = handlers.read_text()
    marker = "tasks.claim_request_id FROM generation.tasks WHERE id"  # GetTask's statement, * written out
    assert text.count(marker) == 1
    handlers.write_text(text.replace(marker, marker.replace("WHERE id", "WHERE  id")))
    drift = subprocess.run(make, cwd=copy, capture_output=True, text=True, timeout=120)
    assert drift.returncode != 0
    out = drift.stdout
    assert "--- generated/generation/task/v1/task_pydb.py" in out
    removed = [line for line in out.splitlines() if line.startswith("-  tasks.claim_request_id FROM")]
    added = [line for line in out.splitlines() if line.startswith("+  tasks.claim_request_id FROM")]
    assert removed == ["-  tasks.claim_request_id FROM generation.tasks WHERE  id = %(task_id)s"]
    assert added == ["+  tasks.claim_request_id FROM generation.tasks WHERE id = %(task_id)s"]
    assert "@@ " in out
    hint = [line for line in out.splitlines() if "make generate" in line]
    assert hint == ["generated code is stale: run 'make generate' and commit the result"]
