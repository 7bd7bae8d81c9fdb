"""Types without a dedicated mapping cross as PostgreSQL's text form (bind/typemap.py), on a real
PostgreSQL: a row holding one of each, written from `string` fields through `@param`s with no
cast in the SQL and read back through the generated handlers, equals PostgreSQL's own text
output, arrays included. And `void` result columns (`SELECT pg_advisory_lock(@id)`) under each
cardinality: skipped, as docs/diagnostics.md says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from goldens.harness import generate, write_tree
from pydb import runtime as rt
from support.pg import Cluster
from test_bind_runtime import HEADER, built, database, pb2, rpc

#: (column, type as written in schema.sql, a value as its input text). Each column also has an
#: array twin `<column>_a` holding [value, value].
SAMPLES: tuple[tuple[str, str, str], ...] = (
    ("v_citext", "citext", 'Hello "World"'),
    ("v_inet", "inet", "10.1.2.3/16"),
    ("v_cidr", "cidr", "10.0.0.0/8"),
    ("v_macaddr", "macaddr", "08:00:2b:01:02:03"),
    ("v_macaddr8", "macaddr8", "08:00:2b:01:02:03:04:05"),
    ("v_bit", "bit(3)", "101"),
    ("v_varbit", "varbit", "10110"),
    ("v_money", "money", "12.34"),
    ("v_xml", "xml", '<a x="1">t</a>'),
    ("v_tsvector", "tsvector", "a fat cat"),
    ("v_tsquery", "tsquery", "fat & cat"),
    ("v_point", "point", "(1,2)"),
    ("v_line", "line", "{1,2,3}"),
    ("v_lseg", "lseg", "[(1,2),(3,4)]"),
    ("v_box", "box", "(1,1),(0,0)"),
    ("v_path", "path", "((0,0),(1,1),(2,0))"),
    ("v_polygon", "polygon", "((0,0),(1,1),(2,0))"),
    ("v_circle", "circle", "<(1,2),3>"),
    ("v_int4range", "int4range", "[1,5)"),
    ("v_int8range", "int8range", "(1,9]"),
    ("v_numrange", "numrange", "(1.5,2.5]"),
    ("v_tsrange", "tsrange", "[2020-01-01 10:00,2020-01-02)"),
    ("v_tstzrange", "tstzrange", "[2020-01-01 10:00+00,infinity)"),
    ("v_daterange", "daterange", "[2020-01-01,2020-02-01)"),
    ("v_int4multirange", "int4multirange", "{[1,3),[5,7)}"),
    ("v_datemultirange", "datemultirange", "{[2020-01-01,2020-02-01)}"),
    ("v_hstore", "hstore", 'a=>1, "b c"=>NULL'),
    ("v_cube", "cube", "(1,2),(3,4)"),
    ("v_seg", "seg", "5.0 .. 7.0"),
    ("v_isbn", "isbn", "978-0-393-04002-9"),
    ("v_ean13", "ean13", "978-0-393-04002-9"),
    ("v_oid", "oid", "42"),
    ("v_cid", "cid", "5"),
    ("v_xid", "xid", "7"),
    ("v_xid8", "xid8", "9"),
    ("v_tid", "tid", "(1,2)"),
    ("v_regclass", "regclass", "pg_class"),
    ("v_regtype", "regtype", "integer"),
    ("v_pg_lsn", "pg_lsn", "0/16B3748"),
    ("v_txid_snapshot", "txid_snapshot", "10:20:10,14,15"),
    ("v_pg_snapshot", "pg_snapshot", "10:20:10,14,15"),
    ("v_char", '"char"', "x"),
    ("v_bpchar", "char(4)", "ab"),
    ("v_composite", "app.point_type", '(1,"a b")'),
    ("v_domain", "app.email", "Someone@Example.com"),
    ("v_floatrange", "app.floatrange", "[1.5,2.5)"),
)

#: ltree's, apart: the extension declares an operator `@`, after which `@name` is no longer
#: read as a parameter (the SQL front end's grammar check, reported to the lead).
LTREE_SAMPLES: tuple[tuple[str, str, str], ...] = (
    ("v_ltree", "ltree", "Top.Science.Astronomy"),
    ("v_lquery", "lquery", "*.Science.*"),
    ("v_ltxtquery", "ltxtquery", "Europe & Russia*@ & !Transportation"),
)

_EXTENSIONS = "CREATE EXTENSION citext; CREATE EXTENSION hstore; CREATE EXTENSION cube; CREATE EXTENSION seg;\n"


def _schema(samples: tuple[tuple[str, str, str], ...], extensions: str) -> str:
    return (
        extensions + "CREATE EXTENSION isn;\nCREATE SCHEMA app;\n"
        "CREATE TYPE app.point_type AS (x int, label text);\n"
        "CREATE DOMAIN app.email AS citext CHECK (VALUE LIKE '%@%');\n"
        "CREATE TYPE app.floatrange AS RANGE (subtype = float8);\n"
        "CREATE TABLE app.vals (\n    id int PRIMARY KEY"
        + "".join(f",\n    {c} {t},\n    {c}_a {t}[]" for c, t, _ in samples)
        + "\n);\n"
    )


def _proto(package: str, samples: tuple[tuple[str, str, str], ...]) -> str:
    fields = "".join(
        f"  optional string {c} = {2 * i + 2};\n  repeated string {c}_a = {2 * i + 3};\n"
        for i, (c, _, _) in enumerate(samples)
    )
    columns = ", ".join(f"{c}, {c}_a" for c, _, _ in samples)
    params = ", ".join(f"@{c}, @{c}_a" for c, _, _ in samples)
    return (
        HEADER.format(package=package)
        + f"message Vals {{\n  int32 id = 1;\n{fields}}}\n"
        + "message GetValsRequest { int32 id = 1; }\n"
        + "service Types {\n"
        + rpc(
            "PutVals", "Vals", "Vals", f"INSERT INTO app.vals (id, {columns}) VALUES (@id, {params}) RETURNING *", "ONE"
        )
        + rpc("GetVals", "GetValsRequest", "Vals", "SELECT * FROM app.vals WHERE id = @id", "ONE")
        + "}\n"
    )


async def _postgres_text(
    conn: psycopg.AsyncConnection[Any], samples: tuple[tuple[str, str, str], ...], id_: int
) -> dict[str, Any]:
    """PostgreSQL's own text output of row `id_` (its non-NULL values): each value through its
    type's output function (`format('%s', v)`; a cast to text may differ: bpchar drops its
    padding), each array as its elements' text output."""
    exprs = ", ".join(f"format('%%s', {c}), ARRAY(SELECT format('%%s', e) FROM unnest({c}_a) e)" for c, _, _ in samples)
    cur = await conn.execute(f"SELECT {exprs} FROM app.vals WHERE id = %s", (id_,))
    row = await cur.fetchone()
    assert row is not None
    out: dict[str, Any] = {}
    for i, (c, _, _) in enumerate(samples):
        out[c], out[c + "_a"] = row[2 * i], row[2 * i + 1]
    return out


def _as_dict(message: Any, samples: tuple[tuple[str, str, str], ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for c, _, _ in samples:
        out[c] = getattr(message, c) if message.HasField(c) else None
        out[c + "_a"] = list(getattr(message, c + "_a"))
    return out


@pytest.mark.parametrize(
    ("samples", "extensions"),
    [
        pytest.param(SAMPLES, _EXTENSIONS, id="types"),
        pytest.param(LTREE_SAMPLES, _EXTENSIONS + "CREATE EXTENSION ltree;\n", id="ltree"),
    ],
)
async def test_text_form_types_round_trip(
    pg_server: tuple[str, Cluster | None],
    tmp_path: Path,
    samples: tuple[tuple[str, str, str], ...],
    extensions: str,
) -> None:
    """Each value is bound from a string (PostgreSQL parses it as the column's type: stored equal
    to the same text cast in SQL), and reads back, RETURNING and SELECT alike, as exactly what
    PostgreSQL prints; arrays too (the text form's quoting undone, `;`-separated box[] included)."""
    schema = _schema(samples, extensions)
    # One package per sample set: both protos are imported into the same descriptor pool.
    package = "bind_text.v1" if samples is SAMPLES else "bind_text_ext.v1"
    with (
        built(tmp_path, package, _proto(package, samples), schema) as handlers,
        database(pg_server, tmp_path, schema) as url,
    ):
        m = pb2(handlers)
        request = m.Vals(id=1)
        for c, _, value in samples:
            setattr(request, c, value)
            getattr(request, c + "_a").extend([value, value])
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            returned = await handlers.put_vals(conn, request)
            got = await handlers.get_vals(conn, m.GetValsRequest(id=1))
            expected = await _postgres_text(conn, samples, 1)
            # The stored values are what PostgreSQL makes of the input text.
            for c, t, value in samples:
                cur = await conn.execute(f"SELECT format('%%s', %s::{t})", (value,))
                parsed = await cur.fetchone()
                assert parsed is not None
                assert expected[c] == parsed[0], c
                assert expected[c + "_a"] == [parsed[0], parsed[0]], c
            assert _as_dict(returned, samples) == expected
            assert _as_dict(got, samples) == expected
            # A string PostgreSQL cannot parse as the column's type is the caller's error (inet's
            # input function says 22P02; ltree's says 42601, a syntax error, so it is not used here).
            strict = next((c for c, t, _ in samples if t == "inet"), None)
            if strict is not None:
                with pytest.raises(psycopg.DataError) as refused:
                    await handlers.put_vals(conn, m.Vals(id=3, **{strict: "not a value of the type"}))
                assert rt.status_for_db_error(refused.value)[0] is grpc.StatusCode.INVALID_ARGUMENT
            # NULLs: an unset optional field binds NULL and reads back unset; a NULL array is [].
            empty = await handlers.put_vals(conn, m.Vals(id=2))
            assert _as_dict(empty, samples) == {k: None if not k.endswith("_a") else [] for k in expected}


VOID_SCHEMA = "CREATE TABLE app_jobs (id bigint PRIMARY KEY);\n"
VOID_PROTO = (
    HEADER.format(package="bind_void.v1")
    + 'import "google/protobuf/empty.proto";\n'
    + """
message LockRequest { int64 id = 1; }
message LockCountRequest { int32 n = 1; }
message Locked {}
message LockedMany { repeated Locked locks = 1; }
message LockedId { int64 id = 1; }
service Locks {
"""
    + rpc("LockOne", "LockRequest", "Locked", "SELECT pg_advisory_lock(@id)", "ONE")
    + rpc("LockOptional", "LockRequest", "Locked", "SELECT pg_advisory_lock(@id)", "OPTIONAL")
    + rpc("LockEmpty", "LockRequest", "google.protobuf.Empty", "SELECT pg_advisory_lock(@id)", "ONE")
    + rpc(
        "LockMany",
        "LockCountRequest",
        "LockedMany",
        "SELECT pg_advisory_lock(k) FROM generate_series(100, 99 + @n) k",
        "MANY",
        "locks",
    )
    + rpc("LockExec", "LockRequest", "Locked", "SELECT pg_advisory_lock(@id)", "EXEC")
    + rpc("LockWithId", "LockRequest", "LockedId", "SELECT pg_advisory_lock(@id), @id AS id", "ONE")
    + "}\n"
)


async def _advisory_locks(conn: psycopg.AsyncConnection[Any]) -> list[int]:
    cur = await conn.execute(
        "SELECT objid::int FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() ORDER BY 1"
    )
    return [r[0] for r in await cur.fetchall()]


async def test_void_columns_are_skipped(pg_server: tuple[str, Cluster | None], tmp_path: Path) -> None:
    """`SELECT pg_advisory_lock(@id)` under ONE / OPTIONAL (an empty message, google.protobuf.Empty
    or one's own), MANY (one empty message per row), EXEC (nothing), and beside other columns
    (they fill their fields)."""
    with (
        built(tmp_path, "bind_void.v1", VOID_PROTO, VOID_SCHEMA) as handlers,
        database(pg_server, tmp_path, VOID_SCHEMA) as url,
    ):
        m = pb2(handlers)
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            assert await handlers.lock_one(conn, m.LockRequest(id=1)) == m.Locked()
            assert await handlers.lock_optional(conn, m.LockRequest(id=2)) == m.Locked()
            empty = await handlers.lock_empty(conn, m.LockRequest(id=3))
            assert empty.DESCRIPTOR.full_name == "google.protobuf.Empty"
            many = await handlers.lock_many(conn, m.LockCountRequest(n=3))
            assert list(many.locks) == [m.Locked()] * 3
            await handlers.lock_exec(conn, m.LockRequest(id=4))
            with_id = await handlers.lock_with_id(conn, m.LockRequest(id=5))
            assert with_id.id == 5
            assert await _advisory_locks(conn) == [1, 2, 3, 4, 5, 100, 101, 102]


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "message Locked { string pg_advisory_lock = 1; }",
            "result column pg_advisory_lock is void, which carries no value: it fills no field; "
            "remove bind_void_field.v1.Locked.pg_advisory_lock",
        ),
    ],
)
def test_a_field_for_a_void_column_is_an_error(tmp_path: Path, message: str, expected: str) -> None:
    proto = (
        HEADER.format(package="bind_void_field.v1")
        + "message LockRequest { int64 id = 1; }\n"
        + message
        + "\nservice Locks {\n"
        + rpc("LockOne", "LockRequest", "Locked", "SELECT pg_advisory_lock(@id)", "ONE")
        + "}\n"
    )
    rel = "bind_void_field/v1/svc.proto"
    write_tree(tmp_path, {rel: proto, "bind_void_field/v1/schema.sql": VOID_SCHEMA})
    outcome = generate(tmp_path, rel)
    assert expected in outcome.error


async def test_ltree_types_read_as_text(pg_server: tuple[str, Cluster | None], tmp_path: Path) -> None:
    """ltree, lquery, ltxtquery (and their arrays) read as PostgreSQL's text output; the statement
    has no parameter (see LTREE_SAMPLES for why)."""
    schema = _schema(LTREE_SAMPLES, _EXTENSIONS + "CREATE EXTENSION ltree;\n")
    proto = (
        HEADER.format(package="bind_ltree.v1")
        + "message Vals {\n  int32 id = 1;\n"
        + "".join(
            f"  optional string {c} = {2 * i + 2};\n  repeated string {c}_a = {2 * i + 3};\n"
            for i, (c, _, _) in enumerate(LTREE_SAMPLES)
        )
        + "}\nmessage AllRequest {}\nmessage ValsList { repeated Vals vals = 1; }\nservice Types {\n"
        + rpc("ListVals", "AllRequest", "ValsList", "SELECT * FROM app.vals ORDER BY id", "MANY", "vals")
        + "}\n"
    )
    with (
        built(tmp_path, "bind_ltree.v1", proto, schema) as handlers,
        database(pg_server, tmp_path, schema) as url,
    ):
        m = pb2(handlers)
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            columns = ", ".join(f"{c}, {c}_a" for c, _, _ in LTREE_SAMPLES)
            values = ", ".join(f"%s::{t}, ARRAY[%s::{t}, %s::{t}]" for _, t, _ in LTREE_SAMPLES)
            args = [a for _, _, v in LTREE_SAMPLES for a in (v, v, v)]
            await conn.execute(f"INSERT INTO app.vals (id, {columns}) VALUES (1, {values})", args)
            got = await handlers.list_vals(conn, m.AllRequest())
            assert len(got.vals) == 1
            assert _as_dict(got.vals[0], LTREE_SAMPLES) == await _postgres_text(conn, LTREE_SAMPLES, 1)
