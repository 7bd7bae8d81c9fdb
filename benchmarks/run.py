"""`make bench`: run every benchmark, then write benchmarks/RESULTS.md, results.json and the plots.

    python benchmarks/run.py                 # everything (about 10 minutes)
    python benchmarks/run.py --only codegen  # one or more of: codegen overhead throughput backlog partition events fleet replication
                                             #   autofailover longtx devloop schedule observe peers shapes claims bounds
    python benchmarks/run.py --quick         # tiny sizes, a smoke run (numbers mean nothing)
    python benchmarks/run.py --render-only   # re-write RESULTS.md and plots from results.json

PostgreSQL: DATABASE_URL (a server URL; each benchmark creates and drops its own scratch
database there) or, when unset, a throwaway cluster started for the run (tests/support/pg.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
import report
from common import Json

NAMES = (
    "codegen", "overhead", "throughput", "backlog", "partition", "events", "fleet", "replication",
    "autofailover", "longtx", "devloop", "schedule", "observe", "peers", "shapes", "claims",
    "bounds",
)  # fmt: skip


def run_all(names: list[str], quick: bool) -> Json:
    import bench_autofailover
    import bench_backlog
    import bench_bounds
    import bench_claims
    import bench_codegen
    import bench_devloop
    import bench_events
    import bench_fleet
    import bench_longtx
    import bench_observe
    import bench_overhead
    import bench_partition
    import bench_peers
    import bench_replication
    import bench_schedule
    import bench_shapes
    import bench_throughput

    results: Json = {"quick": quick, "timings_s": {}}
    started = time.perf_counter()
    with common.server_url() as (server, cluster):
        results["machine"] = common.machine_info(server)
        results["machine"]["postgres_source"] = (
            "DATABASE_URL" if cluster is None else "throwaway cluster (tests/support/pg.py)"
        )
        for name in names:
            t0 = time.perf_counter()
            print(f"bench: {name} ...", file=sys.stderr, flush=True)
            try:
                if name == "codegen":
                    results[name] = bench_codegen.run(quick=quick)
                elif name == "overhead":
                    results[name] = bench_overhead.run(server, quick=quick)
                elif name == "throughput":
                    results[name] = bench_throughput.run(server, quick=quick)
                elif name == "backlog":
                    results[name] = bench_backlog.run(server, quick=quick, own_cluster=cluster is not None)
                elif name == "partition":
                    results[name] = bench_partition.run(server, quick=quick, own_cluster=cluster is not None)
                elif name == "events":
                    results[name] = bench_events.run(server, quick=quick)
                elif name == "fleet":
                    results[name] = bench_fleet.run(server, quick=quick)
                elif name == "devloop":
                    results[name] = bench_devloop.run(quick=quick)
                elif name == "replication":
                    results[name] = bench_replication.run(server, quick=quick)
                elif name == "autofailover":
                    results[name] = bench_autofailover.run(server, quick=quick)
                elif name == "longtx":
                    results[name] = bench_longtx.run(server, quick=quick)
                elif name == "schedule":
                    results[name] = bench_schedule.run(server, quick=quick)
                elif name == "observe":
                    results[name] = bench_observe.run(server, quick=quick)
                elif name == "peers":
                    results[name] = bench_peers.run(server, quick=quick)
                elif name == "shapes":
                    results[name] = bench_shapes.run(server, quick=quick)
                elif name == "claims":
                    results[name] = bench_claims.run(server, quick=quick)
                elif name == "bounds":
                    results[name] = bench_bounds.run(server, quick=quick)
            except Exception:  # one broken benchmark must not lose the others' results
                traceback.print_exc()
                results.setdefault("failed", {})[name] = traceback.format_exc(limit=3)
                continue
            results["timings_s"][name] = time.perf_counter() - t0
            results[name]["loadavg_after"] = common.loadavg()
            print(f"bench: {name} done in {results['timings_s'][name]:.0f}s", file=sys.stderr, flush=True)
    results["timings_s"]["total"] = time.perf_counter() - started
    results["machine"]["loadavg_end"] = list(__import__("os").getloadavg())
    return results


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", nargs="+", choices=NAMES, help="run only these benchmarks")
    p.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run, not a measurement")
    p.add_argument("--out-dir", type=Path, default=common.BENCH, help="where results.json, RESULTS.md, *.png go")
    p.add_argument("--render-only", action="store_true", help="re-render from OUT_DIR/results.json")
    args = p.parse_args()
    out: Path = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    raw = out / "results.json"
    if args.render_only:
        results = json.loads(raw.read_text())
    else:
        names = list(args.only or NAMES)
        results = run_all(names, args.quick)
        if args.only and raw.exists():  # keep the other benchmarks' last results
            previous = json.loads(raw.read_text())
            results = {**previous, **results, "timings_s": {**previous.get("timings_s", {}), **results["timings_s"]}}
        common.write_json(results, raw)
    report.write(results, out)
    print(f"wrote {out / 'RESULTS.md'}", file=sys.stderr)
    if results.get("failed"):
        print(f"failed: {', '.join(results['failed'])}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
