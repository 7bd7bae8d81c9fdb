"""A primary and a hot standby for tests: streaming replication between two throwaway clusters
(tests/support/pg.py's `Cluster`), the standby made by `pg_basebackup -R` (which writes `standby.signal`
and `primary_conninfo`), optionally synchronous. `fail_over()` kills the primary the way a
crash would (`pg_ctl stop -m immediate`) and promotes the standby. `log_statements` makes each node log every statement it is sent
(`log_statement=all`, as JSON lines), so a test can read which statements a role ran on which
node: the evidence of where the server's queries went."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg

from support.pg import Cluster, _free_port, _pg_bin

STANDBY_NAME = "pydb_standby"


class Node(Cluster):
    """A cluster of a replicated pair. Unlike tests/support/pg.py's Cluster, durable: fsync and
    synchronous_commit stay on (what is acknowledged must be on disk and, when synchronous, on the
    standby), and a primary sends WAL to its standbys. `standby_of`: a base backup of that
    running primary, instead of initdb."""

    def __init__(self, synchronous: bool = False, standby_of: Node | None = None, log_statements: bool = False) -> None:
        self._synchronous = synchronous
        self._log_statements = log_statements
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
        if self._log_statements:
            # Logged when a statement is received, before it runs: one refused (a write on a
            # standby: 25006) is logged too. Into the node's own directory outside its data
            # directory, so a base backup does not copy the primary's log into the standby's.
            opts += (
                f"-c logging_collector=on -c log_destination=jsonlog -c log_directory={self.statement_log} "
                "-c log_filename=postgresql.log -c log_statement=all"
            )
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-o", opts, "-l", str(self.dir / "log"), "-w", "start")

    def kill(self) -> None:
        """Stop at once, as a crash would: no shutdown checkpoint, clients cut off."""
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def promote(self) -> None:
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-w", "promote")

    @property
    def statement_log(self) -> Path:
        return self.dir / "statement-log"

    def statements(self, user: str, dbname: str, timeout: float = 10.0) -> list[str]:
        """Every statement `user` sent in database `dbname` so far, in order, as PostgreSQL
        received it (psycopg's placeholders already $n). Needs `log_statements`."""
        assert self._log_statements, "started without log_statements"
        # The logging collector writes a little after the backends: a marker statement sent now
        # lands after every statement logged before it (one pipe, read in order).
        marker = f"pydb-log-marker-{uuid.uuid4().hex}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"SELECT '{marker}'")
        deadline = time.monotonic() + timeout
        while True:
            records = [
                json.loads(line)
                for path in sorted(self.statement_log.glob("*.json"))
                for line in path.read_text().splitlines()
            ]
            if any(marker in r.get("message", "") for r in records):
                break
            if time.monotonic() > deadline:
                raise TimeoutError("the marker statement never reached the log")
            time.sleep(0.02)  # polling the collector's file, bounded by the deadline
        found = []
        for record in records:
            if record.get("user") != user or record.get("dbname") != dbname:
                continue
            # "statement: SQL" (simple protocol), "execute <name>: SQL" (extended: prepared or not).
            kind, _, text = record.get("message", "").partition(": ")
            if kind == "statement" or kind.startswith("execute "):
                found.append(text)
            elif "statement" in record:  # an error before execution (at parse): its statement
                found.append(record["statement"])
        return found

    def in_recovery(self) -> bool:
        with psycopg.connect(self.url, autocommit=True) as conn:
            row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
        assert row is not None
        return bool(row[0])


class ReplicatedPair:
    """A primary and its hot standby, streaming; `synchronous` makes every commit wait for the
    standby to flush it (synchronous_standby_names), so an acknowledged write survives a failover."""

    def __init__(self, synchronous: bool = False, log_statements: bool = False) -> None:
        self.primary = Node(synchronous=synchronous, log_statements=log_statements)
        try:
            self.standby = Node(standby_of=self.primary, log_statements=log_statements)
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
def replicated_pair(synchronous: bool = False, log_statements: bool = False) -> Iterator[ReplicatedPair]:
    pair = ReplicatedPair(synchronous=synchronous, log_statements=log_statements)
    try:
        yield pair
    finally:
        pair.destroy()
