"""Automatic failover by a real HA manager: a pg_auto_failover formation (a monitor and two data
nodes, tests/support/pg_autofailover.py) under enqueue + WorkerFleet load; the primary's keeper and
PostgreSQL are killed together and nobody promotes by hand. The run itself is
benchmarks/bench_autofailover.py's round (RESULTS.md §9 reports its recovery times); here its
accounting is asserted: the monitor promoted the survivor, the server followed the multi-host
URL, and no enqueue or completion answered OK is missing on the new primary."""

from __future__ import annotations

import sys

import pytest
from conftest import ROOT
from support.pg_autofailover import pg_autoctl_binary

sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_autofailover  # type: ignore[import-not-found]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.serial,
    pytest.mark.skipif(pg_autoctl_binary() is None, reason="pg_auto_failover not installed (.ci/run installs it)"),
]


async def test_pg_auto_failover_promotes_and_no_acknowledged_write_is_lost() -> None:
    r = await bench_autofailover._round(2000)
    print(f"\npg_auto_failover: {r}")
    assert r["new_primary_port"] == r["survivor_port"]  # the server's writes went to the promoted node
    assert r["lost_enqueues"] == 0 and r["lost_completions"] == 0, r
    assert r["rows_not_acknowledged"] == 0, r  # no retried enqueue made a second task
    assert r["finished"] == r["tasks"] and r["acknowledged_enqueues"] == r["tasks"], r
    assert all(code.endswith(("UNAVAILABLE", "FAILED_PRECONDITION")) for code in r["failed_by_rpc"]), r
    assert r["crash_to_first_ok_enqueue_s"] < 60, r
