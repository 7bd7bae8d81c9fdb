"""Handler overhead: the generated `claim_next_task` vs a hand-written psycopg call of the same
SQL on the same connection.

Both run CLAIM_NEXT_TASK_SQL (the generated module's constant) on one autocommit
AsyncConnection against the same queue. The hand-written call is what a user would write:
`await conn.execute(SQL, {"tool_id": tool_id})` and `fetchone()` (psycopg prepares it after a
few runs; the generated handler prepares it at once). The generated handler also validates the
UUID and builds the ClaimNextTaskResponse message, so this measures everything it adds.

Runs alternate in rounds (generated block, hand block, then the other order), each block
claiming `block` tasks; claimed tasks are completed between blocks outside the timing so every
block sees the same queue. The ratio is computed per round, and its median reported.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
from common import Json
from generation.task.v1 import task_pb2, task_pydb
from psycopg import AsyncConnection

Call = Callable[[], Awaitable[object]]


async def prepare_queue(conn: AsyncConnection[Any], depth: int) -> str:
    cur = await conn.execute("INSERT INTO generation.tools (name) VALUES ('overhead') RETURNING id")
    row = await cur.fetchone()
    assert row is not None
    tool_id = str(row[0])
    await conn.execute(
        "INSERT INTO generation.tasks (tool_id, input) SELECT %s, '{\"n\": 1}' FROM generate_series(1, %s)",
        (tool_id, depth),
    )
    await conn.execute("VACUUM ANALYZE generation.tasks")
    return tool_id


async def block(call: Call, n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        await call()
        out.append(time.perf_counter() - start)
    return out


async def measure(url: str, rounds: int, block_size: int) -> Json:
    conn = await AsyncConnection.connect(url, autocommit=True)
    try:
        depth = rounds * block_size * 2 + 20 * block_size
        tool_id = await prepare_queue(conn, depth)
        request = task_pb2.ClaimNextTaskRequest(tool_id=tool_id)
        sql = task_pydb.CLAIM_NEXT_TASK_SQL

        async def generated() -> object:
            return await task_pydb.claim_next_task(conn, request)

        async def hand_written() -> object:
            cur = await conn.execute(sql, {"tool_id": tool_id, "max_bytes": request.max_bytes, "request_id": ""})
            return await cur.fetchone()

        async def settle() -> None:
            await conn.execute(
                "UPDATE generation.tasks SET status = 'completed', completed_at = now() "
                "WHERE tool_id = %s AND status = 'processing'",
                (tool_id,),
            )

        # Warm up both paths (prepared statements, caches), then settle.
        await block(generated, block_size)
        await block(hand_written, block_size)
        await settle()
        ratios: list[float] = []
        gen_all: list[float] = []
        hand_all: list[float] = []
        for r in range(rounds):
            order = [(generated, gen_all), (hand_written, hand_all)]
            if r % 2:
                order.reverse()
            means = {}
            for call, sink in order:
                times = await block(call, block_size)
                await settle()
                sink.extend(times)
                means[id(sink)] = statistics.median(times)
            ratios.append(means[id(gen_all)] / means[id(hand_all)])
        # Empty queue: what the handler costs when nothing is claimed.
        return {
            "rounds": rounds,
            "block": block_size,
            "queue_depth": depth,
            "generated": common.latency_summary(gen_all),
            "hand_written": common.latency_summary(hand_all),
            "ratio_per_round": common.summary(ratios),
            "ratio_of_medians": statistics.median(gen_all) / statistics.median(hand_all),
            "added_us_median": (statistics.median(gen_all) - statistics.median(hand_all)) * 1e6,
        }
    finally:
        await conn.close()


def python_side(iterations: int) -> Json:
    """The generated handler's own CPU work with the database taken out: per-call microseconds
    to validate the request and build the response from a claimed row."""
    import datetime
    import uuid

    tool_id = str(uuid.uuid4())
    request = task_pb2.ClaimNextTaskRequest(tool_id=tool_id)
    now = datetime.datetime.now(datetime.UTC)
    row = (
        str(uuid.uuid4()),
        tool_id,
        "processing",
        0,
        0,
        3,
        '{"n": 1}',
        None,
        None,
        None,
        None,
        None,
        None,
        str(uuid.uuid4()),
        now,
        now,
        now,
        None,
        120,
        now,
        now,
        None,
        "[]",
        None,
        None,
        None,
        0,
        None,
        None,
        None,
    )  # fmt: skip  (the claim's columns, in order: ..., the effective lease, run_at, attempted_at, the effective run-time limit, errors, periodic_name, periodic_slot_at, concurrency_key, fair_seq, claim_slot, key_slot, claim_request_id)
    from pydb import runtime as rt

    start = time.perf_counter()
    for _ in range(iterations):
        rt.parse_uuid(request.tool_id, "tool_id")
    parse = (time.perf_counter() - start) / iterations
    build = task_pydb._task_from_row  # the generated row converter
    start = time.perf_counter()
    for _ in range(iterations):
        task_pb2.ClaimNextTaskResponse(task=build(row))
    convert = (time.perf_counter() - start) / iterations
    return {"parse_uuid_us": parse * 1e6, "row_to_proto_us": convert * 1e6}


def run(server: str, quick: bool = False) -> Json:
    rounds, block_size = (2, 20) if quick else (30, 100)
    with common.queue_database(server) as url:
        result = asyncio.run(measure(url, rounds, block_size))
    result["python_side"] = python_side(200 if quick else 20000)
    return result


def main() -> int:
    args = common.arg_parser(__doc__ or "").parse_args()
    with common.server_url() as (server, _):
        common.write_json(run(server, quick=args.quick), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
