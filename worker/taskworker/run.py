"""One call to run a worker process: connect, register the tools by name, pick the wake
signal, drain on SIGTERM/SIGINT. And the reconciler's entry point: `python -m taskworker reconcile`.

Environment: DATA_PLANE_ADDR (default 127.0.0.1:50051, what `make serve` listens on),
DATA_PLANE_TLS / DATA_PLANE_TLS_CA / DATA_PLANE_TLS_CERT / DATA_PLANE_TLS_KEY and
DATA_PLANE_TOKEN / DATA_PLANE_TOKEN_FILE (connect.py, docs/security.md), WAKE (listen | redis | none; default listen), REDIS_ADDR / REDIS_URL and ENVIRONMENT (redis),
POLL_INTERVAL_SECONDS, HEARTBEAT_INTERVAL_SECONDS, DRAIN_TIMEOUT_SECONDS, REPORT_WINDOW_SECONDS and
REPORT_BATCH_SIZE (batched reports: fleet.py),
RECONCILE_INTERVAL_SECONDS, PRUNE_INTERVAL_SECONDS, RETENTION_SECONDS (the reconciler's pruning of
terminal tasks), EVENTS (live task events: redis | postgres | none; default redis),
EVENTS_RETENTION_SECONDS (kept after a task's terminal event; default 3600),
CANCEL_GRACE_SECONDS (a cancelled task's coroutine is cancelled this long after it was told; 5),
RECONCILE_TICK_SECONDS (promotion of due tasks, run-time limits, periodic slots; default 1) and
PERIODIC_MAX_CATCH_UP (missed periodic slots enqueued after downtime, per schedule; default 1).
With WAKE=listen the worker also follows WatchTaskCancels (a running task cancelled stops at once),
with WAKE=redis the Redis cancel channel (cancels.py). MAX_SEND_MESSAGE_BYTES and
MAX_RECEIVE_MESSAGE_BYTES: the server's message limits (default 4194304, gRPC's), which report
batches stay under (limits.py).
METRICS_ADDR (host:port of the fleet's, or the reconciler's, Prometheus /metrics; unset: none; the
reconciler's has the queue gauges, refreshed every QUEUE_GAUGES_INTERVAL_SECONDS, default 15) and
TRACING (true: a span per task, continuing its enqueue's trace; metrics.py, docs/operations.md).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Callable, Mapping
from typing import Any

import grpc
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc

from .cancels import CancelWatcher, RedisCancelSubscriber
from .connect import ChannelSettings, ConnectionSetupError, open_channel, wait_for_server
from .events import (
    DEFAULT_RETENTION,
    EventEmitter,
    EventPurger,
    EventTransport,
    PostgresEventTransport,
    RedisEventTransport,
)
from .fleet import Process, WorkerFleet
from .limits import DEFAULT_MESSAGE_BYTES
from .metrics import FleetObserver, QueueGauges, new_registry, serve_metrics, serve_registry
from .reconciler import Reconciler
from .wake import ListenWakeSubscriber, RedisWakeSubscriber

log = logging.getLogger("taskworker")

DEFAULT_ADDR = "127.0.0.1:50051"
#: How long a starting worker waits for the server to come up.
CONNECT_TIMEOUT_SECONDS = 60.0


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    return float(raw) if raw else default


async def run_worker(
    address: str | None,
    tools: Mapping[str, Process],
    *,
    concurrency: int | Mapping[str, int] = 1,
    wake: str | None = None,
    events: str | None = None,
    channel_settings: ChannelSettings | None = None,
    **fleet_options: Any,
) -> WorkerFleet:
    """Serve `tools` ({tool name: process}) until SIGTERM/SIGINT, then drain. Returns the fleet.

    `channel_settings` (default: from the environment, see connect.py) carry TLS, the client
    certificate and the bearer token. Settings that cannot work with the server raise
    ConnectionSetupError at once; a server not up yet is waited for up to 60 s."""
    address = address or os.environ.get("DATA_PLANE_ADDR", DEFAULT_ADDR)
    wake = (wake or os.environ.get("WAKE", "listen")).lower()
    if wake not in ("listen", "redis", "none"):
        raise ValueError(f"WAKE must be listen, redis or none, not {wake!r}")
    events = _events_setting(events)
    options: dict[str, Any] = {
        "poll_interval": _env_float("POLL_INTERVAL_SECONDS", 2.0),
        "heartbeat_interval": _env_float("HEARTBEAT_INTERVAL_SECONDS", 60.0),
        "drain_timeout": _env_float("DRAIN_TIMEOUT_SECONDS", 30.0),
        "report_window": _env_float("REPORT_WINDOW_SECONDS", 0.002),
        "report_batch": int(_env_float("REPORT_BATCH_SIZE", 500)),
        "cancel_grace": _env_float("CANCEL_GRACE_SECONDS", 5.0),
        # The server's message limits (its MAX_SEND_MESSAGE_BYTES; gRPC's 4 MiB receive limit):
        # report batches stay under them, and a result that can never fit fails its task.
        "server_send_bytes": int(_env_float("MAX_SEND_MESSAGE_BYTES", DEFAULT_MESSAGE_BYTES)),
        "server_receive_bytes": int(_env_float("MAX_RECEIVE_MESSAGE_BYTES", DEFAULT_MESSAGE_BYTES)),
        **fleet_options,
    }
    settings = ChannelSettings.from_env() if channel_settings is None else channel_settings
    async with open_channel(address, settings) as channel:
        await wait_for_server(channel, address, settings, CONNECT_TIMEOUT_SECONDS)
        stub = task_pb2_grpc.GenerationDataServiceStub(channel)
        transport: EventTransport | None = (
            RedisEventTransport(retention=_env_float("EVENTS_RETENTION_SECONDS", DEFAULT_RETENTION))
            if events == "redis"
            else PostgresEventTransport(stub)
            if events == "postgres"
            else None
        )
        emitter = None if transport is None else EventEmitter(transport)
        observer = _observer()
        fleet = WorkerFleet(stub, events=emitter, observer=observer, **options)
        stop_metrics = _serve_fleet_metrics(fleet)
        for name, process in tools.items():
            tool = (await _register(stub, name, address)).tool
            lanes = concurrency if isinstance(concurrency, int) else concurrency.get(name, 1)
            fleet.add_tool(tool.id, process, concurrency=lanes, lease_seconds=tool.lease_seconds)
            log.info("hosting tool %s (%s) with %d lane(s)", name, tool.id, lanes)
        if wake == "redis":
            fleet.add_background(RedisWakeSubscriber(fleet.wake).run())
            fleet.add_background(RedisCancelSubscriber(fleet.request_cancel).run())
        elif wake == "listen":
            fleet.add_background(ListenWakeSubscriber(stub, fleet.wake, list(fleet.lanes)).run())
            fleet.add_background(CancelWatcher(stub, fleet.request_cancel).run())
        fleet.install_signal_handlers()
        try:
            await fleet.run()
        finally:
            stop_metrics()
            if emitter is not None:
                await emitter.aclose()
        return fleet


def _observer() -> FleetObserver | None:
    """METRICS_ADDR and TRACING as a FleetObserver; None (nothing imported) when both are unset."""
    addr, tracing = os.environ.get("METRICS_ADDR", ""), os.environ.get("TRACING", "").lower() in ("1", "true", "yes")
    if not addr and not tracing:
        return None
    return FleetObserver(new_registry() if addr else None, tracing=tracing)


def _serve_fleet_metrics(fleet: WorkerFleet) -> Callable[[], None]:
    addr = os.environ.get("METRICS_ADDR", "")
    if not addr:
        return lambda: None
    port, stop = serve_metrics(addr, fleet)
    log.info("metrics on %s (port %d)", addr, port)
    return stop


def _events_setting(events: str | None) -> str:
    events = (events or os.environ.get("EVENTS", "redis")).lower()
    if events not in ("redis", "postgres", "none"):
        raise ValueError(f"EVENTS must be redis, postgres or none, not {events!r}")
    return events


async def _register(
    stub: task_pb2_grpc.GenerationDataServiceAsyncStub, name: str, address: str
) -> pb.RegisterToolResponse:
    try:
        return await stub.RegisterTool(pb.RegisterToolRequest(name=name), wait_for_ready=True, timeout=60)
    except grpc.aio.AioRpcError as err:
        if err.code() == grpc.StatusCode.UNAUTHENTICATED:  # the health probe may be open, the queue not
            raise ConnectionSetupError(
                f"the server at {address} refused this worker: set DATA_PLANE_TOKEN or DATA_PLANE_TOKEN_FILE "
                f"to an accepted bearer token ({err.details()})"
            ) from None
        raise


async def run_reconciler(address: str | None = None, channel_settings: ChannelSettings | None = None) -> None:
    """The reaper as a process of its own; safe to run in several replicas. With EVENTS=postgres
    it also purges expired live task events (EventPurger, every RECONCILE_INTERVAL_SECONDS)."""
    address = address or os.environ.get("DATA_PLANE_ADDR", DEFAULT_ADDR)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    settings = ChannelSettings.from_env() if channel_settings is None else channel_settings
    async with open_channel(address, settings) as channel:
        await wait_for_server(channel, address, settings, CONNECT_TIMEOUT_SECONDS)
        stub = task_pb2_grpc.GenerationDataServiceStub(channel)
        interval = _env_float("RECONCILE_INTERVAL_SECONDS", 60.0)
        reconciler = Reconciler(
            stub,
            interval=interval,
            prune_interval=_env_float("PRUNE_INTERVAL_SECONDS", 600.0),
            retention_seconds=int(_env_float("RETENTION_SECONDS", 7 * 24 * 3600)),
            tick=_env_float("RECONCILE_TICK_SECONDS", 1.0),
            max_catch_up=int(_env_float("PERIODIC_MAX_CATCH_UP", 1)),
        )
        jobs = [reconciler.run(stop)]
        stop_metrics: Callable[[], None] = lambda: None  # noqa: E731
        if addr := os.environ.get("METRICS_ADDR", ""):
            gauges = QueueGauges(stub, interval=_env_float("QUEUE_GAUGES_INTERVAL_SECONDS", 15.0))
            registry = new_registry()
            registry.register(gauges)
            port, stop_metrics = serve_registry(addr, registry)
            log.info("queue gauges on %s (port %d)", addr, port)
            jobs.append(gauges.run(stop))
        if _events_setting(None) == "postgres":
            retention = _env_float("EVENTS_RETENTION_SECONDS", DEFAULT_RETENTION)
            jobs.append(EventPurger(stub, retention=retention, interval=interval).run(stop))
        try:
            await asyncio.gather(*jobs)
        finally:
            stop_metrics()
