"""A primary and a hot standby for tests: streaming replication between two throwaway clusters
(tests/pg.py's `Cluster`), the standby made by `pg_basebackup -R` (which writes `standby.signal`
and `primary_conninfo`), optionally synchronous. `fail_over()` kills the primary the way a
crash would (`pg_ctl stop -m immediate`) and promotes the standby."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
from pg import Cluster, _free_port, _pg_bin

STANDBY_NAME = "pydb_standby"


class Node(Cluster):
    """A cluster of a replicated pair. Unlike tests/pg.py's Cluster, durable: fsync and
    synchronous_commit stay on (what is acknowledged must be on disk and, when synchronous, on the
    standby), and a primary sends WAL to its standbys. `standby_of`: a base backup of that
    running primary, instead of initdb."""

    def __init__(self, synchronous: bool = False, standby_of: Node | None = None) -> None:
        self._synchronous = synchronous
        if standby_of is None:
            super().__init__()  # initdb, then self.start()
            return
        self.dir = Path(tempfile.mkdtemp(prefix="pydb-pg-standby-"))
        self.data = self.dir / "data"
        self.port = _free_port()
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        source = f"host=127.0.0.1 port={standby_of.port} user=postgres application_name={STANDBY_NAME}"
        # -R: standby.signal plus primary_conninfo (with our application_name, which
        # synchronous_standby_names names) in postgresql.auto.conf.
        self._run(_pg_bin("pg_basebackup"), "-D", str(self.data), "-d", source, "-R", "-X", "stream", "--no-sync")
        self.start()

    def start(self) -> None:
        sync = f"-c synchronous_standby_names={STANDBY_NAME} " if self._synchronous else ""
        opts = (
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c max_connections=200 "
            f"-c wal_level=replica -c max_wal_senders=4 -c hot_standby=on -c wal_keep_size=256MB {sync}"
        )
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-o", opts, "-l", str(self.dir / "log"), "-w", "start")

    def kill(self) -> None:
        """Stop at once, as a crash would: no shutdown checkpoint, clients cut off."""
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def promote(self) -> None:
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-w", "promote")

    def in_recovery(self) -> bool:
        with psycopg.connect(self.url, autocommit=True) as conn:
            row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
        assert row is not None
        return bool(row[0])


class ReplicatedPair:
    """A primary and its hot standby, streaming; `synchronous` makes every commit wait for the
    standby to flush it (synchronous_standby_names), so an acknowledged write survives a failover."""

    def __init__(self, synchronous: bool = False) -> None:
        self.primary = Node(synchronous=synchronous)
        try:
            self.standby = Node(standby_of=self.primary)
            self.wait_streaming()
        except BaseException:
            self.primary.destroy()
            raise

    def wait_streaming(self, timeout: float = 30.0) -> None:
        """Until the primary reports the standby streaming (and, when synchronous, sync)."""
        deadline = time.monotonic() + timeout
        with psycopg.connect(self.primary.url, autocommit=True) as conn:
            while time.monotonic() < deadline:
                row = conn.execute(
                    "SELECT state, sync_state FROM pg_stat_replication WHERE application_name = %s", (STANDBY_NAME,)
                ).fetchone()
                if row is not None and row[0] == "streaming":
                    return
                time.sleep(0.05)  # polling a server state, bounded by the deadline
        raise TimeoutError("the standby did not start streaming")

    def wait_replayed(self, timeout: float = 30.0) -> None:
        """Until the standby has replayed everything the primary has written so far."""
        with psycopg.connect(self.primary.url, autocommit=True) as conn:
            row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        assert row is not None
        target = row[0]
        deadline = time.monotonic() + timeout
        with psycopg.connect(self.standby.url, autocommit=True) as conn:
            while time.monotonic() < deadline:
                done = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (target,)).fetchone()
                if done is not None and done[0]:
                    return
                time.sleep(0.02)  # polling a server state, bounded by the deadline
        raise TimeoutError("the standby did not catch up")

    @property
    def multi_host_url(self) -> str:
        """Both nodes, libpq picking whichever accepts writes (the primary, before and after failover)."""
        return (
            f"host=127.0.0.1,127.0.0.1 port={self.primary.port},{self.standby.port} user=postgres "
            "dbname=postgres target_session_attrs=read-write connect_timeout=2"
        )

    def destroy(self) -> None:
        for node in (self.standby, self.primary):
            with contextlib.suppress(subprocess.CalledProcessError):
                node._run(_pg_bin("pg_ctl"), "-D", str(node.data), "-m", "immediate", "-w", "stop")
            shutil.rmtree(node.dir, ignore_errors=True)


@contextlib.contextmanager
def replicated_pair(synchronous: bool = False) -> Iterator[ReplicatedPair]:
    pair = ReplicatedPair(synchronous=synchronous)
    try:
        yield pair
    finally:
        pair.destroy()
