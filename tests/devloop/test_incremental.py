"""The incremental re-check (pydb/plugin/incremental.py) reports what a full check reports:
edits inside one statement's literals take the fast path, every other edit the full one."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from pydb.plugin.check import Checker

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
synth = importlib.import_module("synth")  # the benchmark's generator of N-RPC protos

EDITS = [
    # (old, new, takes the fast path, is an error)
    ("WHERE id = @id", "WHERE idd = @id", True, True),  # a typo in a column
    ("WHERE id = @id", "WHERE id = @idd", True, True),  # a parameter that is not a field
    ("SELECT * FROM synth.t000", "SELECT * FROM synth.t000x", True, True),  # an unknown table
    ("SELECT * FROM synth.t000", "SELECT name FROM synth.t000", True, True),  # the row no longer fills the response
    ("WHERE id = @id", 'WHERE id " "= @idd', True, True),  # split into two adjacent literals
    ("WHERE id = @id", "WHERE id = @id\\n  AND qty > 0", True, False),  # an escape added, still right
    ("WHERE id = @id", 'WHERE id = "@id', False, True),  # a quote: the literals end elsewhere
    ("cardinality: CARDINALITY_ONE", "cardinality: CARDINALITY_MANY", False, True),  # outside the literal
    ("string id = 1;", "int64 id = 1;", False, True),  # a message changed
]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("incremental")
    synth.write_pydb(root, 24, tables=4)
    return root


@pytest.mark.parametrize(("old", "new", "fast", "error"), EDITS)
def test_edit_reports_what_a_full_check_reports(
    project: Path, monkeypatch: pytest.MonkeyPatch, old: str, new: str, fast: bool, error: bool
) -> None:
    monkeypatch.chdir(project)
    name = "synth/v1/synth.proto"
    path = project / name
    original = path.read_text()
    assert old in original
    checker = Checker((".",))
    assert checker.check([name]) == []
    parses = 0
    real_parse = checker.parse

    def counting_parse(*args: object, **kwargs: object) -> object:
        nonlocal parses
        parses += 1
        return real_parse(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(checker, "parse", counting_parse)
    try:
        path.write_text(original.replace(old, new, 1))
        incremental = checker.check([name])
        full = Checker((".",)).check([name])
        assert incremental == full
        assert (parses == 0) == fast
        assert bool(full) == error, full
        path.write_text(original)  # and back: clean again
        assert checker.check([name]) == []
    finally:
        path.write_text(original)
