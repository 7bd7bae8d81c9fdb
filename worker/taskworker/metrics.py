"""What a worker fleet tells an operator: Prometheus metrics and one OpenTelemetry span per task.

`FleetObserver(registry, tracing)` is handed to `WorkerFleet(observer=...)`; without one the
fleet calls nothing (off by default, and then it costs nothing: neither `prometheus_client`
nor `opentelemetry` is imported). `serve_metrics(addr, fleet)` serves /metrics for a fleet
(`METRICS_ADDR` of `run_worker`).

- `taskworker_tasks_claimed_total{tool}`, `..._completed_total`, `..._failed_total` (a failure
  reported: re-queued or failed for good), `..._lease_lost_total`;
- `taskworker_report_batch_size{kind}`: how many outcomes each CompleteTasks / FailTasks carried;
- `taskworker_tasks_in_flight{tool}`: tasks held (running or reporting), read at scrape time;
- `taskworker_retries_total{what,code}`: calls retried after a transient failure, and
  `taskworker_permanent_errors_total{what,code}`: failures not retried (retry.py), by what was
  retried (`report complete`, `claim`, `events write`, `wake stream`, `connect`, ...) and the
  gRPC code (or the error's name for Redis); `new_registry()` registers them.

Tracing: each task runs in a CONSUMER span `task <tool_id>`, a child of the span its enqueue
recorded (`w3c_traceparent`), so one trace runs from the enqueuing request through the claim
and the work to its report (the report RPC's own span, with the server's --tracing, is a child).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from generation.task.v1 import task_pb2 as pb

from . import retry

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric

    from .fleet import WorkerFleet

#: Outcomes per report batch: 1 (a lone task) up to the default REPORT_BATCH_SIZE of 500.
BATCH_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000)


class FleetObserver:
    def __init__(self, registry: CollectorRegistry | None = None, tracing: bool = False) -> None:
        self.registry = registry
        self.tracer: Any = None
        if tracing:
            from opentelemetry import trace

            self.tracer = trace.get_tracer("taskworker")
        if registry is None:
            return
        from prometheus_client import Counter, Histogram

        def counter(name: str, what: str) -> Any:
            return Counter(f"taskworker_tasks_{name}", what, ("tool",), registry=registry)

        self.claimed = counter("claimed", "Tasks claimed, by tool")
        self.completed = counter("completed", "Tasks whose completion landed, by tool")
        self.failed = counter("failed", "Tasks whose failure landed (re-queued or failed for good), by tool")
        self.lease_lost = counter("lease_lost", "Tasks whose lease was lost: their outcome did not land, by tool")
        self.batch_size = Histogram(
            "taskworker_report_batch_size",
            "Outcomes per CompleteTasks / FailTasks call",
            ("kind",),
            buckets=BATCH_BUCKETS,
            registry=registry,
        )

    def count(self, event: str, tool_id: str, n: int = 1) -> None:
        """`event`: claimed, completed, failed or lease_lost."""
        if self.registry is not None and n:
            getattr(self, event).labels(tool_id).inc(n)

    def batch(self, kind: str, size: int) -> None:
        if self.registry is not None:
            self.batch_size.labels(kind).observe(size)

    @contextlib.contextmanager
    def task_span(self, task: pb.Task) -> Iterator[None]:
        """The task's span, continuing its enqueue's trace (a new trace when it recorded none)."""
        if self.tracer is None:
            yield
            return
        from opentelemetry import propagate, trace

        parent = propagate.extract({"traceparent": task.w3c_traceparent}) if task.w3c_traceparent else None
        attributes = {"task.id": task.id, "task.tool_id": task.tool_id, "task.retry_count": task.retry_count}
        with self.tracer.start_as_current_span(
            f"task {task.tool_id}", context=parent, kind=trace.SpanKind.CONSUMER, attributes=attributes
        ):
            yield


class _InFlight:
    """Tasks each lane holds, read when scraped."""

    def __init__(self, fleet: WorkerFleet) -> None:
        self.fleet = fleet

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        gauge = GaugeMetricFamily("taskworker_tasks_in_flight", "Tasks held: running or reporting", labels=["tool"])
        for tool_id, lane in list(self.fleet.lanes.items()):
            gauge.add_metric([tool_id], len(lane.running))
        yield gauge


class QueueGauges:
    """The queue's depth by tool and status and its oldest task's age, refreshed every `interval`
    seconds by one GetQueueStats call (the live rows, an index-only scan) and one ListTools (the
    names), not per scrape: a scrape reads the last snapshot. Run by the reconciler
    (`python -m taskworker reconcile` with METRICS_ADDR): one per deployment is enough."""

    def __init__(self, stub: Any, interval: float = 15.0, rpc_timeout: float = 10.0) -> None:
        self.stub = stub
        self.interval = interval
        self.rpc_timeout = rpc_timeout
        self.refreshed = 0
        # (tool id, tool name, status) -> (tasks, oldest age); replaced whole, so a scrape (another
        # thread) never sees half a refresh.
        self._snapshot: dict[tuple[str, str, str], tuple[int, float]] = {}

    async def refresh(self) -> None:
        stats = await self.stub.GetQueueStats(pb.GetQueueStatsRequest(), timeout=self.rpc_timeout)
        tools = await self.stub.ListTools(pb.ListToolsRequest(), timeout=self.rpc_timeout)
        names = {t.id: t.name for t in tools.tools}
        snapshot: dict[tuple[str, str, str], tuple[int, float]] = {}
        for tool_id in names:  # a tool with nothing queued shows 0, not a stale count
            for status in ("queued", "processing"):
                snapshot[(tool_id, names[tool_id], status)] = (0, 0.0)
        for stat in stats.stats:
            status = pb.TaskStatus.Name(stat.status).removeprefix("TASK_STATUS_").lower()
            snapshot[(stat.tool_id, names.get(stat.tool_id, ""), status)] = (stat.tasks, stat.oldest_age_seconds)
        self._snapshot = snapshot
        self.refreshed += 1

    async def run(self, stop: Any) -> None:
        """Refresh every `interval` until `stop` (an asyncio.Event) is set; errors are logged."""
        import asyncio
        import logging

        import grpc

        while not stop.is_set():
            try:
                await self.refresh()
            except grpc.aio.AioRpcError as err:
                logging.getLogger("taskworker.metrics").warning("queue gauges: %s", err.code().name)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval)

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        labels = ["tool", "tool_name", "status"]
        depth = GaugeMetricFamily("taskqueue_tasks", "Live tasks by tool and status (GetQueueStats)", labels=labels)
        age = GaugeMetricFamily(
            "taskqueue_oldest_age_seconds", "Age of the oldest live task by tool and status", labels=labels
        )
        for key, (tasks, oldest) in self._snapshot.items():
            depth.add_metric(list(key), tasks)
            age.add_metric(list(key), oldest)
        yield from (depth, age)


def serve_registry(addr: str, registry: CollectorRegistry) -> tuple[int, Callable[[], None]]:
    """/metrics of `registry` on `addr` (host:port; port 0 picks one): the port, and what stops it."""
    from prometheus_client import start_http_server

    host, _, port = addr.rpartition(":")
    httpd, _thread = start_http_server(int(port), addr=host.strip("[]") or "127.0.0.1", registry=registry)
    return int(httpd.server_address[1]), httpd.shutdown


def serve_metrics(addr: str, fleet: WorkerFleet) -> tuple[int, Callable[[], None]]:
    """/metrics of `fleet` (whose observer has a registry) on `addr` (host:port; port 0 picks one):
    the port bound, and what stops the endpoint."""
    observer = fleet.observer
    if observer is None or observer.registry is None:
        raise ValueError("the fleet has no FleetObserver with a registry")
    observer.registry.register(_InFlight(fleet))
    return serve_registry(addr, observer.registry)


class _Retries:
    """retry.COUNTS, read when scraped."""

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily

        labels = ["what", "code"]
        retried = CounterMetricFamily("taskworker_retries", "Calls retried after a transient failure", labels=labels)
        permanent = CounterMetricFamily(
            "taskworker_permanent_errors", "Failures not retried: the same call would fail alike", labels=labels
        )
        for (what, code, verdict), n in sorted(retry.COUNTS.items()):
            (retried if verdict == "transient" else permanent).add_metric([what, code], n)
        yield from (retried, permanent)


def new_registry() -> CollectorRegistry:
    """A registry with the worker SDK's retry counters (retry.py) on it."""
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    registry.register(_Retries())
    return registry
