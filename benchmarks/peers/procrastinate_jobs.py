"""procrastinate's side of benchmarks/bench_peers.py, run by the peers' own interpreter
(benchmarks/requirements-peers.txt): apply its schema, bulk-defer no-op jobs, drain them with one
worker (`wait=False`: it returns once the queue is empty). Prints one JSON object.

    python procrastinate_jobs.py setup|enqueue|drain URL COUNT CONCURRENCY
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import procrastinate

ENQUEUE_BATCH = 1_000  # jobs per batch_defer_async call


def make_app(url: str) -> Any:
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))

    @app.task(name="noop")
    async def noop() -> None:
        return None

    return app, noop


async def run(cmd: str, url: str, count: int, concurrency: int) -> dict[str, Any]:
    app, noop = make_app(url)
    async with app.open_async():
        t0 = time.perf_counter()
        if cmd == "setup":
            await app.schema_manager.apply_schema_async()
        elif cmd == "enqueue":
            for start in range(0, count, ENQUEUE_BATCH):
                await noop.batch_defer_async(*({} for _ in range(min(ENQUEUE_BATCH, count - start))))
        else:
            await app.run_worker_async(concurrency=concurrency, wait=False, install_signal_handlers=False)
        return {"seconds": time.perf_counter() - t0}


def main() -> int:
    cmd, url, count, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    sys.stdout.write(json.dumps(asyncio.run(run(cmd, url, count, concurrency))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
