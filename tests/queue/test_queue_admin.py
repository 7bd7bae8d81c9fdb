"""The admin RPCs (ListTools, ListTasks, GetQueueStats, ListToolOutcomes) through the generated
server on a real PostgreSQL: filters, keyset pages that neither skip nor repeat a task, tampered
page tokens refused with INVALID_ARGUMENT, and counts that match the rows."""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import grpc
import pytest
from conftest import RunningServer, private_service
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from google.protobuf.timestamp_pb2 import Timestamp
from support.pg import Cluster
from support.queue_support import assert_clean_details, new_tool, rpc_error
from support.worker_support import sql

if TYPE_CHECKING:
    Stub = task_pb2_grpc.GenerationDataServiceAsyncStub


@pytest.fixture(scope="module")
async def private(pg_server: tuple[str, Cluster | None]) -> AsyncIterator[tuple[str, RunningServer]]:
    async with private_service(pg_server[0]) as found:
        yield found


@pytest.fixture(scope="module")
async def stub(private: tuple[str, RunningServer]) -> AsyncIterator[Stub]:
    async with grpc.aio.insecure_channel(private[1].address) as ch:
        yield task_pb2_grpc.GenerationDataServiceStub(ch)


async def seeded(stub: Stub, url: str, n: int) -> tuple[pb.Tool, list[str]]:
    """A tool with `n` tasks, one a second apart (newest last); every third failed with an error."""
    tool = await new_tool(stub, "admin")
    tasks = await stub.QueueTasks(pb.QueueTasksRequest(tool_ids=[tool.id] * n))
    ids = sorted(t.id for t in tasks.tasks)
    for i, task_id in enumerate(ids):
        await sql(
            url,
            "UPDATE generation.tasks SET created_at = now() - (%s - %s) * interval '1 second', "
            "status = CASE WHEN %s %% 3 = 0 THEN 'failed' ELSE status END, "
            "error = CASE WHEN %s %% 3 = 0 THEN 'Boom: disk FULL ' || %s ELSE NULL END, "
            "completed_at = CASE WHEN %s %% 3 = 0 THEN now() END WHERE id = %s",
            n, i, i, i, i, i, task_id,
        )  # fmt: skip
    return tool, ids  # oldest first


async def all_pages(stub: Stub, request: pb.ListTasksRequest) -> list[list[pb.ListedTask]]:
    pages: list[list[pb.ListedTask]] = []
    while True:
        response = await stub.ListTasks(request)
        pages.append(list(response.tasks))
        if not response.next_page_token:
            return pages
        following = pb.ListTasksRequest()
        following.CopyFrom(request)
        following.page_token = response.next_page_token
        request = following


async def test_pages_cover_every_task_once_newest_first(stub: Stub, private: tuple[str, RunningServer]) -> None:
    tool, ids = await seeded(stub, private[0], 23)
    pages = await all_pages(stub, pb.ListTasksRequest(tool_id=tool.id, page_size=5))
    assert [len(p) for p in pages] == [5, 5, 5, 5, 3]
    assert [t.id for p in pages for t in p] == ids[::-1]
    # An exact multiple ends without a token, not with an empty page after it.
    pages = await all_pages(stub, pb.ListTasksRequest(tool_id=tool.id, page_size=23))
    assert [len(p) for p in pages] == [23]


async def test_filters_combine(stub: Stub, private: tuple[str, RunningServer]) -> None:
    tool, ids = await seeded(stub, private[0], 12)
    failed = {ids[i] for i in range(12) if i % 3 == 0}
    got = (await stub.ListTasks(pb.ListTasksRequest(tool_id=tool.id, status=pb.TASK_STATUS_FAILED))).tasks
    assert {t.id for t in got} == failed and all(t.error.startswith("Boom") for t in got)
    got = (await stub.ListTasks(pb.ListTasksRequest(tool_id=tool.id, error_contains="disk full 9"))).tasks
    assert [t.id for t in got] == [ids[9]]  # case-insensitive substring
    # Status without tool: the status branch, paged, other tools' failures included but ours all there.
    pages = await all_pages(stub, pb.ListTasksRequest(status=pb.TASK_STATUS_FAILED, page_size=2))
    listed = [t for p in pages for t in p]
    assert failed <= {t.id for t in listed} and len({t.id for t in listed}) == len(listed)
    assert all(t.status == pb.TASK_STATUS_FAILED for t in listed)
    # A time range: [created_after, created_before).
    rows = await sql(
        private[0], "SELECT created_at FROM generation.tasks WHERE id = ANY(%s::uuid[]) ORDER BY created_at", ids
    )
    after, before = Timestamp(), Timestamp()
    after.FromDatetime(rows[3][0])
    before.FromDatetime(rows[7][0])
    got = (await stub.ListTasks(pb.ListTasksRequest(tool_id=tool.id, created_after=after, created_before=before))).tasks
    assert [t.id for t in got] == ids[3:7][::-1]
    # No filter at all: the branch over every task, newest first.
    got = (await stub.ListTasks(pb.ListTasksRequest(page_size=3))).tasks
    assert len(got) == 3 and [t.created_at.ToDatetime() for t in got] == sorted(
        (t.created_at.ToDatetime() for t in got), reverse=True
    )


@pytest.mark.parametrize(
    "token",
    [
        "not base64!",
        base64.b64encode(b"\xff\xfe").decode(),
        base64.b64encode(b"yesterday,nope").decode(),
        base64.b64encode(f"123,{'z' * 36}".encode()).decode(),
        base64.b64encode(b"1,").decode(),
    ],
)
async def test_a_tampered_page_token_is_invalid_argument(stub: Stub, token: str) -> None:
    err = await rpc_error(stub.ListTasks, pb.ListTasksRequest(page_token=token))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
    assert_clean_details(err)


async def test_a_real_token_edited_or_reused_with_other_filters_is_refused(
    stub: Stub, private: tuple[str, RunningServer]
) -> None:
    tool, ids = await seeded(stub, private[0], 6)
    token = (await stub.ListTasks(pb.ListTasksRequest(tool_id=tool.id, page_size=2))).next_page_token
    assert token and tool.id not in token  # opaque
    edited = token[:5] + ("A" if token[5] != "A" else "B") + token[6:]
    for request in (
        pb.ListTasksRequest(tool_id=tool.id, page_size=2, page_token=edited),
        pb.ListTasksRequest(tool_id=tool.id, status=pb.TASK_STATUS_FAILED, page_token=token),
        pb.ListTasksRequest(page_token=token),
    ):
        err = await rpc_error(stub.ListTasks, request)
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
        assert_clean_details(err)
    rest = await stub.ListTasks(pb.ListTasksRequest(tool_id=tool.id, page_size=10, page_token=token))
    assert [t.id for t in rest.tasks] == ids[::-1][2:] and rest.next_page_token == ""


async def test_page_size_is_bounded(stub: Stub, private: tuple[str, RunningServer]) -> None:
    tool, _ = await seeded(stub, private[0], 3)
    err = await rpc_error(stub.ListTasks, pb.ListTasksRequest(tool_id=tool.id, page_size=-4))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT  # AIP-158: a negative size is an error
    assert (
        len((await stub.ListTasks(pb.ListTasksRequest(tool_id=tool.id, page_size=5000))).tasks) == 3
    )  # lowered to 1000
    assert len((await stub.ListTasks(pb.ListTasksRequest(tool_id=tool.id))).tasks) == 3
    err = await rpc_error(stub.ListTasks, pb.ListTasksRequest(tool_id="nope"))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_queue_stats_and_outcomes_match_the_rows(stub: Stub, private: tuple[str, RunningServer]) -> None:
    url = private[0]
    tool, ids = await seeded(stub, url, 9)  # 3 failed, 6 queued
    await sql(url, "UPDATE generation.tasks SET status = 'processing' WHERE id = %s", ids[1])
    await sql(url, "UPDATE generation.tasks SET status = 'completed', completed_at = now() WHERE id = %s", ids[2])
    stats = {(s.tool_id, s.status): s for s in (await stub.GetQueueStats(pb.GetQueueStatsRequest())).stats}
    queued = stats[(tool.id, pb.TASK_STATUS_QUEUED)]
    assert queued.tasks == 4 and stats[(tool.id, pb.TASK_STATUS_PROCESSING)].tasks == 1
    oldest = await sql(url, "SELECT extract(epoch FROM now() - min(created_at))::float8 FROM generation.tasks "
                       "WHERE tool_id = %s AND status = 'queued'", tool.id)  # fmt: skip
    assert abs(queued.oldest_age_seconds - oldest[0][0]) < 5
    outcomes = {o.tool_id: o for o in (await stub.ListToolOutcomes(pb.ListToolOutcomesRequest())).tools}
    mine = outcomes[tool.id]
    assert (mine.completed, mine.failed) == (1, 3) and mine.failure_rate == pytest.approx(0.75)
    # Outside the window: nothing.
    await sql(url, "UPDATE generation.tasks SET completed_at = now() - interval '2 hours' WHERE tool_id = %s", tool.id)
    outcomes = {o.tool_id: o for o in (await stub.ListToolOutcomes(pb.ListToolOutcomesRequest())).tools}
    assert tool.id not in outcomes
    assert tool.id in {
        o.tool_id for o in (await stub.ListToolOutcomes(pb.ListToolOutcomesRequest(window_seconds=3 * 3600))).tools
    }
    tools = (await stub.ListTools(pb.ListToolsRequest())).tools
    assert tool.id in {t.id for t in tools} and [t.name for t in tools] == sorted(t.name for t in tools)
    assert uuid.UUID(tool.id)
