"""`protoc-gen-pydb lsp` driven over stdio as an editor drives it (raw JSON-RPC): open a proto,
introduce a typo, get the diagnostic at the token's range, see it cleared on the fix."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
lsp_client: Any = importlib.import_module("lsp_client")  # the same client the benchmark uses

PROTO = """syntax = "proto3";
package shop.v1;
import "pydb/v1/options.proto";
message Id { int64 id = 1; }
message Item { int64 id = 1; string name = 2; }
service Shop {
  rpc Get(Id) returns (Item) {
    option (pydb.v1.sql) = {
      query: "SELECT id, name"
             " FROM items WHERE id = @id"
      cardinality: CARDINALITY_ONE
    };
  }
}
"""
SCHEMA = "CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL);\n"


@pytest.fixture
def editor(tmp_path: Path) -> Iterator[tuple[Any, str]]:
    (tmp_path / "shop/v1").mkdir(parents=True)
    (tmp_path / "shop/v1/schema.sql").write_text(SCHEMA)
    path = tmp_path / "shop/v1/shop.proto"
    path.write_text(PROTO)
    client = lsp_client.Client(tmp_path, "-I", ".")
    try:
        client.initialize(tmp_path)
        uri = client.open(path, PROTO)
        assert client.diagnostics(uri) == []
        yield client, uri
    finally:
        client.close()


def test_typo_is_reported_at_its_range_and_cleared_on_fix(editor: tuple[Any, str]) -> None:
    client, uri = editor
    client.change(uri, PROTO.replace("FROM items", "FROM itemz"))  # unsaved: the buffer is checked
    [found] = client.diagnostics(uri)
    assert found["range"] == {"start": {"line": 9, "character": 20}, "end": {"line": 9, "character": 25}}
    assert "itemz does not exist" in found["message"] and found["severity"] == 1
    client.change(uri, PROTO)
    assert client.diagnostics(uri) == []


def test_a_proto_syntax_error_then_its_fix(editor: tuple[Any, str]) -> None:
    client, uri = editor
    client.change(uri, PROTO.replace("message Item {", "message Item {{"))
    found = client.diagnostics(uri)
    assert found and found[0]["range"]["start"]["line"] == 4
    client.change(uri, PROTO.replace("SELECT id, name", "SELECT id, nmae"))
    [typo] = client.diagnostics(uri)
    assert typo["range"]["start"] == {"line": 8, "character": 25} and "nmae" in typo["message"]
    client.change(uri, PROTO)
    assert client.diagnostics(uri) == []


def position_of(needle: str, text: str = PROTO, skip: int = 0) -> dict[str, int]:
    at = text.index(needle) + skip
    return {"line": text.count("\n", 0, at), "character": at - (text.rfind("\n", 0, at) + 1)}


def test_hover_on_a_param_and_a_result_column(editor: tuple[Any, str]) -> None:
    client, uri = editor
    doc = {"uri": uri}
    param = client.request("textDocument/hover", {"textDocument": doc, "position": position_of("@id", skip=1)})
    assert param["result"]["contents"]["value"] == "@id: int8 (the parameter's PostgreSQL type)"
    column = client.request("textDocument/hover", {"textDocument": doc, "position": position_of('name"', skip=2)})
    assert column["result"]["contents"]["value"] == "result column name: text NOT NULL"
    nothing = client.request("textDocument/hover", {"textDocument": doc, "position": position_of("message Id")})
    assert nothing["result"] is None


def test_definition_of_a_column_is_its_create_table_line(editor: tuple[Any, str]) -> None:
    client, uri = editor
    found = client.request(
        "textDocument/definition", {"textDocument": {"uri": uri}, "position": position_of('name"', skip=1)}
    )["result"]
    assert found["uri"].endswith("/shop/v1/schema.sql")
    assert found["range"]["start"] == position_of("name text", SCHEMA)
