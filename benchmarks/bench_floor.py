"""Floors under issue 29's bars: where the fleet's cost per job lives, each part measured with the
others taken away, in the same rounds as bench_peers (which calls `measure` once per round).

- **The gRPC hop alone.** The fleet's worker process (fleet_procs.py worker: WorkerFleet at its
  defaults, concurrency 128, batched reports) against floor_server.py, a data plane that answers
  ClaimTasks from Task messages built before it listens and CompleteTasks with the tasks it is
  given: no database. Drain jobs/s (the worker's clock) and CPU per 1,000 jobs of the worker
  (start-up included, as bench_peers counts every worker's) and of the server.
- **The row lifecycle alone.** PostgreSQL's CPU per 1,000 jobs (the one backend's, from /proc)
  for COUNT tasks enqueued 500 a statement, then claimed 100 at a time and completed in the same
  batches on one connection, no server, in three forms:
    served  the generated QueueTasks, ClaimTasks and CompleteTasks statements (task_pydb's SQL);
    fenced  the leanest statements that keep the hot path's guarantees (an idempotency key per
            enqueued task; a claim in claim order under FOR UPDATE SKIP LOCKED that takes a fresh
            lease token; a completion fenced by that token), on the same schema;
    bare    the fenced statements on the table with only the claim path's indexes (primary key,
            queue, lapsing, terminal) and no trigger: the row lifecycle itself.

`bounds` adds them up against the bars (report_peers renders it): the fleet's CPU per job can be
no lower than the hop's (worker + server) plus PostgreSQL's for the fenced statements, and neither
the drain nor the enqueue can be faster than every core busy all the time at the floor's steady
cost per job (the client's and worker's CPU from their first task to their last, the server's,
PostgreSQL's on the fenced statements).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import uuid
from typing import TYPE_CHECKING, Any

import bench_throughput as tp
import common
from common import Json

if TYPE_CHECKING:
    import psycopg

FLOOR_SERVER = common.BENCH / "floor_server.py"
FLEET = common.BENCH / "fleet_procs.py"
ENQUEUE_BATCH, CLAIM_BATCH = 500, 100
#: The fleet worker's settings (fleet_procs.py worker CONCURRENCY REPORT_BATCH): its defaults, the
#: same for the fleet bench_peers measures and for the hop measured here.
FLEET_WORKER_SETTINGS = ("128", "500")

#: The claim path's indexes: what `bare` keeps of generation.tasks.
CLAIM_PATH_INDEXES = ("tasks_pkey", "idx_gen_tasks_queue", "idx_gen_tasks_lapsing", "idx_gen_tasks_terminal")

FENCED_ENQUEUE = """\
INSERT INTO generation.tasks (tool_id, billing_idempotency_key)
SELECT %(tool_id)s, k FROM unnest(%(keys)s::text[]) AS k
ON CONFLICT (billing_idempotency_key) DO NOTHING
RETURNING id"""
#: `bare` has no unique index to arbitrate a key: the insert alone.
BARE_ENQUEUE = FENCED_ENQUEUE.replace("ON CONFLICT (billing_idempotency_key) DO NOTHING\n", "")
FENCED_CLAIM = """\
UPDATE generation.tasks AS t
SET status = 'processing', started_at = now(), attempted_at = now(),
    claim_expires_at = now() + INTERVAL '120 seconds', lease_token = gen_random_uuid()
WHERE t.id = ANY (ARRAY(SELECT id FROM generation.tasks
                        WHERE tool_id = %(tool_id)s AND status = 'queued'
                        ORDER BY priority DESC, fair_seq, created_at
                        LIMIT %(limit)s FOR UPDATE SKIP LOCKED))
RETURNING t.*"""
FENCED_COMPLETE = """\
UPDATE generation.tasks AS t
SET status = 'completed', completed_at = now(), claim_expires_at = NULL
FROM unnest(%(task_ids)s::uuid[], %(lease_tokens)s::uuid[]) AS d (id, lease_token)
WHERE t.id = d.id AND t.lease_token = d.lease_token AND t.status = 'processing'
RETURNING t.id"""

#: The lean forms' statements (enqueue, claim, complete).
LEAN = {
    "fenced": (FENCED_ENQUEUE, FENCED_CLAIM, FENCED_COMPLETE),
    "bare": (BARE_ENQUEUE, FENCED_CLAIM, FENCED_COMPLETE),
}


def _served_statements() -> tuple[str, str, str]:
    from generation.task.v1 import task_pydb

    return task_pydb.QUEUE_TASKS_SQL, task_pydb.CLAIM_TASKS_SQL, task_pydb.COMPLETE_TASKS_SQL


def hop(count: int, env: dict[str, str]) -> Json:
    """The fleet's worker against the database-free data plane."""
    server = subprocess.Popen(
        [common.PYTHON, str(FLOOR_SERVER), str(count)], env=env, stdout=subprocess.PIPE, cwd=common.BENCH
    )
    try:
        assert server.stdout is not None
        ready = server.stdout.readline().decode().split()
        if ready[:1] != ["ready"]:
            raise RuntimeError(f"floor_server.py did not start: {ready}")
        tool_id = str(uuid.uuid4())
        server0, client0 = tp.cpu_seconds(server.pid), tp.children_cpu_seconds()
        enqueued = _run_json([common.PYTHON, str(FLEET), "enqueue", ready[1], tool_id, "bulk", str(count)], env)
        server1, client1 = tp.cpu_seconds(server.pid), tp.children_cpu_seconds()
        drained = _run_json(
            [common.PYTHON, str(FLEET), "worker", ready[1], tool_id, str(count), *FLEET_WORKER_SETTINGS], env
        )
        server2, client2 = tp.cpu_seconds(server.pid), tp.children_cpu_seconds()
    finally:
        server.kill()
        server.wait()
    if enqueued["queued"] != count or drained["completed"] < count:
        raise RuntimeError(f"floor hop: {enqueued['queued']} queued, {drained['completed']} completed of {count}")
    per = 1000 / count
    return {
        "drain_jobs_per_s": drained["tasks_per_s"],
        # As bench_peers counts a worker: the whole process, start-up included.
        "cpu_s_per_1000": {"worker": (client2 - client1) * per, "server": (server2 - server1) * per},
        # The processes' own count from first task to last (enqueue: first call to last answer).
        "worker_steady_cpu_s_per_1000": drained["cpu_seconds"] * per,
        "enqueue_jobs_per_s": enqueued["tasks_per_s"],
        "enqueue_cpu_s_per_1000": {"client": (client1 - client0) * per, "server": (server1 - server0) * per},
        "enqueue_client_steady_cpu_s_per_1000": enqueued["cpu_seconds"] * per,
    }


def _run_json(argv: list[str], env: dict[str, str]) -> Json:
    answer: Json = json.loads(subprocess.run(argv, env=env, capture_output=True, check=True).stdout)
    return answer


def rows(server: str, count: int, form: str) -> Json:
    """PostgreSQL's CPU per 1,000 jobs for the row lifecycle in `form` (served, fenced, bare)."""
    import psycopg

    queue_sql, claim_sql, complete_sql = _served_statements() if form == "served" else LEAN[form]
    with common.queue_database(server) as url, psycopg.connect(url, autocommit=True) as conn:
        if form == "bare":
            for (name,) in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = 'generation' AND tablename = 'tasks'"
                " AND indexname <> ALL (%s)",
                [list(CLAIM_PATH_INDEXES)],
            ).fetchall():
                conn.execute(f"ALTER TABLE generation.tasks DROP CONSTRAINT IF EXISTS {name}")
                conn.execute(f"DROP INDEX IF EXISTS generation.{name}")
            for (name,) in conn.execute(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = 'generation.tasks'::regclass AND NOT tgisinternal"
            ).fetchall():
                conn.execute(f"DROP TRIGGER {name} ON generation.tasks")
        row = conn.execute("INSERT INTO generation.tools (name) VALUES ('floor') RETURNING id").fetchone()
        assert row is not None
        tool_id, backend = row[0], _backend_pid(conn)
        run = uuid.uuid4().hex
        cpu0 = tp.cpu_seconds(backend)
        for start in range(0, count, ENQUEUE_BATCH):
            keys = [f"{run}-{start + i}" for i in range(min(ENQUEUE_BATCH, count - start))]
            conn.execute(queue_sql, _enqueue_params(form, tool_id, keys), prepare=True).fetchall()
        enqueue_cpu = tp.cpu_seconds(backend) - cpu0
        common.settle(url)
        done, cpu0 = 0, tp.cpu_seconds(backend)
        while True:
            cur = conn.execute(
                claim_sql, {"tool_id": tool_id, "request_id": "", "max_bytes": 0, "limit": CLAIM_BATCH}, prepare=True
            )
            claimed = cur.fetchall()
            if not claimed:
                break
            names = [c.name for c in cur.description or ()]
            ids, tokens = names.index("id"), names.index("lease_token")
            params = {
                "task_ids": [r[ids] for r in claimed],
                "lease_tokens": [r[tokens] for r in claimed],
                "outputs": [""] * len(claimed),
                "reported_usages": [""] * len(claimed),
            }
            done += len(conn.execute(complete_sql, params, prepare=True).fetchall())
        drain_cpu = tp.cpu_seconds(backend) - cpu0
    if done != count:
        raise RuntimeError(f"floor rows ({form}): {done} of {count} completed")
    return {
        "enqueue_postgres_cpu_s_per_1000": enqueue_cpu * 1000 / count,
        "postgres_cpu_s_per_1000": drain_cpu * 1000 / count,
    }


def _backend_pid(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    return int(row[0])


def _enqueue_params(form: str, tool_id: object, keys: list[str]) -> Json:
    if form != "served":
        return {"tool_id": tool_id, "keys": keys}
    n, none = len(keys), [None] * len(keys)
    return {
        "tool_ids": [tool_id] * n, "inputs": none, "priorities": none, "max_retries": none,
        "reserved_token_amounts": none, "billing_idempotency_keys": keys, "w3c_traceparents": none,
        "lease_seconds": none, "run_at_unix": none, "max_runtime_seconds": none, "concurrency_keys": none,
    }  # fmt: skip


FORMS = ("served", "fenced", "bare")


def measure(server: str, count: int, env: dict[str, str]) -> Json:
    """One round: the hop, then the row lifecycle in each form."""
    return {"hop": hop(count, env), "rows": {form: rows(server, count, form) for form in FORMS}}


def bounds(floors: list[Json], pgqueuer: Json | None, fastest_enqueue: float | None) -> Json:
    """The medians over rounds, and what they bound: the fleet's least CPU per 1,000 jobs (the hop
    plus PostgreSQL on the fenced statements), and the fastest drain and enqueue at the floor's
    steady cost with every core busy."""

    def med(values: list[float]) -> float:
        return float(statistics.median(values))

    hop_worker = med([f["hop"]["cpu_s_per_1000"]["worker"] for f in floors])
    hop_server = med([f["hop"]["cpu_s_per_1000"]["server"] for f in floors])
    worker_steady = med([f["hop"]["worker_steady_cpu_s_per_1000"] for f in floors])
    enqueue_client = med([f["hop"]["enqueue_client_steady_cpu_s_per_1000"] for f in floors])
    enqueue_server = med([f["hop"]["enqueue_cpu_s_per_1000"]["server"] for f in floors])
    forms = {
        form: {
            key: med([f["rows"][form][key] for f in floors])
            for key in ("enqueue_postgres_cpu_s_per_1000", "postgres_cpu_s_per_1000")
        }
        for form in FORMS
    }
    cores = os.cpu_count() or 1
    fenced = forms["fenced"]
    drain_steady = worker_steady + hop_server + fenced["postgres_cpu_s_per_1000"]
    enqueue_steady = enqueue_client + enqueue_server + fenced["enqueue_postgres_cpu_s_per_1000"]
    out: Json = {
        "rounds": len(floors),
        "cores": cores,
        "hop": {
            "drain_jobs_per_s": med([f["hop"]["drain_jobs_per_s"] for f in floors]),
            "cpu_s_per_1000": {"worker": hop_worker, "server": hop_server},
            "worker_steady_cpu_s_per_1000": worker_steady,
            "enqueue_jobs_per_s": med([f["hop"]["enqueue_jobs_per_s"] for f in floors]),
            "enqueue_cpu_s_per_1000": {"client": enqueue_client, "server": enqueue_server},
        },
        "rows": forms,
        # bench_peers' accounting (the worker's start-up included) at the floor: the CPU bar's.
        "least_cpu_s_per_1000": hop_worker + hop_server + fenced["postgres_cpu_s_per_1000"],
        # Every core busy all the time at the floor's steady cost per job: no drain or enqueue can
        # be faster on this machine.
        "drain_ceiling_jobs_per_s": cores * 1000 / drain_steady,
        "enqueue_ceiling_jobs_per_s": cores * 1000 / enqueue_steady,
    }
    if pgqueuer is not None:
        out["pgqueuer_cpu_s_per_1000"] = pgqueuer["cpu_s_per_1000"]["total"]
        out["pgqueuer_drain_jobs_per_s"] = pgqueuer["drain_jobs_per_s"]
    if fastest_enqueue is not None:
        out["fastest_peer_enqueue_jobs_per_s"] = fastest_enqueue
    return out


def main() -> int:
    p = common.arg_parser(__doc__ or "")
    args = p.parse_args()
    import bench_peers

    count = 1_000 if args.quick else 20_000
    with common.server_url() as (server, _):
        floors = [measure(server, count, bench_peers.child_env(ours=True))]
    common.write_json(bounds(floors, None, None), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
