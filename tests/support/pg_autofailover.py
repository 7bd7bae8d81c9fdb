"""A pg_auto_failover formation (Debian's pg-auto-failover-cli and postgresql-15-auto-failover,
installed by .ci/run): a monitor and two data nodes, all local clusters on free ports in one
temporary directory, each run by its own `pg_autoctl ... --run` process (as the `postgres` user
when we are root). The monitor decides failovers by itself: `crash_primary()` kills the primary's
whole process group (its pg_autoctl keeper and its PostgreSQL, as a lost machine would) and the
monitor, once its health checks have failed for long enough, promotes the secondary.

The monitor's timeouts are lowered (`FAST_MONITOR`) so a failover takes seconds, not the ~40 s of
the defaults; a real deployment chooses them against its network (docs/deploy.md)."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg

from support.pg import _free_port, _pg_bin

#: The monitor's settings (milliseconds) for a test-sized failover; the defaults in brackets.
FAST_MONITOR = {
    "pgautofailover.health_check_period": 1000,  # (5000) between health checks of each node
    "pgautofailover.health_check_timeout": 1000,  # (5000) connect timeout of a check
    "pgautofailover.health_check_max_retries": 1,  # (2)
    "pgautofailover.health_check_retry_delay": 500,  # (2000)
    "pgautofailover.node_considered_unhealthy_timeout": 2000,  # (20000) no keeper report for this long
    "pgautofailover.primary_demote_timeout": 3000,  # (30000) the old primary's time to demote itself
}


def _pg_ctl() -> str:
    """The pg_ctl beside the server binaries (pg_autoctl finds pg_controldata and postgres next
    to it; a pg_ctl elsewhere on PATH, a wrapper or a link, would mislead it)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return found[-1] if found else _pg_bin("pg_ctl")


def pg_autoctl_binary() -> str | None:
    return shutil.which("pg_autoctl")


class Formation:
    def __init__(self) -> None:
        binary = pg_autoctl_binary()
        if binary is None:
            raise RuntimeError("pg_autoctl not found: .ci/run installs pg-auto-failover-cli")
        self.binary = binary
        self.dir = Path(tempfile.mkdtemp(prefix="pydb-paf-"))
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        self.monitor_port = _free_port()
        self.ports = {"node1": _free_port(), "node2": _free_port()}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        try:
            self._start("monitor", "monitor", self.monitor_port)
            self._wait(lambda: self._monitor_ready(), 120, "the monitor")
            with psycopg.connect(self.monitor_admin_url, autocommit=True) as conn:
                for name, value in FAST_MONITOR.items():
                    conn.execute(f"ALTER SYSTEM SET {name} = {int(value)}")
                conn.execute("SELECT pg_reload_conf()")
            self._start("node1", "postgres", self.ports["node1"])
            self._wait(lambda: self.states().get("node1") == ("single", "single"), 180, "node1 as single")
            self._start("node2", "postgres", self.ports["node2"])
            self._wait(lambda: self.primary_and_secondary() is not None, 300, "a primary and a secondary")
        except BaseException:
            self.destroy()
            raise

    # -- processes ---------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "XDG_CONFIG_HOME": str(self.dir / "config"),
            "XDG_DATA_HOME": str(self.dir / "data"),
            "XDG_RUNTIME_DIR": str(self.dir / "run"),
            "PGHOST": "/var/run/postgresql" if os.path.isdir("/var/run/postgresql") else str(self.dir),
        }

    def _start(self, name: str, kind: str, port: int) -> None:
        argv = [
            self.binary, "create", kind, "--pgctl", _pg_ctl(), "--pgdata", str(self.dir / name),
            "--pgport", str(port), "--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl", "--run",
        ]  # fmt: skip
        if kind == "postgres":
            argv += ["--monitor", self.monitor_url, "--name", name]
        if self._as_postgres:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        log = open(self.dir / f"{name}.log", "ab")  # noqa: SIM115 (the process writes it until it ends)
        # A session of its own: crash_primary kills the keeper and its PostgreSQL together.
        self.procs[name] = subprocess.Popen(
            argv, env=self._env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()

    def crash_primary(self) -> str:
        """Kill the primary's keeper and PostgreSQL at once (SIGKILL to its process group); its name."""
        found = self.primary_and_secondary()
        assert found is not None, self.states()
        primary = found[0]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.procs[primary].pid, signal.SIGKILL)
        self.procs[primary].wait(timeout=10)
        # A postmaster that outlived its keeper (it should not: same process group) is stopped too.
        with contextlib.suppress(subprocess.CalledProcessError):
            argv = [_pg_bin("pg_ctl"), "-D", str(self.dir / primary), "-m", "immediate", "-w", "stop"]
            if self._as_postgres:
                argv = ["runuser", "-u", "postgres", "--", *argv]
            subprocess.run(argv, check=True, capture_output=True)
        return primary

    def destroy(self) -> None:
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        for name in ("node1", "node2", "monitor"):
            if (self.dir / name / "postmaster.pid").exists():
                argv = [_pg_bin("pg_ctl"), "-D", str(self.dir / name), "-m", "immediate", "-w", "stop"]
                if self._as_postgres:
                    argv = ["runuser", "-u", "postgres", "--", *argv]
                subprocess.run(argv, capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- state -------------------------------------------------------------------------------

    @property
    def monitor_url(self) -> str:
        return f"postgres://autoctl_node@127.0.0.1:{self.monitor_port}/pg_auto_failover?sslmode=disable"

    @property
    def monitor_admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.monitor_port}/pg_auto_failover"

    @property
    def multi_host_url(self) -> str:
        """Both data nodes; libpq keeps the one that accepts writes."""
        ports = ",".join(str(p) for p in self.ports.values())
        return (
            f"host=127.0.0.1,127.0.0.1 port={ports} user=postgres dbname=postgres "
            "target_session_attrs=read-write connect_timeout=2"
        )

    def _monitor_ready(self) -> bool:
        try:
            with psycopg.connect(self.monitor_admin_url, connect_timeout=2) as conn:
                return (
                    conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'pgautofailover'").fetchone() is not None
                )
        except psycopg.Error:
            return False

    def states(self) -> dict[str, tuple[str, str]]:
        """Each node's (reported state, goal state) as the monitor has them."""
        with psycopg.connect(self.monitor_admin_url, connect_timeout=2) as conn:
            rows = conn.execute(
                "SELECT nodename, reportedstate::text, goalstate::text FROM pgautofailover.node"
            ).fetchall()
        return {name: (reported, goal) for name, reported, goal in rows}

    def primary_and_secondary(self) -> tuple[str, str] | None:
        states = self.states()
        primary = [n for n, s in states.items() if s == ("primary", "primary")]
        secondary = [n for n, s in states.items() if s == ("secondary", "secondary")]
        return (primary[0], secondary[0]) if primary and secondary else None

    def _wait(self, done: object, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(psycopg.Error):
                if done():  # type: ignore[operator]
                    return
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"pg_autoctl {name} exited: {(self.dir / f'{name}.log').read_text()[-2000:]}")
            time.sleep(0.5)  # polling the monitor's state, bounded by the deadline
        raise TimeoutError(f"pg_auto_failover: no {what} within {timeout} s: {self.states()}")


@contextlib.contextmanager
def formation() -> Iterator[Formation]:
    f = Formation()
    try:
        yield f
    finally:
        f.destroy()
