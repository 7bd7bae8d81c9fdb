"""The corpus' generating cases on the shared jobs schema (tests/corpus/_shared/jobs), generated and
run: every handler protoc-gen-pydb writes for them executes its statement on a real PostgreSQL (that
schema, one seeded user and job) and builds its response, so every pg -> proto conversion of the type
table (numeric, real -> FloatValue, date, interval -> Duration, bytea, arrays, enums, jsonb,
timestamps) is exercised for real, not only checked at generation time.
"""

from __future__ import annotations

import datetime
import importlib
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from corpus.run import CORPUS, KNOWN_GAPS, ROOT, Corpus, generating_cases, proto_name
from google.protobuf import descriptor_pb2, duration_pb2, message, symbol_database, timestamp_pb2
from pydb import runtime as rt
from pydb.plugin.protos import snake_case
from pydb.v1 import options_pb2
from support.pg import Cluster, scratch_database
from support.plugin_harness import protoc

JOBS_SCHEMA = CORPUS / "_shared" / "jobs" / "schema.sql"
CORPUS_RUN = Corpus()
GENERATING = frozenset(generating_cases())
#: The cases that generate and run on the jobs schema (a known gap, e.g. IFNULL accepted, fails when run).
VALID = [
    c for c in CORPUS_RUN.cases if CORPUS_RUN.schema_path(c) == JOBS_SCHEMA and c in GENERATING and c not in KNOWN_GAPS
]
JOB_ID = "6f1c2d3e-4a5b-4c6d-8e7f-901234567890"
OTHER_JOB_ID = "7a1c2d3e-4a5b-4c6d-8e7f-901234567891"

SEED = f"""
INSERT INTO app.users (email, name, nickname, tags, profile)
VALUES ('ada@example.com', 'Ada', 'ada', ARRAY['admin', 'ops'], '{{"theme": "dark"}}');
INSERT INTO app.jobs (id, owner_id, state, kind, payload, attempts, score, price, ratio, small, run_at,
                      timeout, due, blob, urgent, created_at, note)
VALUES ('{JOB_ID}', 1, 'queued', 'build',
        '{{"region": "eu", "source": "ci", "limits": {{"cpu": 2}}}}', 2, 1.5, 12.34, 0.5, 3,
        now() - interval '2 hours', interval '90 seconds', current_date - 1, '\\x0102', true,
        now() - interval '3 hours', 'first'),
       ('{OTHER_JOB_ID}', 1, 'failed', 'test', '{{}}', 0, NULL, NULL, NULL, NULL, NULL,
        interval '5 minutes', NULL, NULL, false, now() - interval '1 hour', NULL);
INSERT INTO app.events (job_id, seq, body) VALUES ('{OTHER_JOB_ID}', 1, '{{"ok": true}}');
"""

#: A value for every request field the valid cases use, by field name.
SAMPLES: dict[str, object] = {
    "id": JOB_ID,
    "ids": [JOB_ID, OTHER_JOB_ID],
    "user_id": 1,
    "owner_id": 1,
    "kind": "build",
    "kinds": ["rebuilt", "retested"],
    "payload": '{"region": "us"}',
    "urgent": True,
    "email": "grace@example.com",
    "name": "Grace",
    "tags": ["new"],
    "filter": '{"region": "eu"}',
    "region": "eu",
    "tag": "admin",
    "any_of": ["ops"],
    "delay_seconds": 30.5,
    "grace_seconds": 60,
    "state": 1,  # JOB_STATE_QUEUED
    "max_attempts": 5,
    "limit": 10,
    "note": "other",
    "min_attempts": 1,
    "pattern": "b%",
    "age_seconds": 60.0,
    "verbose": True,
    "unit": "day",
    "schema": "pg_catalog",
    "table": "pg_class",
    "abbrev": "UTC",
    "relname": "pg_class",
}


def sample_request(cls: type[message.Message]) -> message.Message:
    request = cls()
    for field in request.DESCRIPTOR.fields:
        if field.message_type is not None and field.message_type.full_name == "google.protobuf.Duration":
            getattr(request, field.name).CopyFrom(duration_pb2.Duration(seconds=45))
        elif field.message_type is not None and field.message_type.full_name == "google.protobuf.Timestamp":
            getattr(request, field.name).CopyFrom(timestamp_pb2.Timestamp(seconds=0))
        elif field.name in SAMPLES:
            value = SAMPLES[field.name]
            if isinstance(value, list):
                getattr(request, field.name).extend(value)
            else:
                setattr(request, field.name, value)
        else:
            raise AssertionError(f"no sample value for {cls.DESCRIPTOR.full_name}.{field.name}")
    return request


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The corpus' Python (protoc's _pb2/_pb2_grpc and protoc-gen-pydb's handlers), importable."""
    out = tmp_path_factory.mktemp("generated")
    files = [f"{CORPUS.name}/_shared/jobs/common.proto", *(proto_name(name) for name in VALID)]
    protoc(ROOT, f"--python_out={out}", f"--grpc_python_out={out}", *files)
    for name in VALID:
        outcome = CORPUS_RUN.outcome(name)
        assert outcome.error == "", outcome.error
        for path, content in outcome.files.items():
            (out / path).write_text(content, encoding="utf-8")
    sys.path.insert(0, str(out))
    try:
        yield out
    finally:
        sys.path.remove(str(out))


@pytest.fixture(scope="module")
def corpus_url(pg_server: tuple[str, Cluster | None]) -> Iterator[str]:
    with scratch_database(pg_server[0], schema=JOBS_SCHEMA) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(SEED)
        yield url


@pytest.fixture
async def conn(corpus_url: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    async with await psycopg.AsyncConnection.connect(corpus_url) as connection:
        yield connection


def rpcs() -> list[tuple[str, descriptor_pb2.MethodDescriptorProto]]:
    """(case, method) for every RPC of the valid cases."""
    out: list[tuple[str, descriptor_pb2.MethodDescriptorProto]] = []
    for case in VALID:
        file = CORPUS_RUN.file(case)
        out.extend((case, method) for service in file.service for method in service.method)
    return out


async def call(conn: psycopg.AsyncConnection[Any], case: str, rpc: str) -> message.Message:
    """Run the generated handler for `rpc` of `case` on `conn`, rolled back afterwards."""
    module = importlib.import_module(f"{CORPUS.name}.{case}.query_pydb")
    method = next(m for c, m in rpcs() if c == case and m.name == rpc)
    request_cls = symbol_database.Default().GetSymbol(method.input_type.lstrip("."))
    handler = getattr(module, snake_case(rpc))
    async with conn.transaction(force_rollback=True):
        response: message.Message = await handler(conn, sample_request(request_cls))
    return response


async def test_every_generated_handler_runs(generated: Path, conn: psycopg.AsyncConnection[Any]) -> None:
    methods = rpcs()
    assert len(methods) >= 25
    for case, method in methods:
        assert method.options.HasExtension(options_pb2.sql)
        try:
            response = await call(conn, case, method.name)
        except rt.NotFound:
            continue  # ONE with no matching row: a valid outcome of a valid statement
        expected = method.output_type.lstrip(".")
        assert response.DESCRIPTOR.full_name == expected, (case, method.name)


async def test_every_column_type_converts(generated: Path, conn: psycopg.AsyncConnection[Any]) -> None:
    """One row of app.jobs with every column set, through RETURNING * into Job."""
    response: Any = await call(conn, "arrays_any_unnest", "GetJobs")
    first, second = response.jobs
    assert (first.id, second.id) == (JOB_ID, OTHER_JOB_ID)  # ORDER BY created_at
    job = first
    assert job.owner_id == 1 and job.kind == "build" and job.attempts == 2 and job.urgent is True
    assert job.state == 1  # JOB_STATE_QUEUED, from the pg label 'queued'
    assert job.payload.replace(" ", "") == '{"limits":{"cpu":2},"region":"eu","source":"ci"}'  # jsonb as text
    assert job.score == 1.5 and job.HasField("score")
    assert job.price == "12.34"  # numeric -> string, exactly
    assert job.ratio.value == 0.5  # real -> FloatValue
    assert job.small == 3
    assert job.timeout.ToTimedelta() == datetime.timedelta(seconds=90)  # interval -> Duration
    assert job.due == (datetime.date.today() - datetime.timedelta(days=1)).isoformat()  # date -> ISO string
    assert job.blob == b"\x01\x02"  # bytea -> bytes
    assert job.note == "first"
    assert job.created_at.ToDatetime(datetime.UTC) < datetime.datetime.now(datetime.UTC)
    # NULL columns leave optional fields unset and wrapper/message fields absent.
    other = second
    assert other.state == 4  # 'failed'
    assert not other.HasField("score") and not other.HasField("price") and not other.HasField("due")
    assert not other.HasField("ratio") and not other.HasField("run_at") and not other.HasField("note")


async def test_nested_rows_read_as_their_result_columns(generated: Path, conn: psycopg.AsyncConnection[Any]) -> None:
    """An array of app.jobs rows into repeated Job (array_agg, outer join and LATERAL) gives the
    very messages those rows give as result columns: every column type, NULLs included."""
    flat: Any = await call(conn, "arrays_any_unnest", "GetJobs")
    assert len(flat.jobs) == 2
    joined: Any = await call(conn, "nested_rows_array_agg", "GetUserJobs")
    assert (joined.id, joined.name) == (1, "Ada") and list(joined.jobs) == list(flat.jobs)
    lateral: Any = await call(conn, "nested_rows_array_agg", "ListUsersJobs")
    assert [list(u.jobs) for u in lateral.users] == [sorted(flat.jobs, key=lambda j: j.id)]
    # app.users rows, their text[] and jsonb columns inside each row's text form.
    users: Any = await call(conn, "arrays_any_unnest", "UsersTagged")
    owners: Any = await call(conn, "nested_rows_array_agg", "ListKindOwners")
    assert [(k.kind, list(k.owners)) for k in owners.kinds] == [
        ("build", list(users.users)),
        ("test", list(users.users)),
    ]
    assert list(owners.kinds[0].owners[0].tags) == ["admin", "ops"]


async def test_arrays_enums_and_nullable_joins(generated: Path, conn: psycopg.AsyncConnection[Any]) -> None:
    users: Any = await call(conn, "arrays_any_unnest", "UsersTagged")
    assert [u.email for u in users.users] == ["ada@example.com"]
    assert list(users.users[0].tags) == ["admin", "ops"]  # text[] -> repeated string
    owner: Any = await call(conn, "left_join_coalesce", "JobOwner")
    assert (owner.email, owner.nickname, owner.owner_id) == ("ada@example.com", "ada", 1)
    counts: Any = await call(conn, "aggregates_group_by", "CountByState")
    assert {(c.state, c.n) for c in counts.counts} == {(1, 1), (4, 1)}  # enum results, label by label
    requeued: Any = await call(conn, "cte_and_data_modifying_cte", "RequeueFailed")
    assert [(j.id, j.state, j.attempts) for j in requeued.jobs] == [(OTHER_JOB_ID, 1, 1)]
    postponed: Any = await call(conn, "interval_arithmetic", "Postpone")
    assert postponed.job.timeout.ToTimedelta() == datetime.timedelta(seconds=90 + 45)  # interval + Duration param
