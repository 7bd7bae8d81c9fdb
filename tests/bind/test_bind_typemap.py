"""The one pg <-> proto table (bind/typemap.py): the docs show it, pygen writes every conversion
it names, and adding a row is the whole change docs/adding-a-type.md says it is."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import psycopg
import pytest
from pydb import runtime as rt
from pydb.plugin.bind import ir
from pydb.plugin.bind import typemap as t
from pydb.plugin.pygen.lower import _Module
from pydb.plugin.sql.catalog.types import PgType
from support.pg import Cluster
from test_bind_runtime import HEADER, built, database, pb2, rpc

DOC = Path(__file__).resolve().parents[2] / "docs" / "diagnostics.md"


def test_the_docs_show_the_table() -> None:
    text = DOC.read_text(encoding="utf-8")
    m = re.search(r"<!-- BEGIN type-table -->\n(.*?)\n<!-- END type-table -->", text, re.S)
    assert m is not None
    if os.environ.get("PYDB_UPDATE_EXPECTED") == "1":
        DOC.write_text(text[: m.start(1)] + t.markdown_table() + text[m.end(1) :], encoding="utf-8")
        return
    assert m.group(1) == t.markdown_table()


@pytest.mark.parametrize(
    ("pg", "proto", "reads", "binds", "conversion"),
    [
        ("int4", "int32", True, True, ir.Conversion.IDENTITY),
        ("int4", "int64", True, False, ir.Conversion.IDENTITY),  # a wider field may hold it, not feed it
        ("int8", "int32", False, True, ir.Conversion.IDENTITY),
        ("numeric", "string", True, True, ir.Conversion.NUMERIC_TEXT),
        ("numeric", "float", False, True, ir.Conversion.NUMERIC_DOUBLE),
        ("uuid", "string", True, True, ir.Conversion.UUID),
        ("date", "string", True, True, ir.Conversion.TEXT),
        ("timestamptz", t.TIMESTAMP_MSG, True, True, ir.Conversion.TIMESTAMP),
        ("interval", t.DURATION_MSG, True, True, ir.Conversion.DURATION),
        ("text", "google.protobuf.StringValue", True, True, ir.Conversion.IDENTITY),
    ],
)
def test_one_row_says_reads_binds_and_how(
    pg: str, proto: str, reads: bool, binds: bool, conversion: ir.Conversion
) -> None:
    m = t.mapping(PgType(pg), proto)
    assert m is not None and (m.reads, m.binds, m.conversion) == (reads, binds, conversion)
    assert t.mapping(PgType("bool"), "int32") is None
    assert t.mapping(PgType("app.mood", labels=("a",)), "enum") == t.ENUM_PAIRS[0]


def all_pairs() -> list[tuple[str, t.Mapping]]:
    return [(pg, m) for pg, pairs in t.TYPES.items() for m in pairs]


@pytest.mark.parametrize(("pg", "m"), all_pairs(), ids=lambda x: x if isinstance(x, str) else x.proto)
def test_pygen_writes_every_conversion_the_table_names(pg: str, m: t.Mapping) -> None:
    """Each row's conversion becomes Python that parses and calls only what pydb.runtime has."""
    module = _Module("x.proto")
    for repeated in (False, True):
        field = ir.FieldRef("f", m.proto, repeated, not repeated)
        pg_type = PgType(pg, repeated)
        exprs = []
        if m.reads:
            exprs.append(module.value(ir.Column("f", 0, pg_type, True, field, m.conversion)))
        if m.binds:
            exprs.append(module.param(ir.Param("f", pg_type, field, m.conversion)).expr)
        for expr in exprs:
            tree = ast.parse(expr, mode="eval")
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "rt":
                    assert hasattr(rt, node.attr), expr


BIGINT_AS_TEXT = """
CREATE TABLE counters (id bigint PRIMARY KEY, hits bigint NOT NULL);
"""
BIGINT_PROTO = (
    HEADER.format(package="bind_typemap.v1")
    + """
message Counter { string id = 1; string hits = 2; }
message GetRequest { string id = 1; }
service Counters {
"""
    + rpc("Get", "GetRequest", "Counter", "SELECT id, hits FROM counters WHERE id = @id", "ONE")
    + "}\n"
)


async def test_adding_a_row_is_the_whole_change(
    monkeypatch: pytest.MonkeyPatch, pg_server: tuple[str, Cluster | None], tmp_path: Path
) -> None:
    """docs/adding-a-type.md's first example, done: one row (bigint <-> string, an existing
    conversion) and the generated handler round-trips 64-bit values as text on PostgreSQL."""
    row = t.TYPES["int8"] + (t.Mapping("string", True, True, ir.Conversion.NUMERIC_TEXT),)
    monkeypatch.setitem(t.TYPES, "int8", row)
    with (
        built(tmp_path, "bind_typemap.v1", BIGINT_PROTO, BIGINT_AS_TEXT) as handlers,
        database(pg_server, tmp_path, BIGINT_AS_TEXT) as url,
    ):
        m = pb2(handlers)
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute("INSERT INTO counters VALUES (9007199254740993, 9223372036854775807)")
            got = await handlers.get(conn, m.GetRequest(id="9007199254740993"))
            assert (got.id, got.hits) == ("9007199254740993", "9223372036854775807")
            with pytest.raises(psycopg.errors.InvalidTextRepresentation):
                await handlers.get(conn, m.GetRequest(id="nine"))
