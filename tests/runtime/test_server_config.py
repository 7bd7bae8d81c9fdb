"""The generated server's command line: flags and environment, --help, strict values, and the
real entry point run as a process (logfmt on stderr, no password, SIGTERM shutdown)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import grpc
import psycopg
import pytest
from generation.task.v1 import task_pb2 as pb
from generation.task.v1 import task_pb2_grpc, task_pydb_server
from grpc_health.v1 import health_pb2, health_pb2_grpc
from pydb.runtime import server as pydb_server

ROOT = Path(__file__).resolve().parents[2]
ISSUE_SETTINGS = [
    "DATABASE_URL",
    "LISTEN_ADDR",
    "POOL_MIN",
    "POOL_MAX",
    "TLS_CERT",
    "TLS_KEY",
    "LOG_LEVEL",
    "REFLECTION",
]


def test_help_lists_every_flag_and_variable(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        task_pydb_server.main(["--help"])
    assert done.value.code == 0
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert out.startswith("usage: generation.task.v1.task_pydb_server")
    for s in pydb_server.SETTINGS:
        assert s.flag in out and f"[env {s.env}" in out
    for name in ISSUE_SETTINGS:
        assert f"env {name}" in out
    assert "--no-reflection" in out


def test_defaults_environment_and_flags() -> None:
    cfg = pydb_server.parse_config([], "srv", env={})
    assert (cfg.listen_addr, cfg.pool_min, cfg.pool_max, cfg.reflection, cfg.log_level) == (
        "127.0.0.1:50051", 1, 10, True, "info",
    )  # fmt: skip
    assert cfg.tls_cert is None and cfg.database_url == ""
    env = {
        "DATABASE_URL": "postgresql://u@h/db", "LISTEN_ADDR": "0.0.0.0:6000", "POOL_MIN": "2", "POOL_MAX": "4",
        "POOL_TIMEOUT": "1.5", "TLS_CERT": "/c.pem", "TLS_KEY": "/k.pem", "REFLECTION": "off", "LOG_LEVEL": "DEBUG",
        "SHUTDOWN_GRACE_SECONDS": "3", "HEALTH_INTERVAL_SECONDS": "0.5",
    }  # fmt: skip
    cfg = pydb_server.parse_config([], "srv", env=env)
    assert cfg == pydb_server.Config(
        "postgresql://u@h/db", "0.0.0.0:6000", 2, 4, "/c.pem", "/k.pem", False, "debug", 3.0, 0.5, pool_timeout=1.5
    )
    flags = ["--listen-addr", ":7000", "--pool-max", "8", "--reflection", "yes", "--log-level", "error"]
    cfg = pydb_server.parse_config(flags, "srv", env=env)
    assert (cfg.listen_addr, cfg.pool_max, cfg.reflection, cfg.log_level, cfg.pool_min) == (
        ":7000",
        8,
        True,
        "error",
        2,
    )
    assert pydb_server.parse_config(["--no-reflection"], "srv", env={"REFLECTION": "1"}).reflection is False


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        ([], {"POOL_MAX": "ten"}, "environment variable POOL_MAX='ten' is not valid for --pool-max"),
        ([], {"REFLECTION": "maybe"}, "REFLECTION='maybe'"),
        (["--log-level", "loud"], {}, "argument --log-level: expected one of debug, info, warning, error"),
        (["--pool-min", "5", "--pool-max", "2"], {}, "need 0 <= --pool-min <= --pool-max"),
        (["--tls-cert", "c.pem"], {}, "--tls-cert and --tls-key go together"),
        (["--health-interval", "0"], {}, "--health-interval must be positive"),
        (
            [],
            {"DATABASE_URL": "postgresql://u:hunter2@h:notaport/db?bogus=1"},
            "is not a valid libpq connection string",
        ),
        (
            [],
            {"DATABASE_REPLICA_URL": "postgresql://u:hunter2@h:notaport/db?bogus=1"},
            "DATABASE_REPLICA_URL / --database-replica-url is not a valid libpq connection string",
        ),
        (["--bogus"], {}, "unrecognized arguments: --bogus"),
    ],
)
def test_bad_settings_are_usage_errors(
    argv: list[str], env: dict[str, str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        pydb_server.parse_config(argv, "srv", env=env)
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert "hunter2" not in err


def test_redact_dsn_keeps_the_password_out() -> None:
    for dsn in (
        "postgresql://app:s3cret@db.internal:6432/queue?sslmode=require",
        "host=db.internal port=6432 dbname=queue user=app password=s3cret",
    ):
        shown = pydb_server.redact_dsn(dsn)
        assert shown == "dbname=queue host=db.internal port=6432 user=app"
    assert pydb_server.redact_dsn("") == "<libpq defaults>"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


LOGFMT = re.compile(r'ts=\S+Z level=(debug|info|warning|error) logger=\S+( [a-z_]+=("([^"\\]|\\.)*"|\S+))+')


async def test_the_server_process(database_url: str) -> None:
    """`python -m ..._pydb_server` configured by the environment alone: serves, logs logfmt at
    debug with one line per call, never the password, and exits 0 on SIGTERM."""
    secret = "pw" + uuid.uuid4().hex
    parts = psycopg.conninfo.conninfo_to_dict(database_url)
    url = f"postgresql://postgres:{secret}@{parts.get('host', '127.0.0.1')}:{parts.get('port', 5432)}/{parts['dbname']}"
    port = _free_port()
    env = {
        **os.environ, "PYTHONPATH": str(ROOT / "generated"), "DATABASE_URL": url,
        "LISTEN_ADDR": f"127.0.0.1:{port}", "LOG_LEVEL": "debug", "HEALTH_INTERVAL_SECONDS": "0.2",
    }  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "generation.task.v1.task_pydb_server"], env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            health = health_pb2_grpc.HealthStub(ch)
            deadline = time.monotonic() + 20
            while True:
                try:
                    status = (await health.Check(health_pb2.HealthCheckRequest(), timeout=1)).status
                    if status == health_pb2.HealthCheckResponse.SERVING:
                        break
                except grpc.aio.AioRpcError:
                    pass
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "never SERVING"
                await asyncio.sleep(0.05)
            stub = task_pb2_grpc.GenerationDataServiceStub(ch)
            await stub.RegisterTool(pb.RegisterToolRequest(name="process-tool"), timeout=5)
            with pytest.raises(grpc.aio.AioRpcError):
                await stub.GetTask(pb.GetTaskRequest(task_id="not-a-uuid"), timeout=5)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    lines = stderr.splitlines()
    assert lines and all(LOGFMT.fullmatch(line) for line in lines), stderr
    calls = [line.split(" logger=pydb ")[1].split(" ms=")[0] for line in lines if " logger=pydb rpc=" in line]
    assert calls == ["rpc=RegisterTool code=OK", "rpc=GetTask code=INVALID_ARGUMENT"]
    assert "event=serving" in stderr and "event=health status=SERVING" in stderr
    assert stderr.rstrip().endswith("event=stopped")
    assert secret not in stderr
