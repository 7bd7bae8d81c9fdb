"""The index does the work: with 100,000 queued rows of mixed priority for one tool, the claim
statements (the generated SQL, as served) are an ordered scan of idx_gen_tasks_queue with no
Sort node, for the custom plan and for the generic plan a prepared statement may switch to;
and executing the claim reads a handful of index entries, not the backlog."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from generation.task.v1 import task_pydb
from support.pg import Cluster, scratch_database

BACKLOG = 100_000
INDEX = "idx_gen_tasks_queue"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def backlog(pg_server: tuple[str, Cluster | None]) -> Iterator[tuple[str, str]]:
    """A database of its own: 100,000 queued rows (priority 0-9) for one tool, 20,000 more rows of
    other tools, 5,000 finished rows and 512 held ones of the same tool; vacuumed and analyzed.
    (url, tool id)."""
    with scratch_database(pg_server[0]) as url, psycopg.connect(url, autocommit=True) as conn:
        tool = conn.execute("INSERT INTO generation.tools (name) VALUES ('deep') RETURNING id::text").fetchone()
        assert tool is not None
        conn.execute("INSERT INTO generation.tools (name) SELECT 'other-' || i FROM generate_series(1, 4) i")
        conn.execute(
            """
            INSERT INTO generation.tasks (tool_id, priority, created_at)
            SELECT %s, (i * 7919) %% 10, now() - interval '1 day' + ((i::bigint * 104729) %% 100000) * interval '1 second'
            FROM generate_series(1, %s) i
            """,
            (tool[0], BACKLOG),
        )
        conn.execute(
            """
            INSERT INTO generation.tasks (tool_id, priority)
            SELECT t.id, i % 3 FROM generation.tools t, generate_series(1, 5000) i WHERE t.name LIKE 'other-%'
            """
        )
        conn.execute(
            """
            INSERT INTO generation.tasks (tool_id, status, priority, completed_at)
            SELECT %s, 'completed', 50, now() FROM generate_series(1, 5000)
            """,
            (tool[0],),
        )
        # Held under live leases, as a working queue has them: the lapsing index's range the claim
        # must not sort (its zombies are the part below now(), none here).
        conn.execute(
            """
            INSERT INTO generation.tasks (tool_id, status, priority, lease_token, claim_expires_at, started_at)
            SELECT %s, 'processing', i %% 10, gen_random_uuid(), now() + interval '10 minutes', now()
            FROM generate_series(1, 512) i
            """,
            (tool[0],),
        )
        # Statistics from every row (a sample of 300 x 1000 rows covers the table), and the
        # table vacuumed: the plans do not depend on which rows ANALYZE happened to sample or
        # on whether autovacuum has come by yet.
        conn.execute("SET default_statistics_target = 1000")
        conn.execute("VACUUM ANALYZE generation.tasks")
        yield url, tool[0]


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def positional(sql: str) -> tuple[str, list[str]]:
    """The generated %(name)s placeholders as $1, $2, ... (for PREPARE)."""
    names: list[str] = []

    def sub(m: re.Match[str]) -> str:
        if m.group(1) not in names:
            names.append(m.group(1))
        return f"${names.index(m.group(1)) + 1}"

    return re.sub(r"%\((\w+)\)s", sub, sql), names


def explain(url: str, sql: str, params: dict[str, Any], *, generic: bool, analyze: bool = False) -> dict[str, Any]:
    body, names = positional(sql)
    with psycopg.connect(url) as conn:  # a transaction, rolled back: EXPLAIN ANALYZE really claims
        if generic:
            conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE claim AS {body}")  # generated, trusted SQL
        args = ", ".join(psycopg.sql.quote(params[n]) for n in names)
        opts = "ANALYZE, BUFFERS, FORMAT JSON" if analyze else "FORMAT JSON"
        row = conn.execute(f"EXPLAIN ({opts}) EXECUTE claim{f'({args})' if args else ''}").fetchone()
        conn.rollback()
    assert row is not None
    return row[0][0]["Plan"]  # type: ignore[no-any-return]


def assert_index_ordered(plan: dict[str, Any], what: str) -> list[dict[str, Any]]:
    all_nodes = list(nodes(plan))
    kinds = [n["Node Type"] for n in all_nodes]
    # ClaimTasks' byte budget orders the claimed rows (at most `limit` queued and `limit` due
    # scheduled ones, CTEs) for its running sum: a sort of the picked handful, never of the backlog.
    backlog_sorts = [
        n
        for n in all_nodes
        if "Sort" in n["Node Type"]
        and any(d["Node Type"].endswith("Scan") and d["Node Type"] != "CTE Scan" for d in list(nodes(n))[1:])
    ]
    assert not backlog_sorts, f"{what}: the plan sorts: {kinds}"
    scans = [n for n in all_nodes if n["Node Type"] in ("Index Scan", "Index Only Scan")]
    assert any(n.get("Index Name") == INDEX for n in scans), f"{what}: no scan of {INDEX}: {kinds}"
    assert "Seq Scan" not in kinds and "Bitmap Heap Scan" not in kinds, f"{what}: {kinds}"
    return [n for n in scans if n.get("Index Name") == INDEX]


@pytest.mark.parametrize("generic", [False, True], ids=["custom-plan", "generic-plan"])
@pytest.mark.parametrize(
    ("rpc", "sql", "extra"),
    [
        ("ClaimNextTask", task_pydb.CLAIM_NEXT_TASK_SQL, {"max_bytes": 0, "request_id": ""}),
        ("ClaimTasks", task_pydb.CLAIM_TASKS_SQL, {"limit": 50, "max_bytes": 0, "request_id": ""}),
    ],
)
def test_claim_is_an_index_ordered_top_n(
    backlog: tuple[str, str], rpc: str, sql: str, extra: dict[str, Any], generic: bool
) -> None:
    url, tool = backlog
    plan = explain(url, sql, {"tool_id": tool, **extra}, generic=generic)
    assert_index_ordered(plan, f"{rpc} ({'generic' if generic else 'custom'} plan)")


def test_claim_reads_a_handful_of_rows_not_the_backlog(backlog: tuple[str, str]) -> None:
    url, tool = backlog
    plan = explain(
        url,
        task_pydb.CLAIM_NEXT_TASK_SQL,
        {"tool_id": tool, "max_bytes": 0, "request_id": ""},
        generic=False,
        analyze=True,
    )
    scans = assert_index_ordered(plan, "ClaimNextTask (executed)")
    assert sum(n["Actual Rows"] for n in scans) <= 5
    assert plan.get("Actual Rows", 1) == 1, "the claim updated exactly one row"
    # The top node's buffers include every node below it (summing the nodes would count a CTE's
    # buffers once per level above it).
    touched = plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0)
    assert touched < 200, f"{touched} buffers for one claim out of {BACKLOG:,}"


def rows_read(plan: dict[str, Any]) -> int:
    """Rows the executed statement's scans returned, over all their loops."""
    return sum(
        int(n["Actual Rows"] * n["Actual Loops"])
        for n in nodes(plan)
        if n["Node Type"].endswith("Scan") and n["Node Type"] != "CTE Scan"
    )


def add_history(url: str, terminal: int, queued: int, days_ago: int) -> None:
    """`terminal` rows (every tenth failed) finished `days_ago` days ago and earlier, one second
    apart, plus `queued` live rows; analyzed."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO generation.tools (name) VALUES ('history') ON CONFLICT (name) DO NOTHING")
        conn.execute(
            """
            INSERT INTO generation.tasks (tool_id, status, output, created_at, completed_at)
            SELECT t.id, CASE WHEN i %% 10 = 0 THEN 'failed' ELSE 'completed' END::generation.task_status, '{}',
                   now() - %s * interval '1 day' - i * interval '1 second' - interval '1 minute',
                   now() - %s * interval '1 day' - i * interval '1 second'
            FROM generation.tools t, generate_series(1, %s) i WHERE t.name = 'history'
            """,
            (days_ago, days_ago, terminal),
        )
        conn.execute(
            "INSERT INTO generation.tasks (tool_id) SELECT t.id FROM generation.tools t, generate_series(1, %s) i "
            "WHERE t.name = 'history'",
            (queued,),
        )
        conn.execute("VACUUM ANALYZE generation.tasks")


def explain_prune(url: str, generic: bool) -> dict[str, Any]:
    """PruneTasks as served (defaults: 1,000 rows older than 7 days), executed and rolled back."""
    return explain(url, task_pydb.PRUNE_TASKS_SQL, {"older_than_seconds": 0, "limit": 0}, generic=generic, analyze=True)


def assert_prune_is_index_driven(plan: dict[str, Any], what: str) -> None:
    all_nodes = list(nodes(plan))
    kinds = [n["Node Type"] for n in all_nodes]
    # The batch is found in idx_gen_tasks_terminal and deleted by primary-key lookups; a sequential
    # scan (or a hash join, which needs one side scanned whole) costs the table, not the batch.
    assert "Seq Scan" not in kinds and "Hash Join" not in kinds and "Hash Semi Join" not in kinds, f"{what}: {kinds}"
    indexes = {n.get("Index Name") for n in all_nodes}
    assert {"idx_gen_tasks_terminal", "tasks_pkey"} <= indexes, f"{what}: {indexes}"
    assert plan["Plans"][0]["Actual Rows"] == 1000, f"{what}: deleted {plan['Plans'][0]['Actual Rows']}"


def test_prune_costs_the_batch_not_the_table(pg_server: tuple[str, Cluster | None]) -> None:
    """PruneTasks on 20,000 and then 200,000 rows (mostly terminal, then mostly live): both plans
    (custom, and the generic one a prepared statement may switch to) find the 1,000 oldest
    terminal rows through idx_gen_tasks_terminal and delete them by primary key, reading about
    3,000 rows whatever the table holds (each deleted row once in each index and once in the
    heap). `WHERE id IN (subquery)` got a generic plan that hashed the batch and scanned the
    whole table against it (300,000 rows: 100 ms where this takes 4-10 ms)."""
    with scratch_database(pg_server[0]) as url:
        add_history(url, terminal=15_000, queued=5_000, days_ago=8)
        # Then 10x the table: younger terminal rows (not yet due) and a live backlog.
        for rows, more in (("20,000", None), ("200,000", (30_000, 150_000))):
            if more:
                add_history(url, terminal=more[0], queued=more[1], days_ago=1)
            for generic in (False, True):
                plan = explain_prune(url, generic)
                what = f"{rows} rows, {'generic' if generic else 'custom'} plan"
                assert_prune_is_index_driven(plan, what)
                assert rows_read(plan) <= 3_100, f"{what}: read {rows_read(plan)} rows"


def test_stale_listing_reads_the_stale_rows_not_the_backlog(pg_server: tuple[str, Cluster | None]) -> None:
    """ListStaleTasks under a young backlog of 100,000 claimable rows, with 3 unclaimable queued
    rows (retry_count = max_retries), 2 dead zombies (last retry, lease lapsed past the grace),
    1 zombie within the grace and 4 queued rows older than the cutoff: it returns the 9 stale
    rows oldest first, and both plans read about that many rows (one WHERE of ORs, as before,
    read every live row: a sequential or bitmap scan of the backlog)."""
    params = {"processing_grace_seconds": 0, "queued_max_age_seconds": 0, "limit": 0}
    with scratch_database(pg_server[0]) as url, psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO generation.tools (name) VALUES ('reaped')")
        tool = "(SELECT id FROM generation.tools WHERE name = 'reaped')"
        conn.execute(f"INSERT INTO generation.tasks (tool_id) SELECT {tool} FROM generate_series(1, 100000)")
        conn.execute(
            f"INSERT INTO generation.tasks (tool_id, retry_count, max_retries, created_at) "
            f"SELECT {tool}, 3, 3, now() - i * interval '1 minute' FROM generate_series(1, 3) i"
        )
        conn.execute(
            f"INSERT INTO generation.tasks (tool_id, status, retry_count, max_retries, claim_expires_at, created_at) "
            f"SELECT {tool}, 'processing', 3, 3, now() - lapsed, now() - lapsed - interval '5 minutes' "
            f"FROM unnest(ARRAY[interval '1 hour', interval '10 minutes', interval '1 minute']) AS lapsed"
        )
        conn.execute(
            f"INSERT INTO generation.tasks (tool_id, created_at, run_at) "
            f"SELECT {tool}, now() - interval '1 hour' - i * interval '1 second', now() - interval '1 hour' - i * interval '1 second' "
            f"FROM generate_series(1, 4) i"
        )
        conn.execute("VACUUM ANALYZE generation.tasks")
        # The definition, written independently of the statement under test (default windows).
        expected = [
            r[0]
            for r in conn.execute(
                "SELECT id FROM generation.tasks WHERE (status = 'queued' AND (retry_count >= max_retries "
                "OR created_at < now() - interval '15 minutes')) OR (status = 'processing' AND "
                "retry_count >= max_retries AND claim_expires_at < now() - interval '2 minutes') ORDER BY created_at"
            )
        ]
        assert len(expected) == 9
        got = conn.execute(task_pydb.LIST_STALE_TASKS_SQL, params).fetchall()
        assert [r[0] for r in got] == expected
        for generic in (False, True):
            plan = explain(url, task_pydb.LIST_STALE_TASKS_SQL, params, generic=generic, analyze=True)
            what = f"ListStaleTasks ({'generic' if generic else 'custom'} plan)"
            kinds = [n["Node Type"] for n in nodes(plan)]
            assert "Seq Scan" not in kinds and "Bitmap Heap Scan" not in kinds, f"{what}: {kinds}"
            assert plan["Actual Rows"] == 9, what
            assert rows_read(plan) <= 20, f"{what}: read {rows_read(plan)} rows"


#: The rule PurgeTaskEvents implements, written as the definition (group every task's events),
#: independently of the statement under test; default windows (3,600 s retention, 86,400 s idle).
EXPIRED_BY_DEFINITION = """
    SELECT task_id FROM generation.task_events GROUP BY task_id
    HAVING max(emitted_at) < now() - CASE WHEN max(seq) = max(seq) FILTER (WHERE kind = 'terminal')
                                          THEN interval '1 hour' ELSE interval '1 day' END
"""


def add_events(url: str, tasks: int, finished_share: float, last_event: str, *, terminal_then: str = "") -> None:
    """`tasks` tasks of 10 events each (seq 1-10, one second apart), the newest `last_event` ago
    plus up to a minute; the first `finished_share` of them end with a terminal event. With
    `terminal_then`, a further progress event follows the terminal one that long after it."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            """
            CREATE TEMP TABLE spec AS
            SELECT gen_random_uuid() AS task_id, i <= %(tasks)s * %(share)s AS finished,
                   now() - %(last)s::interval - (i %% 60) * interval '1 second' AS last_at
            FROM generate_series(1, %(tasks)s) i
            """,
            {"tasks": tasks, "share": finished_share, "last": last_event},
        )
        # seq-major, as a fleet appends them: a task's events interleave with other tasks'.
        conn.execute(
            """
            INSERT INTO generation.task_events (task_id, seq, kind, data, emitted_at)
            SELECT s.task_id, n, CASE WHEN s.finished AND n = 10 THEN 'terminal' ELSE 'progress' END,
                   '{"fraction": 0.5}', s.last_at - (10 - n) * interval '1 second'
            FROM generate_series(1, 10) n, spec s ORDER BY n
            """
        )
        if terminal_then:
            conn.execute(
                "INSERT INTO generation.task_events (task_id, seq, kind, data, emitted_at) "
                "SELECT task_id, 11, 'progress', '{}', last_at + %s::interval FROM spec WHERE finished",
                (terminal_then,),
            )
        conn.execute("VACUUM ANALYZE generation.task_events")


def test_event_purge_costs_the_expired_tasks_not_the_table(pg_server: tuple[str, Cluster | None]) -> None:
    """PurgeTaskEvents with 120 tasks due (100 finished over an hour ago, 20 silent for two days)
    among 2,000 and then 20,000 retained tasks of 10 events (finished within the hour, silent
    for 2 to 20 hours, running), plus tasks the candidate indexes find but the rule keeps (an
    event after the terminal one; a terminal event old by the clock of a task whose other event
    is recent): both plans delete exactly the tasks the rule names, through the two candidate
    indexes and the primary key, reading about the same rows whatever the table holds. Grouping
    the whole table read every event (200,000+ rows) on every run."""
    with scratch_database(pg_server[0]) as url:
        add_events(url, 100, 1.0, "2 hours")  # finished, past retention: purged
        add_events(url, 20, 0.0, "2 days")  # abandoned, past idle: purged
        add_events(url, 10, 1.0, "3 hours", terminal_then="1 minute")  # newest not terminal: kept
        add_events(url, 10, 1.0, "3 hours", terminal_then="2 hours 50 minutes")  # a recent event: kept
        for retained, rows in ((2_000, "20,000"), (18_000, "200,000")):
            add_events(url, retained // 2, 1.0, "10 minutes")  # finished within retention
            add_events(url, retained * 2 // 5, 0.0, "2 hours")  # silent, within idle
            add_events(url, retained // 10, 0.0, "0 seconds")  # running
            with psycopg.connect(url) as conn:
                expected = {r[0] for r in conn.execute(EXPIRED_BY_DEFINITION)}
                assert len(expected) == 120
                before = {r[0] for r in conn.execute("SELECT DISTINCT task_id FROM generation.task_events")}
                conn.execute(task_pydb.PURGE_TASK_EVENTS_SQL, {"retention_seconds": 0, "idle_seconds": 0})
                after = {r[0] for r in conn.execute("SELECT DISTINCT task_id FROM generation.task_events")}
                conn.rollback()
            assert before - after == expected, f"{rows} rows: purged other tasks than the rule names"
            for generic in (False, True):
                plan = explain(
                    url,
                    task_pydb.PURGE_TASK_EVENTS_SQL,
                    {"retention_seconds": 0, "idle_seconds": 0},
                    generic=generic,
                    analyze=True,
                )
                what = f"PurgeTaskEvents, {rows} rows ({'generic' if generic else 'custom'} plan)"
                all_nodes = list(nodes(plan))
                kinds = [n["Node Type"] for n in all_nodes]
                assert "Seq Scan" not in kinds and "Hash Join" not in kinds, f"{what}: {kinds}"
                indexes = {n.get("Index Name") for n in all_nodes}
                wanted = {"idx_gen_task_events_terminal", "idx_gen_task_events_first", "task_events_pkey"}
                assert wanted <= indexes, f"{what}: {indexes}"
                assert plan["Plans"][-1]["Actual Rows"] == 1_200, f"{what}: deleted {plan['Plans'][-1]['Actual Rows']}"
                assert rows_read(plan) <= 6_000, f"{what}: read {rows_read(plan)} rows"
