"""How `make test` spreads the tests over pytest-xdist workers (`-n 4 --dist loadscope`).

Most of the suite waits (on PostgreSQL, servers it starts, leases, deadlines, subprocesses)
rather than computes, so four workers on a two-core machine overlap the waits. Each worker is a
pytest session of its own, with its own throwaway cluster (or scratch database on DATABASE_URL),
server and Redis; a test that needs a cluster, pgbouncer or redis-server to itself already makes
one (support/pg.py, pgbouncer.py, worker_support.py) on a free port.

- A unit of work is a test module, so a module-scoped fixture (a schema, a loaded table, a
  server) is built once, as in a run in one process. SPREAD_MODULES are the exceptions: modules
  of long tests that share nothing but the session, whose tests go to the workers one by one.
- The slowest modules start first (SLOWEST, measured with `--durations`), so that no long module
  is left to run alone at the end; the many quick modules fill in behind them. The lists only
  steer the order: a module missing from them still runs, just later.
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

#: Modules whose tests are each long and independent: one work unit per test.
SPREAD_MODULES = frozenset({"tests/bench/test_bench_smoke.py", "tests/queue/test_queue_dispatch.py"})

#: The modules taking longest, slowest first (`--durations` of a full `-n 4` run, 2026-12-02).
SLOWEST = (
    "tests/sql/test_corpus_fuzz.py",
    "tests/bench/test_bench_smoke.py",
    "tests/workflow/test_workflow_install.py",
    "tests/queue/test_queue_index.py",
    "tests/pygen/test_pygen_goldens.py",
    "tests/sql/test_sql_resolve.py",
    "tests/queue/test_queue_dispatch.py",
    "tests/devloop/test_diff.py",
    "tests/sql/test_corpus.py",
    "tests/workflow/test_workflow_generate.py",
    "tests/deploy/test_deploy_pgbouncer.py",
    "tests/worker/test_fleet_batching.py",
    "tests/queue/test_queue_schedule_index.py",
    "tests/workflow/test_workflow_adding_rpc.py",
    "tests/replication/test_replication_failover.py",
    "tests/sql/test_sql_builtins.py",
    "tests/queue/test_queue_admin_index.py",
    "tests/replication/test_replication_servers.py",
    "tests/devloop/test_snapshot.py",
    "tests/queue/test_queue_faults.py",
    "tests/devloop/test_client_types.py",
    "tests/replication/test_replication_routing.py",
    "tests/security/test_security_memory.py",
    "tests/worker/test_worker_fleet.py",
    "tests/worker/test_events_transports.py",
    "tests/worker/test_events_redis.py",
    "tests/queue/test_queue_limits.py",
    "tests/worker/test_fleet_recovery.py",
    "tests/worker/test_worker_schedule.py",
    "tests/queue/test_queue_partitioned.py",
    "tests/devloop/test_lsp.py",
    "tests/observe/test_dashboard_browser.py",
    "tests/queue/test_queue_deliverable.py",
    "tests/devloop/test_check.py",
)
_RANK = {module: rank for rank, module in enumerate(SLOWEST)}


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def slowest_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """`items` with SLOWEST's modules first, in its order; the rest after, in pytest's order."""
    return sorted(items, key=lambda item: _RANK.get(module_of(item.nodeid), len(SLOWEST)))


class ModuleScheduling(LoadScopeScheduling):  # type: ignore[misc]  # xdist ships no type information
    """loadscope with a module (not a class) as the unit, but a test of SPREAD_MODULES alone,
    and units in collection order (slowest_first), not by their number of tests."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        super().__init__(config, log)
        config.option.loadscopereorder = False

    def _split_scope(self, nodeid: str) -> str:
        module = module_of(nodeid)
        return nodeid if module in SPREAD_MODULES else module
