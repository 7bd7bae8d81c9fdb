"""RESULTS.md's section and headline rows for bench_peers: the fleet beside the other Python
queues on PostgreSQL, one interleaved run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

Json = dict[str, Any]

OURS = "pydb fleet"
#: Issue 29's bars: drain ≥ 1.2x PgQueuer + asyncpg, CPU per job ≤ its, enqueue ≥ 1.2x the fastest peer,
#: the fleet ≥ 0.8x the batched path.
DRAIN_RATIO, ENQUEUE_RATIO, BATCHED_RATIO = 1.2, 1.2, 0.8


def _met(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def _fastest_peer(systems: Json, key: str) -> tuple[str, float]:
    peers = {name: s[key] for name, s in systems.items() if name != OURS}
    name = max(peers, key=lambda n: peers[n])
    return name, float(peers[name])


def headline(pe: Json) -> list[tuple[str, str, str, str]]:
    systems = pe["systems"]
    if OURS not in systems or "PgQueuer + asyncpg" not in systems:
        return []
    ours, pgq = systems[OURS], systems["PgQueuer + asyncpg"]
    drain = ours["drain_jobs_per_s"] / pgq["drain_jobs_per_s"]
    cpu = ours["cpu_s_per_1000"]["total"] / pgq["cpu_s_per_1000"]["total"]
    peer, peer_enqueue = _fastest_peer(systems, "enqueue_jobs_per_s")
    enqueue = ours["enqueue_jobs_per_s"] / peer_enqueue
    n = f"{pe['jobs']:,}"
    return [
        (f"Fleet drain vs PgQueuer + asyncpg ({n} no-op jobs, 1 worker process, same run)",
         f"{ours['drain_jobs_per_s']:,.0f} vs {pgq['drain_jobs_per_s']:,.0f} jobs/s = {drain:.2f}x", "≥ 1.2x",
         _met(drain >= DRAIN_RATIO)),
        ("Fleet CPU per 1,000 jobs (worker + server + PostgreSQL) vs PgQueuer + asyncpg",
         f"{ours['cpu_s_per_1000']['total']:.3f} vs {pgq['cpu_s_per_1000']['total']:.3f} s = {cpu:.2f}x", "≤ 1x",
         _met(cpu <= 1.0)),
        (f"Bulk enqueue vs the fastest peer ({peer})",
         f"{ours['enqueue_jobs_per_s']:,.0f} vs {peer_enqueue:,.0f} jobs/s = {enqueue:.2f}x", "≥ 1.2x",
         _met(enqueue >= ENQUEUE_RATIO)),
        *_batched_row(ours),
    ]  # fmt: skip


def _batched_row(ours: Json) -> list[tuple[str, str, str, str]]:
    """The fleet against the data plane's batched path (ClaimTasks + CompleteTasks loops), same rounds."""
    batched = ours.get("batched_path_tasks_per_s")
    if not batched:
        return []
    ratio = ours["drain_jobs_per_s"] / batched
    return [("Fleet drain vs the batched path (ClaimTasks 100 + CompleteTasks, 8 loops), same run",
             f"{ours['drain_jobs_per_s']:,.0f} vs {batched:,.0f} tasks/s = {ratio:.2f}x", "≥ 0.8x",
             _met(ratio >= BATCHED_RATIO))]  # fmt: skip


def winners(systems: Json) -> str:
    """Who wins each measure, in words (the README and RESULTS.md say it, whoever it is)."""
    best = {
        "drain": max(systems, key=lambda n: systems[n]["drain_jobs_per_s"]),
        "enqueue": max(systems, key=lambda n: systems[n]["enqueue_jobs_per_s"]),
        "CPU per job": min(systems, key=lambda n: systems[n]["cpu_s_per_1000"]["total"]),
    }
    return "Fastest drain: {drain}; fastest enqueue: {enqueue}; least CPU per job: {CPU per job}.".format(**best)


def table(pe: Json) -> list[str]:
    """Every system measured, best drain first, with its setting and CPU per process."""
    systems = pe["systems"]
    out = [
        "| system | setting | drain jobs/s | enqueue jobs/s | CPU s / 1,000 jobs: worker | server | PostgreSQL | total |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in sorted(systems, key=lambda n: -systems[n]["drain_jobs_per_s"]):
        s = systems[name]
        c = s["cpu_s_per_1000"]
        server = f"{c['server']:.3f}" if name == OURS else "–"
        bold = "**" if name == OURS else ""
        out.append(
            f"| {bold}{name}{bold} | {s['setting']} | {s['drain_jobs_per_s']:,.0f} | {s['enqueue_jobs_per_s']:,.0f} "
            f"| {c['worker']:.3f} | {server} | {c['postgres']:.3f} | {c['total']:.3f} |"
        )
    return out


START, END = "<!-- peers:start -->", "<!-- peers:end -->"


def update_readme(r: Json, readme: Path) -> None:
    """The README's side-by-side table (between the markers), from this run's peers section."""
    pe = r.get("peers")
    if not pe or not pe.get("systems") or not readme.exists():
        return
    text = readme.read_text()
    if START not in text or END not in text:
        return
    versions = ", ".join(f"{k} {v}" for k, v in sorted(pe["versions"].items()))
    when = r.get("machine", {}).get("when_utc", "?")
    note = (
        f"{pe['jobs']:,} no-op jobs pre-queued, one worker process draining, {pe['rounds']} interleaved round(s), "
        f"medians; peers at the best of their documented settings ({versions}), ours at its defaults. "
        f"{winners(pe['systems'])} Measured {when} by `make bench` (load average {pe.get('loadavg', 0):.1f}); "
        "details in [benchmarks/RESULTS.md](benchmarks/RESULTS.md#15-the-fleet-beside-the-other-python-queues)."
    )
    block = "\n".join([START, *table(pe), "", note, END])
    head, rest = text.split(START, 1)
    readme.write_text(head + block + rest.split(END, 1)[1])


def section(r: Json) -> list[str]:
    pe = r["peers"]
    systems = pe["systems"]
    versions = ", ".join(f"{k} {v}" for k, v in sorted(pe["versions"].items()))
    out = [
        "## 15. The fleet beside the other Python queues",
        "",
        f"{pe['jobs']:,} no-op jobs per system and round, {pe['rounds']} interleaved rounds (every system once per "
        "round, so all see the same load), each in a fresh database on the same PostgreSQL: enqueued through the "
        "system's own bulk API, then `VACUUM ANALYZE` + `CHECKPOINT`, then one worker process drains them. Drain "
        "jobs/s comes from each system's own timestamps in the database (first claim to last job done; every job "
        "checked done); CPU per 1,000 jobs is each process's during the drain (the worker process whole, start-up "
        "included, bytecode cached as installed; for this project also "
        "the gRPC data plane between workers and PostgreSQL; PostgreSQL's whole server). Peers in environments of "
        f"their own ({versions}), each at the best of the settings listed; ours at its defaults. Medians over rounds.",
        "",
        *table(pe),
    ]
    out += ["", winners(systems)]
    ours = systems.get(OURS, {})
    if ours.get("batched_path_tasks_per_s"):
        out[-1] += (
            f" The batched path (ClaimTasks 100 + CompleteTasks, 8 loops) on the fleet's server, same rounds: "
            f"{ours['batched_path_tasks_per_s']:,.0f} tasks/s."
        )
    out += [f"Load average at the end of the run: {pe.get('loadavg', 0):.1f}.", ""]
    tried = [
        f"{name}: " + "; ".join(f"`{k}` {v['drain_jobs_per_s']:,.0f}/s" for k, v in s["settings"].items())
        for name, s in systems.items()
        if len(s["settings"]) > 1
    ]
    if tried:
        out += ["Settings tried (median drain): " + " — ".join(tried) + ".", ""]
    for name, why in pe.get("unavailable", {}).items():
        out += [f"Not measured: {name} ({why}).", ""]
    return [*out, "![peers](peers.png)", "", *floor_section(pe)]


def floor_section(pe: Json) -> list[str]:
    """The floors under the fleet's figures (bench_floor.py) and the bars they bound."""
    fl = pe.get("floor")
    if not fl:
        return []
    hop, forms = fl["hop"], fl["rows"]
    out = [
        "### The floors under the fleet's figures",
        "",
        f"Each part measured with the others taken away, in the same rounds (bench_floor.py, medians of {fl['rounds']}). "
        "**The gRPC hop alone**: the fleet's worker process against a data plane without a database "
        f"(floor_server.py): {hop['drain_jobs_per_s']:,.0f} jobs/s drained; CPU per 1,000 jobs: worker "
        f"{hop['cpu_s_per_1000']['worker']:.3f} s (start-up included; {hop['worker_steady_cpu_s_per_1000']:.3f} s "
        f"from its first task to its last), server {hop['cpu_s_per_1000']['server']:.3f} s. Bulk enqueue through it: "
        f"{hop['enqueue_jobs_per_s']:,.0f} jobs/s, client {hop['enqueue_cpu_s_per_1000']['client']:.4f} s and server "
        f"{hop['enqueue_cpu_s_per_1000']['server']:.4f} s per 1,000. **The row lifecycle alone**: PostgreSQL's CPU "
        "per 1,000 jobs, one connection, no server, enqueued 500 a statement, claimed and completed 100 at a time:",
        "",
        "| statements | enqueue | claim + complete |",
        "|---|---|---|",
        *(
            f"| {label} | {forms[form]['enqueue_postgres_cpu_s_per_1000']:.4f} s "
            f"| {forms[form]['postgres_cpu_s_per_1000']:.4f} s |"
            for form, label in (
                ("served", "served (the generated QueueTasks, ClaimTasks, CompleteTasks)"),
                ("fenced", "fenced (the leanest that keep the key, the claim order and the lease fence), same schema"),
                ("bare", "bare (the fenced ones; only the claim path's indexes, no trigger, no key arbiter)"),
            )
        ),
        "",
        f"What they bound on this machine ({fl['cores']} cores): the fleet's CPU per 1,000 jobs can be no lower than "
        f"the hop's plus PostgreSQL's on the fenced statements, **{fl['least_cpu_s_per_1000']:.3f} s**"
        + (
            f" (PgQueuer + asyncpg, whole: {fl['pgqueuer_cpu_s_per_1000']:.3f} s)"
            if "pgqueuer_cpu_s_per_1000" in fl
            else ""
        )
        + f"; with every core busy all the time at the floor's steady cost, no drain beats "
        f"**{fl['drain_ceiling_jobs_per_s']:,.0f} jobs/s**"
        + (
            f" (1.2x PgQueuer + asyncpg: {1.2 * fl['pgqueuer_drain_jobs_per_s']:,.0f})"
            if "pgqueuer_drain_jobs_per_s" in fl
            else ""
        )
        + f" and no enqueue **{fl['enqueue_ceiling_jobs_per_s']:,.0f} jobs/s**"
        + (
            f" (1.2x the fastest peer: {1.2 * fl['fastest_peer_enqueue_jobs_per_s']:,.0f})"
            if "fastest_peer_enqueue_jobs_per_s" in fl
            else ""
        )
        + ". The served statements' PostgreSQL cost above the fenced ones is what the queue's features "
        "(fair claims, limits, byte bounds, retried claims, zombies and due tasks in one claim, a completion that "
        "never waits on a hot row) cost per job; the fenced ones' above the bare ones is what the other indexes cost "
        "(the task list's four, the billing key's, the reaper's).",
        "",
    ]
    return out


def plot(pe: Json, plt: Any) -> Any:
    """Drain jobs/s and CPU per 1,000 jobs per system, side by side (a figure for report._save)."""
    systems = pe["systems"]
    order = sorted(systems, key=lambda n: -systems[n]["drain_jobs_per_s"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    colours = ["tab:green" if n == OURS else "tab:grey" for n in order]
    left.barh(order, [systems[n]["drain_jobs_per_s"] for n in order], color=colours)
    left.set_xlabel("drain jobs/s (median, higher is better)")
    left.invert_yaxis()
    bottom = [0.0] * len(order)
    for part, colour in (("worker", "tab:blue"), ("server", "tab:orange"), ("postgres", "tab:purple")):
        values = [systems[n]["cpu_s_per_1000"][part] for n in order]
        right.barh(order, values, left=bottom, color=colour, label=part)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    right.set_xlabel("CPU s per 1,000 jobs (lower is better)")
    right.invert_yaxis()
    right.set_yticklabels([])
    right.legend()
    fig.suptitle(f"{pe['jobs']:,} no-op jobs, one worker process, same run")
    fig.tight_layout()
    return fig
