"""What callers can send and see (issue 14): undecodable bytes answer INVALID_ARGUMENT with a
plain message and one log line; the queue schema's CHECK constraints answer INVALID_ARGUMENT;
reflection lists the services but serves no SQL; the server's role can do what the RPCs need
and nothing else."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import grpc
import psycopg
import pytest
from conftest import SERVICE_ROLE, RunningServer, server_config, start_server
from generation.task.v1 import task_pb2 as pb
from google.protobuf import descriptor_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from psycopg.conninfo import make_conninfo
from pydb.runtime.decoding import UNDECODABLE_MESSAGE

Code = grpc.StatusCode
SERVICE = "generation.task.v1.GenerationDataService"


def raw_method(channel: grpc.aio.Channel, method: str, streaming: bool = False) -> Any:
    """A generic call that sends the given bytes as they are, whatever the method expects."""
    path = f"/{SERVICE}/{method}"
    make = channel.unary_stream if streaming else channel.unary_unary
    return make(path, request_serializer=bytes, response_deserializer=bytes)


# -- undecodable requests ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "payload"),
    [
        ("RegisterTool", b"\xff\xff\xff\xff"),  # not a protobuf message at all
        ("RegisterTool", b"\x0a\x02\xc3\x28"),  # name = invalid UTF-8 (a string field must be UTF-8)
        ("QueueTask", b"\x0a\x10abc"),  # a length running past the end
        ("GetTask", b"\x0f"),  # field 1 with wire type 7, which does not exist
    ],
)
async def test_undecodable_requests_are_invalid_argument(
    service: RunningServer, method: str, payload: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with grpc.aio.insecure_channel(service.address) as ch:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await raw_method(ch, method)(payload, timeout=10)
    assert err.value.code() == Code.INVALID_ARGUMENT
    assert err.value.details() == UNDECODABLE_MESSAGE  # no class name, no parser message
    lines = [r for r in caplog.records if r.levelno >= logging.INFO and "rpc=" in r.getMessage()]
    assert [r.getMessage() for r in lines] == [f"rpc={method} code=INVALID_ARGUMENT event=undecodable_request"]
    assert all(r.exc_info is None for r in caplog.records) and "Traceback" not in caplog.text


async def test_undecodable_request_to_a_streaming_method(service: RunningServer) -> None:
    async with grpc.aio.insecure_channel(service.address) as ch:
        call = raw_method(ch, "WatchTaskWakes", streaming=True)(b"\x0a\x02\xc3\x28", timeout=10)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await call.read()
    assert err.value.code() == Code.INVALID_ARGUMENT
    assert err.value.details() == UNDECODABLE_MESSAGE


async def test_well_formed_bytes_still_work_through_the_guard(service: RunningServer) -> None:
    async with grpc.aio.insecure_channel(service.address) as ch:
        reply = await raw_method(ch, "RegisterTool")(
            pb.RegisterToolRequest(name="raw-ok").SerializeToString(), timeout=10
        )
    assert pb.RegisterToolResponse.FromString(reply).tool.name == "raw-ok"


# -- CHECK constraints -------------------------------------------------------------------------


async def rejected(call: Any) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    assert err.value.code() == Code.INVALID_ARGUMENT, err.value.details()
    return err.value.details() or ""


async def test_tool_names_are_non_empty_and_capped(stub: Any) -> None:
    assert "tools_name_check" in await rejected(stub.RegisterTool(pb.RegisterToolRequest(name="")))
    assert "tools_name_check" in await rejected(stub.RegisterTool(pb.RegisterToolRequest(name="n" * 201)))
    longest = "é" * 200  # the cap counts characters, not bytes
    assert (await stub.RegisterTool(pb.RegisterToolRequest(name=longest))).tool.name == longest


@pytest.mark.parametrize(
    ("fields", "constraint"),
    [
        ({"reserved_token_amount": -1}, "tasks_reserved_token_amount_check"),
        ({"max_retries": 101}, "tasks_max_retries_check"),
        ({"max_retries": 2**31 - 1}, "tasks_max_retries_check"),
        ({"max_retries": -1}, "tasks_max_retries_check"),
        ({"priority": 1001}, "tasks_priority_check"),
        ({"priority": -1001}, "tasks_priority_check"),
        ({"priority": 2**31 - 1}, "tasks_priority_check"),
    ],
)
async def test_task_values_out_of_bounds_are_invalid_argument(
    stub: Any, tool: pb.Tool, fields: dict[str, Any], constraint: str
) -> None:
    message = await rejected(stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id, **fields)))
    assert constraint in message


async def test_task_values_at_the_bounds_are_accepted(stub: Any, tool: pb.Tool) -> None:
    bounds: tuple[dict[str, Any], ...] = (
        {"reserved_token_amount": 0, "max_retries": 100, "priority": 1000},
        {"max_retries": 0, "priority": -1000},
    )
    for fields in bounds:
        task = (await stub.QueueTask(pb.QueueTaskRequest(tool_id=tool.id, **fields))).task
        assert all(getattr(task, k) == v for k, v in fields.items())


async def test_constraints_match_what_postgresql_enforces(database_url: str) -> None:
    """The bounds the tests above use are the schema's: asked of PostgreSQL, not assumed."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE contype = 'c' AND conrelid IN ('generation.tasks'::regclass, 'generation.tools'::regclass)"
        )
        checks: dict[str, str] = dict(await cur.fetchall())
    assert set(checks) >= {
        "tools_name_check",
        "tasks_priority_check",
        "tasks_max_retries_check",
        "tasks_reserved_token_amount_check",
    }


# -- reflection --------------------------------------------------------------------------------


async def reflect(address: str) -> tuple[list[str], descriptor_pb2.FileDescriptorProto]:
    """The service list and the queue's file descriptor, asked over one reflection stream."""
    async with grpc.aio.insecure_channel(address) as ch:
        call = reflection_pb2_grpc.ServerReflectionStub(ch).ServerReflectionInfo(timeout=20)
        responses: list[reflection_pb2.ServerReflectionResponse] = []
        for request in (
            reflection_pb2.ServerReflectionRequest(list_services=""),
            reflection_pb2.ServerReflectionRequest(file_containing_symbol=SERVICE),
        ):
            await call.write(request)
            response = await call.read()
            assert isinstance(response, reflection_pb2.ServerReflectionResponse)
            responses.append(response)
        await call.done_writing()
    names = [s.name for s in responses[0].list_services_response.service]
    files = [
        descriptor_pb2.FileDescriptorProto.FromString(b)
        for b in responses[1].file_descriptor_response.file_descriptor_proto
    ]
    (task_file,) = [f for f in files if any(s.name == "GenerationDataService" for s in f.service)]
    return names, task_file


async def test_reflection_lists_services_but_serves_no_sql(service: RunningServer, database_url: str) -> None:
    names, file = await asyncio.wait_for(reflect(service.address), 30)
    assert SERVICE in names and "grpc.health.v1.Health" in names
    methods = {m.name: m for m in file.service[0].method}
    assert {"RegisterTool", "QueueTask", "WatchTaskWakes"} <= set(methods)
    assert all(not m.HasField("options") for m in methods.values())
    assert not file.HasField("options")  # no (pydb.v1.schema) either
    text = str(file) + file.SerializeToString().decode("latin-1")
    for word in ("INSERT INTO", "SELECT", "generation.tasks", "schema.sql"):
        assert word not in text
    # Asked for: the options (the SQL) are served.
    running = await asyncio.wait_for(start_server(server_config(database_url, reflection_options=True)), 30)
    try:
        _, full = await asyncio.wait_for(reflect(running.address), 30)
    finally:
        await asyncio.wait_for(running.close(), 30)
    assert "INSERT INTO generation.tools" in full.SerializeToString().decode("latin-1")


# -- least privilege -----------------------------------------------------------------------------


async def test_the_server_runs_as_the_service_role(service: RunningServer, stub: Any, database_url: str) -> None:
    await stub.RegisterTool(pb.RegisterToolRequest(name="whoami"))
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT DISTINCT a.usename, r.rolsuper FROM pg_stat_activity a JOIN pg_roles r ON r.rolname = a.usename"
            " WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() AND a.backend_type = 'client backend'"
        )
        rows = await cur.fetchall()
    assert (SERVICE_ROLE, False) in rows


@pytest.mark.parametrize(
    "statement",
    [
        # DELETE on generation.tasks is granted for PruneTasks (retention of terminal rows).
        "TRUNCATE generation.tasks",
        "UPDATE generation.tasks SET id = gen_random_uuid()",
        "UPDATE generation.tasks SET created_at = now()",
        "UPDATE generation.tools SET created_at = now()",
        "INSERT INTO generation.tasks (id, tool_id) VALUES (gen_random_uuid(), gen_random_uuid())",
        "DELETE FROM generation.tools",
        "CREATE TABLE generation.extra (id int)",
        "ALTER TABLE generation.tasks DROP CONSTRAINT tasks_priority_check",
        "CREATE FUNCTION generation.f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    ],
)
async def test_the_service_role_cannot_do_more_than_the_rpcs_need(database_url: str, statement: str) -> None:
    url = make_conninfo(database_url, user=SERVICE_ROLE)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await conn.execute(statement)
