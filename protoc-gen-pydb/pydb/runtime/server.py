"""The generic half of a generated server: configuration, pool, health, reflection, TLS,
graceful shutdown, logging. A generated `*_pydb_server.py` supplies `register` and its
service names. docs/server.md describes every setting."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any

import grpc
import psycopg
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from . import auth, metrics, trace
from .config import LOG_LEVELS as LOG_LEVELS  # re-exported: the settings, parsed (config.py)
from .config import LOOKAHEAD_BYTES
from .config import SETTINGS as SETTINGS
from .config import Config as Config
from .config import config_from_args as config_from_args
from .config import parse_config as parse_config
from .config import parser as parser
from .database import configure_answer_budget, configure_max_answer, configure_row_wait, drain
from .decoding import DecodeGuard
from .descriptors import public_pool
from .errors import set_log_detail
from .listen import close_streams, configure_streams
from .logfmt import LogfmtFormatter as LogfmtFormatter  # re-exported: the servers' log format
from .logfmt import configure_logging
from .logfmt import quote as _quote
from .pooling import session_setup

log = logging.getLogger("pydb.server")

# (server, the primary's pool, the replica's pool or None): adds the generated services.
Register = Callable[[grpc.aio.Server, AsyncConnectionPool[Any], AsyncConnectionPool[Any] | None], None]


def redact_dsn(dsn: str) -> str:
    """A connection string fit for logs: host, port, dbname and user; never the password."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<unparseable DATABASE_URL>"
    shown = {k: v for k, v in parts.items() if k in ("host", "port", "dbname", "user")}
    return " ".join(f"{k}={v}" for k, v in sorted(shown.items())) or "<libpq defaults>"


async def database_ok(pool: AsyncConnectionPool[Any], timeout: float = 2.0) -> str | None:
    """None when a pooled connection answers `SELECT 1`, else why not.

    A probe whose connection was lost is made once more after the pool has checked its idle
    connections: after a restart of the database, or of a pooler in front of it, every idle
    connection is broken, and each would otherwise fail one probe (NOT_SERVING for as many
    intervals while the database is back)."""
    err = await _probe(pool, timeout)
    if isinstance(err, psycopg.OperationalError) and not isinstance(err, PoolTimeout):
        await pool.check()
        err = await _probe(pool, timeout)
    return None if err is None else f"{type(err).__name__}: {err}"


async def _probe(pool: AsyncConnectionPool[Any], timeout: float) -> Exception | None:
    try:
        async with pool.connection(timeout=timeout) as conn:
            await conn.execute("SELECT 1")
        return None
    except Exception as err:
        return err


async def watch_health(
    pool: AsyncConnectionPool[Any], servicer: HealthServicer, names: Sequence[str], interval: float
) -> None:
    """Keep the health service in step with the database: NOT_SERVING while it cannot be reached."""
    last: int | None = None
    while True:
        problem = await database_ok(pool, timeout=max(interval, 1.0))
        status = (
            health_pb2.HealthCheckResponse.SERVING if problem is None else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        if status != last:
            if problem is None:
                log.info("event=health status=SERVING database=reachable")
            else:
                log.error("event=health status=NOT_SERVING database=unreachable error=%s", _quote(problem))
            for name in ("", *names):
                await servicer.set(name, status)
            last = status
        await asyncio.sleep(interval)


def make_pool(cfg: Config, url: str | None = None, name: str = "pydb") -> AsyncConnectionPool[Any]:
    """A pool on `url` (default: the primary's DATABASE_URL). A libpq multi-host URL
    (`host=a,b target_session_attrs=read-write`) makes every new connection find the current
    primary, so after a failover the pool's replacements for its broken connections go there."""
    return AsyncConnectionPool(
        cfg.database_url if url is None else url,
        min_size=cfg.pool_min,
        max_size=cfg.pool_max,
        timeout=cfg.pool_timeout,
        # Single-statement handlers need no transaction block: autocommit saves two round trips.
        kwargs={"autocommit": True},
        open=False,
        # A connection attempt backs off exponentially; giving up after 10 s resets the backoff,
        # so a database back from a long outage is found again within seconds, not minutes.
        reconnect_timeout=10.0,
        name=name,
        configure=session_setup(cfg.lock_timeout, cfg.database_prepare, listen_url=bool(cfg.database_listen_url)),
    )


async def serve(
    cfg: Config,
    register: Register,
    service_names: Sequence[str],
    started: Callable[[int], None] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Run until SIGTERM/SIGINT (or `stop` is set), then shut down gracefully: health goes
    NOT_SERVING, no new calls are accepted, in-flight calls get `grace_seconds` to finish
    (then are cancelled, which cancels their statements), and the pool is closed."""
    interceptors = server_interceptors(cfg)  # first: a refused configuration opens nothing
    pool = make_pool(cfg)
    replica = make_pool(cfg, cfg.database_replica_url, "pydb-replica") if cfg.database_replica_url else None
    pools = (pool,) if replica is None else (pool, replica)
    stop_metrics = observe(cfg, pools)
    configure_streams(pool, cfg.max_listen_streams, cfg.database_listen_url)
    configure_max_answer(pool, cfg.max_send_message_bytes)
    configure_row_wait(pool, cfg.lock_timeout)
    configure_answer_budget(pool, cfg.max_unsent_answer_bytes, cfg.max_unsent_answer_bytes_per_connection)
    set_log_detail(cfg.log_database_detail)
    await pool.open(wait=False)
    if replica is not None:
        await replica.open(wait=False)
    grpc_server = grpc.aio.server(interceptors=interceptors, options=grpc_options(cfg))
    register(grpc_server, pool, replica)
    health_servicer = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, grpc_server)
    for name in ("", *service_names):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
    if cfg.reflection:
        enable_reflection(cfg, service_names, grpc_server)
    if cfg.tls_cert and cfg.tls_key:
        creds = auth.server_credentials(cfg.tls_cert, cfg.tls_key, cfg.tls_client_ca)
        port = grpc_server.add_secure_port(cfg.listen_addr, creds)
    else:
        port = grpc_server.add_insecure_port(cfg.listen_addr)
    await grpc_server.start()
    log.info(
        "event=serving services=%s addr=%s port=%d tls=%s auth=%s reflection=%s database=%s replica=%s",
        ",".join(service_names),
        cfg.listen_addr,
        port,
        str(bool(cfg.tls_cert)).lower(),
        authentication(cfg),
        str(cfg.reflection).lower(),
        _quote(redact_dsn(cfg.database_url)),
        _quote(redact_dsn(cfg.database_replica_url)) if replica is not None else "none",
    )
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    handled: list[signal.Signals] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
            handled.append(sig)
    watcher = asyncio.create_task(watch_health(pool, health_servicer, service_names, cfg.health_interval))
    try:
        if started is not None:
            started(port)
        await stop.wait()
    finally:
        try:
            log.info("event=shutdown grace_seconds=%.1f", cfg.grace_seconds)
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            await health_servicer.enter_graceful_shutdown()
            close_streams(pool)  # LISTEN streams never end by themselves: end them now
            await grpc_server.stop(cfg.grace_seconds)
            for each in pools:
                await drain(each, timeout=5.0)  # calls cut off by the grace period: cancel their statements
                await each.close()
            stop_metrics()
            log.info("event=stopped")
        finally:
            # Only now: a repeated SIGTERM/SIGINT (a supervisor, `make` passing it on) must not
            # kill the process halfway through its graceful shutdown.
            for sig in handled:
                loop.remove_signal_handler(sig)


def grpc_options(cfg: Config) -> list[tuple[str, int]]:
    """gRPC's own limits (docs/server.md, "Limits"): the largest answer sent; how much of a
    request body the transport reads ahead of the handler (a refused call's body is never
    received whole: auth.py answers before reading it), with no bandwidth probing growing that
    window; the keepalive that drops connections whose caller stopped reading."""
    return [
        ("grpc.max_send_message_length", cfg.max_send_message_bytes),
        ("grpc.http2.lookahead_bytes", LOOKAHEAD_BYTES),
        ("grpc.http2.bdp_probe", 0),
        # A caller that stops reading stops answering pings too: its connection is closed and
        # the answers buffered for it are freed.
        ("grpc.keepalive_time_ms", int(cfg.keepalive_seconds * 1000)),
        ("grpc.keepalive_timeout_ms", int(cfg.keepalive_timeout_seconds * 1000)),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
    ]


def observe(cfg: Config, pools: Sequence[AsyncConnectionPool[Any]]) -> Callable[[], None]:
    """Metrics and tracing as configured (metrics.py, tracing.py); returns what stops the
    metrics endpoint. Both off: nothing is imported or installed."""
    if not cfg.metrics_addr and not cfg.tracing:
        return lambda: None
    registry, stop = None, None
    if cfg.metrics_addr:
        registry, port, stop = metrics.start_metrics_server(cfg.metrics_addr, pools)
        log.info("event=metrics addr=%s port=%d", cfg.metrics_addr, port)
    if cfg.tracing:
        from . import tracing

        trace.use_current_span(tracing.current_traceparent)
    metrics.configure_observer(pools, metrics.Observer(registry, cfg.tracing))

    def stopped() -> None:
        if stop is not None:
            stop()
        if cfg.tracing:
            trace.use_current_span(None)

    return stopped


def authentication(cfg: Config) -> str:
    """How callers are authenticated, for the log: `mtls`, `token`, both (`mtls+token`) or `none`."""
    kinds = [k for k, on in (("mtls", cfg.tls_client_ca), ("token", cfg.auth_tokens or cfg.auth_tokens_file)) if on]
    return "+".join(kinds) or "none"


def server_interceptors(cfg: Config) -> list[grpc.aio.ServerInterceptor]:  # type: ignore[type-arg]
    """Bearer-token check (when tokens are configured), then the undecodable-request guard.

    Raises `auth.UnsafeConfiguration` for a configuration the server must not start with: a
    non-loopback address with no authentication (docs/security.md), or weak tokens."""
    tokens = auth.load_tokens(cfg.auth_tokens, cfg.auth_tokens_file)
    auth.check_exposure(cfg.listen_addr, bool(tokens) or bool(cfg.tls_client_ca), cfg.allow_unauthenticated)
    chain: list[grpc.aio.ServerInterceptor] = []  # type: ignore[type-arg]
    open_methods = auth.HEALTH_METHODS if cfg.health_open else frozenset()
    if tokens:
        chain.append(auth.AuthInterceptor(tokens, open_methods=open_methods))
    names = auth.parse_list(cfg.tls_client_names or "")  # the same list syntax
    if names and cfg.tls_client_ca:
        chain.append(auth.ClientNameInterceptor(names, open_methods=open_methods))
    chain.append(DecodeGuard())
    if cfg.tracing:
        from .tracing import TracingInterceptor

        chain.insert(0, TracingInterceptor())  # outermost: a refused call is traced too
    return chain


def enable_reflection(cfg: Config, service_names: Sequence[str], grpc_server: grpc.aio.Server) -> None:
    """Server reflection over descriptors without the pydb options (the SQL), unless
    --reflection-options asks for them."""
    names = (*service_names, health.SERVICE_NAME, reflection.SERVICE_NAME)
    pool = None if cfg.reflection_options else public_pool(names)
    reflection.enable_server_reflection(names, grpc_server, pool=pool)


def main(
    argv: Sequence[str] | None,
    *,
    register: Register,
    service_names: Sequence[str],
    prog: str,
    config: Config | None = None,
) -> int:
    """Serve until SIGTERM/SIGINT; `config`, when given, is already parsed (`pydb.serve` parses its modules too)."""
    cfg = config if config is not None else parse_config(argv, prog)
    configure_logging(cfg.log_level)
    return run(cfg, register, service_names, prog)


def run(cfg: Config, register: Register, service_names: Sequence[str], prog: str) -> int:
    """`serve` until stopped: exit status 0, or 2 (a usage error, said on stderr) for a
    configuration the server refuses to start with (docs/security.md)."""
    try:
        asyncio.run(serve(cfg, register, service_names))
    except auth.UnsafeConfiguration as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    return 0
