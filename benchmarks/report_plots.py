"""The plots of RESULTS.md (codegen.png, throughput.png, backlog.png, peers.png), drawn with
matplotlib (benchmarks/requirements.txt: a bench-only dependency, imported only here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import report_peers
from common import Json


def plots(r: Json, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    if "codegen" in r:
        cg = r["codegen"]
        synth = [(c["rpcs"], c) for name, c in cg["cases"].items() if name.startswith("synthetic")]
        fig, ax = plt.subplots(figsize=(6, 4))
        xs = [n for n, _ in synth]
        ax.errorbar(xs, [c["pydb_s"]["median"] for _, c in synth],
                    yerr=[[c["pydb_s"]["median"] - c["pydb_s"]["min"] for _, c in synth],
                          [c["pydb_s"]["max"] - c["pydb_s"]["median"] for _, c in synth]],
                    marker="o", capsize=3, label="protoc-gen-pydb")  # fmt: skip
        with_sqlc = [(n, c) for n, c in synth if "sqlc_s" in c]
        if with_sqlc:
            ax.plot(
                [n for n, _ in with_sqlc], [c["sqlc_s"]["median"] for _, c in with_sqlc], marker="s", label="sqlc (Go)"
            )
        ax.plot(xs, [c["protoc_alone_s"]["median"] for _, c in synth], marker=".", linestyle=":", label="protoc alone")
        ax.axhline(3.0, color="grey", linestyle="--", linewidth=0.8, label="target for 1,000 RPCs")
        ax.set_xlabel("annotated RPCs (100-table schema)")
        ax.set_ylabel("wall time (s), median")
        ax.set_title("Codegen time")
        ax.legend()
        ax.grid(alpha=0.3)
        written.append(_save(fig, out / "codegen.png"))
    if "throughput" in r:
        tp = r["throughput"]
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for ax, mode in zip(axes, ("single", "batched"), strict=True):
            rows = tp[mode]
            ns = sorted(int(n) for n in rows)
            ax.plot(ns, [rows[str(n)]["pgbench"]["tasks_per_s"] for n in ns], marker="s", label="pgbench, same SQL")
            ax.plot(ns, [rows[str(n)]["tool"]["tasks_per_s"] for n in ns], marker="o", label="generated gRPC server")
            if mode == "batched":
                ax.axhline(12000, color="grey", linestyle="--", linewidth=0.8, label="target 12,000/s")
            ax.set_xlabel("concurrent clients N")
            ax.set_ylabel("tasks completed / s")
            ax.set_title(f"{mode} path" + (" (batches of 100)" if mode == "batched" else ""))
            ax.set_ylim(bottom=0)
            ax.legend()
            ax.grid(alpha=0.3)
        written.append(_save(fig, out / "throughput.png"))
    if "backlog" in r:
        bl = r["backlog"]
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        ds = sorted(int(d) for d in bl["sweep"])
        for key, label in (("p50_ms", "p50"), ("p99_ms", "p99")):
            axes[0].plot(ds, [bl["sweep"][str(d)][key] for d in ds], marker="o", label=label)
        axes[0].set_xscale("log")
        axes[0].set_xlabel("queued rows for the tool")
        axes[0].set_ylabel("claim latency (ms)")
        axes[0].set_title("Claim latency vs backlog depth")
        axes[0].set_ylim(bottom=0)
        axes[0].legend()
        axes[0].grid(alpha=0.3)
        for name, s in bl["settings"].items():
            w = s["churn"]["windows"]
            axes[1].plot([x["t"] for x in w], [x["p50_ms"] for x in w], marker="o", label=f"{name}: p50")
        axes[1].set_xlabel("seconds of churn")
        axes[1].set_ylabel("claim latency p50 (ms), per window")
        axes[1].set_title(f"Under churn at {bl['churn_depth']:,} rows")
        axes[1].set_ylim(bottom=0)
        axes[1].legend()
        axes[1].grid(alpha=0.3)
        written.append(_save(fig, out / "backlog.png"))
    if "peers" in r and r["peers"].get("systems"):
        written.append(_save(report_peers.plot(r["peers"], plt), out / "peers.png"))
    return written


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=90, metadata={"Software": None})
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path
