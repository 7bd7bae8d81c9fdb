"""Helpers that put corpus statements in front of a real PostgreSQL."""

from __future__ import annotations

import re
from collections.abc import Iterator

import psycopg
from google.protobuf import descriptor_pb2
from pydb.plugin.sql.grammar import parameter_spans
from pydb.v1 import options_pb2

from .runner import Corpus, proto_name


def annotated_queries(kind: str, name: str) -> Iterator[tuple[str, str]]:
    """(rpc name, query) of every annotated RPC in a corpus file, read from its descriptor."""
    descriptors = descriptor_set()
    for file in descriptors.file:
        if file.name != proto_name(kind, name):
            continue
        for service in file.service:
            for method in service.method:
                if method.options.HasExtension(options_pb2.sql):
                    yield method.name, method.options.Extensions[options_pb2.sql].query


_DESCRIPTORS: list[descriptor_pb2.FileDescriptorSet] = []


def descriptor_set() -> descriptor_pb2.FileDescriptorSet:
    if not _DESCRIPTORS:
        _DESCRIPTORS.append(Corpus().descriptors)
    return _DESCRIPTORS[0]


def positional(sql: str) -> str:
    """`@name` -> `$n` (the same n for every use of a name), as PREPARE takes it."""
    spans = sorted((span.start, span.end, name) for name, found in parameter_spans(sql).items() for span in found)
    numbers: dict[str, int] = {}
    out, pos = [], 0
    for start, end, name in spans:
        numbers.setdefault(name, len(numbers) + 1)
        out.append(sql[pos:start] + f"${numbers[name]}")
        pos = end + 1
    return "".join(out) + sql[pos:]


def postgres_error(conn: psycopg.Connection, sql: str, execute: bool = False) -> str | None:
    """The first line of Postgres' error for `sql`, or None when it is accepted. PREPARE runs
    parse analysis; `execute` also plans and runs it once with every parameter NULL (in a
    transaction rolled back), for errors Postgres only finds when planning (ON CONFLICT)."""
    pgconn = conn.pgconn
    text = positional(sql)
    pgconn.exec_(b"BEGIN")
    try:
        result = pgconn.prepare(b"", text.encode())
        if result.status == psycopg.pq.ExecStatus.COMMAND_OK and execute:
            count = len(set(re.findall(r"\$\d+", text)))
            nulls = [None] * count  # libpq takes None as NULL; psycopg's stub does not say so
            result = pgconn.exec_prepared(b"", nulls)  # type: ignore[arg-type]
        if result.status in (psycopg.pq.ExecStatus.COMMAND_OK, psycopg.pq.ExecStatus.TUPLES_OK):
            return None
        return (result.error_message or b"").decode().strip().split("\n")[0]
    finally:
        pgconn.exec_(b"ROLLBACK")


def pg_type_names(conn: psycopg.Connection) -> dict[int, str]:
    """OID -> the analyzer's spelling: `int4`, `text[]`, `app.job_state` (enums qualified)."""
    rows = conn.execute(
        "SELECT t.oid, t.typname, t.typelem, n.nspname, t.typtype FROM pg_type t "
        "JOIN pg_namespace n ON n.oid = t.typnamespace"
    ).fetchall()
    raw = {oid: (name, elem, schema, kind) for oid, name, elem, schema, kind in rows}

    def spell(oid: int) -> str:
        name, elem, schema, kind = raw[oid]
        if name.startswith("_") and elem:
            return spell(elem) + "[]"
        return f"{schema}.{name}" if kind == "e" else name

    return {oid: spell(oid) for oid in raw}


def postgres_signature(conn: psycopg.Connection, sql: str) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """What Postgres infers for `sql`: parameter types by name, and (name, type) per column."""
    order: list[str] = []
    for _, _, name in sorted((s.start, s.end, n) for n, found in parameter_spans(sql).items() for s in found):
        if name not in order:
            order.append(name)
    conn.pgconn.prepare(b"", positional(sql).encode())
    described = conn.pgconn.describe_prepared(b"")
    names = pg_type_names(conn)
    params = {name: names[described.param_type(i)] for i, name in enumerate(order)}
    columns = [((described.fname(i) or b"").decode(), names[described.ftype(i)]) for i in range(described.nfields)]
    return params, columns
