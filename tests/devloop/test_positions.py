"""Diagnostics point at the offending SQL token inside the .proto's own string literal(s):
single literals, escapes, adjacent literals over several lines, text-format and `.query =`
syntax. Each test writes a proto with the typo at a known place and checks `line:col`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydb.plugin.bind.positions import query_offsets
from support.plugin_harness import compile_protos, run_plugin

SCHEMA = "CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL, note text);\n"
HEAD = """syntax = "proto3";
package pos.v1;
import "pydb/v1/options.proto";
message Id { int64 id = 1; }
message Item { int64 id = 1; string name = 2; }
message Items { repeated Item items = 1; }
message Empty {}
"""


def diagnose(tmp_path: Path, service: str, schema: str = SCHEMA) -> list[tuple[int, int, str]]:
    (tmp_path / "pos").mkdir(exist_ok=True)
    (tmp_path / "pos/schema.sql").write_text(schema)
    (tmp_path / "pos/api.proto").write_text(HEAD + service)
    outcome = run_plugin(compile_protos(tmp_path, ["pos/api.proto"]), ["pos/api.proto"], cwd=tmp_path)
    return [
        (int(m[1]), int(m[2]), m[3])
        for m in re.finditer(r"^pos/api\.proto:(\d+):(\d+): error: (.*)$", outcome.error, re.MULTILINE)
    ]


def where(text: str, needle: str, occurrence: int = 1) -> tuple[int, int]:
    """1-based line and column of the `occurrence`-th `needle` in the proto (HEAD included)."""
    full = HEAD + text
    at = -1
    for _ in range(occurrence):
        at = full.index(needle, at + 1)
    line = full.count("\n", 0, at) + 1
    return line, at - (full.rfind("\n", 0, at) + 1) + 1


def test_single_literal(tmp_path: Path) -> None:
    service = """service S {
  rpc Get(Id) returns (Item) {
    option (pydb.v1.sql) = { query: "SELECT id, nmae FROM items WHERE id = @id" cardinality: CARDINALITY_ONE };
  }
}
"""
    [(line, col, message)] = diagnose(tmp_path, service)
    assert (line, col) == where(service, "nmae")
    assert "column nmae does not exist" in message


def test_escaped_quotes(tmp_path: Path) -> None:
    service = r"""service S {
  rpc Get(Id) returns (Item) {
    option (pydb.v1.sql) = {
      query: "SELECT \"id\", \"name\" FROM \"items\" WHERE \"idd\" = @id"
      cardinality: CARDINALITY_ONE
    };
  }
}
"""
    [(line, col, message)] = diagnose(tmp_path, service)
    assert (line, col) == where(service, r"\"idd\"")
    assert "idd" in message


def test_adjacent_literals_over_several_lines(tmp_path: Path) -> None:
    service = r"""service S {
  rpc List(Empty) returns (Items) {
    option (pydb.v1.sql) = {
      query:
        "SELECT id, name\n"
        "  FROM items\n"
        // a comment between the pieces
        "  WHERE note = 'x'\n"
        "  ORDER BY nmae"
      cardinality: CARDINALITY_MANY
      result_field: "items"
    };
  }
}
"""
    [(line, col, _)] = diagnose(tmp_path, service)
    assert (line, col) == where(service, "nmae")


def test_query_assigned_as_a_subfield(tmp_path: Path) -> None:
    service = """service S {
  rpc Get(Id) returns (Item) {
    option (pydb.v1.sql).cardinality = CARDINALITY_ONE;
    option (pydb.v1.sql).query = "SELECT id, name FROM itemz WHERE id = @id";
  }
}
"""
    [(line, col, message)] = diagnose(tmp_path, service)
    assert (line, col) == where(service, "itemz")
    assert "itemz" in message


def test_every_error_of_a_statement_at_its_own_token(tmp_path: Path) -> None:
    service = r"""service S {
  rpc Get(Id) returns (Item) {
    option (pydb.v1.sql) = {
      query: "SELECT id, 'caf\303\251' || nmae AS name"
             " FROM items WHERE id = @idd"
      cardinality: CARDINALITY_ONE
    };
  }
}
"""
    found = sorted(diagnose(tmp_path, service))
    assert [(line, col) for line, col, _ in found] == sorted([where(service, "nmae"), where(service, "@idd")])


def test_a_stale_source_falls_back_to_the_option() -> None:
    text = 'option (pydb.v1.sql) = { query: "SELECT 1" };'
    assert query_offsets(text, 0, len(text), "SELECT 1") == [*range(33, 41), 41]
    assert query_offsets(text, 0, len(text), "SELECT 2") is None


@pytest.mark.parametrize(
    ("literal", "decoded"),
    [
        (r'"a\nb"', "a\nb"),
        (r'"\x41\101\\"', "AA\\"),
        (r"'it''s'", "its"),
        (r'"\u00e9t\303\251"', "été"),
        ('"tab\\tend"', "tab\tend"),
    ],
)
def test_escapes_decode_as_protoc_decodes(literal: str, decoded: str) -> None:
    text = f"option (pydb.v1.sql) = {{ query: {literal} }};"
    offsets = query_offsets(text, 0, len(text), decoded)
    assert offsets is not None and len(offsets) == len(decoded) + 1
    assert offsets == sorted(offsets)
