"""What a generated server tells an operator: Prometheus metrics (`--metrics-addr`) and the
attributes of each RPC's OpenTelemetry span (`--tracing`, tracing.py).

Off by default, and then it costs nothing: `Database.run` finds no `Observer` for its pool and
skips the hook; `prometheus_client` is imported only when `--metrics-addr` is set. On, one
`observe()` call per RPC updates a counter and a histogram (and, for a database error, a
counter by SQLSTATE class); the pools' gauges are read from psycopg_pool's own statistics when
scraped (in-memory, no database round trip).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf.message import Message
from psycopg_pool import AsyncConnectionPool

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric

# Seconds: from a primary-key lookup (~0.2 ms) to a call that waited out a pool timeout.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Observer:
    """Per-RPC metrics (when `registry` is given) and span attributes (when `tracing`)."""

    def __init__(self, registry: CollectorRegistry | None, tracing: bool) -> None:
        self.tracing = tracing
        self._metrics = registry is not None
        if registry is not None:
            from prometheus_client import Counter, Histogram

            self.calls = Counter(
                "pydb_rpc_calls", "RPCs answered, by method and gRPC status code", ("method", "code"), registry=registry
            )
            self.latency = Histogram(
                "pydb_rpc_duration_seconds",
                "Time from the call reaching its handler to its answer, by method",
                ("method",),
                buckets=LATENCY_BUCKETS,
                registry=registry,
            )
            self.db_errors = Counter(
                "pydb_database_errors",
                "Database errors, by method and SQLSTATE class (the first two characters; 'none' for a lost "
                "connection, which has no SQLSTATE)",
                ("method", "sqlstate_class"),
                registry=registry,
            )

    def observe(
        self,
        rpc: str,
        statement: str,
        code: grpc.StatusCode,
        seconds: float,
        response: object,
        sqlstate: str | None,
    ) -> None:
        """One call's outcome. `sqlstate` is "" for a database error without one, None without an error."""
        if self._metrics:
            self.calls.labels(rpc, code.name).inc()
            self.latency.labels(rpc).observe(seconds)
            if sqlstate is not None:
                self.db_errors.labels(rpc, sqlstate[:2] or "none").inc()
        if self.tracing:
            from . import tracing

            tracing.annotate(rpc, statement, code, rows(response), sqlstate)


def rows(response: object) -> int:
    """How many rows an answer carries: the length of its repeated message field, else 1 (0 for
    no answer or an empty one)."""
    if not isinstance(response, Message):
        return 0
    for field, value in response.ListFields():
        if field.message_type is not None and field.is_repeated:
            return len(value)
    return 1 if response.ListFields() else 0


_observers: dict[int, Observer] = {}


def configure_observer(pools: Sequence[AsyncConnectionPool[Any]], observer: Observer) -> None:
    """The observer of the calls on `pools` (read by each `Database` when it is created)."""
    for pool in pools:
        _observers[id(pool)] = observer


def observer_for(pool: AsyncConnectionPool[Any]) -> Observer | None:
    return _observers.get(id(pool))


class PoolCollector:
    """psycopg_pool's statistics at scrape time: connections lent to calls, callers waiting."""

    def __init__(self, pools: Sequence[AsyncConnectionPool[Any]]) -> None:
        self.pools = pools

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        in_use = GaugeMetricFamily("pydb_pool_connections_in_use", "Pooled connections lent to calls", labels=["pool"])
        idle = GaugeMetricFamily("pydb_pool_connections_idle", "Pooled connections open and free", labels=["pool"])
        waiting = GaugeMetricFamily(
            "pydb_pool_requests_waiting", "Calls waiting for a pooled connection", labels=["pool"]
        )
        size = GaugeMetricFamily("pydb_pool_connections_max", "The pool's --pool-max", labels=["pool"])
        for pool in self.pools:
            stats = pool.get_stats()
            opened, available = stats.get("pool_size", 0), stats.get("pool_available", 0)
            in_use.add_metric([pool.name], opened - available)
            idle.add_metric([pool.name], available)
            waiting.add_metric([pool.name], callers_waiting(pool))
            size.add_metric([pool.name], pool.max_size)
        yield from (in_use, idle, waiting, size)


def callers_waiting(pool: AsyncConnectionPool[Any]) -> int:
    """Callers waiting for one of `pool`'s connections now.

    Not psycopg_pool's `requests_waiting`: a caller whose wait timed out keeps its place in the
    pool's queue until a connection is next returned, and is counted until then — so under
    saturation, when an operator looks, that count only grows while every connection stays held.
    A place holding neither a connection nor an error is a caller still waiting."""
    queue = getattr(pool, "_waiting", None)
    if queue is None:  # a psycopg_pool laid out otherwise: its own count
        return int(pool.get_stats().get("requests_waiting", 0))
    # Copied in one step first: scrapes run on the metrics server's thread, beside the event loop.
    return sum(1 for place in list(queue) if place.conn is None and place.error is None)


def start_metrics_server(
    addr: str, pools: Sequence[AsyncConnectionPool[Any]]
) -> tuple[CollectorRegistry, int, Callable[[], None]]:
    """Serve /metrics on `addr` (host:port; port 0 picks one) from a registry of its own;
    returns it, the port bound and what stops it."""
    from prometheus_client import CollectorRegistry, start_http_server

    host, _, port = addr.rpartition(":")
    registry = CollectorRegistry()
    registry.register(PoolCollector(pools))
    httpd, _thread = start_http_server(int(port), addr=host.strip("[]") or "127.0.0.1", registry=registry)
    return registry, int(httpd.server_address[1]), httpd.shutdown
