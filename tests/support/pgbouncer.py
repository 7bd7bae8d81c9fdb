"""A real PgBouncer for tests (the Debian package, installed by .ci/run): a process of its own on
a free port with a generated ini file, in front of any PostgreSQL (the scratch database's server
or a Cluster). Every database name is forwarded (`* = host=... port=...`), so a scratch database
is reachable through it by name. `restart()` kills it as a crash or a redeploy would and starts a
new process on the same port. Run as the `postgres` user when we are root (PgBouncer refuses to
run as root)."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from support.pg import _free_port

#: Users the test servers connect as (trust: the auth file only has to name them).
USERS = ("postgres", "pydb_task_service")


def pgbouncer_binary() -> str | None:
    return shutil.which("pgbouncer") or next(
        (p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.path.exists(p)), None
    )


class PgBouncer:
    """One pgbouncer process in `mode` (`transaction` or `session`) in front of `server_url`'s
    host and port."""

    def __init__(self, server_url: str, mode: str = "transaction", pool_size: int = 20) -> None:
        binary = pgbouncer_binary()
        if binary is None:
            raise RuntimeError("pgbouncer not found: .ci/run installs the Debian package")
        self.binary = binary
        target = conninfo_to_dict(server_url)
        self.dir = Path(tempfile.mkdtemp(prefix="pydb-pgbouncer-"))
        self.port = _free_port()
        self.mode = mode
        self._as_postgres = os.geteuid() == 0
        (self.dir / "users.txt").write_text("".join(f'"{u}" ""\n' for u in USERS))
        ini = f"""[databases]
* = host={target.get("host", "127.0.0.1")} port={target.get("port", 5432)}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {self.dir}/users.txt
admin_users = postgres
pool_mode = {mode}
default_pool_size = {pool_size}
max_client_conn = 500
server_reset_query = DISCARD ALL
ignore_startup_parameters = extra_float_digits,options
logfile = {self.dir}/pgbouncer.log
pidfile = {self.dir}/pgbouncer.pid
"""
        self.ini = self.dir / "pgbouncer.ini"
        self.ini.write_text(ini)
        if self._as_postgres:
            pw = pwd.getpwnam("postgres")
            for path in (self.dir, *self.dir.iterdir()):
                os.chown(path, pw.pw_uid, pw.pw_gid)
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self, timeout: float = 20.0) -> None:
        argv = [self.binary, str(self.ini)]
        if self._as_postgres:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        while True:  # until it accepts connections on its port
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"pgbouncer exited: {self.log()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"pgbouncer did not listen on {self.port}: {self.log()}")
            time.sleep(0.02)  # polling the port, bounded by the deadline

    def stop(self) -> None:
        """Immediate shutdown (SIGTERM): every client and server connection is cut."""
        if self.proc is None:
            return
        # runuser forwards the signal to pgbouncer
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def url(self, database_url: str) -> str:
        """`database_url` (its dbname and user) through this PgBouncer."""
        parts = {k: str(v) for k, v in conninfo_to_dict(database_url).items() if v is not None}
        parts.update(host="127.0.0.1", port=str(self.port))
        return make_conninfo("", **parts)

    def log(self) -> str:
        path = self.dir / "pgbouncer.log"
        return path.read_text() if path.exists() else ""

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def pgbouncer(server_url: str, mode: str = "transaction", pool_size: int = 20) -> Iterator[PgBouncer]:
    bouncer = PgBouncer(server_url, mode, pool_size)
    try:
        yield bouncer
    finally:
        bouncer.destroy()
