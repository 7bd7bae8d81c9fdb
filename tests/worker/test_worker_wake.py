"""The Redis wake signal against a private redis-server: pickup latency, tool filtering, lost
wakes while Redis is down, reconnect after a restart, and an enqueue that never fails on Redis."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import AsyncIterator
from functools import partial
from typing import TYPE_CHECKING

import grpc
import pytest
import redis.asyncio as aioredis
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from support.worker_support import Pickups, RedisServer, free_port, redis_server, requires_redis, wait_until
from taskworker import RedisWakeSubscriber, WakePublisher, WorkerFleet, config, enqueue

if TYPE_CHECKING:
    Stub = task_pb2_grpc.GenerationDataServiceAsyncStub

__all__ = ["redis_server"]  # the fixture, re-exported for pytest


class WakingFleet:
    def __init__(self, stub: Stub, tool_ids: list[str], url: str, env: str, poll_interval: float) -> None:
        self.pickups = Pickups()
        self.fleet = WorkerFleet(stub, poll_interval=poll_interval)
        for t in tool_ids:
            self.fleet.add_tool(t, self.pickups)
        self.sub = RedisWakeSubscriber(self.fleet.wake, url, environment=env, reconnect_max=0.2)
        self.fleet.add_background(self.sub.run())
        self.task = asyncio.create_task(self.fleet.run())

    async def stop(self) -> None:
        self.fleet.drain()
        await asyncio.wait_for(self.task, 10)


@pytest.fixture
async def env_name() -> str:
    return f"test{time.monotonic_ns()}"


@pytest.fixture
async def publisher(redis_server: RedisServer, env_name: str) -> AsyncIterator[WakePublisher]:
    pub = WakePublisher(redis_server.url, environment=env_name)
    yield pub
    await pub.aclose()


async def pickup(stub: Stub, tool: pb.Tool, publisher: WakePublisher, pickups: Pickups) -> float:
    t0 = time.perf_counter()
    task = await enqueue(stub, pb.QueueTaskRequest(tool_id=tool.id), publisher)
    await wait_until(lambda: task.id in pickups.at, timeout=15, what="pickup")
    return pickups.at[task.id] - t0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@pytest.mark.serial
@requires_redis
async def test_wake_pickup_latency(
    stub: Stub, tool: pb.Tool, redis_server: RedisServer, publisher: WakePublisher, env_name: str
) -> None:
    # A 5 s poll interval: any pickup well under it is the wake's doing.
    wf = WakingFleet(stub, [tool.id], redis_server.url, env_name, poll_interval=5.0)
    try:
        await asyncio.wait_for(wf.sub.subscribed.wait(), 10)
        latencies = [await pickup(stub, tool, publisher, wf.pickups) for _ in range(40)]
    finally:
        await wf.stop()
    p50, p99 = statistics.median(latencies), pct(latencies, 0.99)
    print(f"\nwake pickup (enqueue -> process start, 40 samples): p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms")
    assert p50 < 0.1, latencies
    assert max(latencies) < 4.5, latencies  # every one beat the poll floor
    assert wf.sub.received >= 40


@requires_redis
async def test_wake_reaches_only_fleets_hosting_the_tool(
    stub: Stub, redis_server: RedisServer, publisher: WakePublisher, env_name: str
) -> None:
    tools = [(await stub.RegisterTool(pb.RegisterToolRequest(name=f"wake-only-{i}-{env_name}"))).tool for i in (1, 2)]
    a = WakingFleet(stub, [tools[0].id], redis_server.url, env_name, poll_interval=30.0)
    b = WakingFleet(stub, [tools[1].id], redis_server.url, env_name, poll_interval=30.0)
    try:
        await asyncio.wait_for(asyncio.gather(a.sub.subscribed.wait(), b.sub.subscribed.wait()), 10)
        assert await publisher.publish(tools[0].id)
        assert await publisher.publish(tools[1].id)
        # Messages arrive in order on each connection: once each fleet saw its own, it saw both.
        await wait_until(lambda: a.sub.received == 1 and b.sub.received == 1, what="both wakes")
        assert (a.sub.ignored, b.sub.ignored) == (1, 1)
        # Another environment's channel is not ours.
        other = WakePublisher(redis_server.url, environment=env_name + "-other")
        assert await other.publish(tools[0].id)
        await other.aclose()
        assert await publisher.publish(tools[0].id)
        await wait_until(lambda: a.sub.received == 2, what="second wake")
        assert a.sub.ignored == 1 and b.sub.ignored == 2
    finally:
        await asyncio.gather(a.stop(), b.stop())


@requires_redis
@pytest.mark.slow
async def test_lost_wakes_fall_back_to_polling_and_subscriber_reconnects(
    stub: Stub, tool: pb.Tool, redis_server: RedisServer, publisher: WakePublisher, env_name: str
) -> None:
    poll = 1.0
    wf = WakingFleet(stub, [tool.id], redis_server.url, env_name, poll_interval=poll)
    try:
        await asyncio.wait_for(wf.sub.subscribed.wait(), 10)
        assert await pickup(stub, tool, publisher, wf.pickups) < 0.5
        redis_server.stop()  # Redis dies mid-run
        await wait_until(lambda: not wf.sub.subscribed.is_set(), what="subscriber noticed the outage")
        # Enqueues still succeed (publish fails quietly) and every task completes by polling.
        t0 = time.perf_counter()
        tasks = [await enqueue(stub, pb.QueueTaskRequest(tool_id=tool.id), publisher) for _ in range(5)]
        assert time.perf_counter() - t0 < 5
        await wait_until(lambda: all(t.id in wf.pickups.at for t in tasks), timeout=poll * 3, what="polled pickups")
        for t in tasks:
            await wait_until(partial(_completed, stub, t.id), timeout=5, what="completed without wakes")
        redis_server.start()
        await wait_until(lambda: wf.sub.subscribed.is_set(), timeout=10, what="resubscribed after restart")
        assert wf.sub.subscriptions >= 2
        # Wakes work again: with a 1 s poll, a median pickup under 0.3 s is the wake.
        latencies = [await pickup(stub, tool, publisher, wf.pickups) for _ in range(7)]
        assert statistics.median(latencies) < 0.3, latencies
    finally:
        if redis_server.proc is None:
            redis_server.start()
        await wf.stop()


async def _completed(stub: Stub, task_id: str) -> bool:
    return (await stub.GetTask(pb.GetTaskRequest(task_id=task_id))).task.status == pb.TASK_STATUS_COMPLETED


async def test_enqueue_never_fails_when_redis_is_unreachable(stub: Stub, tool: pb.Tool) -> None:
    dead = WakePublisher(f"redis://127.0.0.1:{free_port()}/0", environment="test")
    try:
        t0 = time.perf_counter()
        task = await enqueue(stub, pb.QueueTaskRequest(tool_id=tool.id), dead)
        assert time.perf_counter() - t0 < 2.0
        assert task.status == pb.TASK_STATUS_QUEUED
        assert not await dead.publish(tool.id)
    finally:
        await dead.aclose()


@requires_redis
async def test_publish_happens_only_after_a_committed_enqueue(
    stub: Stub, redis_server: RedisServer, publisher: WakePublisher, env_name: str
) -> None:
    """A failed QueueTask (unknown tool) publishes nothing."""
    client = aioredis.Redis.from_url(redis_server.url)
    pubsub = client.pubsub()
    try:
        await pubsub.subscribe(config.wake_channel(env_name))
        assert (await pubsub.get_message(timeout=5))["type"] == "subscribe"
        missing = "00000000-0000-0000-0000-000000000000"
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await enqueue(stub, pb.QueueTaskRequest(tool_id=missing), publisher)
        assert failed.value.code() == grpc.StatusCode.NOT_FOUND
        tool = (await stub.RegisterTool(pb.RegisterToolRequest(name=f"commit-{env_name}"))).tool
        await enqueue(stub, pb.QueueTaskRequest(tool_id=tool.id), publisher)
        msg = await pubsub.get_message(ignore_subscribe_messages=True, timeout=5)
        assert msg is not None and msg["data"] == tool.id.encode()  # the first message is the committed one
    finally:
        await pubsub.aclose()  # type: ignore[no-untyped-call]
        await client.aclose()


def test_config_reads_redis_addr_then_alias_and_environment() -> None:
    assert (
        config.redis_url({"REDIS_ADDR": "redis://cache:6380/4", "REDIS_URL": "redis://x/1"}) == "redis://cache:6380/4"
    )
    assert config.redis_url({"REDIS_URL": "redis://alias:6379/2"}) == "redis://alias:6379/2"
    assert config.redis_url({"REDIS_ADDR": "cache:6379"}) == "redis://cache:6379"
    assert config.redis_url({}) == config.DEFAULT_REDIS_ADDR
    assert config.wake_channel(config.environment({"ENVIRONMENT": "prod"})) == "prod:common:task:wake"
    assert config.environment({}) == "local"
