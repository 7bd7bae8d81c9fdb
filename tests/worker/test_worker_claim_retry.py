"""The fleet's claim carries a request id, fresh per attempt and sent again when an attempt's
answer was lost: the claim committed, the worker saw DEADLINE_EXCEEDED, and the retry gets the
very tasks (same lease tokens) that claim holds, so none is held by nobody until its lease lapses
and none burns a retry."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import grpc
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from support.worker_support import wait_until
from taskworker import TaskContext, WorkerFleet


class LoseFirstClaimAnswer(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[type-arg]
    """The first ClaimTasks answer that holds tasks reaches the server's commit and is then lost:
    the caller sees DEADLINE_EXCEEDED. Records every claim's request id and answer."""

    def __init__(self) -> None:
        self.lost: list[pb.Task] = []
        self.claims: list[tuple[str, list[pb.Task]]] = []

    async def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        call = await continuation(client_call_details, request)
        raw = client_call_details.method
        if not (raw.decode() if isinstance(raw, bytes) else raw).endswith("/ClaimTasks"):
            return call
        response = await call
        self.claims.append((request.request_id, list(response.tasks)))
        if response.tasks and not self.lost:
            self.lost = list(response.tasks)
            raise grpc.aio.AioRpcError(
                grpc.StatusCode.DEADLINE_EXCEEDED, grpc.aio.Metadata(), grpc.aio.Metadata(), "answer lost", None
            )
        return call


async def test_a_claim_whose_answer_was_lost_is_retried_with_its_request_id(service: Any, tool: pb.Tool) -> None:
    lose = LoseFirstClaimAnswer()
    async with grpc.aio.insecure_channel(service.address, interceptors=[cast(Any, lose)]) as channel:
        stub = task_pb2_grpc.GenerationDataServiceStub(channel)
        queued = [(await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id))).task for _ in range(3)]
        done: dict[str, pb.Task] = {}

        async def process(t: pb.Task, ctx: TaskContext) -> Any:
            done[t.id] = t
            return None

        fleet = WorkerFleet(stub, poll_interval=0.05)
        fleet.add_tool(tool.id, process, concurrency=4)
        run = asyncio.create_task(fleet.run())
        try:
            await wait_until(lambda: fleet.stats.completed == 3, timeout=30, what="every task completed")
        finally:
            fleet.drain()
            await asyncio.wait_for(run, 30)
    assert lose.lost, "an answer was lost"
    ids = [rid for rid, _ in lose.claims]
    assert all(ids) and len(ids[0]) >= 16, "every claim carries a request id"
    lost_at = next(i for i, (_, tasks) in enumerate(lose.claims) if tasks)
    retry_id, retried = lose.claims[lost_at + 1]
    assert retry_id == ids[lost_at], "the retry of the lost claim sends its request id again"
    assert sorted((t.id, t.lease_token) for t in retried) == sorted((t.id, t.lease_token) for t in lose.lost)
    later = ids[lost_at + 2 :]
    assert retry_id not in later, "the next attempt has a fresh id"
    # The lost claim's tasks ran under the lease it took: no retry burnt, nothing reclaimed.
    assert sorted(done) == sorted(t.id for t in queued)
    assert all(t.retry_count == 0 for t in done.values())
    for t in lose.lost:
        assert done[t.id].lease_token == t.lease_token
