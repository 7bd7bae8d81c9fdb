"""The generated server as an operator runs it: deadlines and cancellation reach the
statement, graceful shutdown, health that follows the database, TLS, reflection, the W3C
traceparent, structured logs. Real PostgreSQL and real gRPC throughout."""

from __future__ import annotations

import asyncio
import logging
import re
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import psycopg
import pytest
from conftest import RunningServer, server_config, start_server
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from pydb.runtime import server as pydb_server
from support.pg import Cluster, scratch_database, with_dbname

if TYPE_CHECKING:
    from generation.task.v1.task_pb2_grpc import GenerationDataServiceAsyncStub as Stub

SERVICE = "generation.task.v1.GenerationDataService"
# RegisterTool's INSERT waits on a name another transaction inserted and has not committed.
BLOCKED = """
SELECT pid FROM pg_stat_activity
WHERE datname = current_database() AND state = 'active' AND wait_event_type = 'Lock'
  AND query LIKE 'INSERT INTO generation.tools%%'
"""


async def wait_until(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 10.0) -> None:
    """Poll `check` until it is true; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)


async def blocked_pids(conn: psycopg.AsyncConnection[object]) -> list[int]:
    cur = await conn.execute(BLOCKED)
    return [row[0] for row in await cur.fetchall()]  # type: ignore[index]


async def hold_name(url: str, name: str) -> psycopg.AsyncConnection[object]:
    """A connection with an open transaction that inserted tool `name`: a RegisterTool for
    the same name blocks on it until it commits or rolls back."""
    holder: psycopg.AsyncConnection[object] = await psycopg.AsyncConnection.connect(url)
    await holder.execute("INSERT INTO generation.tools (name) VALUES (%s)", (name,))
    return holder


async def observer(url: str) -> psycopg.AsyncConnection[object]:
    return await psycopg.AsyncConnection.connect(url, autocommit=True)


# -- deadline and cancellation ---------------------------------------------------------------


async def test_deadline_bounds_the_statement_and_cancels_it(stub: Stub, database_url: str) -> None:
    name = f"locked-{uuid.uuid4().hex[:8]}"
    holder = await hold_name(database_url, name)
    watch = await observer(database_url)
    try:
        started = time.monotonic()
        call = asyncio.ensure_future(stub.RegisterTool(pb.RegisterToolRequest(name=name), timeout=2.0))
        await wait_until(lambda: _nonempty(blocked_pids(watch)), "the statement to block on the row lock", 2.0)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await call
        elapsed = time.monotonic() - started
        assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert 1.9 <= elapsed < 3.5, elapsed  # ended by the deadline, not by the lock (held throughout)
        # The server cancelled the statement: nothing is left waiting on the lock we still hold.
        await wait_until(lambda: _empty(blocked_pids(watch)), "the backend to stop running the INSERT", 3.0)
    finally:
        await holder.rollback()
        await holder.close()
        await watch.close()


async def test_cancelled_call_cancels_its_query(stub: Stub, database_url: str) -> None:
    name = f"locked-{uuid.uuid4().hex[:8]}"
    holder = await hold_name(database_url, name)
    watch = await observer(database_url)
    try:
        call = stub.RegisterTool(pb.RegisterToolRequest(name=name))  # no deadline at all
        await wait_until(lambda: _nonempty(blocked_pids(watch)), "the statement to block on the row lock", 5.0)
        assert call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await wait_until(lambda: _empty(blocked_pids(watch)), "the backend to stop running the INSERT", 3.0)
        await holder.commit()  # the cancelled INSERT never ran: one row, the holder's
        cur = await watch.execute("SELECT count(*) FROM generation.tools WHERE name = %s", (name,))
        assert await cur.fetchone() == (1,)
    finally:
        await holder.close()
        await watch.close()


async def _nonempty(pids: Awaitable[list[int]]) -> bool:
    return bool(await pids)


async def _empty(pids: Awaitable[list[int]]) -> bool:
    return not await pids


# -- graceful shutdown -----------------------------------------------------------------------


@pytest.fixture
async def own_database(pg_server: tuple[str, Cluster | None]) -> AsyncIterator[str]:
    """A scratch database only this test's server uses, so its backends can be counted."""
    with scratch_database(pg_server[0]) as url:
        yield url


async def no_other_backends(watch: psycopg.AsyncConnection[object], holder: psycopg.AsyncConnection[object]) -> bool:
    """Whether only `watch` and `holder` are connected to the database: the server's pool is closed."""
    cur = await watch.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> ALL(%s)",
        ([watch.info.backend_pid, holder.info.backend_pid],),
    )
    row = await cur.fetchone()
    return bool(row == (0,))


async def test_graceful_shutdown_finishes_in_flight_call_then_closes_pool(own_database: str) -> None:
    running = await start_server(server_config(own_database, grace_seconds=10.0))
    name = f"inflight-{uuid.uuid4().hex[:8]}"
    holder = await hold_name(own_database, name)
    watch = await observer(own_database)
    try:
        async with grpc.aio.insecure_channel(running.address) as ch:
            stub = task_pb2_grpc.GenerationDataServiceStub(ch)
            call = stub.RegisterTool(pb.RegisterToolRequest(name=name), timeout=30)
            await wait_until(lambda: _nonempty(blocked_pids(watch)), "the in-flight call to reach the database")
            running.stop.set()

            async def refuses_new_calls() -> bool:
                try:
                    await stub.RegisterTool(pb.RegisterToolRequest(name="after-stop"), timeout=1)
                except grpc.aio.AioRpcError as err:
                    return err.code() == grpc.StatusCode.UNAVAILABLE
                return False

            await wait_until(refuses_new_calls, "the stopping server to refuse new calls")
            assert not call.done() and not running.task.done()
            await holder.commit()  # let the in-flight call finish, within the grace period
            resp = await call
            assert resp.tool.name == name
        await asyncio.wait_for(running.task, 10)
        await wait_until(lambda: no_other_backends(watch, holder), "the pool's connections to close", 5.0)
    finally:
        await holder.close()
        await watch.close()
        if not running.task.done():
            await running.close()


async def test_shutdown_cancels_calls_still_running_after_the_grace_period(own_database: str) -> None:
    running = await start_server(server_config(own_database, grace_seconds=0.5))
    name = f"overdue-{uuid.uuid4().hex[:8]}"
    holder = await hold_name(own_database, name)
    watch = await observer(own_database)
    try:
        async with grpc.aio.insecure_channel(running.address) as ch:
            call = task_pb2_grpc.GenerationDataServiceStub(ch).RegisterTool(
                pb.RegisterToolRequest(name=name), timeout=30
            )
            await wait_until(lambda: _nonempty(blocked_pids(watch)), "the in-flight call to reach the database")
            started = time.monotonic()
            running.stop.set()
            await asyncio.wait_for(running.task, 10)
            assert time.monotonic() - started < 5
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await call
            assert err.value.code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)
        assert await blocked_pids(watch) == [], "the overdue call's statement was cancelled before the pool closed"
        await wait_until(lambda: no_other_backends(watch, holder), "the pool's connections to close", 5.0)
    finally:
        await holder.rollback()
        await holder.close()
        await watch.close()


# -- health ----------------------------------------------------------------------------------


async def test_health_not_serving_until_the_database_can_be_reached(
    pg_server: tuple[str, Cluster | None], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pydb")
    name = f"pydb_test_late_{uuid.uuid4().hex[:10]}"
    url = with_dbname(pg_server[0], name)  # does not exist yet: every connection attempt fails
    running = await start_server(
        server_config(url, pool_min=1, pool_timeout=0.3, health_interval=0.1, grace_seconds=1.0)
    )
    try:
        async with grpc.aio.insecure_channel(running.address) as ch:
            health = health_pb2_grpc.HealthStub(ch)

            async def status(service: str) -> int:
                resp = await health.Check(health_pb2.HealthCheckRequest(service=service), timeout=2)
                return int(resp.status)

            await wait_until(
                lambda: _logged(caplog, "status=NOT_SERVING"), "the watcher to find the database unreachable"
            )
            for service in ("", SERVICE):
                assert await status(service) == health_pb2.HealthCheckResponse.NOT_SERVING
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await task_pb2_grpc.GenerationDataServiceStub(ch).RegisterTool(
                    pb.RegisterToolRequest(name="x"), timeout=5
                )
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE
            assert err.value.details() == "database unavailable"

            with psycopg.connect(pg_server[0], autocommit=True) as admin:
                admin.execute(f'CREATE DATABASE "{name}"')

            async def serving() -> bool:
                return bool(await status(SERVICE) == health_pb2.HealthCheckResponse.SERVING)

            await wait_until(serving, "SERVING once the database exists", 20.0)
            assert await status("") == health_pb2.HealthCheckResponse.SERVING
            # Graceful shutdown turns health NOT_SERVING before the port closes: a watcher
            # connected before the shutdown sees the change (a new Check may already be refused).
            watch = health.Watch(health_pb2.HealthCheckRequest(service=""), timeout=10)
            first = await watch.read()
            assert isinstance(first, health_pb2.HealthCheckResponse)
            assert first.status == health_pb2.HealthCheckResponse.SERVING
            running.stop.set()
            update = await watch.read()
            assert isinstance(update, health_pb2.HealthCheckResponse)
            assert update.status == health_pb2.HealthCheckResponse.NOT_SERVING
            watch.cancel()
    finally:
        await running.close()
        with psycopg.connect(pg_server[0], autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def _logged(caplog: pytest.LogCaptureFixture, text: str) -> bool:
    return any(text in r.getMessage() for r in caplog.records)


async def _is(value: Awaitable[int], expected: int) -> bool:
    try:
        return await value == expected
    except grpc.aio.AioRpcError:
        return False


# -- TLS and reflection ----------------------------------------------------------------------


def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


async def test_tls_serves_tls_clients_only(database_url: str, tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    running = await start_server(server_config(database_url, tls_cert=str(cert), tls_key=str(key)))
    try:
        creds = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        options = (("grpc.ssl_target_name_override", "localhost"),)
        async with grpc.aio.secure_channel(running.address, creds, options=options) as ch:
            tool = (
                await task_pb2_grpc.GenerationDataServiceStub(ch).RegisterTool(
                    pb.RegisterToolRequest(name="tls-tool"), timeout=10
                )
            ).tool
            assert tool.name == "tls-tool"
        async with grpc.aio.insecure_channel(running.address) as plain:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await task_pb2_grpc.GenerationDataServiceStub(plain).RegisterTool(
                    pb.RegisterToolRequest(name="plain"), timeout=2
                )
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        other = grpc.ssl_channel_credentials()  # the system roots do not trust our self-signed cert
        async with grpc.aio.secure_channel(running.address, other, options=options) as ch:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await task_pb2_grpc.GenerationDataServiceStub(ch).RegisterTool(
                    pb.RegisterToolRequest(name="untrusted"), timeout=2
                )
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        await running.close()


async def list_services(address: str) -> list[str]:
    async with grpc.aio.insecure_channel(address) as ch:
        stub = reflection_pb2_grpc.ServerReflectionStub(ch)
        call = stub.ServerReflectionInfo(timeout=5)
        await call.write(reflection_pb2.ServerReflectionRequest(list_services=""))
        await call.done_writing()
        names = [s.name async for resp in call for s in resp.list_services_response.service]
        return sorted(names)


async def test_reflection_on_by_default_and_switchable_off(database_url: str, service: RunningServer) -> None:
    assert SERVICE in await list_services(service.address)
    assert "grpc.health.v1.Health" in await list_services(service.address)
    off = await start_server(server_config(database_url, reflection=False))
    try:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await list_services(off.address)
        assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        await off.close()


# -- W3C traceparent -------------------------------------------------------------------------

TP_META = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
TP_FIELD = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.mark.parametrize(
    ("field", "metadata", "stored"),
    [
        (None, TP_META, TP_META),  # metadata into the row
        (TP_FIELD, TP_META, TP_FIELD),  # a request field wins over metadata
        (None, None, None),  # neither: NULL
        (None, "00-not-a-traceparent", None),  # malformed metadata is ignored
        (None, "00-00000000000000000000000000000000-00f067aa0ba902b7-01", None),  # all-zero trace id is invalid
    ],
)
async def test_traceparent_from_metadata_into_the_row(
    stub: Stub, tool: pb.Tool, database_url: str, field: str | None, metadata: str | None, stored: str | None
) -> None:
    req = pb.QueueTaskRequest(tool_id=tool.id)
    if field is not None:
        req.w3c_traceparent = field
    md = (("traceparent", metadata),) if metadata is not None else None
    task = (await stub.QueueTask(req, metadata=md)).task
    assert (task.w3c_traceparent if task.HasField("w3c_traceparent") else None) == stored
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute("SELECT w3c_traceparent FROM generation.tasks WHERE id = %s", (task.id,))
        assert await cur.fetchone() == (stored,)


# -- logs ------------------------------------------------------------------------------------

LOGFMT = re.compile(r'ts=\S+ level=(debug|info|warning|error) logger=\S+( [a-z_]+=("([^"\\]|\\.)*"|\S+))+')


async def test_one_debug_line_per_call_and_server_faults_always(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    running = await start_server(server_config(database_url))
    try:
        async with grpc.aio.insecure_channel(running.address) as ch:
            stub = task_pb2_grpc.GenerationDataServiceStub(ch)
            caplog.clear()
            await stub.RegisterTool(pb.RegisterToolRequest(name="logged-tool"))
            with pytest.raises(grpc.aio.AioRpcError):
                await stub.GetTask(pb.GetTaskRequest(task_id=str(uuid.uuid4())))
            with pytest.raises(grpc.aio.AioRpcError):
                await stub.GetTask(pb.GetTaskRequest(task_id="nope"))
        calls = [r for r in caplog.records if r.name == "pydb" and r.getMessage().startswith("rpc=")]
        assert [(r.levelno, r.getMessage().split(" ms=")[0]) for r in calls] == [
            (logging.DEBUG, "rpc=RegisterTool code=OK"),
            (logging.DEBUG, "rpc=GetTask code=NOT_FOUND"),
            (logging.DEBUG, "rpc=GetTask code=INVALID_ARGUMENT"),
        ]
        formatter = pydb_server.LogfmtFormatter()
        for r in caplog.records:
            assert LOGFMT.fullmatch(formatter.format(r)), formatter.format(r)
    finally:
        await running.close()


async def test_password_never_logged(
    pg_server: tuple[str, Cluster | None], database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "Pw-" + uuid.uuid4().hex
    parts = psycopg.conninfo.conninfo_to_dict(database_url)
    host, port, db = parts.get("host", "127.0.0.1"), parts.get("port", "5432"), parts["dbname"]
    good = f"postgresql://postgres:{secret}@{host}:{port}/{db}"  # trust auth: the password is not checked
    bad = f"postgresql://postgres:{secret}@127.0.0.1:1/{db}?connect_timeout=1"  # nothing listens on port 1
    caplog.set_level(logging.DEBUG)
    for url in (good, bad):
        running = await start_server(server_config(url, pool_timeout=0.5, health_interval=0.1))
        try:
            async with grpc.aio.insecure_channel(running.address) as ch:
                stub = task_pb2_grpc.GenerationDataServiceStub(ch)
                try:
                    await stub.RegisterTool(pb.RegisterToolRequest(name="pw-tool"), timeout=5)
                except grpc.aio.AioRpcError as err:
                    assert url == bad and err.code() == grpc.StatusCode.UNAVAILABLE
                    assert secret not in (err.details() or "")
            if url == bad:
                await wait_until(lambda: _logged(caplog, "status=NOT_SERVING"), "the health watcher's error line")
        finally:
            await running.close()
    text = caplog.text + "\n".join(pydb_server.LogfmtFormatter().format(r) for r in caplog.records)
    assert "event=serving" in text and "status=NOT_SERVING" in text and "rpc=RegisterTool code=OK" in text
    assert "rpc=RegisterTool code=UNAVAILABLE" in text
    assert secret not in text
    assert f"dbname={db}" in text  # what is logged of the DSN: host, port, dbname, user
