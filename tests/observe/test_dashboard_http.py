"""The dashboard over HTTP against the generated server on a real PostgreSQL: authentication
(refused without credentials, a read token may look but not act, the login cookie), the pages'
content, and data-plane errors shown with the right HTTP status (docs/operations.md)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import grpc
import pytest
from conftest import RunningServer, private_service
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from support.dashboard_support import ADMIN_TOKEN, READ_TOKEN, dashboard, request
from support.pg import Cluster
from support.queue_support import new_tool
from taskdash import DashboardConfig, create_app
from taskdash.app import available_actions
from taskdash.auth import UnsafeConfiguration


@pytest.fixture(scope="module")
async def private(pg_server: tuple[str, Cluster | None]) -> AsyncIterator[tuple[str, RunningServer]]:
    async with private_service(pg_server[0]) as found:
        yield found


@pytest.fixture(scope="module")
async def stub(private: tuple[str, RunningServer]) -> AsyncIterator[task_pb2_grpc.GenerationDataServiceAsyncStub]:
    async with grpc.aio.insecure_channel(private[1].address) as ch:
        yield task_pb2_grpc.GenerationDataServiceStub(ch)


@pytest.fixture(scope="module")
async def guarded(private: tuple[str, RunningServer]) -> AsyncIterator[str]:
    """Listening on every address (so not loopback-only), with an operator and a read-only token."""
    async with dashboard(
        private[1].address, host="0.0.0.0", admin_tokens=[ADMIN_TOKEN], read_tokens=[READ_TOKEN]
    ) as url:
        yield url


def test_off_loopback_without_tokens_it_refuses_to_start() -> None:
    with pytest.raises(UnsafeConfiguration, match="without authentication"):
        create_app(DashboardConfig(listen_host="0.0.0.0"))
    with pytest.raises(UnsafeConfiguration, match="shorter"):
        create_app(DashboardConfig(listen_host="127.0.0.1", admin_tokens=["short"]))


@pytest.mark.parametrize("path", ["/", "/tasks", "/tasks/00000000-0000-0000-0000-000000000001", "/tasks/x/events"])
async def test_a_request_without_credentials_is_refused(guarded: str, path: str) -> None:
    answer = await request("GET", guarded + path)
    assert answer.status == 401 and "Sign in" in answer.text
    wrong = await request("GET", guarded + path, {"authorization": "Bearer not-a-token-of-this-dashboard"})
    assert wrong.status == 401
    refused = await request("POST", guarded + "/act/cancel/00000000-0000-0000-0000-000000000001", form={})
    assert refused.status == 401


async def test_the_login_form_sets_a_session(guarded: str) -> None:
    bad = await request("POST", guarded + "/login", form={"token": "wrong-token-wrong-token"})
    assert bad.status == 401 and "not accepted" in bad.text
    good = await request("POST", guarded + "/login", form={"token": ADMIN_TOKEN})
    assert good.status == 303
    cookie = good.headers["set-cookie"]
    assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
    session = cookie.split(";", 1)[0]
    assert (await request("GET", guarded + "/", {"cookie": session})).status == 200
    forged = session[:-3] + ("abc" if not session.endswith("abc") else "xyz")
    assert (await request("GET", guarded + "/", {"cookie": forged})).status == 401


async def test_pages_show_the_queue(guarded: str, stub: task_pb2_grpc.GenerationDataServiceAsyncStub) -> None:
    tool = await new_tool(stub, "dash")
    await stub.QueueTasks(pb.QueueTasksRequest(tool_ids=[tool.id] * 3))
    admin = {"authorization": f"Bearer {ADMIN_TOKEN}"}
    queues = await request("GET", guarded + "/", admin)
    assert queues.status == 200
    row = re.search(rf'<tr data-tool="{tool.id}">(.*?)</tr>', queues.text, re.S)
    assert row is not None and tool.name in row.group(1)
    assert re.search(r'status=queued">3</a>', row.group(1))
    tasks = await request("GET", guarded + f"/tasks?tool={tool.id}", admin)
    assert tasks.status == 200 and tasks.text.count('href="/tasks/') >= 3
    task_id = re.findall(r'href="/tasks/([0-9a-f-]{36})"', tasks.text)[0]
    detail = await request("GET", guarded + f"/tasks/{task_id}", admin)
    assert detail.status == 200 and task_id in detail.text and 'id="task-input"' in detail.text


async def test_data_plane_errors_keep_their_meaning(guarded: str) -> None:
    admin = {"authorization": f"Bearer {ADMIN_TOKEN}"}
    missing = await request("GET", guarded + "/tasks/00000000-0000-0000-0000-000000000001", admin)
    assert missing.status == 404
    tampered = await request("GET", guarded + "/tasks?page_token=%21%21", admin)
    assert tampered.status == 400 and "INVALID_ARGUMENT" in tampered.text
    assert (await request("GET", guarded + "/tasks?after=yesterday", admin)).status == 400


async def test_a_read_token_may_look_but_not_act(
    guarded: str, stub: task_pb2_grpc.GenerationDataServiceAsyncStub
) -> None:
    tool = await new_tool(stub, "dash")
    task = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id))).task
    reader = {"authorization": f"Bearer {READ_TOKEN}"}
    page = await request("GET", guarded + f"/tasks/{task.id}", reader)
    assert page.status == 200 and "read-only" in page.text and "/act/" not in page.text
    action = next(iter(available_actions()), "cancel")
    refused = await request("POST", guarded + f"/act/{action}/{task.id}", reader, form={})
    assert refused.status == (403 if available_actions() else 404)


async def test_a_read_only_dashboard_offers_no_actions(private: tuple[str, RunningServer]) -> None:
    async with dashboard(private[1].address, admin_tokens=[ADMIN_TOKEN], read_only=True) as url:
        admin = {"authorization": f"Bearer {ADMIN_TOKEN}"}
        page = await request("GET", url + "/", admin)
        assert page.status == 200 and "read-only" in page.text and "/act/" not in page.text
        for action in available_actions():
            refused = await request("POST", url + f"/act/{action}/00000000-0000-0000-0000-000000000001", admin, form={})
            assert refused.status == 403


async def test_an_open_dashboard_on_loopback_still_checks_the_form(private: tuple[str, RunningServer]) -> None:
    """No tokens (loopback only): every visitor may act, but only through the dashboard's own
    forms: a POST without their CSRF field (another site's form) is refused."""
    async with dashboard(private[1].address) as url:
        assert (await request("GET", url + "/")).status == 200
        for action in available_actions():
            refused = await request("POST", url + f"/act/{action}/00000000-0000-0000-0000-000000000001", form={})
            assert refused.status == 403
