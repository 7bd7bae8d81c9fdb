"""Run protoc-gen-pydb on the diagnostics corpus in-process: protoc (grpc_tools) only parses the
.proto files into descriptors once; each case is then one CodeGeneratorRequest handed to
`pydb.plugin.main.generate`. No subprocess, no files written.

`python tests/annotation_corpus/runner.py --update` rewrites every bad case's `.expected` file from what the
plugin prints now; review the diff before committing it.
"""

from __future__ import annotations

import sys
from pathlib import Path

CORPUS = Path(__file__).resolve().parent
#: The -I root: the corpus' files are `annotation_corpus/...` in it, names no other test's
#: protos use (generated modules of two same-named .proto files would clash in one process).
ROOT = CORPUS.parent
if str(ROOT) not in sys.path:  # run as a script: tests/ holds plugin_harness
    sys.path.insert(0, str(ROOT))

from plugin_harness import WELL_KNOWN, Outcome, compile_protos, run_plugin  # noqa: E402

__all__ = [
    "CORPUS",
    "ROOT",
    "WELL_KNOWN",
    "Corpus",
    "Outcome",
    "case_names",
    "compile_protos",
    "proto_name",
    "update_expected",
]


def case_names(kind: str) -> list[str]:
    return sorted(p.stem for p in (CORPUS / kind).glob("*.proto"))


class Corpus:
    """Every corpus .proto parsed once; outcomes per case on demand."""

    def __init__(self) -> None:
        self.files = [proto_name(kind, name) for kind in ("bad", "valid") for name in case_names(kind)]
        self.descriptors = compile_protos(ROOT, self.files)

    def run(self, kind: str, name: str) -> Outcome:
        return run_plugin(self.descriptors, [proto_name(kind, name)], cwd=ROOT)


def proto_name(kind: str, name: str) -> str:
    """The name protoc knows a case by, e.g. `annotation_corpus/bad/unknown_table.proto`."""
    return f"{CORPUS.name}/{kind}/{name}.proto"


def update_expected() -> None:
    corpus = Corpus()
    for name in case_names("bad"):
        outcome = corpus.run("bad", name)
        (CORPUS / "bad" / f"{name}.expected").write_text(outcome.transcript(), encoding="utf-8")
        print(f"--- {name}\n{outcome.transcript()}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--update"]:
        update_expected()
    else:
        print(__doc__)
