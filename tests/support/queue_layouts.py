"""The queue's table, plain (schema.sql as shipped) or partitioned: the layouts that
benchmarks/bench_partition.py compares and tests/queue/test_queue_partitioned.py runs the generated
queue on.

A partitioned variant is schema.sql with generation.tasks declared PARTITION BY and its keys
widened: PostgreSQL requires every PRIMARY KEY and UNIQUE constraint of a partitioned table to
include the partition key, so `PRIMARY KEY (id)` becomes `(id, <key>)` and
`UNIQUE (billing_idempotency_key)` becomes `(billing_idempotency_key, <key>)`. The indexes of
schema.sql (the claim, stale and terminal indexes) are created on the partitioned table, so each
partition gets its own.

- `by_tool`: HASH (tool_id) into `partitions` partitions. A claim names its tool and reads one
  partition; a lookup by id alone (GetTask, CompleteTask) probes every partition's key index.
- `by_status`: LIST (status): `tasks_live` (queued, dispatched, processing) and
  `tasks_terminal` (completed, failed). Completing or failing a task moves its row (an UPDATE
  of the partition key is a DELETE from one partition and an INSERT into the other).
"""

from __future__ import annotations

from pathlib import Path

SCHEMA = Path(__file__).resolve().parents[2] / "example_protos" / "generation" / "task" / "v1" / "schema.sql"

LAYOUTS = ("plain", "by_tool", "by_status")

_ID = "CREATE TABLE generation.tasks (\n    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),\n"
_KEY = "    billing_idempotency_key text UNIQUE,\n"
_LAST = "    claim_request_id text CHECK (char_length(claim_request_id) BETWEEN 1 AND 200)"
_END = _LAST + "\n);\n"
_SLOT = "ON generation.tasks (periodic_name, periodic_slot_at)\n"


def _replace_once(text: str, old: str, new: str) -> str:
    # schema.sql is the source of truth: if it changes shape, fail loudly rather than build a
    # variant that silently differs from it.
    if text.count(old) != 1:
        raise ValueError(f"schema.sql no longer has exactly one {old.strip()!r}")
    return text.replace(old, new)


def partition_clause(layout: str, partitions: int = 8) -> tuple[str, str, list[str]]:
    """(partition key column, PARTITION BY clause, the partitions' CREATE TABLE statements)."""
    if layout == "by_tool":
        parts = [
            f"CREATE TABLE generation.tasks_p{r} PARTITION OF generation.tasks "
            f"FOR VALUES WITH (MODULUS {partitions}, REMAINDER {r});"
            for r in range(partitions)
        ]
        return "tool_id", "PARTITION BY HASH (tool_id)", parts
    if layout == "by_status":
        parts = [
            "CREATE TABLE generation.tasks_live PARTITION OF generation.tasks "
            "FOR VALUES IN ('scheduled', 'queued', 'dispatched', 'processing');",
            "CREATE TABLE generation.tasks_terminal PARTITION OF generation.tasks FOR VALUES IN ('completed', 'failed', 'cancelled');",
        ]
        return "status", "PARTITION BY LIST (status)", parts
    raise ValueError(f"unknown partitioned layout {layout!r}")


def schema_sql(layout: str, partitions: int = 8) -> str:
    """schema.sql for `layout` ("plain" is the file as shipped)."""
    text = SCHEMA.read_text()
    if layout == "plain":
        return text
    column, clause, parts = partition_clause(layout, partitions)
    text = _replace_once(
        text, _ID, "CREATE TABLE generation.tasks (\n    id uuid NOT NULL DEFAULT gen_random_uuid(),\n"
    )
    text = _replace_once(text, _KEY, "    billing_idempotency_key text,\n")
    end = (
        _LAST + ",\n"
        f"    PRIMARY KEY (id, {column}),\n"
        f"    UNIQUE (billing_idempotency_key, {column})\n"
        f") {clause};\n" + "".join(p + "\n" for p in parts)
    )
    text = _replace_once(text, _SLOT, f"ON generation.tasks (periodic_name, periodic_slot_at, {column})\n")
    return _replace_once(text, _END, end)
