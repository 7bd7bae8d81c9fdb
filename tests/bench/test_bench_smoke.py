"""Smoke tests for benchmarks/: each benchmark runs at tiny size so it keeps working.

No timing is asserted here (benchmarks are not tests): only that every script runs end to end
and reports the measurements RESULTS.md is written from.
"""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from support.pg import Cluster

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

pytestmark = pytest.mark.slow


def bench(name: str) -> ModuleType:
    return importlib.import_module(name)


def render(results: dict[str, Any], tmp_path: Path) -> str:
    """RESULTS.md for these results; the plots too when matplotlib (a bench-only dependency) is here."""
    report = bench("report")
    text: str = report.markdown({"quick": True, **results})
    if importlib.util.find_spec("matplotlib") is not None:
        written = bench("report_plots").plots(results, tmp_path)
        assert all(p.stat().st_size > 0 for p in written)
    return text


def test_codegen(tmp_path: Path) -> None:
    result = bench("bench_codegen").run(quick=True)
    case = next(c for name, c in result["cases"].items() if name.startswith("queue"))
    assert case["pydb_s"]["n"] == 1 and case["pydb_s"]["median"] > 0
    assert "synthetic 10 RPCs, 100 tables" in result["cases"]
    calls = result["phases"]["calls"]
    assert calls["SQL analysis (sqlglot parse + checks)"] == 10
    assert calls["schema parse (catalog)"] == 1 and calls["render (jinja2)"] == 1
    assert result["phases"]["phases_s"]["schema parse (catalog)"] > 0
    deps, plugin = (
        result["imports"]["python_start_plus_dependencies_s"],
        result["imports"]["python_start_plus_plugin_import_s"],
    )
    assert 0 < deps["median"] < plugin["median"]
    assert "## 1. Codegen speed" in render({"codegen": result}, tmp_path)


def test_codegen_phase_breakdown_refuses_a_vanished_phase(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A phase whose entry point was renamed is an error, not a phase silently left out."""
    import pydb.plugin.bind.compiler as compiler

    codegen = bench("bench_codegen")
    monkeypatch.delattr(compiler, "load_catalog")
    with pytest.raises(RuntimeError, match=r"load_catalog .*no longer exists"):
        codegen.phase_breakdown(codegen.PROTO_ROOT, codegen.QUEUE_PROTO, tmp_path)


def test_synthetic_proto_matches_sqlc_queries() -> None:
    synth = bench("synth")
    assert synth.proto(12).count("rpc ") == 12
    assert synth.sqlc_queries(12).count("-- name: ") == 12
    assert synth.schema_sql().count("CREATE TABLE") == synth.TABLES


def test_overhead(pg_server: tuple[str, Cluster | None], tmp_path: Path) -> None:
    result = bench("bench_overhead").run(pg_server[0], quick=True)
    assert result["generated"]["n"] == result["hand_written"]["n"] > 0
    assert result["ratio_per_round"]["median"] > 0
    assert "## 2. Handler overhead" in render({"overhead": result}, tmp_path)


@pytest.mark.skipif(shutil.which("pgbench") is None and not list(Path("/usr/lib/postgresql").glob("*/bin/pgbench")),
                    reason="pgbench not installed")  # fmt: skip
def test_throughput(pg_server: tuple[str, Cluster | None], tmp_path: Path) -> None:
    result = bench("bench_throughput").run(pg_server[0], quick=True)
    for mode in ("single", "batched"):
        for row in result[mode].values():
            assert row["tool"]["tasks_per_s"] > 0 and row["pgbench"]["tasks_per_s"] > 0
            assert row["tool"]["verified_completed_rows"] > 0
    assert "## 3. Queue throughput" in render({"throughput": result}, tmp_path)


def test_pgbench_scripts_use_the_generated_sql() -> None:
    scripts = bench("bench_throughput").pgbench_scripts()
    assert "FOR UPDATE SKIP LOCKED" in scripts["single"] and "\\gset" in scripts["single"]
    assert "WHERE id = :id AND lease_token = :lease_token" in scripts["single"]
    assert "unnest(:ids::uuid[]" in scripts["batched"]
    assert "%(" not in scripts["single"] + scripts["batched"]


def test_backlog(pg_server: tuple[str, Cluster | None], tmp_path: Path) -> None:
    result = bench("bench_backlog").run(pg_server[0], quick=True)
    assert set(result["sweep"]) == {"1000", "10000"}
    for s in result["settings"].values():
        assert s["after"]["n"] > 0 and s["churn"]["windows"]
    assert "## 4. Backlog depth" in render({"backlog": result}, tmp_path)


def test_partition(pg_server: tuple[str, Cluster | None], tmp_path: Path) -> None:
    result = bench("bench_partition").run(pg_server[0], quick=True)
    assert set(result["scenarios"]) == {"terminal", "deep"}
    for scenario in result["scenarios"].values():
        assert set(scenario["layouts"]) == {"plain", "plain_tuned", "by_tool", "by_status"}
        for layout in scenario["layouts"].values():
            assert layout["claim"]["n"] > 0 and layout["single_tasks_per_s"]["median"] > 0
            assert layout["indexes"]["tasks_pkey"]["bytes"] > 0
    by_tool = result["scenarios"]["terminal"]["layouts"]["by_tool"]["indexes"]
    assert "tasks_billing_idempotency_key_tool_id_key" in by_tool  # the widened key, on every partition
    assert "## 8. Partitioning the queue table" in render({"partition": result}, tmp_path)


def test_fleet(pg_server: tuple[str, Cluster | None], tmp_path: Path) -> None:
    result = bench("bench_fleet").run(pg_server[0], quick=True)
    for key in ("fleet_batched", "fleet_one_report_per_task"):
        assert result[key]["completed"] == result["tasks"] == result[key]["verified_completed_rows"]
    assert result["fleet_batched"]["report_batches"] < result["fleet_one_report_per_task"]["report_batches"]
    assert result["enqueue_bulk_500"]["queued"] == result["enqueue_bulk_500"]["verified_rows"] > 0
    assert "## 6. The worker fleet end to end" in render({"fleet": result}, tmp_path)


def test_replication(pg_server: tuple[str, Cluster | None], tmp_path: Path) -> None:
    result = bench("bench_replication").run(pg_server[0], quick=True)
    round_ = result["failover"]["rounds"][0]
    assert 0 < round_["promote_to_first_ok_s"] < round_["kill_to_first_ok_s"]
    assert round_["enqueued_before_kill"] > 0
    assert result["servers"]["one_server_tasks_per_s"]["median"] > 0
    assert result["servers"]["three_servers_tasks_per_s"]["median"] > 0
    assert "## 7. Failover and several server processes" in render({"replication": result}, tmp_path)


def test_devloop() -> None:
    result = bench("bench_devloop").run(quick=True)
    assert result["incremental"]["incremental_typo_ms"]["n"] == 4
    assert result["lsp"]["diagnostic_ms"]["n"] == 3
    rows = bench("report_headline").headline({"devloop": result})
    assert [r[2] for r in rows] == ["≤ 50 ms", "≤ 300 ms"]


def test_schedule(pg_server: tuple[str, Cluster | None], tmp_path: Path) -> None:
    result = bench("bench_schedule").run(pg_server[0], quick=True)
    assert result["batched"]["tasks_per_s"]["seed"] > 0 and result["batched"]["tasks_per_s"]["now"] > 0
    assert result["deep"]["samples"] == {"small": 200, "deep": 200}
    assert "## 11. Scheduling features on the claim path" in render({"schedule": result}, tmp_path)


def test_claims(pg_server: tuple[str, Cluster | None], tmp_path: Path) -> None:
    result = bench("bench_claims").run(pg_server[0], quick=True)
    assert result["noisy"]["fifo"]["tasks_per_s"] > 0 and result["noisy"]["fair"]["tasks_per_s"] > 0
    assert result["global"]["slots"] == 64 and result["global"]["tasks_per_s"]["limited"] > 0
    assert result["latency"]["samples"] == {"small": 200, "deep": 200}
    assert set(result["latency"]["plans"]) == {"1k", "deep", "deep_limited"}
    assert "## 16. Fair and bounded claims" in render({"claims": result}, tmp_path)


def test_bounds(pg_server: tuple[str, Cluster | None], tmp_path: Path) -> None:
    """Both side-by-side measurements of issue 27 (rows 5 and 7) ran and the section renders."""
    result = bench("bench_bounds").run(pg_server[0], quick=True)
    flood, hot = result["flood"], result["hot_row"]
    assert flood["clients"] == 10 and flood["unauthenticated_sent"] > 0
    assert flood["idle_p50_ms"] > 0 and flood["flood_p50_ms"] > 0 and flood["rss_growth_mb"] is not None
    assert hot["hammers"] == 10 and hot["idle_p50_ms"] > 0 and hot["hot_p50_ms"] > 0 and hot["hot_40_p50_ms"] > 0
    assert sum(hot["hot_row_answers"].values()) > 0  # the locked row's callers were answered, not left waiting
    text = render({"bounds": result}, tmp_path)
    assert "## 18. Bounded under abuse" in text
    assert len(bench("bench_bounds").headline(result)) == 2


def test_observe(pg_server: tuple[str, Cluster | None], tmp_path: Path) -> None:
    result = bench("bench_observe").run(pg_server[0], quick=True)
    assert result["overhead"]["tasks_per_s_off"] > 0 and result["overhead"]["tasks_per_s_on"] > 0
    assert set(result["dashboard"]["pages"]) >= {"queues", "tasks", "tasks_page_21", "task_detail"}
    assert "## 12. Observability" in render({"observe": result}, tmp_path)


def test_peers_our_side(pg_server: tuple[str, Cluster | None], tmp_path: Path) -> None:
    """bench_peers' measurement of the fleet (the peers themselves are installed only by
    `make bench`): every job counted done in the database, CPU per process, and the section."""
    peers = bench("bench_peers")
    run = peers.measure_ours(pg_server[0], 1000)
    assert run["done"] == 1000 and run["drain_jobs_per_s"] > 0 and run["enqueue_jobs_per_s"] > 0
    cpu = run["cpu_s_per_1000"]
    assert cpu["worker"] > 0 and cpu["server"] > 0 and cpu["postgres"] > 0
    assert cpu["total"] == pytest.approx(cpu["worker"] + cpu["server"] + cpu["postgres"])
    result = {"jobs": 1000, "rounds": 1, "versions": {}, "unavailable": {"oban-py": "not installed here"}}
    result["systems"] = {peers.OURS: peers.best([run])}
    text = render({"peers": result}, tmp_path)
    assert "## 15. The fleet beside the other Python queues" in text and "Not measured: oban-py" in text


def test_floor(pg_server: tuple[str, Cluster | None], tmp_path: Path) -> None:
    """bench_floor's parts (the hop without a database, the row lifecycle in three forms) and the
    bounds the peers section renders from them."""
    floor, peers = bench("bench_floor"), bench("bench_peers")
    measured = floor.measure(pg_server[0], 1000, peers.child_env(ours=True))
    hop = measured["hop"]
    assert hop["drain_jobs_per_s"] > 0 and hop["enqueue_jobs_per_s"] > 0
    assert hop["cpu_s_per_1000"]["worker"] > hop["worker_steady_cpu_s_per_1000"] > 0
    assert set(measured["rows"]) == {"served", "fenced", "bare"}
    for form in measured["rows"].values():
        assert form["postgres_cpu_s_per_1000"] >= 0 and form["enqueue_postgres_cpu_s_per_1000"] >= 0
    pgq = {"cpu_s_per_1000": {"total": 0.07}, "drain_jobs_per_s": 20_000.0}
    bounds = floor.bounds([measured], pgq, 80_000.0)
    assert bounds["least_cpu_s_per_1000"] == pytest.approx(
        hop["cpu_s_per_1000"]["worker"]
        + hop["cpu_s_per_1000"]["server"]
        + bounds["rows"]["fenced"]["postgres_cpu_s_per_1000"]
    )
    assert bounds["drain_ceiling_jobs_per_s"] > 0 and bounds["enqueue_ceiling_jobs_per_s"] > 0
    result = {"jobs": 1000, "rounds": 1, "versions": {}, "unavailable": {}, "floor": bounds}
    result["systems"] = {peers.OURS: peers.best([peers.measure_ours(pg_server[0], 1000)])}
    text = render({"peers": result}, tmp_path)
    assert "### The floors under the fleet's figures" in text and "1.2x the fastest peer: 96,000" in text


def test_shapes(pg_server: tuple[str, Cluster | None], tmp_path: Path) -> None:
    result = bench("bench_shapes").run(pg_server[0], quick=True)
    stream, copy = result["stream"], result["copy"]
    assert stream["grpc_rows_per_s"]["n"] == 1 and stream["psycopg_rows_per_s"]["median"] > 0
    assert stream["rss_growth_mb"]["n"] == 1
    assert copy["copy_rows_per_s"]["median"] > 0 and copy["unnest_rows_per_s"]["median"] > 0
    text = render({"shapes": result}, tmp_path)
    assert "## 14. Streamed reads and COPY writes" in text
