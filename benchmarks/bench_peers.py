"""The fleet side by side with the other Python queues on PostgreSQL: PgQueuer (on asyncpg and on
psycopg), procrastinate and oban-py, interleaved in one run on the same PostgreSQL.

Each system, each round, in a fresh database: its schema installed, COUNT no-op jobs enqueued
through its own bulk API (timed: enqueue jobs/s), VACUUM ANALYZE + CHECKPOINT (the same for
everyone), then ONE worker process drains them. Drain jobs/s is read from the database, not from
the worker: COUNT / (last job done - first job claimed), each system's own timestamps
(generation.tasks started_at/completed_at; pgqueuer_log picked/successful; procrastinate_events
started/succeeded; oban_jobs attempted_at/completed_at), and every job is checked done. CPU per
1,000 jobs during the drain, per process: the worker (its rusage), the gRPC server (ours only:
the architecture puts a data plane between workers and PostgreSQL) and PostgreSQL (the whole
postmaster tree, so run it on a server of its own: `make bench` without DATABASE_URL does).

The peers run in environments of their own, made on first use under benchmarks/.peers/ from
benchmarks/requirements-peers.txt (and requirements-peers-oban.txt with a Python >= 3.12, which
oban-py 0.7 requires; it is left out, and said so, where none is found). Each peer is measured at
every setting listed in PEER_SETTINGS (documented tuning knobs) and reported at its best; ours at
its defaults (WorkerFleet concurrency 128, batched reports, QueueTasks of 500).

Each round also measures the floors under the fleet's figures (bench_floor.py: the gRPC hop without
a database, PostgreSQL's cost of the row lifecycle in three forms) and the run reports what they
bound: the least CPU per job and the fastest drain and enqueue this design allows on this machine.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_floor
import bench_throughput as tp
import common
from common import Json

PEERS_DIR = common.BENCH / "peers"
ENVS = common.BENCH / ".peers"
FLEET = common.BENCH / "fleet_procs.py"
OURS = "pydb fleet"

#: Per peer: its driver, the interpreter environment it needs, and the settings tried (the knobs
#: each documents for throughput); the best setting's median is the peer's figure.
PEER_SETTINGS: dict[str, tuple[str, str, list[list[str]]]] = {
    "PgQueuer + asyncpg": ("pgqueuer_jobs.py", "py311", [["asyncpg", "10"], ["asyncpg", "100"]]),
    "PgQueuer + psycopg": ("pgqueuer_jobs.py", "py311", [["psycopg", "10"], ["psycopg", "100"]]),
    "procrastinate": ("procrastinate_jobs.py", "py311", [["10"], ["50"]]),
    "oban-py": ("oban_jobs.py", "py312", [["10"], ["50"]]),
}
VERSIONS = {"py311": ("pgqueuer", "procrastinate", "asyncpg", "psycopg"), "py312": ("oban",)}
REQUIREMENTS = {"py311": "requirements-peers.txt", "py312": "requirements-peers-oban.txt"}

#: The batched path measured beside the fleet in each round: queue depth and seconds.
BATCHED_DEPTH, BATCHED_SECONDS = 60_000, 3.0
#: Rounds of a full run (every system once per round); `make bench` keeps 3.
ROUNDS = int(os.environ.get("PYDB_BENCH_PEERS_ROUNDS", "3"))

#: Per system: (jobs done, first claim, last done) from its own tables.
SPANS = {
    OURS: "SELECT count(*) FILTER (WHERE status = 'completed'), min(started_at), max(completed_at) "
    "FROM generation.tasks",
    "pgqueuer": "SELECT count(*) FILTER (WHERE status = 'successful'), min(created) FILTER (WHERE status = 'picked'), "
    "max(created) FILTER (WHERE status = 'successful') FROM pgqueuer_log",
    "procrastinate": "SELECT (SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'), "
    "min(at) FILTER (WHERE type = 'started'), max(at) FILTER (WHERE type = 'succeeded') FROM procrastinate_events",
    "oban": "SELECT count(*) FILTER (WHERE state = 'completed'), min(attempted_at), max(completed_at) FROM oban_jobs",
}


# -- environments ------------------------------------------------------------------------------


def _python_at_least_312() -> str | None:
    """An interpreter that runs and is >= 3.12 (a pyenv shim may exist and refuse to run)."""
    candidates = [shutil.which(name) for name in ("python3.13", "python3.12")]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python")), reverse=True)
    for found in candidates:
        if found is None:
            continue
        check = subprocess.run([found, "-c", "import sys; assert sys.version_info >= (3, 12)"], capture_output=True)
        if check.returncode == 0:
            return found
    return None


def peer_env(kind: str) -> tuple[str | None, str]:
    """The interpreter of a peers' environment (made on first use), or None and why not."""
    env = ENVS / kind
    python = env / "bin" / "python"
    marker = env / ".installed"
    requirements = common.BENCH / REQUIREMENTS[kind]
    if marker.exists() and marker.read_text() == requirements.read_text():
        return str(python), ""
    base = sys.executable if kind == "py311" else _python_at_least_312()
    if base is None:
        return None, "no Python >= 3.12 on this machine (oban-py 0.7 requires it)"
    shutil.rmtree(env, ignore_errors=True)
    made = subprocess.run([base, "-m", "venv", str(env)], capture_output=True, text=True)
    if made.returncode == 0:
        made = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r", str(requirements)],
            capture_output=True,
            text=True,
        )
    if made.returncode != 0:
        return None, f"could not install {requirements.name}: {made.stderr.strip().splitlines()[-1:]}"
    marker.write_text(requirements.read_text())
    return str(python), ""


def versions(python: str, kind: str) -> dict[str, str]:
    code = "import importlib.metadata as m, json, sys; print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))"
    out = subprocess.run([python, "-c", code, *VERSIONS[kind]], capture_output=True, text=True, check=True).stdout
    return dict(json.loads(out))


# -- measuring ---------------------------------------------------------------------------------


def postgres_cpu_seconds(url: str) -> float:
    """CPU used so far by the whole PostgreSQL server: the postmaster, its exited children (its
    cutime/cstime) and its live ones."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SHOW data_directory").fetchone()
    assert row is not None
    postmaster = int((Path(str(row[0])) / "postmaster.pid").read_text().split()[0])
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile: its time is in the postmaster's cutime now
        pid = int(stat.split("/")[2])
        if pid == postmaster:
            total += sum(int(f) for f in fields[11:15]) / tick
        elif int(fields[1]) == postmaster:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def child_env(ours: bool = False) -> dict[str, str]:
    """Every measured process's environment: bytecode cached as an installed package's is (a
    shell that sets PYTHONDONTWRITEBYTECODE would make our worker recompile the project's
    modules at each start, counted in its CPU, while the peers' site-packages are compiled)."""
    env = common.env_with_path() if ours else dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(ENVS / "pycache")  # not beside the sources (generated/ is diffed)
    return env


def run_process(argv: list[str]) -> Json:
    """Run a driver to its end (reaped, so its CPU is in this process's children's rusage)."""
    proc = subprocess.run(argv, capture_output=True, cwd=PEERS_DIR, timeout=1800, env=child_env())
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[1]} {argv[2]} failed: {proc.stderr.decode(errors='replace')[-2000:]}")
    answer: Json = json.loads(proc.stdout) if proc.stdout.strip() else {}
    return answer


def _children_cpu() -> float:
    return tp.children_cpu_seconds()


def span(url: str, system: str, count: int) -> Json:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(SPANS[system]).fetchone()
    assert row is not None
    done, first, last = int(row[0]), row[1], row[2]
    if done != count or first is None or last is None:
        raise RuntimeError(f"{system}: {done} of {count} jobs done")
    seconds = (last - first).total_seconds()
    return {"done": done, "drain_seconds": seconds, "drain_jobs_per_s": count / seconds}


def as_uri(url: str) -> str:
    """A conninfo as a postgresql:// URI (asyncpg takes no key=value form)."""
    from urllib.parse import quote

    from psycopg.conninfo import conninfo_to_dict

    parts = conninfo_to_dict(url)
    user = quote(str(parts.get("user", "postgres")))
    host, port, db = parts.get("host", "127.0.0.1"), parts.get("port", 5432), quote(str(parts.get("dbname", "")))
    if str(host).startswith("/"):
        return f"postgresql://{user}@/{db}?host={quote(str(host))}&port={port}"
    return f"postgresql://{user}@{host}:{port}/{db}"


def measure_peer(server: str, name: str, python: str, setting: list[str], count: int) -> Json:
    driver, _, _ = PEER_SETTINGS[name]
    system = driver.split("_", 1)[0]
    with common.queue_database(server, schema=None) as url:
        base, url = [python, driver], as_uri(url)
        run_process([*base, "setup", url, "0", *setting])
        enqueue_s = run_process([*base, "enqueue", url, str(count), *setting])["seconds"]
        common.settle(url)
        pg0, cpu0 = postgres_cpu_seconds(url), _children_cpu()
        run_process([*base, "drain", url, str(count), *setting])
        worker_cpu, pg_cpu = _children_cpu() - cpu0, postgres_cpu_seconds(url) - pg0
        result = span(url, system, count)
    return {
        **result,
        "setting": setting,
        "enqueue_jobs_per_s": count / enqueue_s,
        "cpu_s_per_1000": _per_1000({"worker": worker_cpu, "server": 0.0, "postgres": pg_cpu}, count),
    }


def measure_ours(server: str, count: int) -> Json:
    """The fleet's figures (`count`: a multiple of bench_fleet's QueueTasks batch of 500)."""
    env = child_env(ours=True)
    with common.queue_database(server) as url:
        tool_id = tp.make_tool(url)
        proc, address = tp.start_server(url, pool=16)
        try:
            enqueued = subprocess.run(
                [common.PYTHON, str(FLEET), "enqueue", address, tool_id, "bulk", str(count)],
                env=env, capture_output=True, check=True,
            )  # fmt: skip
            answer = json.loads(enqueued.stdout)
            queued, enqueue_s = answer["queued"], answer["seconds"]
            if queued != count:
                raise RuntimeError(f"{OURS}: {queued} of {count} tasks queued")
            common.settle(url)
            pg0, cpu0, server0 = postgres_cpu_seconds(url), _children_cpu(), tp.cpu_seconds(proc.pid)
            subprocess.run(
                [common.PYTHON, str(FLEET), "worker", address, tool_id, str(count), *bench_floor.FLEET_WORKER_SETTINGS],
                env=env, capture_output=True, check=True,
            )  # fmt: skip
            cpu = {
                "worker": _children_cpu() - cpu0,
                "server": tp.cpu_seconds(proc.pid) - server0,
                "postgres": postgres_cpu_seconds(url) - pg0,
            }
            result = span(url, OURS, count)
            # The data plane's own ceiling on the same server: ClaimTasks(100) + CompleteTasks
            # loops (bench_throughput's, 8 in two processes), the fleet's bar is 0.8x of it.
            tp.refill(url, tool_id, BATCHED_DEPTH)
            batched = tp.run_tool(address, tool_id, "batched", 8, BATCHED_SECONDS, processes=2, server_pid=proc.pid)
        finally:
            tp.stop_server(proc)
    return {
        **result,
        "batched_path_tasks_per_s": batched["tasks_per_s"],
        "setting": ["concurrency 128", "batched reports"],
        "enqueue_jobs_per_s": count / enqueue_s,
        "cpu_s_per_1000": _per_1000(cpu, count),
    }


def _per_1000(cpu: dict[str, float], count: int) -> dict[str, float]:
    per = {k: v * 1000 / count for k, v in cpu.items()}
    return {**per, "total": sum(per.values())}


def best(runs: list[Json]) -> Json:
    """A system's figures: per setting the medians over rounds; the setting with the best drain."""
    by_setting: dict[str, list[Json]] = {}
    for run in runs:
        by_setting.setdefault(" ".join(run["setting"]), []).append(run)
    summaries = {
        setting: {
            "rounds": len(rs),
            "drain_jobs_per_s": statistics.median(r["drain_jobs_per_s"] for r in rs),
            "enqueue_jobs_per_s": statistics.median(r["enqueue_jobs_per_s"] for r in rs),
            "cpu_s_per_1000": {
                k: statistics.median(r["cpu_s_per_1000"][k] for r in rs) for k in rs[0]["cpu_s_per_1000"]
            },
            **(
                {"batched_path_tasks_per_s": statistics.median(r["batched_path_tasks_per_s"] for r in rs)}
                if "batched_path_tasks_per_s" in rs[0]
                else {}
            ),
        }
        for setting, rs in by_setting.items()
    }
    chosen = max(summaries, key=lambda s: summaries[s]["drain_jobs_per_s"])
    return {"setting": chosen, **summaries[chosen], "settings": summaries}


def _progress(round_no: int, name: str, run: Json) -> None:
    c = run["cpu_s_per_1000"]
    print(
        f"bench: peers round {round_no + 1}: {name} {' '.join(run['setting'])}: drain {run['drain_jobs_per_s']:,.0f}/s, "
        f"enqueue {run['enqueue_jobs_per_s']:,.0f}/s, CPU/1000 {c['total']:.3f}, load {common.loadavg():.1f}",
        file=sys.stderr,
        flush=True,
    )


def run(server: str, quick: bool = False) -> Json:
    count = 1_000 if quick else 20_000
    rounds = 1 if quick else ROUNDS
    envs: dict[str, tuple[str | None, str]] = {kind: peer_env(kind) for kind in REQUIREMENTS}
    result: Json = {"jobs": count, "rounds": rounds, "versions": {}, "unavailable": {}, "systems": {}}
    for kind, (python, _) in envs.items():
        if python is not None:
            result["versions"].update(versions(python, kind))
    runs: dict[str, list[Json]] = {OURS: []}
    floors: list[Json] = []
    for round_no in range(rounds):
        # Interleaved: every system once per round, so all of them see the same machine load.
        runs[OURS].append(measure_ours(server, count))
        _progress(round_no, OURS, runs[OURS][-1])
        floors.append(bench_floor.measure(server, count, child_env(ours=True)))
        for name, (_, kind, settings) in PEER_SETTINGS.items():
            python, why = envs[kind]
            if python is None:
                result["unavailable"][name] = why
                continue
            for setting in settings[:1] if quick else settings:
                print(f"bench: peers round {round_no + 1}: {name} {setting}", file=sys.stderr, flush=True)
                runs.setdefault(name, []).append(measure_peer(server, name, python, setting, count))
                _progress(round_no, name, runs[name][-1])
    for name, rs in runs.items():
        result["systems"][name] = best(rs)
    peers = {n: s for n, s in result["systems"].items() if n != OURS}
    result["floor"] = bench_floor.bounds(
        floors,
        peers.get("PgQueuer + asyncpg"),
        max((s["enqueue_jobs_per_s"] for s in peers.values()), default=None),
    )
    result["loadavg"] = common.loadavg()
    return result


def main() -> int:
    p = common.arg_parser(__doc__ or "")
    args = p.parse_args()
    with common.server_url() as (server, _):
        common.write_json(run(server, quick=args.quick), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
