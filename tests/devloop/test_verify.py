"""`protoc-gen-pydb verify` against a live PostgreSQL: passes on a matching database, finds a
dropped column and a changed type (in the schema and in the statements PREPAREd there)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from pydb.plugin.check import Checker
from pydb.plugin.verify import verify
from support.pg import Cluster, scratch_database

SCHEMA = """CREATE SCHEMA shop;
CREATE TYPE shop.state AS ENUM ('new', 'paid');
CREATE TABLE shop.items (
    id bigint PRIMARY KEY,
    name text NOT NULL,
    note text,
    state shop.state NOT NULL DEFAULT 'new',
    tags text[] NOT NULL DEFAULT '{}'
);
"""
PROTO = """syntax = "proto3";
package shop.v1;
import "pydb/v1/options.proto";
message Id { int64 id = 1; }
message Item { int64 id = 1; string name = 2; optional string note = 3; repeated string tags = 4; }
message Items { repeated Item items = 1; }
message Rename { int64 id = 1; string name = 2; }
message Empty {}
service Shop {
  rpc Get(Id) returns (Item) {
    option (pydb.v1.sql) = { query: "SELECT id, name, note, tags FROM shop.items WHERE id = @id" cardinality: CARDINALITY_ONE };
  }
  rpc SetName(Rename) returns (Empty) {
    option (pydb.v1.sql) = { query: "UPDATE shop.items SET name = @name WHERE id = @id" cardinality: CARDINALITY_EXEC };
  }
}
"""
NAME = "shop/v1/shop.proto"


@pytest.fixture
def live(pg_server: tuple[str, Cluster | None], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    (tmp_path / "shop/v1").mkdir(parents=True)
    (tmp_path / "shop/v1/schema.sql").write_text(SCHEMA)
    (tmp_path / NAME).write_text(PROTO)
    monkeypatch.chdir(tmp_path)
    with scratch_database(pg_server[0], schema=tmp_path / "shop/v1/schema.sql") as url:
        yield url


def alter(url: str, sql: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql)


def test_a_matching_database_passes(live: str) -> None:
    assert verify(Checker((".",)), [NAME], live) == ([], [])


def test_a_dropped_column(live: str) -> None:
    alter(live, "ALTER TABLE shop.items DROP COLUMN note")
    drift, diagnostics = verify(Checker((".",)), [NAME], live)
    assert drift == ["shop.items.note: in the schema files, not in the database (dropped?)"]
    [get] = diagnostics
    assert get.message == 'Get: PostgreSQL refuses it on the live database: ERROR:  column "note" does not exist'
    assert get.line == 11  # at the token in the proto


def test_a_changed_type_and_nullability(live: str) -> None:
    alter(live, "ALTER TABLE shop.items ALTER COLUMN id TYPE integer, ALTER COLUMN note SET NOT NULL")
    alter(live, "ALTER TABLE shop.items ADD COLUMN extra int")
    drift, diagnostics = verify(Checker((".",)), [NAME], live)
    assert drift == [
        "shop.items.id: type int8 in the schema files, int4 in the database",
        "shop.items.note: nullable in the schema files, NOT NULL in the database",
        "shop.items.extra: in the database, not in the schema files",
    ]
    messages = sorted(d.message for d in diagnostics)
    assert messages == [
        "Get: parameter @id: compiled as int8, the live database infers int4",
        "Get: result column id: compiled as int8, the live database gives int4",
        "SetName: parameter @id: compiled as int8, the live database infers int4",
    ]


def test_a_missing_table(live: str) -> None:
    alter(live, "DROP TABLE shop.items")
    drift, diagnostics = verify(Checker((".",)), [NAME], live)
    assert drift == ["shop.items: in the schema files, not in the database"]
    assert len(diagnostics) == 2 and all("does not exist" in d.message for d in diagnostics)


def test_the_readme_applies_the_schema_and_verify_passes(pg_server: tuple[str, Cluster | None]) -> None:
    """README step 4, as written: psql applies schema.sql to an empty database, which `verify`
    then finds ready to serve (every table, column and statement as compiled)."""
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text()
    [command] = [line.strip() for line in readme.splitlines() if line.strip().startswith('psql "$DATABASE_URL"')]
    with scratch_database(pg_server[0], schema=None) as url:
        env = {**os.environ, "DATABASE_URL": url}
        subprocess.run(["bash", "-c", command], cwd=root, env=env, check=True, capture_output=True)
        done = subprocess.run(
            [sys.executable, "-c", "from pydb.plugin.entry import main; raise SystemExit(main())", "verify",
             "-I", "example_protos", "generation/task/v1/task.proto"],
            cwd=root, env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert "matches the schema files and every statement" in done.stdout
