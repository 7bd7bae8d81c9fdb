"""One trace from the enqueuing request to the worker's task span: the server's --tracing spans
(a child of the caller's traceparent), the traceparent QueueTask stores, and the fleet's task
span continuing it. Read with the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import grpc
import pytest
from conftest import RunningServer, private_service
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from support.pg import Cluster
from support.queue_support import new_tool
from support.worker_support import wait_until
from taskworker import FleetObserver, TaskContext, WorkerFleet

EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def provider() -> Iterator[None]:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(tracer_provider)  # once per process: no other test sets one
    yield


@pytest.fixture(scope="module")
async def private(pg_server: tuple[str, Cluster | None], provider: None) -> AsyncIterator[tuple[str, RunningServer]]:
    async with private_service(pg_server[0], tracing=True) as found:
        yield found


@pytest.fixture(scope="module")
async def stub(private: tuple[str, RunningServer]) -> AsyncIterator[task_pb2_grpc.GenerationDataServiceAsyncStub]:
    async with grpc.aio.insecure_channel(private[1].address) as ch:
        yield task_pb2_grpc.GenerationDataServiceStub(ch)


def ancestors(span: ReadableSpan, spans: list[ReadableSpan]) -> list[str]:
    """The names of `span`'s ancestors among `spans`, nearest first."""
    by_id = {s.context.span_id: s for s in spans}
    out: list[str] = []
    parent = span.parent
    while parent is not None and parent.span_id in by_id:
        found = by_id[parent.span_id]
        out.append(found.name)
        parent = found.parent
    return out


async def run_one(stub: task_pb2_grpc.GenerationDataServiceAsyncStub, tool: pb.Tool, task_id: str) -> None:
    done = asyncio.Event()

    async def process(task: pb.Task, ctx: TaskContext) -> object:
        with trace.get_tracer("test").start_as_current_span("inside process"):
            pass
        done.set()
        return {}

    fleet = WorkerFleet(stub, poll_interval=0.2, observer=FleetObserver(tracing=True))
    fleet.add_tool(tool.id, process)
    running = asyncio.create_task(fleet.run())
    try:
        await asyncio.wait_for(done.wait(), 20)
        await wait_until(lambda: fleet.stats.completed == 1, what="the completion")
    finally:
        fleet.drain()
        await asyncio.wait_for(running, 30)


async def test_the_worker_span_descends_from_the_enqueuing_request(
    stub: task_pb2_grpc.GenerationDataServiceAsyncStub,
) -> None:
    tool = await new_tool(stub, "trace")
    EXPORTER.clear()
    with trace.get_tracer("test").start_as_current_span("enqueuing request") as root:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        task = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id), metadata=tuple(carrier.items()))).task
    trace_id = root.get_span_context().trace_id
    # What the row keeps is the server span's context: same trace, a span below the caller's.
    assert task.w3c_traceparent.split("-")[1] == f"{trace_id:032x}"
    assert task.w3c_traceparent.split("-")[2] != f"{root.get_span_context().span_id:016x}"
    await run_one(stub, tool, task.id)
    spans = list(EXPORTER.get_finished_spans())
    worker = next(s for s in spans if s.name == f"task {tool.id}")
    assert worker.context.trace_id == trace_id
    assert worker.kind == trace.SpanKind.CONSUMER
    assert ancestors(worker, spans) == ["generation.task.v1.GenerationDataService/QueueTask", "enqueuing request"]
    inner = next(s for s in spans if s.name == "inside process")
    assert ancestors(inner, spans)[0] == f"task {tool.id}"
    server = next(s for s in spans if s.name.endswith("/QueueTask") and s.context.trace_id == trace_id)
    assert server.kind == trace.SpanKind.SERVER
    assert server.attributes is not None
    assert server.attributes["rpc.grpc.status_code"] == 0
    assert server.attributes["db.query.summary"] == "queue_task"
    assert server.attributes["db.response.returned_rows"] == 1
    # The statement's name, never its values: the input is nowhere in the span.
    assert all("{}" not in str(v) for v in server.attributes.values())


async def test_an_enqueue_without_traceparent_starts_the_trace(
    stub: task_pb2_grpc.GenerationDataServiceAsyncStub,
) -> None:
    tool = await new_tool(stub, "trace")
    EXPORTER.clear()
    task = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id))).task
    assert task.w3c_traceparent
    await run_one(stub, tool, task.id)
    spans = list(EXPORTER.get_finished_spans())
    worker = next(s for s in spans if s.name == f"task {tool.id}")
    assert ancestors(worker, spans) == ["generation.task.v1.GenerationDataService/QueueTask"]


async def test_a_failed_call_is_an_error_span(stub: task_pb2_grpc.GenerationDataServiceAsyncStub) -> None:
    EXPORTER.clear()
    with pytest.raises(grpc.aio.AioRpcError):
        await stub.GetTask(pb.GetTaskRequest(task_id="00000000-0000-0000-0000-000000000001"))
    span = next(s for s in EXPORTER.get_finished_spans() if s.name.endswith("/GetTask"))
    assert span.status.status_code == trace.StatusCode.ERROR
    assert span.attributes is not None and span.attributes["rpc.grpc.status_code"] == grpc.StatusCode.NOT_FOUND.value[0]
