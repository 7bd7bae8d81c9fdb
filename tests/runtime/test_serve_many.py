"""Two protos' services in one process: `python -m pydb.serve` serves the queue
(generation.task.v1, schema `generation`) and an invoice service generated here (billing.v1,
schema `billing`) from one scratch database, through one port and one connection pool, with
grpc.health.v1 answering for each service name and for "", and reflection listing both."""

from __future__ import annotations

import contextlib
import importlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from generation.task.v1 import task_pb2, task_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from pydb.runtime import compose
from support.pg import Cluster, scratch_database
from support.server_proc import serving, wait_serving

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = Path(sys.executable).parent / "protoc-gen-pydb"
QUEUE_SERVER = "generation.task.v1.task_pydb_server"
QUEUE_SERVICE = "generation.task.v1.GenerationDataService"
BILLING_SERVER = "billing.v1.invoice_pydb_server"
BILLING_SERVICE = "billing.v1.InvoiceService"

BILLING_SCHEMA = """\
CREATE SCHEMA billing;
CREATE TABLE billing.invoices (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    customer text NOT NULL,
    cents bigint NOT NULL CHECK (cents >= 0)
);
"""
BILLING_PROTO = """\
syntax = "proto3";

package billing.v1;

import "pydb/v1/options.proto";

message Invoice {
  int64 id = 1;
  string customer = 2;
  int64 cents = 3;
}
message CreateInvoiceRequest {
  string customer = 1;
  int64 cents = 2;
}
message CreateInvoiceResponse {
  Invoice invoice = 1;
}
message GetInvoiceRequest {
  int64 id = 1;
}
message GetInvoiceResponse {
  Invoice invoice = 1;
}

service InvoiceService {
  rpc CreateInvoice(CreateInvoiceRequest) returns (CreateInvoiceResponse) {
    option (pydb.v1.sql) = {
      query: "INSERT INTO billing.invoices (customer, cents) VALUES (@customer, @cents) RETURNING id, customer, cents"
      cardinality: CARDINALITY_ONE
      result_field: "invoice"
    };
  }
  rpc GetInvoice(GetInvoiceRequest) returns (GetInvoiceResponse) {
    option (pydb.v1.sql) = {
      query: "SELECT id, customer, cents FROM billing.invoices WHERE id = @id"
      cardinality: CARDINALITY_ONE
      result_field: "invoice"
    };
  }
}
"""


@pytest.fixture(scope="module")
def billing_code(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """billing/v1/invoice.proto generated (protoc's _pb2, _pb2_grpc and protoc-gen-pydb's
    handlers and server) into a directory of its own, importable from this process too."""
    protos = tmp_path_factory.mktemp("billing_protos")
    (protos / "billing" / "v1").mkdir(parents=True)
    (protos / "billing" / "v1" / "invoice.proto").write_text(BILLING_PROTO)
    (protos / "billing" / "v1" / "schema.sql").write_text(BILLING_SCHEMA)
    out = tmp_path_factory.mktemp("billing_generated")
    done = subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"--plugin=protoc-gen-pydb={PLUGIN}",
         f"-I{protos}", f"-I{ROOT / 'protoc-gen-pydb'}", f"--python_out={out}", f"--grpc_python_out={out}",
         f"--pydb_out={out}", f"--pydb_opt=proto_path={protos}", "billing/v1/invoice.proto"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (out / "billing" / "v1" / "invoice_pydb_server.py").is_file()
    sys.path.insert(0, str(out))
    try:
        yield out
    finally:
        sys.path.remove(str(out))
        for name in [m for m in sys.modules if m == "billing" or m.startswith("billing.")]:
            del sys.modules[name]


@pytest.fixture
def two_schemas(pg_server: tuple[str, Cluster | None]) -> Iterator[str]:
    """A scratch database with the queue's schema and billing's."""
    with scratch_database(pg_server[0]) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(BILLING_SCHEMA)
        yield url


def serve_many(
    database_url: str, code: Path, *argv: str
) -> contextlib.AbstractAsyncContextManager[tuple[str, list[str]]]:
    """`python -m pydb.serve MODULE... [flags]` with the queue's and billing's code on PYTHONPATH."""
    env = {
        **os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "generated"), str(code)]),
        "DATABASE_URL": database_url, "HEALTH_INTERVAL_SECONDS": "0.2",
    }  # fmt: skip
    return serving([sys.executable, "-m", "pydb.serve", *argv], env)


async def listed_services(channel: grpc.aio.Channel) -> set[str]:
    call = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(timeout=5)
    await call.write(reflection_pb2.ServerReflectionRequest(list_services=""))
    await call.done_writing()
    return {s.name async for resp in call for s in resp.list_services_response.service}


async def test_two_protos_two_schemas_one_port_one_pool(billing_code: Path, two_schemas: str) -> None:
    billing_pb2: Any = importlib.import_module("billing.v1.invoice_pb2")
    billing_grpc: Any = importlib.import_module("billing.v1.invoice_pb2_grpc")
    flags = ("--pool-min", "1", "--pool-max", "1")
    async with (
        serve_many(two_schemas, billing_code, QUEUE_SERVER, BILLING_SERVER, *flags) as (address, lines),
        grpc.aio.insecure_channel(address) as channel,
    ):
        await wait_serving(channel)
        health = health_pb2_grpc.HealthStub(channel)
        for name in ("", QUEUE_SERVICE, BILLING_SERVICE):
            answer = await health.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING, name
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await health.Check(health_pb2.HealthCheckRequest(service="billing.v1.NoSuchService"), timeout=5)
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
        assert await listed_services(channel) == {
            QUEUE_SERVICE, BILLING_SERVICE, "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection",
        }  # fmt: skip

        # Both services, through the same channel.
        queue = task_pb2_grpc.GenerationDataServiceStub(channel)
        tool = (
            await queue.RegisterTool(task_pb2.RegisterToolRequest(name=f"t-{uuid.uuid4().hex[:8]}"), timeout=5)
        ).tool
        invoices = billing_grpc.InvoiceServiceStub(channel)
        made = (
            await invoices.CreateInvoice(billing_pb2.CreateInvoiceRequest(customer="ada", cents=1250), timeout=5)
        ).invoice
        got = (await invoices.GetInvoice(billing_pb2.GetInvoiceRequest(id=made.id), timeout=5)).invoice
        assert (got.id, got.customer, got.cents) == (made.id, "ada", 1250)
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await invoices.GetInvoice(billing_pb2.GetInvoiceRequest(id=made.id + 1000), timeout=5)
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND

        with psycopg.connect(two_schemas, autocommit=True) as conn:
            assert conn.execute("SELECT name FROM generation.tools WHERE id = %s", (tool.id,)).fetchone() == (
                tool.name,
            )
            assert conn.execute("SELECT customer, cents FROM billing.invoices").fetchall() == [("ada", 1250)]
            # One pool for both modules: with --pool-max 1 the server holds one connection in all.
            backends = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()
            assert backends == (1,)
    serving = next(line for line in lines if " event=serving " in line)
    assert f"services={QUEUE_SERVICE},{BILLING_SERVICE} " in serving


def test_usage_errors_name_the_module(billing_code: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = {
        ("no.such.module_pydb_server",): "cannot import no.such.module_pydb_server: No module named 'no'",
        ("generation.task.v1.task_pydb",): "did you mean generation.task.v1.task_pydb_server?",
        (QUEUE_SERVER, BILLING_SERVER, QUEUE_SERVER): f"{QUEUE_SERVER} is listed twice",
        ("generated/generation/task/v1/task_pydb_server.py",): "give the module's dotted name",
    }
    for argv, message in cases.items():
        with pytest.raises(SystemExit) as done:
            compose.main([*argv, "--database-url", "dbname=unused"], env={})
        assert done.value.code == 2
        assert message in capsys.readouterr().err


def test_a_service_two_modules_provide_is_refused() -> None:
    class Stand:
        def __init__(self, name: str, services: tuple[str, ...]) -> None:
            self.__name__ = name
            self.SERVICE_NAMES = services

        def register(self, grpc_server: grpc.aio.Server, pool: Any, replica: Any) -> None:
            raise AssertionError("never registered")

    first, second = Stand("a_pydb_server", ("x.v1.S", "x.v1.T")), Stand("b_pydb_server", ("x.v1.T",))
    with pytest.raises(compose.CompositionError, match=r"service x\.v1\.T is in both a_pydb_server and b_pydb_server"):
        compose.combine([first, second])
    assert compose.combine([first, Stand("c_pydb_server", ("y.v1.U",))]).names == ("x.v1.S", "x.v1.T", "y.v1.U")


def test_modules_and_flags_in_any_order(billing_code: Path) -> None:
    argv = ["--pool-max", "3", QUEUE_SERVER, "--no-reflection", BILLING_SERVER, "--log-level", "debug"]
    cfg, services = compose.parse_args(argv, env={"LISTEN_ADDR": "127.0.0.1:7001"})
    assert (cfg.pool_max, cfg.reflection, cfg.log_level, cfg.listen_addr) == (3, False, "debug", "127.0.0.1:7001")
    assert services.names == (QUEUE_SERVICE, BILLING_SERVICE)


def test_help_lists_modules_and_every_setting(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        compose.main(["--help"])
    assert done.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert out.startswith("usage: python -m pydb.serve") and "MODULE [MODULE ...]" in out
    for flag in ("--database-url", "--listen-addr", "--pool-max", "--reflection", "--health-interval"):
        assert flag in out
