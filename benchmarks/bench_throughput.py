"""Queue throughput end to end: claim+complete cycles through the generated gRPC server with N
concurrent clients, next to pgbench running the same SQL directly against the same database.

Two paths:
- single: ClaimNextTask + CompleteTask per task (pgbench: the same two statements, the claim's
  id and lease_token carried over with \\gset);
- batched: ClaimTasks(limit=100) + CompleteTasks for the whole batch (pgbench: the same claim
  with its ids and lease tokens aggregated into arrays, then the same unnest completion).

The server (`python -m generation.task.v1.task_pydb_server`) and the clients are separate
processes; the clients use grpc.aio with N concurrent workers in total. Before every run the
queue is truncated and refilled, so each run starts from the same table. Runs of the tool and
of pgbench alternate at each N, so both see the same machine load.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
from common import Json

BATCH = 100


# -- the SQL, taken from the generated module so pgbench runs exactly what the server runs ------


def _pgbench_sql(sql: str) -> str:
    """psycopg's %(name)s placeholders -> pgbench :name variables; one line per statement (so the
    statement's `--` comments, none of them inside a string literal, are dropped first)."""
    return " ".join(re.sub(r"%\((\w+)\)s", r":\1", re.sub(r"--[^\n]*", "", sql)).split())


def pgbench_scripts() -> dict[str, str]:
    from generation.task.v1 import task_pydb as h

    # No request_id: a fresh claim every time (a retried claim's replay is not measured here).
    claim = _pgbench_sql(h.CLAIM_NEXT_TASK_SQL).replace(":request_id", "''")
    complete = (
        _pgbench_sql(h.COMPLETE_TASK_SQL)
        .replace(":task_id", ":id")  # the claim's RETURNING * sets :id and :lease_token
        .replace(":output", "NULL")
        .replace(":reported_usage", "NULL")
    )
    claim_many = _pgbench_sql(h.CLAIM_TASKS_SQL).replace(":limit", str(BATCH)).replace(":request_id", "''")
    # The batch claim's WITH is kept (its UPDATE is the CTE `claimed`), and the ids it claimed are
    # aggregated instead of returned as rows (nothing is `held` without a request_id).
    head = claim_many.split(") SELECT claimed.id,", 1)[0]
    claim_batch = (
        f"{head}) "
        "SELECT COALESCE(array_agg(id), '{}') AS ids, COALESCE(array_agg(lease_token), '{}') AS tokens "
        "FROM claimed \\gset"
    )
    complete_many = (
        _pgbench_sql(h.COMPLETE_TASKS_SQL)
        .replace(":task_ids", ":ids")
        .replace(":lease_tokens", ":tokens")
        .replace(":outputs", "'{}'")
        .replace(":reported_usages", "'{}'")
    )
    return {
        "single": f"{claim} \\gset\n{complete}\n",
        "batched": f"{claim_batch}\n{complete_many}\n",
    }


# -- the queue -------------------------------------------------------------------------------


def refill(url: str, tool_id: str, depth: int) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE generation.tasks")
        conn.execute(
            "INSERT INTO generation.tasks (tool_id, input) SELECT %s, '{}' FROM generate_series(1, %s)",
            (tool_id, depth),
        )
        conn.execute("VACUUM ANALYZE generation.tasks")
        conn.execute("CHECKPOINT")


def make_tool(url: str) -> str:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "INSERT INTO generation.tools (name) VALUES ('throughput') ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING id"
        ).fetchone()
        assert row is not None
        return str(row[0])


def completed_count(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM generation.tasks WHERE status = 'completed'").fetchone()
        return int(row[0]) if row else 0


# -- pgbench ---------------------------------------------------------------------------------


def run_pgbench(url: str, script: str, clients: int, seconds: float, tool_id: str, tmp: Path) -> Json:
    from psycopg.conninfo import conninfo_to_dict

    parts = conninfo_to_dict(url)
    path = tmp / "script.sql"
    path.write_text(script)
    env = dict(os.environ)
    for key, var in (("host", "PGHOST"), ("port", "PGPORT"), ("user", "PGUSER"), ("password", "PGPASSWORD")):
        if parts.get(key):
            env[var] = str(parts[key])
    argv = [
        common.pg_bin("pgbench"), "-n", "-M", "prepared", "-c", str(clients), "-j", str(min(clients, 2)),
        "-T", str(int(seconds)), "-D", f"tool_id={tool_id}", "-D", "max_bytes=0", "-f", str(path), str(parts.get("dbname", "postgres")),
    ]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=seconds + 60)
    out = proc.stdout + proc.stderr
    m = re.search(r"tps = ([\d.]+) \(without initial connection time\)", out)
    if proc.returncode != 0 or not m:
        raise RuntimeError(f"pgbench failed ({proc.returncode}):\n{out[-2000:]}")
    lat = re.search(r"latency average = ([\d.]+) ms", out)
    failed = re.search(r"number of failed transactions: (\d+)", out)
    return {
        "cycles_per_s": float(m.group(1)),
        "latency_avg_ms": float(lat.group(1)) if lat else None,
        "failed": int(failed.group(1)) if failed else 0,
    }


# -- the tool: server and client processes ---------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(url: str, pool: int) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    argv = [
        common.PYTHON, "-m", "generation.task.v1.task_pydb_server", "--database-url", url,
        "--listen-addr", f"127.0.0.1:{port}", "--pool-min", str(pool), "--pool-max", str(pool),
        "--no-reflection", "--log-level", "warning",
    ]  # fmt: skip
    proc = subprocess.Popen(argv, env=common.env_with_path(), stdout=subprocess.DEVNULL)
    address = f"127.0.0.1:{port}"
    wait_serving(address, proc)
    return proc, address


def wait_serving(address: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(address) as ch:
        stub = health_pb2_grpc.HealthStub(ch)
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited with {proc.returncode}")
            try:
                resp = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=1)
                if resp.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            time.sleep(0.1)
    raise RuntimeError("server did not become SERVING")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def client_main(address: str, tool_id: str, mode: str, workers: int, start_at: float, seconds: float) -> Json:
    """One client process: `workers` threads, each a blocking client looping from start_at for
    `seconds`. (grpc's blocking stubs cost the client about half the CPU of grpc.aio ones, and
    the client shares the machine with the server and the database.)"""
    import threading

    import grpc
    from generation.task.v1 import task_pb2, task_pb2_grpc

    # Several servers (bench_replication): one channel, client-side round_robin over them.
    if "," in address:
        channel = grpc.insecure_channel(f"ipv4:{address}", options=[("grpc.lb_policy_name", "round_robin")])
    else:
        channel = grpc.insecure_channel(address)
    grpc.channel_ready_future(channel).result(timeout=30)
    stub = task_pb2_grpc.GenerationDataServiceStub(channel)
    done = [0] * workers
    empty = [0] * workers
    latencies: list[list[float]] = [[] for _ in range(workers)]
    time.sleep(max(0.0, start_at - time.time()))
    end = time.monotonic() + seconds

    def single(i: int) -> None:
        claim = task_pb2.ClaimNextTaskRequest(tool_id=tool_id)
        lat = latencies[i]
        while time.monotonic() < end:
            t0 = time.perf_counter()
            resp = stub.ClaimNextTask(claim)
            if not resp.HasField("task"):
                empty[i] += 1
                continue
            stub.CompleteTask(task_pb2.CompleteTaskRequest(task_id=resp.task.id, lease_token=resp.task.lease_token))
            lat.append(time.perf_counter() - t0)
            done[i] += 1

    def batched(i: int) -> None:
        claim = task_pb2.ClaimTasksRequest(tool_id=tool_id, limit=BATCH)
        lat = latencies[i]
        while time.monotonic() < end:
            t0 = time.perf_counter()
            resp = stub.ClaimTasks(claim)
            if not resp.tasks:
                empty[i] += 1
                continue
            req = task_pb2.CompleteTasksRequest(
                task_ids=[t.id for t in resp.tasks], lease_tokens=[t.lease_token for t in resp.tasks]
            )
            completed = stub.CompleteTasks(req)
            lat.append(time.perf_counter() - t0)
            done[i] += len(completed.tasks)

    def floor(i: int) -> None:
        """Two empty RPCs per cycle (grpc health Check on the same server): gRPC's own cost."""
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        health = health_pb2_grpc.HealthStub(channel)
        req = health_pb2.HealthCheckRequest(service="")
        lat = latencies[i]
        while time.monotonic() < end:
            t0 = time.perf_counter()
            health.Check(req)
            health.Check(req)
            lat.append(time.perf_counter() - t0)
            done[i] += 1

    loop = {"single": single, "batched": batched, "floor": floor}[mode]
    threads = [threading.Thread(target=loop, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    channel.close()
    return {"done": sum(done), "empty": sum(empty), "latencies": [x for lat in latencies for x in lat]}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_tool(
    address: str, tool_id: str, mode: str, clients: int, seconds: float, processes: int, server_pid: int
) -> Json:
    procs = max(1, min(processes, clients))
    server_cpu = cpu_seconds(server_pid)
    client_cpu = children_cpu_seconds()
    start_at = time.time() + 2.0
    children = []
    for p in range(procs):
        workers = clients // procs + (1 if p < clients % procs else 0)
        argv = [
            common.PYTHON, __file__, "client", address, tool_id, mode, str(workers), repr(start_at), repr(seconds),
        ]  # fmt: skip
        children.append(subprocess.Popen(argv, env=common.env_with_path(), stdout=subprocess.PIPE))
    results = []
    for c in children:
        out, _ = c.communicate(timeout=seconds + 60)
        if c.returncode != 0:
            raise RuntimeError(f"client exited with {c.returncode}")
        results.append(json.loads(out))
    done = sum(r["done"] for r in results)
    lats = [x for r in results for x in r["latencies"]]
    # CPU per task is far less sensitive to other load on the machine than tasks/s.
    server_cpu = cpu_seconds(server_pid) - server_cpu
    client_cpu = children_cpu_seconds() - client_cpu
    return {
        "tasks_per_s": done / seconds,
        "server_cpu_us_per_task": server_cpu / done * 1e6 if done else None,
        "client_cpu_us_per_task": client_cpu / done * 1e6 if done else None,
        "cycle_latency": common.latency_summary(lats),
        "empty_claims": sum(r["empty"] for r in results),
        "client_processes": procs,
    }


# -- the benchmark ---------------------------------------------------------------------------


def measure(url: str, quick: bool) -> Json:
    seconds = 1.0 if quick else 8.0
    # The batched path drains a queue fast: shorter runs keep the refill affordable.
    seconds_batched = 1.0 if quick else 5.0
    single_ns = (2,) if quick else (1, 4, 8, 16, 32)
    batched_ns = (1,) if quick else (1, 2, 4, 8)
    # Enough for pgbench's single path at 18k cycles/s (it stops on an empty queue); the batched
    # script tolerates an empty queue (it then completes nothing). Tasks are counted in the table.
    depth_single = 30_000 if quick else 150_000
    depth_batched = 60_000 if quick else 400_000
    tool_id = make_tool(url)
    scripts = pgbench_scripts()
    result: Json = {
        "seconds_per_run": seconds,
        "seconds_per_batched_run": seconds_batched,
        "batch": BATCH,
        "single": {},
        "batched": {},
        "scripts": scripts,
    }
    pool = max(max(single_ns), max(batched_ns))
    server, address = start_server(url, pool)
    try:
        with tempfile.TemporaryDirectory(prefix="pydb-bench-tp-") as d:
            tmp = Path(d)
            for mode, ns, depth, secs in (
                ("single", single_ns, depth_single, seconds),
                ("batched", batched_ns, depth_batched, seconds_batched),
            ):
                for n in ns:
                    refill(url, tool_id, depth)
                    pg = run_pgbench(url, scripts[mode], n, secs, tool_id, tmp)
                    pg["verified_completed_rows"] = completed_count(url)
                    refill(url, tool_id, depth)
                    tool = run_tool(address, tool_id, mode, n, secs, processes=2, server_pid=server.pid)
                    tool["verified_completed_rows"] = completed_count(url)
                    pg_tasks = pg["verified_completed_rows"] / secs
                    result[mode][str(n)] = {
                        "pgbench": {**pg, "tasks_per_s": pg_tasks},
                        "tool": tool,
                        "ratio": tool["tasks_per_s"] / pg_tasks if pg_tasks else None,
                        "loadavg": common.loadavg(),
                    }
            # gRPC's floor at the best single-path N: the same clients, two empty RPCs per cycle.
            best_n = max(result["single"], key=lambda k: result["single"][k]["tool"]["tasks_per_s"])
            result["grpc_floor"] = {
                "clients": int(best_n),
                **run_tool(address, tool_id, "floor", int(best_n), seconds, processes=2, server_pid=server.pid),
            }
    finally:
        stop_server(server)
    for mode in ("single", "batched"):
        rows = result[mode]
        best = max(rows, key=lambda k: rows[k]["tool"]["tasks_per_s"])
        result[f"{mode}_best"] = {"clients": int(best), **rows[best]}
    return result


def run(server: str, quick: bool = False) -> Json:
    with common.queue_database(server) as url:
        return measure(url, quick)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "client":
        address, tool_id, mode, workers, start_at, seconds = sys.argv[2:8]
        out = client_main(address, tool_id, mode, int(workers), float(start_at), float(seconds))
        sys.stdout.write(json.dumps(out))
        return 0
    p: argparse.ArgumentParser = common.arg_parser(__doc__ or "")
    args = p.parse_args()
    with common.server_url() as (server, _):
        common.write_json(run(server, quick=args.quick), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
