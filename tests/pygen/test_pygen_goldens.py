"""Feature goldens (as mypy-protobuf keeps them): for each tests/goldens/<feature>/ (a proto, its
schema.sql), the committed output of protoc-gen-pydb under expected/ (`.expected` so linters
leave it alone), regenerated and diffed here; every golden and every valid corpus case compiles,
and passes `mypy --strict` together with protoc's and mypy-protobuf's output.

After an intended change to the generated code, rewrite the goldens and review the diff:

    PYDB_UPDATE_EXPECTED=1 .venv/bin/pytest tests/pygen/test_pygen_goldens.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from corpus.run import CORPUS, Corpus, generating_cases, proto_name
from corpus.run import ROOT as CORPUS_ROOT
from goldens.harness import generate, python_out
from support.plugin_harness import protoc

ROOT = Path(__file__).resolve().parents[2]
GOLDENS = Path(__file__).resolve().parents[1] / "goldens"
FEATURES = sorted(d.name for d in GOLDENS.iterdir() if (d / f"goldens_{d.name}.proto").is_file())
UPDATE = os.environ.get("PYDB_UPDATE_EXPECTED") == "1"


def test_the_goldens_cover_the_features() -> None:
    assert set(FEATURES) >= {
        "comments",
        "copy",
        "enum_arrays",
        "exec",
        "exec_rows",
        "keywords",
        "listen",
        "nested",
        "quoted_identifiers",
        "text_form",
        "wrappers",
    }


@pytest.mark.parametrize("feature", FEATURES)
def test_the_generated_code_is_the_golden(feature: str) -> None:
    outcome = generate(GOLDENS / feature, f"goldens_{feature}.proto")
    assert outcome.error == "", outcome.error
    expected_dir = GOLDENS / feature / "expected"
    if UPDATE:
        expected_dir.mkdir(exist_ok=True)
        for old in expected_dir.glob("*.expected"):
            old.unlink()
        for name, content in outcome.files.items():
            (expected_dir / f"{name}.expected").write_text(content, encoding="utf-8")
    expected = {p.name[: -len(".expected")]: p.read_text(encoding="utf-8") for p in expected_dir.glob("*.expected")}
    assert sorted(outcome.files) == sorted(expected)
    for name, content in outcome.files.items():
        assert content == expected[name], f"{feature}/{name} differs from its golden (see this module's doc)"


def test_the_goldens_compile_and_pass_mypy_strict(tmp_path: Path) -> None:
    out = tmp_path / "out"
    handlers = []
    for feature in FEATURES:
        outcome = generate(GOLDENS / feature, f"goldens_{feature}.proto", out, stubs=True)
        assert outcome.error == "", outcome.error
        handlers += sorted(outcome.files)
    for name in handlers:
        compile((out / name).read_text(encoding="utf-8"), name, "exec")
    mypy_strict(out, handlers, tmp_path / "cache")


def mypy_strict(out: Path, modules: list[str], cache: Path, *extra: str) -> None:
    """One `mypy --strict` over `modules` (paths relative to `out`, which holds everything they
    import but pydb), with no project configuration and its cache in `cache`; fails with its report."""
    env = {**os.environ, "MYPYPATH": str(ROOT / "protoc-gen-pydb")}
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--config-file=", f"--cache-dir={cache}", *extra, *modules],
        cwd=out,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


#: The corpus cases that generate (tests/corpus/<case>/expected/analysis.txt).
GENERATING = generating_cases()


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return Corpus(GENERATING)


@pytest.mark.parametrize("name", GENERATING)
def test_every_valid_corpus_case_compiles(corpus: Corpus, name: str) -> None:
    outcome = corpus.run(name)
    assert outcome.error == "", outcome.error
    assert outcome.files
    for path, content in outcome.files.items():
        compile(content, path, "exec")


def test_every_valid_corpus_case_passes_mypy_strict(corpus: Corpus, tmp_path: Path) -> None:
    """Every generating case's modules (handlers and servers), with protoc's modules and
    mypy-protobuf's stubs for the cases and the shared protos they import, in one tree and one
    mypy run. Each case is a package `corpus.<case>` without __init__.py, hence
    --explicit-package-bases (else every `query_pydb` would be the same top-level module)."""
    out = tmp_path / "out"
    out.mkdir()
    protos = sorted(f.name for f in corpus.descriptors.file if f.name.startswith(f"{CORPUS.name}/"))
    protoc(CORPUS_ROOT, *python_out(out, stubs=True), *protos)
    outcome = corpus.run(*GENERATING)
    assert outcome.error == "", outcome.error
    modules = sorted(outcome.files)
    assert set(modules) >= {f"{proto_name(case).removesuffix('.proto')}_pydb.py" for case in GENERATING}
    for name, content in outcome.files.items():
        (out / name).write_text(content, encoding="utf-8")
    mypy_strict(out, modules, tmp_path / "cache", "--explicit-package-bases")
