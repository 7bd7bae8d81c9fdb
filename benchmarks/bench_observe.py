"""Observability's costs, measured side by side in one run.

- overhead: the batched path (bench_throughput's ClaimTasks(100) + CompleteTasks clients, 8 of
  them in two processes) against a server with metrics and tracing off, then one with
  `--metrics-addr` and `--tracing` on and the OpenTelemetry SDK installed (a BatchSpanProcessor
  with an exporter that drops the spans: the SDK's whole cost, no network), alternating off/on
  so both see the same machine; the ratio on/off of the median tasks/s.
- dashboard: 1,000,000 tasks in the table (5 tools, 10,000 of them queued, 1 in 10 finished ones
  failed), the generated server and `python -m taskdash` as processes of their own, each page
  fetched over HTTP one request after another; p50/p95 per page.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_throughput as tp
import common
from common import Json

ROOT = Path(__file__).resolve().parent.parent

# The generated server with the OpenTelemetry SDK installed, spans batched and dropped.
TRACED_SERVER = """
import sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

class Drop(SpanExporter):
    def export(self, spans):
        return SpanExportResult.SUCCESS

provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(Drop()))
trace.set_tracer_provider(provider)
from generation.task.v1 import task_pydb_server
raise SystemExit(task_pydb_server.main(sys.argv[1:]))
"""


def start(url: str, observed: bool) -> tuple[subprocess.Popen[bytes], str]:
    port = tp.free_port()
    args = ["--database-url", url, "--listen-addr", f"127.0.0.1:{port}", "--pool-min", "16", "--pool-max", "16",
            "--no-reflection", "--log-level", "warning"]  # fmt: skip
    if observed:
        argv = [common.PYTHON, "-c", TRACED_SERVER, *args, "--tracing", "true",
                "--metrics-addr", f"127.0.0.1:{tp.free_port()}"]  # fmt: skip
    else:
        argv = [common.PYTHON, "-m", "generation.task.v1.task_pydb_server", *args]
    proc = subprocess.Popen(argv, env=common.env_with_path(), stdout=subprocess.DEVNULL)
    address = f"127.0.0.1:{port}"
    tp.wait_serving(address, proc)
    return proc, address


def overhead(url: str, quick: bool) -> Json:
    seconds = 1.0 if quick else 5.0
    rounds = 1 if quick else 3
    depth = 60_000 if quick else 300_000
    tool_id = tp.make_tool(url)
    runs: dict[str, list[Json]] = {"off": [], "on": []}
    for _ in range(rounds):
        for mode in ("off", "on"):
            tp.refill(url, tool_id, depth)
            proc, address = start(url, observed=mode == "on")
            try:
                runs[mode].append(
                    tp.run_tool(address, tool_id, "batched", 8, seconds, processes=2, server_pid=proc.pid)
                )
            finally:
                tp.stop_server(proc)
    med = {m: statistics.median(r["tasks_per_s"] for r in rs) for m, rs in runs.items()}
    cpu = {m: statistics.median(r["server_cpu_us_per_task"] or 0 for r in rs) for m, rs in runs.items()}
    return {
        "seconds_per_run": seconds,
        "rounds": rounds,
        "tasks_per_s_off": med["off"],
        "tasks_per_s_on": med["on"],
        "ratio_on_to_off": med["on"] / med["off"],
        "server_cpu_us_per_task_off": cpu["off"],
        "server_cpu_us_per_task_on": cpu["on"],
        "runs": runs,
        "target": ">= 0.95",
    }


def seed(url: str, total: int, queued: int) -> list[str]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO generation.tools (name) SELECT 'tool-' || i FROM generate_series(1, 5) i")
        conn.execute(
            """
            INSERT INTO generation.tasks (tool_id, status, input, output, error, created_at, started_at, completed_at)
            SELECT (ARRAY(SELECT id FROM generation.tools ORDER BY name))[1 + i %% 5],
                   CASE WHEN i %% 10 = 0 THEN 'failed' ELSE 'completed' END::generation.task_status,
                   '{"prompt": "a cat"}', CASE WHEN i %% 10 <> 0 THEN '{"url": "s3://bucket/x.png"}'::jsonb END,
                   CASE WHEN i %% 10 = 0 THEN 'CUDA out of memory ' || i END,
                   now() - (%(n)s - i) * interval '1 second' - interval '1 hour',
                   now() - (%(n)s - i) * interval '1 second' - interval '1 hour',
                   now() - (%(n)s - i) * interval '1 second' - interval '59 minutes'
            FROM generate_series(1, %(n)s) i
            """,
            {"n": total - queued},
        )
        conn.execute(
            "INSERT INTO generation.tasks (tool_id, input, created_at) "
            "SELECT (ARRAY(SELECT id FROM generation.tools ORDER BY name))[1 + i %% 5], '{}', now() - i * interval '10 ms' "
            "FROM generate_series(1, %s) i",
            (queued,),
        )
        conn.execute("VACUUM ANALYZE generation.tasks")
        conn.execute("CHECKPOINT")
        return [str(r[0]) for r in conn.execute("SELECT id FROM generation.tools ORDER BY name")]


def fetch(url: str) -> float:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as resp:
        resp.read()
        assert resp.status == 200, url
    return time.perf_counter() - t0


def dashboard(url: str, quick: bool) -> Json:
    total = 20_000 if quick else 1_000_000
    requests = 20 if quick else 100
    t0 = time.perf_counter()
    tools = seed(url, total, queued=min(10_000, total // 10))
    seeded_s = time.perf_counter() - t0
    server, address = tp.start_server(url, pool=8)
    port = tp.free_port()
    env = common.env_with_path()
    env["PYTHONPATH"] = f"{ROOT / 'dashboard'}:{ROOT / 'worker'}:{env['PYTHONPATH']}"
    dash = subprocess.Popen(
        [common.PYTHON, "-m", "taskdash", "--listen-addr", f"127.0.0.1:{port}", "--data-plane-addr", address],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:  # until uvicorn answers (a process of its own: no event to wait on)
            try:
                fetch(base + "/")
                break
            except OSError:
                if time.monotonic() > deadline or dash.poll() is not None:
                    raise
                time.sleep(0.1)
        page = urllib.request.urlopen(base + f"/tasks?tool={tools[0]}", timeout=30).read().decode()
        task_id = re.findall(r'href="/tasks/([0-9a-f-]{36})"', page)[0]
        deep = base + f"/tasks?tool={tools[0]}"
        for _ in range(20):  # 20 pages in: the keyset makes page 21 cost what page 1 does
            nxt = re.search(
                r'href="/tasks\?([^"]+)" id="next-page"', urllib.request.urlopen(deep, timeout=30).read().decode()
            )
            assert nxt is not None
            deep = base + "/tasks?" + nxt.group(1).replace("&amp;", "&")
        pages = {
            "queues": base + "/",
            "tasks": base + "/tasks",
            "tasks_by_tool": base + f"/tasks?tool={tools[0]}",
            "tasks_failed": base + "/tasks?status=failed",
            "tasks_tool_failed_error": base + f"/tasks?tool={tools[1]}&status=failed&error=memory",
            "tasks_page_21": deep,
            "task_detail": base + f"/tasks/{task_id}",
        }
        out: Json = {}
        for name, page_url in pages.items():
            fetch(page_url)  # warm: prepared statements, connections
            times = [fetch(page_url) for _ in range(requests)]
            out[name] = {"p50_ms": common.quantile(times, 0.5) * 1000, "p95_ms": common.quantile(times, 0.95) * 1000}
        return {"tasks": total, "requests_per_page": requests, "seed_seconds": seeded_s, "pages": out,
                "worst_p95_ms": max(p["p95_ms"] for p in out.values()), "target_p95_ms": 100}  # fmt: skip
    finally:
        dash.terminate()
        dash.wait(timeout=20)
        tp.stop_server(server)


def run(server: str, quick: bool = False) -> Json:
    with common.queue_database(server) as url:
        result: Json = {"overhead": overhead(url, quick)}
    with common.queue_database(server) as url:
        result["dashboard"] = dashboard(url, quick)
    return result


def main() -> int:
    p = common.arg_parser(__doc__ or "")
    args = p.parse_args()
    with common.server_url() as (server, _):
        result = run(server, quick=args.quick)
    common.write_json(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
