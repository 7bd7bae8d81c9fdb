"""Shared fixtures: a real PostgreSQL with a scratch database, and the generated
GenerationDataService served over gRPC on a free port."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from psycopg.conninfo import make_conninfo

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "generated"))
sys.path.insert(0, str(ROOT / "worker"))  # the taskworker package (tests/worker/)
sys.path.insert(0, str(ROOT / "dashboard"))  # the taskdash package (tests/observe/)
sys.path.insert(0, str(ROOT / "tests"))
CORPUS_JOBS_SCHEMA = ROOT / "tests" / "corpus" / "_shared" / "jobs" / "schema.sql"

from generation.task.v1 import task_pb2, task_pb2_grpc, task_pydb_server  # noqa: E402
from pydb.runtime import server as pydb_server  # noqa: E402
from support.pg import Cluster, postgres_server, scratch_database, with_dbname  # noqa: E402


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`make test`'s `-n 4 --dist loadscope`: a test module runs whole on one worker (a
    module-scoped fixture is built once), the slowest first (support/xdist_schedule.py)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from support.xdist_schedule import ModuleScheduling

    return ModuleScheduling(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker, the slowest modules first (every worker sorts alike, as xdist
    requires); a run in one process keeps pytest's order."""
    if hasattr(config, "workerinput"):
        from support.xdist_schedule import slowest_first

        items[:] = slowest_first(items)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[tuple[str, Cluster | None]]:
    with postgres_server() as found:
        yield found


@pytest.fixture(scope="session")
def database_url(pg_server: tuple[str, Cluster | None]) -> Iterator[str]:
    with scratch_database(pg_server[0]) as url:
        yield url


def server_config(database_url: str, **overrides: object) -> pydb_server.Config:
    base = pydb_server.Config(
        database_url=database_url,
        listen_addr="127.0.0.1:0",
        pool_min=2,
        pool_max=20,
        tls_cert=None,
        tls_key=None,
        reflection=True,
        log_level="info",
        grace_seconds=5.0,
        health_interval=0.2,
        # Off: these tests hold row locks on purpose, to watch deadlines, cancellation and shutdown
        # act on a blocked statement. tests/security/ tests the lock timeout itself.
        lock_timeout=0.0,
    )
    return dataclasses.replace(base, **overrides)  # type: ignore[arg-type]


SERVICE_ROLE = "pydb_task_service"


def as_service_role(url: str) -> str:
    """`url` as the least-privileged role the server runs as, never the superuser that made the
    database: tests/support/pg.py's scratch_database applies its grants (service_role.sql) with the
    queue's schema. A database made otherwise gets the role's login and no table privileges."""
    # Unreachable (a test starting the server during an outage): scratch_database made the role.
    with (
        contextlib.suppress(psycopg.OperationalError),
        psycopg.connect(with_dbname(url, "postgres"), autocommit=True) as admin,
    ):
        if admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (SERVICE_ROLE,)).fetchone() is None:
            admin.execute(f"CREATE ROLE {SERVICE_ROLE} LOGIN")
    return make_conninfo(url, user=SERVICE_ROLE)


class RunningServer:
    def __init__(self, port: int, stop: asyncio.Event, task: asyncio.Task[None]) -> None:
        self.port = port
        self.address = f"127.0.0.1:{port}"
        self.stop = stop
        self.task = task

    async def close(self) -> None:
        self.stop.set()
        await self.task


async def start_server(cfg: pydb_server.Config) -> RunningServer:
    """Serve the generated service in this event loop, as the service role; returns once it listens."""
    cfg = dataclasses.replace(
        cfg,
        database_url=as_service_role(cfg.database_url),
        database_listen_url=as_service_role(cfg.database_listen_url) if cfg.database_listen_url else "",
    )
    stop = asyncio.Event()
    ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        pydb_server.serve(
            cfg, task_pydb_server.register, task_pydb_server.SERVICE_NAMES, started=ready.set_result, stop=stop
        )
    )
    waiters: list[asyncio.Future[object]] = [task, ready]  # type: ignore[list-item]
    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        task.result()  # raises what made it stop
    return RunningServer(ready.result(), stop, task)


@contextlib.asynccontextmanager
async def private_service(server_url: str, **overrides: object) -> AsyncIterator[tuple[str, RunningServer]]:
    """A scratch database of its own and the generated server on it: for tests of RPCs that see
    every tool's rows (ListStaleTasks, the reaper), which must not meet other modules' rows."""
    with scratch_database(server_url) as url:
        running = await start_server(server_config(url, **overrides))
        try:
            yield url, running
        finally:
            await running.close()


@pytest.fixture(scope="module")
def corpus_db(pg_server: tuple[str, Cluster | None]) -> Iterator[psycopg.Connection]:
    """A connection to a scratch database holding the corpus' shared jobs schema."""
    with (
        scratch_database(pg_server[0], schema=CORPUS_JOBS_SCHEMA) as url,
        psycopg.connect(url, autocommit=True) as conn,
    ):
        yield conn


@pytest.fixture(scope="session")
async def service(database_url: str) -> AsyncIterator[RunningServer]:
    running = await start_server(server_config(database_url))
    yield running
    await running.close()


@pytest.fixture(scope="session")
async def channel(service: RunningServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(service.address) as ch:
        yield ch


@pytest.fixture
def stub(channel: grpc.aio.Channel) -> task_pb2_grpc.GenerationDataServiceAsyncStub:
    return task_pb2_grpc.GenerationDataServiceStub(channel)


@pytest.fixture
async def tool(stub: task_pb2_grpc.GenerationDataServiceAsyncStub) -> task_pb2.Tool:
    """A fresh tool per test, so tests never see each other's queue."""
    resp = await stub.RegisterTool(task_pb2.RegisterToolRequest(name=f"tool-{uuid.uuid4().hex[:10]}"))
    return resp.tool
