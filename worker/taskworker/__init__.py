"""taskworker: the worker side of the generation task queue.

Depends only on the generated client stubs (generation.task.v1.task_pb2 / _grpc), grpcio and
redis. See docs/worker.md.
"""

from __future__ import annotations

from .cancels import CancelWatcher, RedisCancelSubscriber, cancel_task
from .config import environment, redis_url, wake_channel
from .connect import ChannelSettings, ConnectionSetupError, open_channel
from .events import (
    EventEmitter,
    EventPurger,
    PostgresEventSource,
    PostgresEventTransport,
    RedisEventSource,
    RedisEventTransport,
    TaskEvent,
    watch_task_events,
)
from .fleet import FleetStats, Process, RetryAfter, Snooze, TaskContext, TaskResult, WorkerFleet
from .metrics import FleetObserver, QueueGauges, serve_metrics
from .reconciler import Reconciler, SweepResult
from .run import run_reconciler, run_worker
from .wake import ListenWakeSubscriber, RedisWakeSubscriber, WakePublisher, enqueue

__all__ = [
    "CancelWatcher",
    "ChannelSettings",
    "ConnectionSetupError",
    "EventEmitter",
    "EventPurger",
    "FleetObserver",
    "FleetStats",
    "ListenWakeSubscriber",
    "PostgresEventSource",
    "PostgresEventTransport",
    "Process",
    "QueueGauges",
    "Reconciler",
    "RedisCancelSubscriber",
    "RedisEventSource",
    "RedisEventTransport",
    "RedisWakeSubscriber",
    "RetryAfter",
    "Snooze",
    "SweepResult",
    "TaskContext",
    "TaskEvent",
    "TaskResult",
    "WakePublisher",
    "WorkerFleet",
    "cancel_task",
    "enqueue",
    "environment",
    "open_channel",
    "redis_url",
    "run_reconciler",
    "run_worker",
    "serve_metrics",
    "wake_channel",
    "watch_task_events",
]
