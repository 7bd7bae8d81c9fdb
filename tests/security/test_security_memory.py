"""Bounded memory before authentication (issue 27, row 5) and for callers that never read their
answers (row 6): a refused call is answered before its body is received, so a hundred
unauthenticated 3.9 MB requests cost the server almost nothing; answers a caller does not read
are bounded per connection and dropped with the connection when its keepalive goes unanswered.
The server runs as a process of its own; its memory is read from /proc."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from conftest import as_service_role
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from support.pg import Cluster, scratch_database
from support.server_proc import rss_bytes, serving, wait_serving

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "t0ken-for-the-memory-tests-0123456789"
MB = 1024 * 1024
QUEUE_TASKS = "/generation.task.v1.GenerationDataService/QueueTasks"


@pytest.fixture
def queue_db(pg_server: tuple[str, Cluster | None]) -> Iterator[str]:
    with scratch_database(pg_server[0]) as url:
        yield url


def server_argv(url: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "generation.task.v1.task_pydb_server",
        "--database-url",
        as_service_role(url),
        "--pool-max",
        "4",
        "--no-reflection",
        *extra,
    ]


def server_env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT / "generated"), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "AUTH_TOKENS": TOKEN}


AUTH = (("authorization", f"Bearer {TOKEN}"),)


async def test_a_hundred_unauthenticated_big_requests_are_refused_before_they_are_buffered(queue_db: str) -> None:
    pid: list[int] = []
    async with (
        serving(server_argv(queue_db), server_env(), pid) as (address, _),
        grpc.aio.insecure_channel(address) as ch,
    ):
        await wait_serving(ch)
        stub = task_pb2_grpc.GenerationDataServiceStub(ch)
        tool = (await stub.RegisterTool(pb.RegisterToolRequest(name="memory"), metadata=AUTH)).tool
        task = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id), metadata=AUTH)).task
        for _ in range(20):  # warm: the answer path allocated once
            await stub.GetTask(pb.GetTaskRequest(task_id=task.id), metadata=AUTH)
        before = rss_bytes(pid[0])

        body = b"\x0a" + b"\xff" * (39 * MB // 10)  # 3.9 MB, never decoded
        # Each on a channel of its own, as a hundred clients would be (one connection each).
        channels = [grpc.aio.insecure_channel(address) for _ in range(100)]
        try:
            calls = [c.unary_unary(QUEUE_TASKS, None, None)(body, timeout=60) for c in channels]
            outcomes = await asyncio.gather(*calls, return_exceptions=True)
            # Authenticated calls are still answered meanwhile and after.
            got = await stub.GetTask(pb.GetTaskRequest(task_id=task.id), metadata=AUTH, timeout=30)
            assert got.task.id == task.id
        finally:
            await asyncio.gather(*(c.close(None) for c in channels))
        peak = rss_bytes(pid[0], "VmHWM")
        codes = {o.code() if isinstance(o, grpc.aio.AioRpcError) else o for o in outcomes}
        assert codes <= {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.UNAVAILABLE}, codes
        assert grpc.StatusCode.UNAUTHENTICATED in codes, codes
        growth = max(peak, rss_bytes(pid[0])) - before
        assert growth < 100 * MB, f"the server grew by {growth / MB:.0f} MB for 100 refused 3.9 MB requests"
        print(f"rss before {before / MB:.0f} MB, growth {growth / MB:.1f} MB")


# -- callers that never read -----------------------------------------------------------------


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def _literal(name: str, value: str) -> bytes:
    """An HPACK header field, literal without indexing, no Huffman coding (RFC 7541, 6.2.2)."""
    n, v = name.encode(), value.encode()
    assert len(n) < 127 and len(v) < 127
    return b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v


def non_reading_call(address: str, method: str, message: bytes) -> bytes:
    """The bytes of one gRPC call, as a client that will never read its answer sends them: the
    HTTP/2 preface, settings granting the server a window of 2**31-1 (so it may send the whole
    answer at once), the request's headers and its one message."""
    window = 2**31 - 1
    settings = (4).to_bytes(2, "big") + window.to_bytes(4, "big")  # SETTINGS_INITIAL_WINDOW_SIZE
    headers = b"".join(
        _literal(k, v)
        for k, v in (
            (":method", "POST"),
            (":scheme", "http"),
            (":path", method),
            (":authority", address),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("authorization", f"Bearer {TOKEN}"),
        )
    )
    body = b"\x00" + len(message).to_bytes(4, "big") + message
    return b"".join(
        (
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            _frame(0x4, 0, 0, settings),
            _frame(0x8, 0, 0, (window - 65535).to_bytes(4, "big")),  # WINDOW_UPDATE, the connection
            _frame(0x1, 0x4, 1, headers),  # HEADERS, END_HEADERS
            _frame(0x0, 0x1, 1, body),  # DATA, END_STREAM
        )
    )


async def test_fifty_callers_that_never_read_a_big_answer_are_dropped(queue_db: str) -> None:
    pid: list[int] = []
    argv = server_argv(queue_db, "--keepalive-seconds", "1", "--keepalive-timeout-seconds", "1",
                       "--max-unsent-answer-bytes", str(8 * MB))  # fmt: skip
    async with (
        serving(argv, server_env(), pid) as (address, _),
        grpc.aio.insecure_channel(address) as ch,
    ):
        await wait_serving(ch)
        stub = task_pb2_grpc.GenerationDataServiceStub(ch)
        tool = (await stub.RegisterTool(pb.RegisterToolRequest(name="slow-readers"), metadata=AUTH)).tool
        big = '"' + "x" * (35 * MB // 10) + '"'
        task = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id, input=big), metadata=AUTH)).task
        assert len((await stub.GetTask(pb.GetTaskRequest(task_id=task.id), metadata=AUTH)).task.input) > 3 * MB
        before = rss_bytes(pid[0])

        host, port = address.rsplit(":", 1)
        request = non_reading_call(address, "/generation.task.v1.GenerationDataService/GetTask",
                                   pb.GetTaskRequest(task_id=task.id).SerializeToString())  # fmt: skip
        writers = []
        for _ in range(50):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            # A small receive buffer, as a caller too slow to drain its socket leaves: the answer
            # stays with the server rather than in this machine's socket buffers.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect((host, int(port)))
            sock.setblocking(False)
            _, writer = await asyncio.open_connection(sock=sock)
            writer.write(request)
            await writer.drain()
            writers.append(writer)
        try:
            # Answers past the cap are refused at once (UNAVAILABLE); the server drops each
            # connection whose keepalive ping goes unanswered, and its answer's memory with it.
            # A caller that reads retries until the answers waiting for the others are gone.
            got = None
            for _ in range(600):
                try:
                    got = await stub.GetTask(pb.GetTaskRequest(task_id=task.id), metadata=AUTH, timeout=30)
                    break
                except grpc.aio.AioRpcError as err:
                    assert err.code() == grpc.StatusCode.UNAVAILABLE, err
                    assert "answers are waiting" in (err.details() or ""), err.details()
                await asyncio.sleep(0.1)
            assert got is not None and got.task.id == task.id
        finally:
            for writer in writers:
                writer.close()
        peak = rss_bytes(pid[0], "VmHWM") - before
        assert peak < 100 * MB, f"the server grew by {peak / MB:.0f} MB for 50 callers that never read"
        print(f"rss before {before / MB:.0f} MB, peak growth {peak / MB:.1f} MB")
