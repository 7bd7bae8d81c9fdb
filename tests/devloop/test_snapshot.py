"""`protoc-gen-pydb snapshot` on a real PostgreSQL: the schema as PostgreSQL applies it, dumped
for the plugin to read, and `--check` saying whether a committed snapshot is current.

1. The queue's schema.sql: its snapshot, read by the plugin, gives the catalog the plugin builds
   from schema.sql itself, and both are what pg_catalog holds once PostgreSQL has applied
   schema.sql (the catalog differential's comparison, tests/support/catalog_oracle.py).
2. A migrations directory (goose markers: the Down sections not applied) written, checked
   current, then stale once a migration is added (exit 1, the diff names the new table).
3. The escape hatch: DDL run by procedural code (a loop of EXECUTEs), which the plugin cannot
   apply offline, is in the snapshot and so in the catalog the plugin reads from it.
4. A schema PostgreSQL refuses: exit 2, the error at the file's line and column.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from pydb.plugin.snapshot import main, snapshot
from pydb.plugin.sql.frontend import build_catalog
from support.catalog_oracle import CatalogSide, compare, pg_snapshot
from support.pg import SCHEMA, Cluster, scratch_database

Server = tuple[str, Cluster | None]


def _catalog_of(path: str, sql: str) -> CatalogSide:
    side = CatalogSide()
    assert side.apply(path, sql) == [], f"the plugin refuses {path}"
    return side


def test_queue_snapshot_is_the_schema_postgres_applies(pg_server: Server) -> None:
    dump = snapshot(SCHEMA, pg_server[0])
    assert "CREATE TABLE generation." in dump and "Dumped by pg_dump version" not in dump
    from_source = _catalog_of(str(SCHEMA), SCHEMA.read_text(encoding="utf-8")).snapshot()
    from_dump = _catalog_of("schema.snapshot.sql", dump).snapshot()
    with scratch_database(pg_server[0], SCHEMA) as url, psycopg.connect(url) as conn:
        applied = pg_snapshot(conn)
    assert compare(applied, from_source) == []
    assert compare(applied, from_dump) == []
    assert snapshot(SCHEMA, pg_server[0]) == dump, "the snapshot is stable from run to run"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    """The installed command, as CI runs it."""
    return subprocess.run(
        [sys.executable, "-m", "pydb", "snapshot", *args], capture_output=True, text=True, check=False
    )


def test_check_says_whether_the_snapshot_is_current(pg_server: Server, tmp_path: Path) -> None:
    migrations = tmp_path / "migrations"
    migrations.mkdir()
    (migrations / "00001_init.sql").write_text(
        "-- +goose Up\nCREATE TABLE accounts (id bigint PRIMARY KEY, email text NOT NULL UNIQUE);\n"
        "-- +goose Down\nDROP TABLE accounts;\n"
    )
    out = tmp_path / "schema.snapshot.sql"
    url = ["--database-url", pg_server[0]]
    assert _run(str(migrations), "-o", str(out), *url).returncode == 0
    assert "CREATE TABLE public.accounts" in out.read_text()
    assert _run(str(migrations), "-o", str(out), "--check", *url).returncode == 0

    (migrations / "00002_notes.sql").write_text("-- +goose Up\nCREATE TABLE notes (id int, body text);\n")
    stale = _run(str(migrations), "-o", str(out), "--check", *url)
    assert stale.returncode == 1
    assert "+CREATE TABLE public.notes" in stale.stdout
    assert "is not the schema PostgreSQL applies: run protoc-gen-pydb snapshot" in stale.stderr
    assert "CREATE TABLE public.notes" not in out.read_text(), "--check writes nothing"


def test_procedural_ddl_reaches_the_plugin_through_the_snapshot(pg_server: Server, tmp_path: Path) -> None:
    schema = tmp_path / "schema.sql"
    schema.write_text(
        "CREATE TABLE events (id bigint, at date NOT NULL) PARTITION BY RANGE (at);\n"
        "DO $$ BEGIN FOR m IN 1..3 LOOP\n"
        "  EXECUTE format('CREATE TABLE events_%s PARTITION OF events FOR VALUES FROM (%L) TO (%L)',\n"
        "    m, make_date(2024, m, 1), make_date(2024, m + 1, 1));\n"
        "END LOOP; END $$;\n"
    )
    source, source_problems = build_catalog(schema.read_text())
    assert source.table("events_2") is None
    assert any(p.severity == "warning" for p in source_problems)
    assert main([str(schema), "-o", str(tmp_path / "snap.sql"), "--database-url", pg_server[0]]) == 0
    dumped, problems = build_catalog((tmp_path / "snap.sql").read_text())
    assert [p.message for p in problems if p.severity == "error"] == []
    partition = dumped.table("events_2")
    assert partition is not None and partition.kind == "table" and partition.partition_bound is not None


def test_a_schema_postgres_refuses_is_reported_at_its_line(
    pg_server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = tmp_path / "schema.sql"
    schema.write_text("CREATE TABLE a (id int);\n\nCREATE TABLE b (id int REFERENCES missing);\n")
    assert main([str(schema), "--database-url", pg_server[0]]) == 2
    err = capsys.readouterr().err
    assert f"{schema}:3:" in err and 'error: relation "missing" does not exist' in err
