"""A PostgreSQL for tests: DATABASE_URL when set, else a throwaway cluster (initdb + pg_ctl
in a temp dir, run as the `postgres` user when we are root). Each test session gets its own
scratch database, created here and dropped at the end; nothing is written elsewhere."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from pydb.plugin.sql.schema.apply import skip_meta_lines
from pydb.plugin.sql.schema.state import State
from pydb.plugin.sql.syntax.pgparse import PgSyntaxError, parse

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "example_protos" / "generation" / "task" / "v1" / "schema.sql"
# The least-privileged role the generated server runs as (conftest.start_server connects as it).
SERVICE_ROLE_SQL = SCHEMA.with_name("service_role.sql")


def _pg_bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not candidates:
        raise RuntimeError(f"{name} not found: install PostgreSQL or set DATABASE_URL")
    return candidates[-1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """A throwaway PostgreSQL cluster; `stop()` and `start()` simulate an outage."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="pydb-pg-"))
        self.data = self.dir / "data"
        self.port = _free_port()
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        self._run(_pg_bin("initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")
        self.start()

    def _run(self, *cmd: str) -> None:
        argv = list(cmd)
        if self._as_postgres:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def start(self) -> None:
        opts = (
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-o", opts, "-l", str(self.dir / "log"), "-w", "start")

    def stop(self) -> None:
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def destroy(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def with_dbname(url: str, dbname: str) -> str:
    parts = {k: str(v) for k, v in conninfo_to_dict(url).items() if v is not None}
    parts["dbname"] = dbname
    return make_conninfo("", **parts)


def schema_statements(text: str) -> list[str]:
    """A schema file as psql applies it: psql meta-lines skipped (as the catalog skips them),
    then each statement on its own (CREATE INDEX CONCURRENTLY cannot run in the implicit
    transaction of a multi-statement text). A text PostgreSQL's parser rejects is one piece,
    so PostgreSQL reports the error."""
    text = skip_meta_lines(State(), text)
    try:
        statements = parse(text)
    except PgSyntaxError:
        return [text]
    return [text[stmt.start : stmt.end] for stmt in statements]


@contextlib.contextmanager
def scratch_database(server_url: str, schema: Path | None = SCHEMA) -> Iterator[str]:
    """Create a uniquely named database on `server_url`, apply `schema`, drop it afterwards."""
    name = f"pydb_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = with_dbname(server_url, name)
    try:
        if schema is not None:
            with psycopg.connect(url, autocommit=True) as conn:
                for statement in schema_statements(schema.read_text()):
                    conn.execute(statement)
                if schema == SCHEMA:
                    conn.execute(SERVICE_ROLE_SQL.read_text())
        yield url
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def postgres_server() -> Iterator[tuple[str, Cluster | None]]:
    """(server url, cluster) — the cluster is None when DATABASE_URL points at an existing server."""
    env = os.environ.get("DATABASE_URL")
    if env:
        yield env, None
        return
    cluster = Cluster()
    try:
        yield cluster.url, cluster
    finally:
        cluster.destroy()
