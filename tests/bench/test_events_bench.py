"""Smoke test for benchmarks/bench_events.py: it runs end to end at tiny size on both transports
and RESULTS.md gets its section. No timing is asserted (benchmarks are not tests)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from support.pg import Cluster

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

pytestmark = pytest.mark.slow


def test_bench_events_quick(pg_server: tuple[str, Cluster | None]) -> None:
    result = importlib.import_module("bench_events").run(pg_server[0], quick=True)
    for transport in ("redis", "postgres"):
        cases = result[transport]
        assert cases["one_task_latency"]["events"] == 51 and cases["one_task_latency"]["p50_ms"] > 0
        assert cases["many_tasks_latency"]["tasks"] == 10
        assert cases["one_task_throughput"]["events"] == 501 and cases["one_task_throughput"]["events_per_s"] > 0
        assert cases["many_tasks_throughput"]["events"] == 10 * 21
    text: str = importlib.import_module("report").markdown({"quick": True, "events": result})
    assert "## 5. Live task events" in text and "| postgres | 1 task, burst | 501 |" in text
