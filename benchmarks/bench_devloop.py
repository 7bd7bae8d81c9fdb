"""The developer loop: how fast an edit is re-checked.

- `check`: a full `protoc-gen-pydb check` of a synthetic 1,000-RPC proto (benchmarks/synth.py),
  in-process: protoc's parse (grpc_tools) and every RPC analysed and bound; cold (first run)
  and warm (the analyses cached).
- incremental: the same checker after one RPC's SQL is edited on disk (a typo, then its fix,
  alternating over different RPCs): what `check --watch` and the language server do on save.
  Target: ≤ 50 ms.
- lsp (when pygls is installed): the language server over stdio, a 100-RPC proto opened, one
  statement changed: the time from didChange to the publishDiagnostics that reports it.
  Target: ≤ 300 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
import synth
from common import Json


def _summary(xs: list[float]) -> Json:
    xs = sorted(xs)
    return {
        "median": statistics.median(xs),
        "p90": xs[min(len(xs) - 1, int(len(xs) * 0.9))],
        "min": xs[0],
        "max": xs[-1],
        "n": len(xs),
    }


def bench_incremental(rpcs: int, edits: int) -> Json:
    from pydb.plugin.check import Checker

    with tempfile.TemporaryDirectory(prefix="bench-devloop-") as tmp:
        root = Path(tmp)
        name = synth.write_pydb(root, rpcs)
        path = root / name
        original = path.read_text()
        cwd = os.getcwd()
        os.chdir(root)
        try:
            checker = Checker((".",))
            t0 = time.perf_counter()
            assert checker.check([name]) == []
            cold = time.perf_counter() - t0
            warm = []
            for _ in range(3):
                fresh = Checker((".",), cache=checker.cache)
                t0 = time.perf_counter()
                fresh.check([name])
                warm.append(time.perf_counter() - t0)
            # One RPC at a time: a typo (reported), then its fix (clean again).
            sites = [i for i in range(len(original)) if original.startswith("WHERE id = @id", i)]
            step = max(1, len(sites) // edits)
            typo, fixed = [], []
            for site in sites[::step][:edits]:
                path.write_text(original[:site] + "WHERE idd = @id" + original[site + len("WHERE id = @id") :])
                t0 = time.perf_counter()
                found = checker.check([name])
                typo.append(time.perf_counter() - t0)
                assert len(found) == 1 and "idd" in found[0].message, found
                path.write_text(original)
                t0 = time.perf_counter()
                assert checker.check([name]) == []
                fixed.append(time.perf_counter() - t0)
        finally:
            os.chdir(cwd)
    return {
        "rpcs": rpcs,
        "full_check_cold_s": cold,
        "full_check_warm_s": _summary(warm),
        "incremental_typo_ms": _summary([x * 1000 for x in typo]),
        "incremental_fix_ms": _summary([x * 1000 for x in fixed]),
    }


def bench_lsp(rpcs: int, edits: int) -> Json | None:
    try:
        import lsp_client
    except ImportError:
        return None
    return lsp_client.bench(rpcs, edits)


def run(quick: bool = False) -> Json:
    out: Json = {"incremental": bench_incremental(100 if quick else 1000, 4 if quick else 20)}
    lsp = bench_lsp(20 if quick else 100, 3 if quick else 15)
    if lsp is not None:
        out["lsp"] = lsp
    out["loadavg"] = common.loadavg()
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    result = run(args.quick)
    if args.out:
        common.write_json(result, args.out)
    else:
        import json

        print(json.dumps(result, indent=2))
