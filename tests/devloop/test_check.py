"""`protoc-gen-pydb check` gives the plugin's own diagnostics without protoc's round trip, and
`check --watch` re-checks on save. The project is laid out as a user's (protos under `proto/`,
the schema under `db/`), not as this repository."""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydb.plugin.bind.cache import CompileCache
from pydb.plugin.check import Checker, report
from support.plugin_harness import compile_protos, run_plugin

PROTO = """syntax = "proto3";
package shop.v1;
import "pydb/v1/options.proto";
message Id { int64 id = 1; }
message Item { int64 id = 1; string name = 2; }
service Shop {
  rpc Get(Id) returns (Item) {
    option (pydb.v1.sql) = { query: "SELECT id, name FROM items WHERE id = @id" cardinality: CARDINALITY_ONE };
  }
}
"""
SCHEMA = "CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL);\n"
NAME = "shop/v1/shop.proto"


def project(tmp_path: Path, proto: str = PROTO) -> Path:
    (tmp_path / "proto/shop/v1").mkdir(parents=True)
    (tmp_path / "db").mkdir()
    (tmp_path / "db/schema.sql").write_text(SCHEMA)
    (tmp_path / "proto" / NAME).write_text(proto)
    return tmp_path


def command(*args: str) -> list[str]:
    return [sys.executable, "-c", "from pydb.plugin.entry import main; raise SystemExit(main())", *args]


def test_check_prints_what_the_plugin_reports(tmp_path: Path) -> None:
    root = project(tmp_path, PROTO.replace("name FROM", "nmae FROM"))
    ok = subprocess.run(
        command("check", "-I", "proto", "--schema", "db/schema.sql", f"proto/{NAME}"),
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 1
    plugin = run_plugin(
        compile_protos(root / "proto", [NAME]),
        [NAME],
        cwd=root,
        parameter="proto_path=proto,proto_path=.,schema=db/schema.sql",
    )
    assert plugin.error.split("\n", 1)[1] in ok.stderr
    assert f"{NAME}:8:49: error: Get: column nmae does not exist" in ok.stderr
    assert ok.stderr.rstrip().endswith("1 error, 0 warnings")


def test_check_passes_a_clean_project_and_reports_protoc_errors(tmp_path: Path) -> None:
    root = project(tmp_path)
    ok = subprocess.run(
        command("check", "-I", "proto", "--schema", "db/schema.sql", f"proto/{NAME}"),
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stderr
    (root / "proto" / NAME).write_text(PROTO.replace("message Id {", "message Id {{"))
    bad = subprocess.run(
        command("check", "-I", "proto", "--schema", "db/schema.sql", f"proto/{NAME}"),
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert (
        bad.returncode == 1
        and f"{NAME}:4:13: error: Expected type name." in bad.stderr
        and "Traceback" not in bad.stderr
    )


def test_cached_recheck_gives_the_uncached_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = project(tmp_path, PROTO.replace("name FROM", "nmae FROM"))
    cached = Checker(("proto",), "db/schema.sql", cache=CompileCache())
    monkeypatch.chdir(root)
    first = cached.check([NAME])
    assert cached.check([NAME]) == first  # nothing changed
    proto = root / "proto" / NAME
    proto.write_text(PROTO.replace("id = @id", "id = @id AND name <> ''"))  # inside the literal
    assert cached.check([NAME]) == Checker(("proto",), "db/schema.sql").check([NAME]) == []
    proto.write_text(PROTO.replace("name FROM", "nmae FROM"))
    again = cached.check([NAME])
    fresh = Checker(("proto",), "db/schema.sql").check([NAME])
    assert first == again == fresh and len(first) == 1
    assert cached.cache.hits >= 1
    assert {p.name for p in cached.inputs} == {"shop.proto", "schema.sql"}


class Watch:
    """`check --watch` as a subprocess; reads its reports (one per check) as they come."""

    def __init__(self, root: Path) -> None:
        argv = command(
            "check", "--watch", "--interval", "0.05", "-I", "proto", "--schema", "db/schema.sql", f"proto/{NAME}"
        )
        self.proc = subprocess.Popen(argv, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert self.proc.stdout is not None
        self.fd = self.proc.stdout.fileno()
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.fd, selectors.EVENT_READ)
        self.pending = b""

    def next_report(self, timeout: float = 30.0) -> str:
        """The text up to the next `N errors, M warnings (... ms; watching ...)` summary line."""
        deadline = time.monotonic() + timeout
        while b"; watching " not in self.pending or not self.pending.endswith(b"\n"):
            end = self.pending.find(b"\n", self.pending.find(b"; watching "))
            if b"; watching " in self.pending and end != -1:
                break
            remaining = deadline - time.monotonic()
            assert remaining > 0 and self.selector.select(remaining), f"no report within {timeout}s: {self.pending!r}"
            chunk = os.read(self.fd, 65536)
            assert chunk, f"watch exited: {self.pending!r}"
            self.pending += chunk
        end = self.pending.find(b"\n", self.pending.find(b"; watching ")) + 1
        text, self.pending = self.pending[:end], self.pending[end:]
        return text.decode()

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def test_watch_rechecks_on_save(tmp_path: Path) -> None:
    root = project(tmp_path)
    watch = Watch(root)
    try:
        assert watch.next_report().startswith("0 errors, 0 warnings")
        (root / "proto" / NAME).write_text(PROTO.replace("name FROM", "nmae FROM"))
        broken = watch.next_report()
        assert f"{NAME}:8:49: error: Get: column nmae does not exist" in broken and "1 error," in broken
        (root / "db/schema.sql").write_text(SCHEMA.replace("name text", "nmae text"))
        assert "Get: column nmae" not in watch.next_report()  # the schema is watched too
        (root / "db/schema.sql").write_text(SCHEMA)
        (root / "proto" / NAME).write_text(PROTO)
        text = watch.next_report()
        while "1 error," in text:  # the two saves may be seen one at a time
            text = watch.next_report()
        assert text.startswith("0 errors, 0 warnings")
    finally:
        watch.close()


def test_report_counts() -> None:
    assert report([]) == "0 errors, 0 warnings"
