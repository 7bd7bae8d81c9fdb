"""The generated server's settings: every one a flag and an environment variable (the flag
wins), parsed into a `Config`; a bad value is a usage error naming the setting. docs/server.md
lists them all; server.py serves with them."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from .database import (
    DEFAULT_MAX_ANSWER_BYTES,
    DEFAULT_UNSENT_ANSWER_BYTES,
    DEFAULT_UNSENT_ANSWER_BYTES_PER_CONNECTION,
)
from .pooling import PREPARE_MODES

LOG_LEVELS = ("debug", "info", "warning", "error")
#: How much of a request body gRPC reads before the handler asks for it (its HTTP/2 stream window).
LOOKAHEAD_BYTES = 64 * 1024


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
    #: The server pings each connection this often; one that leaves a ping unanswered for
    #: `keepalive_timeout` seconds is closed, its calls cancelled (a caller that stopped reading).
    keepalive_seconds: float = 30.0
    keepalive_timeout_seconds: float = 10.0
    #: Bytes of answers handed to gRPC and not yet delivered, in all and per connection
    #: (admission.AnswerBudget): past either, a call is answered UNAVAILABLE before COMMIT.
    max_unsent_answer_bytes: int = DEFAULT_UNSENT_ANSWER_BYTES
    max_unsent_answer_bytes_per_connection: int = DEFAULT_UNSENT_ANSWER_BYTES_PER_CONNECTION


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
            "--keepalive-seconds",
            "KEEPALIVE_SECONDS",
            "30",
            "float",
            "the server pings every connection this often (HTTP/2 keepalive)",
        ),
        _Setting(
            "--keepalive-timeout-seconds",
            "KEEPALIVE_TIMEOUT_SECONDS",
            "10",
            "float",
            "a connection that leaves a ping unanswered this long is closed and its calls cancelled "
            "(a caller that stopped reading its answers)",
        ),
        _Setting(
            "--max-unsent-answer-bytes",
            "MAX_UNSENT_ANSWER_BYTES",
            str(DEFAULT_UNSENT_ANSWER_BYTES),
            "int",
            "bytes of answers waiting for their callers to read them, at most; past it a call is answered "
            "UNAVAILABLE (retry) before it commits",
        ),
        _Setting(
            "--max-unsent-answer-bytes-per-connection",
            "MAX_UNSENT_ANSWER_BYTES_PER_CONNECTION",
            str(DEFAULT_UNSENT_ANSWER_BYTES_PER_CONNECTION),
            "int",
            "the same cap for the answers of one client connection",
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
    for name in ("max_unsent_answer_bytes", "max_unsent_answer_bytes_per_connection"):
        if values[name] < values["max_send_message_bytes"]:
            p.error(f"--{name.replace('_', '-')} must be at least --max-send-message-bytes (one answer must fit)")
    for name in ("pool_timeout", "grace_seconds", "health_interval", "keepalive_seconds", "keepalive_timeout_seconds"):
        if values[name] < 0 or (name != "grace_seconds" and values[name] == 0):
            p.error(f"--{name.replace('_', '-')} must be positive")
    for name in ("database_url", "database_replica_url", "database_listen_url"):
        try:
            conninfo_to_dict(values[name])
        except psycopg.ProgrammingError:
            env_name = name.upper()
            p.error(f"{env_name} / --{name.replace('_', '-')} is not a valid libpq connection string (value not shown)")
    return Config(**values)
