"""The data plane without a database, for bench_floor's "gRPC hop alone": a grpc.aio server that
answers ClaimTasks from Task messages built before it listens (shaped as a claim's answer: ids,
lease tokens, timestamps, the tool's lease), CompleteTasks with the tasks it is given (as the
served statement returns the rows it completed) and QueueTasks with a queued task per entry (as
the served statement returns the rows it inserted), and keeps WatchTaskWakes open without a wake.
What a worker process and a server process cost per job when PostgreSQL costs nothing.

    python floor_server.py COUNT      # prints "ready HOST:PORT", serves until killed
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import AsyncIterator

import grpc
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc


def claimed_tasks(count: int) -> list[pb.Task]:
    """`count` tasks as ClaimTasks answers them: every field a claim sets, none a no-op leaves unset."""
    tool = str(uuid.uuid4())
    now = {"seconds": int(time.time()), "nanos": 0}
    return [
        pb.Task(
            id=str(uuid.uuid4()), tool_id=tool, status=pb.TASK_STATUS_PROCESSING, max_retries=3, input="{}",
            lease_token=str(uuid.uuid4()), claim_expires_at=now, created_at=now, started_at=now, run_at=now,
            attempted_at=now, lease_seconds=120, errors="[]", billing_idempotency_key=f"floor-{i}",
        )
        for i in range(count)
    ]  # fmt: skip


class FloorDataPlane(task_pb2_grpc.GenerationDataServiceServicer):
    def __init__(self, count: int) -> None:
        self.tasks = claimed_tasks(count)
        self.by_id = {t.id: t for t in self.tasks}
        self.served = 0
        self.now = {"seconds": int(time.time()), "nanos": 0}

    async def ClaimTasks(self, request: pb.ClaimTasksRequest, context: object) -> pb.ClaimTasksResponse:
        start = self.served
        self.served = min(len(self.tasks), start + request.limit)
        return pb.ClaimTasksResponse(tasks=self.tasks[start : self.served])

    async def CompleteTasks(self, request: pb.CompleteTasksRequest, context: object) -> pb.CompleteTasksResponse:
        return pb.CompleteTasksResponse(tasks=[self.by_id[i] for i in request.task_ids if i in self.by_id])

    async def QueueTasks(self, request: pb.QueueTasksRequest, context: object) -> pb.QueueTasksResponse:
        # As the served statement answers (RETURNING *): a queued task per entry, with its key.
        return pb.QueueTasksResponse(
            tasks=[
                pb.Task(id=str(uuid.uuid4()), tool_id=tool, status=pb.TASK_STATUS_QUEUED, max_retries=3, input="{}",
                        created_at=self.now, run_at=self.now, errors="[]", billing_idempotency_key=key)
                for tool, key in zip(request.tool_ids, request.billing_idempotency_keys, strict=True)
            ]
        )  # fmt: skip

    async def WatchTaskWakes(
        self, request: pb.WatchTaskWakesRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> AsyncIterator[pb.WatchTaskWakesResponse]:
        await context.send_initial_metadata(())
        await asyncio.Event().wait()  # no wakes: the worker claims on its poll and on its own answers
        yield pb.WatchTaskWakesResponse()


async def serve(count: int) -> None:
    server = grpc.aio.server()
    task_pb2_grpc.add_GenerationDataServiceServicer_to_server(FloorDataPlane(count), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"ready 127.0.0.1:{port}", flush=True)
    await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1])))
