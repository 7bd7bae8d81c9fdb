"""What every pooled session gets when it is opened, and how the server adapts to a connection
pooler (PgBouncer, or any proxy) between it and PostgreSQL (docs/deploy.md, "Behind PgBouncer").

psycopg prepares a statement server-side (the generated handlers ask for it at once, `prepare=
True`): the prepared statement lives in the PostgreSQL session. Behind a pooler in transaction
mode consecutive transactions of one client connection run on different server sessions, so a
statement prepared on one session is missing on the next (26000) or a second client prepares
the same name on a session that has it (42P05), and the queue stops. `DATABASE_PREPARE` says
what to do: `on` (always prepare: a direct connection, or a pooler that tracks prepared
statements itself, PgBouncer >= 1.21 with `max_prepared_statements`), `off` (never:
`prepare_threshold=None`, every statement is parsed and planned per execution), or `auto` (the
default): prepare unless the connection goes through a pooler. A pooler answers cancel requests
itself, so it gives its clients a backend key of its own: the process id in the connection's key
data (`conn.info.backend_pid`) is then not the server process that runs its statements
(`pg_backend_pid()`). That one comparison, made once per new connection in the statement that
applies the session settings, is the detection.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from psycopg import AsyncConnection

log = logging.getLogger("pydb.server")

PREPARE_MODES = ("auto", "on", "off")

Configure = Callable[[AsyncConnection[Any]], Awaitable[None]]


def behind_pooler(conn: AsyncConnection[Any], server_pid: int) -> bool:
    """Whether `conn` reaches PostgreSQL through a pooler: its key data names another process
    than the one that answered `pg_backend_pid()` (`server_pid`)."""
    return conn.info.backend_pid != server_pid


def session_setup(lock_timeout: float, prepare: str = "auto", listen_url: bool = False) -> Configure | None:
    """The pool's `configure` hook: settings every pooled session gets once, when it is opened;
    None when there is nothing to do.

    - `lock_timeout` (seconds; 0: none) bounds each wait for a lock (a row another transaction
      holds): past it the statement fails with 55P03, answered ABORTED "row busy", and its
      connection goes back to the pool instead of being tied up for as long as the other
      transaction lasts. Behind a pooler in transaction mode a session setting reaches only the
      server session that ran it: set it on the role there (`ALTER ROLE ... SET lock_timeout`).
    - `prepare` (`PREPARE_MODES`, above): whether the connection prepares statements.
    - `listen_url`: whether listen streams have a connection string of their own
      (DATABASE_LISTEN_URL); if not, a detected pooler is reported as a risk to them.
    """
    if prepare not in PREPARE_MODES:
        raise ValueError(f"prepare must be one of {PREPARE_MODES}, not {prepare!r}")
    columns = []
    params: list[str] = []
    if prepare == "auto":
        columns.append("pg_backend_pid()")
    if lock_timeout > 0:
        columns.append("set_config('lock_timeout', %s, false)")
        params.append(f"{round(lock_timeout * 1000)}ms")
    if not columns and prepare != "off":
        return None
    statement = "SELECT " + ", ".join(columns) if columns else ""
    reported: set[str] = set()  # where this pool found a pooler, said once

    async def configure(conn: AsyncConnection[Any]) -> None:
        if prepare == "off":
            conn.prepare_threshold = None
        if not statement:
            return
        cur = await conn.execute(statement, params, prepare=False)
        row = await cur.fetchone()
        if prepare == "auto" and row is not None and behind_pooler(conn, int(row[0])):
            conn.prepare_threshold = None
            _report_once(conn, listen_url, reported)

    return configure


def _report_once(conn: AsyncConnection[Any], listen_url: bool, reported: set[str]) -> None:
    where = f"{conn.info.host}:{conn.info.port}"
    if where in reported:
        return
    reported.add(where)
    log.info("event=pooler_detected at=%s prepared_statements=off", where)
    if not listen_url:
        log.warning(
            'event=pooler_detected at=%s listen=through_pooler hint="listen streams need a session: set '
            'DATABASE_LISTEN_URL to PostgreSQL itself or to a session-mode pool"',
            where,
        )
