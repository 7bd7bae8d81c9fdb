"""The generic half of a generated server: configuration, pool, health, reflection, TLS,
graceful shutdown, logging. A generated `*_pydb_server.py` supplies `register` and its
service names. docs/server.md describes every setting."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import psycopg
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from . import auth, metrics, trace
from .database import DEFAULT_MAX_ANSWER_BYTES, configure_max_answer, configure_row_wait, drain
from .decoding import DecodeGuard
from .descriptors import public_pool
from .errors import set_log_detail
from .listen import close_streams, configure_streams
from .logfmt import LogfmtFormatter as LogfmtFormatter  # re-exported: the servers' log format
from .logfmt import configure_logging
from .logfmt import quote as _quote
from .pooling import PREPARE_MODES, session_setup

log = logging.getLogger("pydb.server")

# (server, the primary's pool, the replica's pool or None): adds the generated services.
Register = Callable[[grpc.aio.Server, AsyncConnectionPool[Any], AsyncConnectionPool[Any] | None], None]

LOG_LEVELS = ("debug", "info", "warning", "error")


@dataclass(frozen=True)
class Config:
    database_url: str
    listen_addr: str
    pool_min: int
    pool_max: int
    tls_cert: str | None
    tls_key: str | None
    reflection: bool
    log_level: str
    grace_seconds: float
    health_interval: float
    #: How long a call waits for a pooled connection before UNAVAILABLE (its deadline may cut it shorter).
    pool_timeout: float = 5.0
    # Security settings (docs/security.md); the defaults are the safe ones.
    tls_client_ca: str | None = None
    tls_client_names: str | None = None
    auth_tokens: str | None = None
    auth_tokens_file: str | None = None
    health_open: bool = True
    allow_unauthenticated: bool = False
    reflection_options: bool = False
    lock_timeout: float = 1.0
    max_listen_streams: int = 1000
    log_database_detail: bool = False
    #: A hot standby (or a load balancer over several) for the read-only RPCs; "" means none.
    database_replica_url: str = ""
    max_send_message_bytes: int = DEFAULT_MAX_ANSWER_BYTES
    #: Where LISTEN streams connect; "" means DATABASE_URL (docs/deploy.md, "Behind PgBouncer").
    database_listen_url: str = ""
    #: Server-side prepared statements: auto (off behind a detected pooler), on, off (pooling.py).
    database_prepare: str = "auto"
    #: host:port of the Prometheus /metrics endpoint; "" means none (docs/operations.md).
    metrics_addr: str = ""
    #: An OpenTelemetry SERVER span per RPC (needs opentelemetry-api; the SDK is the deployment's).
    tracing: bool = False


@dataclass(frozen=True)
class _Setting:
    flag: str
    env: str
    default: str | None
    kind: str  # str | int | float | bool | level | path | prepare
    help: str


# Every setting is a flag and an environment variable; the flag wins.
SETTINGS = (
    _Setting("--database-url", "DATABASE_URL", "", "str", "PostgreSQL connection string (libpq defaults when empty)"),
    _Setting(
        "--database-replica-url",
        "DATABASE_REPLICA_URL",
        "",
        "str",
        "PostgreSQL connection string of a hot standby: the read-only RPCs run there (docs/deploy.md)",
    ),
    _Setting(
        "--database-listen-url",
        "DATABASE_LISTEN_URL",
        "",
        "str",
        "PostgreSQL connection string for LISTEN streams (a session: PostgreSQL itself or a session-mode pool) "
        "when DATABASE_URL is a transaction-mode pooler",
    ),
    _Setting(
        "--database-prepare",
        "DATABASE_PREPARE",
        "auto",
        "prepare",
        "server-side prepared statements: on, off, or auto (off when the connection goes through a pooler)",
    ),
    _Setting("--listen-addr", "LISTEN_ADDR", "127.0.0.1:50051", "str", "host:port to serve on"),
    _Setting("--pool-min", "POOL_MIN", "1", "int", "connections kept open"),
    _Setting("--pool-max", "POOL_MAX", "10", "int", "connections at most"),
    _Setting(
        "--pool-timeout", "POOL_TIMEOUT", "5", "float", "seconds a call waits for a free connection before UNAVAILABLE"
    ),
    _Setting(
        "--tls-cert", "TLS_CERT", None, "path", "PEM certificate chain; with --tls-key the server speaks TLS only"
    ),
    _Setting("--tls-key", "TLS_KEY", None, "path", "PEM private key for --tls-cert"),
    _Setting("--reflection", "REFLECTION", "true", "bool", "gRPC server reflection: true or false"),
    _Setting("--log-level", "LOG_LEVEL", "info", "level", "debug logs one line per call; errors are always logged"),
    _Setting(
        "--grace-seconds",
        "SHUTDOWN_GRACE_SECONDS",
        "10",
        "float",
        "time in-flight calls get to finish on SIGTERM/SIGINT",
    ),
    _Setting("--health-interval", "HEALTH_INTERVAL_SECONDS", "1", "float", "seconds between database health probes"),
    *(
        # Security (docs/security.md).
        _Setting(
            "--tls-client-ca",
            "TLS_CLIENT_CA",
            None,
            "path",
            "PEM CA certificate(s): with TLS, clients must present a certificate signed by one (mTLS)",
        ),
        _Setting(
            "--tls-client-names",
            "TLS_CLIENT_NAMES",
            None,
            "str",
            "with --tls-client-ca: accept only client certificates whose CN or a subjectAltName is one of these "
            "(comma-separated)",
        ),
        _Setting(
            "--auth-tokens",
            "AUTH_TOKENS",
            None,
            "str",
            "bearer tokens accepted (comma-separated; prefer the variable or a file: flags show in `ps`)",
        ),
        _Setting("--auth-tokens-file", "AUTH_TOKENS_FILE", None, "path", "file of bearer tokens, one a line"),
        _Setting("--health-open", "HEALTH_OPEN", "true", "bool", "health checks need no bearer token"),
        _Setting(
            "--allow-unauthenticated",
            "ALLOW_UNAUTHENTICATED",
            "false",
            "bool",
            "serve a non-loopback address with neither tokens nor mTLS (else the server refuses to start)",
        ),
        _Setting(
            "--reflection-options",
            "REFLECTION_OPTIONS",
            "false",
            "bool",
            "reflection serves the pydb options (every RPC's SQL); off, they are stripped",
        ),
        _Setting(
            "--lock-timeout",
            "LOCK_TIMEOUT_SECONDS",
            "1",
            "float",
            'longest wait for a locked row before ABORTED "row busy" (0: no limit)',
        ),
        _Setting(
            "--max-listen-streams",
            "MAX_LISTEN_STREAMS",
            "1000",
            "int",
            "concurrent LISTEN streams at most; more are refused with RESOURCE_EXHAUSTED",
        ),
        _Setting(
            "--log-database-detail",
            "LOG_DATABASE_DETAIL",
            "false",
            "bool",
            "log PostgreSQL's messages and DETAIL in full (they may quote row contents)",
        ),
        _Setting(
            "--max-send-message-bytes",
            "MAX_SEND_MESSAGE_BYTES",
            str(DEFAULT_MAX_ANSWER_BYTES),
            "int",
            "largest answer sent (default: gRPC's client receive limit); a request's max_bytes budget is capped at it",
        ),
    ),
    *(
        # Observability (docs/operations.md).
        _Setting(
            "--metrics-addr",
            "METRICS_ADDR",
            "",
            "str",
            "host:port to serve Prometheus metrics on (/metrics, plain HTTP: keep it on a private address); "
            "empty: no metrics",
        ),
        _Setting(
            "--tracing",
            "TRACING",
            "false",
            "bool",
            "an OpenTelemetry span per RPC, continuing the caller's traceparent (needs opentelemetry-api)",
        ),
    ),
)

# Settings whose value is never echoed in an error (it may hold a password or a token).
_SECRET_SETTINGS = ("DATABASE_URL", "DATABASE_REPLICA_URL", "DATABASE_LISTEN_URL", "AUTH_TOKENS")

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _parse_bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {raw!r}")


def _parse_level(raw: str) -> str:
    value = raw.strip().lower()
    if value not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(LOG_LEVELS)}, got {raw!r}")
    return value


def _parse_prepare(raw: str) -> str:
    value = raw.strip().lower()
    if value not in PREPARE_MODES:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(PREPARE_MODES)}, got {raw!r}")
    return value


_TYPES: dict[str, Callable[[str], Any]] = {
    "str": str,
    "path": str,
    "int": int,
    "float": float,
    "bool": _parse_bool,
    "level": _parse_level,
    "prepare": _parse_prepare,
}


def parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Serve the SQL-annotated gRPC services generated by protoc-gen-pydb, with the gRPC health "
        "service (NOT_SERVING while the database is unreachable) and, unless turned off, server reflection.",
        epilog="Each flag can also be set by the environment variable in brackets; a flag wins over its variable. "
        "SIGTERM or SIGINT: stop accepting calls, let in-flight ones finish within the grace period, close the pool.",
    )
    for s in SETTINGS:
        shown = "" if s.default in (None, "") else f", default {s.default}"
        p.add_argument(
            s.flag,
            metavar=s.env if s.kind != "bool" else "BOOL",
            type=_TYPES[s.kind],
            help=f"{s.help} [env {s.env}{shown}]",
        )
    p.add_argument("--no-reflection", dest="reflection", action="store_false", help="same as --reflection=false")
    p.set_defaults(reflection=None)  # unset: REFLECTION decides
    return p


def parse_config(argv: Sequence[str] | None, prog: str, env: Mapping[str, str] | None = None) -> Config:
    """Flags over environment over defaults; a bad value, from either, exits with a usage error."""
    p = parser(prog)
    return config_from_args(p, p.parse_args(argv), env)


def config_from_args(p: argparse.ArgumentParser, a: argparse.Namespace, env: Mapping[str, str] | None = None) -> Config:
    """The Config of flags already parsed by `p` (a `parser(...)`, possibly with arguments of its
    own, as `pydb.serve` adds its modules) over the environment; a bad value exits via `p.error`."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    for s in SETTINGS:
        dest = s.flag[2:].replace("-", "_")
        value = getattr(a, dest)
        if value is None:
            raw = env.get(s.env)
            if raw is None or (raw == "" and s.kind != "str"):
                raw = s.default
            if raw is not None:
                try:
                    value = _TYPES[s.kind](raw)
                except (ValueError, argparse.ArgumentTypeError) as err:
                    shown = "<hidden>" if s.env in _SECRET_SETTINGS else repr(raw)
                    p.error(f"environment variable {s.env}={shown} is not valid for {s.flag}: {err}")
        values[dest] = value
    if bool(values["tls_cert"]) != bool(values["tls_key"]):
        p.error("--tls-cert and --tls-key go together")
    if values["pool_min"] < 0 or values["pool_max"] < max(values["pool_min"], 1):
        p.error("need 0 <= --pool-min <= --pool-max and --pool-max >= 1")
    if values["tls_client_ca"] and not values["tls_cert"]:
        p.error("--tls-client-ca needs --tls-cert and --tls-key (client certificates are checked by TLS)")
    if values["tls_client_names"] and not values["tls_client_ca"]:
        p.error("--tls-client-names needs --tls-client-ca")
    if values["lock_timeout"] < 0 or values["max_listen_streams"] < 1:
        p.error("need --lock-timeout >= 0 and --max-listen-streams >= 1")
    if values["metrics_addr"] and not values["metrics_addr"].rpartition(":")[2].isdigit():
        p.error("--metrics-addr must be host:port")
    if not 1024 <= values["max_send_message_bytes"] < 2**31:
        p.error("--max-send-message-bytes must be at least 1024 and below 2**31")
    for name in ("pool_timeout", "grace_seconds", "health_interval"):
        if values[name] < 0 or (name != "grace_seconds" and values[name] == 0):
            p.error(f"--{name.replace('_', '-')} must be positive")
    for name in ("database_url", "database_replica_url", "database_listen_url"):
        try:
            conninfo_to_dict(values[name])
        except psycopg.ProgrammingError:
            env_name = name.upper()
            p.error(f"{env_name} / --{name.replace('_', '-')} is not a valid libpq connection string (value not shown)")
    return Config(**values)


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
    window; the streams one connection may have open."""
    return [
        ("grpc.max_send_message_length", cfg.max_send_message_bytes),
        ("grpc.http2.lookahead_bytes", 64 * 1024),
        ("grpc.http2.bdp_probe", 0),
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
