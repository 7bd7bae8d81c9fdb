"""PgQueuer's side of benchmarks/bench_peers.py, run by the peers' own interpreter
(benchmarks/requirements-peers.txt): install the schema, bulk-enqueue no-op jobs, drain them with
one QueueManager. Prints one JSON object.

    python pgqueuer_jobs.py setup|enqueue|drain URL COUNT DRIVER BATCH
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

ENTRYPOINT = "noop"
ENQUEUE_BATCH = 1_000  # rows per Queries.enqueue call (one INSERT ... unnest)


async def connect(url: str, driver: str) -> Any:
    if driver == "asyncpg":
        import asyncpg
        from pgqueuer import AsyncpgDriver

        return AsyncpgDriver(await asyncpg.connect(url))
    import psycopg
    from pgqueuer import PsycopgDriver

    return PsycopgDriver(await psycopg.AsyncConnection.connect(url, autocommit=True))


async def setup(url: str, driver: str) -> dict[str, Any]:
    from pgqueuer import Queries

    await Queries(await connect(url, driver)).install()
    return {}


async def enqueue(url: str, count: int, driver: str) -> dict[str, Any]:
    from pgqueuer import Queries

    queries = Queries(await connect(url, driver))
    t0 = time.perf_counter()
    for start in range(0, count, ENQUEUE_BATCH):
        n = min(ENQUEUE_BATCH, count - start)
        await queries.enqueue([ENTRYPOINT] * n, [None] * n, [0] * n)
    return {"seconds": time.perf_counter() - t0}


async def drain(url: str, count: int, driver: str, batch: int) -> dict[str, Any]:
    from datetime import timedelta

    from pgqueuer import Queries, QueueManager
    from pgqueuer.types import QueueExecutionMode

    qm = QueueManager(Queries(await connect(url, driver)))

    @qm.entrypoint(ENTRYPOINT)
    async def noop(job: Any) -> None:
        return None

    t0 = time.perf_counter()
    await qm.run(batch_size=batch, mode=QueueExecutionMode.drain, dequeue_timeout=timedelta(seconds=1))
    return {"seconds": time.perf_counter() - t0}


def main() -> int:
    cmd, url, count, driver, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
    if cmd == "setup":
        out = asyncio.run(setup(url, driver))
    elif cmd == "enqueue":
        out = asyncio.run(enqueue(url, count, driver))
    else:
        out = asyncio.run(drain(url, count, driver, batch))
    sys.stdout.write(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
