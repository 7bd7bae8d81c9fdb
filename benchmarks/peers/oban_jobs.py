"""oban-py's side of benchmarks/bench_peers.py, run by its own interpreter (oban 0.7 needs
Python >= 3.12; benchmarks/requirements-peers-oban.txt): install its schema, enqueue no-op jobs
with enqueue_many, drain them with one Oban instance (one queue of CONCURRENCY), stopped once
the database counts every job completed. Prints one JSON object.

    python oban_jobs.py setup|enqueue|drain URL COUNT CONCURRENCY
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from oban import Oban, worker
from oban.schema import install
from psycopg_pool import AsyncConnectionPool

ENQUEUE_BATCH = 1_000  # jobs per enqueue_many call


@worker(queue="default")
class Noop:
    async def process(self, job: Any) -> None:
        return None


async def completed(pool: AsyncConnectionPool) -> int:
    async with pool.connection() as conn:
        row = await (await conn.execute("SELECT count(*) FROM oban_jobs WHERE state = 'completed'")).fetchone()
        return int(row[0])


async def run(cmd: str, url: str, count: int, concurrency: int) -> dict[str, Any]:
    pool = AsyncConnectionPool(conninfo=url, open=False, min_size=1, max_size=max(4, concurrency // 4))
    await pool.open()
    try:
        t0 = time.perf_counter()
        if cmd == "setup":
            await install(pool)
        elif cmd == "enqueue":
            client = Oban(pool=pool)
            for start in range(0, count, ENQUEUE_BATCH):
                await client.enqueue_many([Noop.new({}) for _ in range(min(ENQUEUE_BATCH, count - start))])
        else:
            async with Oban(pool=pool, queues={"default": concurrency}, stager={"interval": 0.1}):
                while await completed(pool) < count:
                    await asyncio.sleep(0.02)  # sampling the database's count, not synchronisation
        return {"seconds": time.perf_counter() - t0}
    finally:
        await pool.close()


def main() -> int:
    cmd, url, count, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    sys.stdout.write(json.dumps(asyncio.run(run(cmd, url, count, concurrency))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
