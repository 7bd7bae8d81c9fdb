"""Authentication of the generated server (issue 14): bearer tokens and mutual TLS with real
certificates made here by the `openssl` CLI, the worker SDK over both, its fast failure when
its settings cannot work, and the refusal to serve a reachable address unauthenticated."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from conftest import ROOT, RunningServer, server_config, start_server
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2_grpc
from pydb.runtime import auth
from pydb.runtime import server as pydb_server
from taskworker import ChannelSettings, ConnectionSetupError, TaskContext, run_worker

TOKEN = "t0ken-" + uuid.uuid4().hex  # 38 characters
OTHER_TOKEN = "t0ken-" + uuid.uuid4().hex
Code = grpc.StatusCode


# -- certificates ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    rogue_cert: Path  # a client certificate signed by another CA
    rogue_key: Path
    other_ca: Path
    stranger_cert: Path  # signed by the client CA, for another service
    stranger_key: Path

    def read(self, path: Path) -> bytes:
        return path.read_bytes()


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _make_ca(directory: Path, name: str) -> tuple[Path, Path]:
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
             "-days", "1", "-subj", f"/CN={name}")  # fmt: skip
    return cert, key


def _make_leaf(directory: Path, name: str, ca: tuple[Path, Path], san: str) -> tuple[Path, Path]:
    cert, key, csr, ext = (directory / f"{name}{suffix}" for suffix in (".pem", ".key", ".csr", ".ext"))
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={name}")
    ext.write_text(f"subjectAltName={san}\n")
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]), "-CAcreateserial",
             "-out", str(cert), "-days", "1", "-extfile", str(ext))  # fmt: skip
    return cert, key


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    ca, other = _make_ca(d, "ca"), _make_ca(d, "other-ca")
    server = _make_leaf(d, "server", ca, "DNS:localhost,IP:127.0.0.1")
    client = _make_leaf(d, "worker", ca, "DNS:worker")
    rogue = _make_leaf(d, "rogue", other, "DNS:worker")
    stranger = _make_leaf(d, "billing", ca, "DNS:billing")
    return Pki(ca[0], *server, *client, *rogue, other[0], *stranger)


# -- servers ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
async def token_server(database_url: str) -> AsyncIterator[RunningServer]:
    running = await start_server(server_config(database_url, auth_tokens=f"{OTHER_TOKEN},{TOKEN}"))
    yield running
    await running.close()


@pytest.fixture(scope="module")
async def mtls_server(database_url: str, pki: Pki) -> AsyncIterator[RunningServer]:
    cfg = server_config(
        database_url, tls_cert=str(pki.server_cert), tls_key=str(pki.server_key), tls_client_ca=str(pki.ca)
    )
    running = await start_server(cfg)
    yield running
    await running.close()


def bearer(token: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {token}"),)


async def register(channel: grpc.aio.Channel, name: str, metadata: Any = None) -> pb.Tool:
    stub = task_pb2_grpc.GenerationDataServiceStub(channel)
    return (await stub.RegisterTool(pb.RegisterToolRequest(name=name), metadata=metadata, timeout=10)).tool


async def refused(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    return err.value


# -- bearer tokens ---------------------------------------------------------------------------


async def test_calls_without_the_right_token_are_unauthenticated(
    token_server: RunningServer, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pydb")
    name = f"tok-{uuid.uuid4().hex[:8]}"
    async with grpc.aio.insecure_channel(token_server.address) as ch:
        for metadata, reason in (
            (None, "no bearer token"),
            (bearer(TOKEN[:-1] + "x"), "wrong bearer token"),
            ((("authorization", TOKEN),), "no bearer token"),  # not the Bearer scheme
            (bearer(""), "wrong bearer token"),
        ):
            err = await refused(register(ch, name, metadata))
            assert err.code() == Code.UNAUTHENTICATED, metadata
            assert (err.details() or "").startswith(reason)
        # Both configured tokens are accepted; the scheme is case-insensitive (RFC 7235).
        assert (await register(ch, name, bearer(TOKEN))).name == name
        assert (await register(ch, name, (("authorization", f"bearer {OTHER_TOKEN}"),))).name == name
        # Nothing the refused calls asked for was done: the only row is the accepted one's.
        from support.worker_support import sql

        assert await sql(database_url, "SELECT count(*) FROM generation.tools WHERE name = %s", name) == [(1,)]
        # An unknown method gets the same answer: method names cannot be probed without a token.
        probe = ch.unary_unary("/no.such.Service/Method", request_serializer=bytes, response_deserializer=bytes)
        assert (await refused(probe(b"", timeout=5))).code() == Code.UNAUTHENTICATED
        # Reflection is behind the token too. Its stream is refused on its headers, before any
        # request: none is written (a write can find the call already ended, when the refusal
        # arrives first, and fail otherwise than with the call's status).
        stream = reflection_pb2_grpc.ServerReflectionStub(ch).ServerReflectionInfo(timeout=10)
        assert await stream.code() == Code.UNAUTHENTICATED
        # The health service stays open (--health-open, default true): load balancers have no token.
        resp = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert resp.status in (health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING)
    lines = [r.getMessage() for r in caplog.records if "event=unauthenticated" in r.getMessage()]
    assert len(lines) == 6  # one line per refused call
    assert not any(TOKEN[:-1] in line for line in lines), "a presented token never reaches the log"


async def test_health_can_require_the_token_too(database_url: str) -> None:
    running = await start_server(server_config(database_url, auth_tokens=TOKEN, health_open=False))
    try:
        async with grpc.aio.insecure_channel(running.address) as ch:
            health = health_pb2_grpc.HealthStub(ch)
            err = await refused(health.Check(health_pb2.HealthCheckRequest(), timeout=5))
            assert err.code() == Code.UNAUTHENTICATED
            ok = await health.Check(health_pb2.HealthCheckRequest(), metadata=bearer(TOKEN), timeout=5)
            assert ok.status in (health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING)
    finally:
        await running.close()


def test_tokens_compare_every_candidate_and_refuse_weak_ones(tmp_path: Path) -> None:
    file = tmp_path / "tokens"
    file.write_text(f"# rotated 2026-01\n{TOKEN}\n\n{OTHER_TOKEN}, {TOKEN}\n")
    accepted = auth.load_tokens(None, str(file))
    assert len(accepted) == 2  # the duplicate collapses
    assert auth.token_matches(TOKEN, accepted) and auth.token_matches(OTHER_TOKEN, accepted)
    assert not auth.token_matches(TOKEN + "x", accepted) and not auth.token_matches("", accepted)
    with pytest.raises(auth.UnsafeConfiguration, match="shorter than 16"):
        auth.load_tokens("secret", None)
    with pytest.raises(auth.UnsafeConfiguration, match="cannot read"):
        auth.load_tokens(None, str(tmp_path / "missing"))


# -- exposure --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("addr", "loopback"),
    [
        ("127.0.0.1:50051", True),
        ("localhost:50051", True),
        ("[::1]:50051", True),
        ("unix:/run/pydb.sock", True),
        ("0.0.0.0:50051", False),
        ("[::]:50051", False),
        (":50051", False),
        ("10.1.2.3:50051", False),
        ("queue.internal:50051", False),
    ],
)
def test_loopback_addresses(addr: str, loopback: bool) -> None:
    assert auth.is_loopback(addr) is loopback


async def test_a_reachable_address_needs_authentication_or_an_explicit_flag(database_url: str) -> None:
    with pytest.raises(auth.UnsafeConfiguration, match=r"refusing to listen on 0\.0\.0\.0:0 without authentication"):
        await start_server(server_config(database_url, listen_addr="0.0.0.0:0"))
    for allowed in ({"auth_tokens": TOKEN}, {"allow_unauthenticated": True}):
        running = await start_server(server_config(database_url, listen_addr="0.0.0.0:0", **allowed))
        await running.close()


@pytest.mark.parametrize(
    "command",
    [
        ["-m", "generation.task.v1.task_pydb_server"],
        ["-m", "pydb.serve", "generation.task.v1.task_pydb_server"],
    ],
    ids=["generated server", "pydb.serve"],
)
def test_the_server_process_refuses_to_start_exposed_and_says_why(database_url: str, command: list[str]) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "generated"), str(ROOT / "protoc-gen-pydb")]),
        "DATABASE_URL": database_url,
        "LISTEN_ADDR": "0.0.0.0:0",
    }
    env.pop("AUTH_TOKENS", None)
    done = subprocess.run(
        [sys.executable, *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "refusing to listen on 0.0.0.0:0 without authentication" in done.stderr
    assert "Traceback" not in done.stderr


# -- mutual TLS ------------------------------------------------------------------------------


async def test_mtls_admits_only_certificates_from_the_client_ca(mtls_server: RunningServer, pki: Pki) -> None:
    name = f"mtls-{uuid.uuid4().hex[:8]}"
    good = grpc.ssl_channel_credentials(pki.read(pki.ca), pki.read(pki.client_key), pki.read(pki.client_cert))
    async with grpc.aio.secure_channel(mtls_server.address, good) as ch:
        assert (await register(ch, name)).name == name
    # No certificate, or one another CA signed: the handshake itself fails, so no call (and no
    # status) ever exists; gRPC reports it to the client as UNAVAILABLE.
    for creds in (
        grpc.ssl_channel_credentials(pki.read(pki.ca)),
        grpc.ssl_channel_credentials(pki.read(pki.ca), pki.read(pki.rogue_key), pki.read(pki.rogue_cert)),
    ):
        async with grpc.aio.secure_channel(mtls_server.address, creds) as ch:
            err = await refused(register(ch, f"{name}-refused"))
            assert err.code() == Code.UNAVAILABLE
    async with grpc.aio.insecure_channel(mtls_server.address) as ch:
        assert (await refused(register(ch, f"{name}-plain"))).code() == Code.UNAVAILABLE


async def test_mtls_and_token_together(database_url: str, pki: Pki) -> None:
    cfg = server_config(
        database_url,
        tls_cert=str(pki.server_cert),
        tls_key=str(pki.server_key),
        tls_client_ca=str(pki.ca),
        auth_tokens=TOKEN,
    )
    running = await start_server(cfg)
    try:
        good = grpc.ssl_channel_credentials(pki.read(pki.ca), pki.read(pki.client_key), pki.read(pki.client_cert))
        async with grpc.aio.secure_channel(running.address, good) as ch:
            err = await refused(register(ch, "both", bearer(OTHER_TOKEN)))
            assert err.code() == Code.UNAUTHENTICATED  # a valid certificate does not stand in for the token
            assert (await register(ch, "both", bearer(TOKEN))).name == "both"
        # The README's client: the token as call credentials composed with the TLS ones.
        composite = grpc.composite_channel_credentials(good, grpc.access_token_call_credentials(TOKEN))
        async with grpc.aio.secure_channel(running.address, composite) as ch:
            assert (await register(ch, "both")).name == "both"
    finally:
        await running.close()


async def test_mtls_client_names_narrow_the_ca(database_url: str, pki: Pki) -> None:
    cfg = server_config(
        database_url,
        tls_cert=str(pki.server_cert),
        tls_key=str(pki.server_key),
        tls_client_ca=str(pki.ca),
        tls_client_names="worker, reaper",
    )
    running = await start_server(cfg)
    try:
        good = grpc.ssl_channel_credentials(pki.read(pki.ca), pki.read(pki.client_key), pki.read(pki.client_cert))
        async with grpc.aio.secure_channel(running.address, good) as ch:
            assert (await register(ch, "named")).name == "named"
        # Signed by the same CA, but for another service: a status this time, the handshake succeeded.
        other = grpc.ssl_channel_credentials(pki.read(pki.ca), pki.read(pki.stranger_key), pki.read(pki.stranger_cert))
        async with grpc.aio.secure_channel(running.address, other) as ch:
            err = await refused(register(ch, "stranger"))
            assert err.code() == Code.UNAUTHENTICATED
            assert err.details() == "client certificate not accepted by this server"
            watch = task_pb2_grpc.GenerationDataServiceStub(ch).WatchTaskWakes(pb.WatchTaskWakesRequest())
            assert (await refused(watch.read())).code() == Code.UNAUTHENTICATED
            # Health stays open to any certificate the CA signed (--health-open).
            await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5)
    finally:
        await running.close()


async def test_a_refused_certificate_cannot_tell_real_methods_from_unknown_ones(database_url: str, pki: Pki) -> None:
    """Under --tls-client-names, a certificate of the right CA with a refused name gets the same
    status for a real method and a made-up one (before: UNAUTHENTICATED vs UNIMPLEMENTED); an
    accepted certificate still learns that a method does not exist."""
    cfg = server_config(
        database_url,
        tls_cert=str(pki.server_cert),
        tls_key=str(pki.server_key),
        tls_client_ca=str(pki.ca),
        tls_client_names="worker",
    )
    running = await start_server(cfg)
    real, unknown = (
        "/generation.task.v1.GenerationDataService/GetTask",
        "/generation.task.v1.GenerationDataService/Nope",
    )
    try:
        other = grpc.ssl_channel_credentials(pki.read(pki.ca), pki.read(pki.stranger_key), pki.read(pki.stranger_cert))
        async with grpc.aio.secure_channel(running.address, other) as ch:
            answers = [await refused(ch.unary_unary(method, None, None)(b"", timeout=10)) for method in (real, unknown)]
            assert {(a.code(), a.details()) for a in answers} == {
                (Code.UNAUTHENTICATED, "client certificate not accepted by this server")
            }
        good = grpc.ssl_channel_credentials(pki.read(pki.ca), pki.read(pki.client_key), pki.read(pki.client_cert))
        async with grpc.aio.secure_channel(running.address, good) as ch:
            assert (await refused(ch.unary_unary(unknown, None, None)(b"", timeout=10))).code() == Code.UNIMPLEMENTED
    finally:
        await running.close()


# -- the worker SDK --------------------------------------------------------------------------


async def run_tasks_through_worker(address: str, settings: ChannelSettings, client: grpc.aio.Channel) -> None:
    """Queue three tasks, run a worker with `settings` until it has processed them, and check
    every task completed with the worker's output."""
    name = f"secure-tool-{uuid.uuid4().hex[:8]}"
    stub = task_pb2_grpc.GenerationDataServiceStub(client)
    tool = (await stub.RegisterTool(pb.RegisterToolRequest(name=name), timeout=10)).tool
    ids = [
        (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id, input=f'{{"n": {n}}}'), timeout=10)).task.id
        for n in range(3)
    ]
    seen: list[str] = []

    async def process(task: pb.Task, ctx: TaskContext) -> dict[str, str]:
        seen.append(task.id)
        if len(seen) == len(ids):
            ctx.fleet.drain()  # done: run_worker returns once this task is completed
        return {"echo": task.input}

    fleet = await asyncio.wait_for(
        run_worker(address, {name: process}, wake="none", channel_settings=settings, poll_interval=0.05), 60
    )
    assert sorted(seen) == sorted(ids)
    assert fleet.stats.completed == 3
    for task_id in ids:
        task = (await stub.GetTask(pb.GetTaskRequest(task_id=task_id), timeout=10)).task
        assert task.status == pb.TASK_STATUS_COMPLETED and task.output.startswith('{"echo"')


async def test_worker_runs_tasks_end_to_end_over_mtls(mtls_server: RunningServer, pki: Pki) -> None:
    settings = ChannelSettings(
        tls=True, ca=pki.read(pki.ca), cert=pki.read(pki.client_cert), key=pki.read(pki.client_key)
    )
    good = grpc.ssl_channel_credentials(pki.read(pki.ca), pki.read(pki.client_key), pki.read(pki.client_cert))
    async with grpc.aio.secure_channel(mtls_server.address, good) as client:
        await run_tasks_through_worker(mtls_server.address, settings, client)


async def test_worker_runs_tasks_end_to_end_with_a_token(token_server: RunningServer) -> None:
    async with grpc.aio.insecure_channel(token_server.address, interceptors=[_token_interceptor(TOKEN)]) as client:
        await run_tasks_through_worker(token_server.address, ChannelSettings(token=TOKEN), client)


def _token_interceptor(token: str) -> Any:
    from taskworker.connect import BearerToken

    return BearerToken(token)


def test_worker_settings_from_the_environment(pki: Pki, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    settings = ChannelSettings.from_env(
        {
            "DATA_PLANE_TLS_CA": str(pki.ca),
            "DATA_PLANE_TLS_CERT": str(pki.client_cert),
            "DATA_PLANE_TLS_KEY": str(pki.client_key),
            "DATA_PLANE_TOKEN_FILE": str(token_file),
        }
    )
    assert settings.tls and settings.ca == pki.read(pki.ca) and settings.cert == pki.read(pki.client_cert)
    assert settings.token == TOKEN
    assert ChannelSettings.from_env({"DATA_PLANE_TLS": "true"}) == ChannelSettings(tls=True)
    assert ChannelSettings.from_env({}) == ChannelSettings()


@pytest.fixture
def noop_tools() -> Iterator[dict[str, Any]]:
    async def never(task: pb.Task, ctx: TaskContext) -> None:
        raise AssertionError("no task can be claimed without a connection")

    yield {f"unreachable-{uuid.uuid4().hex[:6]}": never}


async def fails_fast(address: str, settings: ChannelSettings, tools: dict[str, Any]) -> str:
    started = time.monotonic()
    with pytest.raises(ConnectionSetupError) as err:
        await asyncio.wait_for(run_worker(address, tools, wake="none", channel_settings=settings), 30)
    assert time.monotonic() - started < 5, "a worker whose settings cannot work fails at once, not after 60 s"
    return str(err.value)


async def test_worker_fails_fast_with_a_clear_message(
    mtls_server: RunningServer, token_server: RunningServer, pki: Pki, noop_tools: dict[str, Any]
) -> None:
    # Plaintext against TLS: the 60 s silent hang.
    message = await fails_fast(mtls_server.address, ChannelSettings(), noop_tools)
    assert "requires TLS" in message and "DATA_PLANE_TLS_CA" in message
    # TLS without a client certificate against mTLS.
    message = await fails_fast(mtls_server.address, ChannelSettings(tls=True, ca=pki.read(pki.ca)), noop_tools)
    assert "client certificate" in message
    # A server certificate this worker does not trust.
    settings = ChannelSettings(
        tls=True, ca=pki.read(pki.other_ca), cert=pki.read(pki.client_cert), key=pki.read(pki.client_key)
    )
    assert "does not trust" in await fails_fast(mtls_server.address, settings, noop_tools)
    # TLS against a plaintext server.
    message = await fails_fast(token_server.address, ChannelSettings(tls=True, ca=pki.read(pki.ca)), noop_tools)
    assert "does not speak TLS" in message
    # No token, and a wrong one, against a token server (its health probe is open: RegisterTool says it).
    assert "DATA_PLANE_TOKEN" in await fails_fast(token_server.address, ChannelSettings(), noop_tools)
    wrong = ChannelSettings(token="not-" + TOKEN)
    assert "DATA_PLANE_TOKEN" in await fails_fast(token_server.address, wrong, noop_tools)


def test_worker_never_sends_a_token_in_clear_to_another_host() -> None:
    from taskworker import open_channel

    with pytest.raises(ConnectionSetupError, match="in clear text"):
        open_channel("queue.internal:50051", ChannelSettings(token=TOKEN))


def test_client_ca_needs_tls() -> None:
    with pytest.raises(SystemExit):
        pydb_server.parse_config(["--tls-client-ca", "/ca.pem"], "prog", env={})
