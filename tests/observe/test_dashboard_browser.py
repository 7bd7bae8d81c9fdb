"""The dashboard as a person uses it: Debian's chromium, driven by Playwright, against the
generated server on a real PostgreSQL. It signs in, reads the queues, filters and pages the task
list, opens a task, watches a live event arrive, and (when the data plane has the queue-control
RPCs) cancels and retries it, checking what the database then holds. Screenshots of the main
pages go to build/screenshots/ (gitignored)."""

from __future__ import annotations

import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from conftest import RunningServer, private_service
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from playwright.async_api import Browser, Page, async_playwright, expect
from support.dashboard_support import ADMIN_TOKEN, dashboard
from support.pg import Cluster
from support.queue_support import new_tool
from support.worker_support import sql
from taskdash.app import available_actions

CHROMIUM = "/usr/bin/chromium"
SHOTS = Path(__file__).resolve().parent.parent / "build" / "screenshots"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed (.ci/run)")


@pytest.fixture(scope="module")
async def private(pg_server: tuple[str, Cluster | None]) -> AsyncIterator[tuple[str, RunningServer]]:
    async with private_service(pg_server[0]) as found:
        yield found


@pytest.fixture(scope="module")
async def stub(private: tuple[str, RunningServer]) -> AsyncIterator[task_pb2_grpc.GenerationDataServiceAsyncStub]:
    async with grpc.aio.insecure_channel(private[1].address) as ch:
        yield task_pb2_grpc.GenerationDataServiceStub(ch)


@pytest.fixture(scope="module")
async def site(private: tuple[str, RunningServer]) -> AsyncIterator[str]:
    async with dashboard(private[1].address, admin_tokens=[ADMIN_TOKEN], page_size=10) as url:
        yield url


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as p:
        launched = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield launched
        await launched.close()


@pytest.fixture
async def page(browser: Browser, site: str) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport={"width": 1280, "height": 800})
    signed_in = await context.new_page()
    await signed_in.goto(site + "/")
    await expect(signed_in.get_by_role("heading", name="Sign in")).to_be_visible()
    await signed_in.get_by_label("Dashboard token").fill(ADMIN_TOKEN)
    await signed_in.get_by_role("button", name="Sign in").click()
    await expect(signed_in.get_by_role("heading", name="Queues")).to_be_visible()
    yield signed_in
    await context.close()


async def seeded(stub: task_pb2_grpc.GenerationDataServiceAsyncStub, url: str) -> tuple[pb.Tool, list[str]]:
    """A tool with 25 tasks, one a minute apart (ids newest first); the 7 oldest failed with an error."""
    tool = await new_tool(stub, "browser")
    created = await stub.QueueTasks(pb.QueueTasksRequest(tool_ids=[tool.id] * 25, inputs=['{"prompt": "a cat"}'] * 25))
    ids = sorted(t.id for t in created.tasks)
    await sql(url, "UPDATE generation.tasks t SET created_at = now() - (26 - o.n) * interval '1 minute', "
              "status = CASE WHEN o.n <= 7 THEN 'failed' ELSE 'queued' END::generation.task_status, "
              "error = CASE WHEN o.n <= 7 THEN 'CUDA out of memory #' || o.n END, "
              "completed_at = CASE WHEN o.n <= 7 THEN now() END "
              "FROM unnest(%s::uuid[]) WITH ORDINALITY AS o (id, n) WHERE t.id = o.id", ids)  # fmt: skip
    return tool, ids[::-1]


async def test_queues_filters_pages_and_a_live_task(
    page: Page, site: str, stub: task_pb2_grpc.GenerationDataServiceAsyncStub, private: tuple[str, RunningServer]
) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    tool, ids = await seeded(stub, private[0])
    await page.reload()
    row = page.locator(f'tr[data-tool="{tool.id}"]')
    await expect(row).to_contain_text(tool.name)
    await expect(row.locator("td").nth(1)).to_have_text("18")  # queued
    await page.screenshot(path=str(SHOTS / "queues.png"), full_page=True)

    # The task list: filter by tool, then page through its 25 tasks, 10 a page, newest first.
    await page.get_by_role("link", name="Tasks", exact=True).click()
    await page.locator("select[name=tool]").select_option(tool.id)
    await page.get_by_role("button", name="Filter").click()
    links = page.locator("#tasks tbody a")
    await expect(links).to_have_count(10)
    seen = [await a.inner_text() for a in await links.all()]
    await page.screenshot(path=str(SHOTS / "tasks.png"), full_page=True)
    await page.locator("#next-page").click()
    await expect(links).to_have_count(10)
    seen += [await a.inner_text() for a in await links.all()]
    await page.locator("#next-page").click()
    await expect(links).to_have_count(5)
    seen += [await a.inner_text() for a in await links.all()]
    await expect(page.locator("#next-page")).to_have_count(0)
    assert seen == [i[:8] for i in ids], "every task once, newest first"

    # Failed ones whose error mentions memory: the 7 oldest.
    await page.locator("#first-page").click()
    await page.locator("select[name=status]").select_option("failed")
    await page.locator("input[name=error]").fill("out of MEMORY")
    await page.get_by_role("button", name="Filter").click()
    await expect(links).to_have_count(7)
    await expect(page.locator("#tasks")).to_contain_text("CUDA out of memory #7")

    # A task's detail, and a live event arriving while it is open.
    await links.first.click()
    await expect(page.locator("#task-status")).to_have_text("failed")
    await expect(page.locator("#task-input")).to_contain_text('"prompt": "a cat"')
    task_id = ids[-7]
    assert task_id in page.url
    await expect(page.locator("#live-state")).to_have_text("(live)")
    await stub.AppendTaskEvents(
        pb.AppendTaskEventsRequest(
            task_ids=[task_id], kinds=["progress"], data=['{"fraction": 0.5}'], emitted_at_unix=[time.time()]
        )
    )
    await expect(page.locator("#events tbody tr")).to_have_count(1)
    await expect(page.locator("#events tbody")).to_contain_text('"fraction": 0.5')
    await page.screenshot(path=str(SHOTS / "task.png"), full_page=True)


@pytest.mark.skipif(
    not {"cancel", "retry"} <= set(available_actions()), reason="the data plane has no CancelTask/RetryTask yet"
)
async def test_cancel_and_retry_a_task(
    page: Page, site: str, stub: task_pb2_grpc.GenerationDataServiceAsyncStub, private: tuple[str, RunningServer]
) -> None:
    tool = await new_tool(stub, "browser")
    task = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id))).task
    await page.goto(f"{site}/tasks/{task.id}")
    await page.locator("#cancel-task").click()
    await expect(page.locator("#task-status")).to_have_text("cancelled")
    assert (await sql(private[0], "SELECT status::text FROM generation.tasks WHERE id = %s", task.id)) == [
        ("cancelled",)
    ]
    await page.locator("#retry-task").click()
    await expect(page.locator("#task-status")).to_have_text("queued")
    assert (await sql(private[0], "SELECT status::text FROM generation.tasks WHERE id = %s", task.id)) == [("queued",)]
