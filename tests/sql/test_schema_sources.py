"""Where the DDL comes from: a file, a migrations directory in each tool's format, the plugin's
`schema=` parameter.

The rich schema of test_sql_catalog is cut into migrations the way each tool lays them out
(golang-migrate, goose, dbmate, Flyway, sqitch, plain numbered files), with Down / undo /
revert parts that would wreck the catalog if they were applied; each directory must give the
catalog PostgreSQL holds after applying the same schema.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from pydb.plugin.sql.frontend import load_catalog
from pydb.plugin.sql.schema.source import (
    SchemaRoots,
    migration_order,
    natural_key,
    read_files,
    schema_path,
    up_sections,
)
from pydb.plugin.sql.syntax.pgparse import parse
from support.pg import Cluster, scratch_database
from support.plugin_harness import compile_protos, run_plugin
from test_sql_catalog import RICH_SCHEMA, assert_catalog_matches_postgres

#: A Down section's content: applying it would drop what the Up parts built.
UNDO = "DROP TABLE app.users CASCADE;\nDROP TYPE app.mood CASCADE;\n"
#: How many migrations the schema is cut into: more than 9, so `2` must sort before `10`.
PARTS = 12


def rich_statements() -> list[str]:
    return [RICH_SCHEMA[s.start : s.end].strip().rstrip(";") + ";" for s in parse(RICH_SCHEMA)]


def chunks() -> list[list[str]]:
    statements = rich_statements()
    size = -(-len(statements) // PARTS)
    return [statements[i : i + size] for i in range(0, len(statements), size)]


def _goose(statements: list[str]) -> str:
    body = []
    for stmt in statements:
        if "$$" in stmt:  # goose splits on `;` unless told where a statement with a body ends
            body.append(f"-- +goose StatementBegin\n{stmt}\n-- +goose StatementEnd")
        else:
            body.append(stmt)
    return (
        "-- +goose Up\n"
        + "\n".join(body)
        + "\n\n-- +goose Down\n-- +goose StatementBegin\n"
        + UNDO
        + ("-- +goose StatementEnd\n")
    )


def golang_migrate(root: Path) -> None:
    for i, part in enumerate(chunks(), 1):
        (root / f"{i:06d}_step.up.sql").write_text("\n".join(part) + "\n", encoding="utf-8")
        (root / f"{i:06d}_step.down.sql").write_text(UNDO, encoding="utf-8")


def goose(root: Path) -> None:
    for i, part in enumerate(chunks(), 1):
        (root / f"{i}_step.sql").write_text(_goose(part), encoding="utf-8")


def dbmate(root: Path) -> None:
    for i, part in enumerate(chunks(), 1):
        text = "-- migrate:up\n" + "\n".join(part) + "\n\n-- migrate:down\n" + UNDO
        (root / f"2024010100{i:04d}_step.sql").write_text(text, encoding="utf-8")


def flyway(root: Path) -> None:
    parts = chunks()
    views = [s for part in parts for s in part if s.startswith("CREATE VIEW")]
    # Versions 1, 1.1, 2, ..., 10, ...: compared number by number, not as text.
    versions = ["1", "1_1", *[str(n) for n in range(2, len(parts))]]
    for version, part in zip(versions, parts, strict=True):
        body = [s for s in part if s not in views]
        (root / f"V{version}__step.sql").write_text("\n".join(body) + "\n", encoding="utf-8")
        (root / f"U{version}__undo.sql").write_text(UNDO, encoding="utf-8")
    # A repeatable migration runs after every versioned one.
    (root / "R__views.sql").write_text("\n".join(views) + "\n", encoding="utf-8")


def sqitch(root: Path) -> None:
    for sub in ("deploy", "revert", "verify"):
        (root / sub).mkdir()
    plan = ["%syntax-version=1.0.0", "%project=rich", ""]
    # Change names that do not sort in plan order: the plan decides.
    for i, part in enumerate(chunks(), 1):
        change = f"{chr(ord('z') - i)}_change"
        plan.append(f"{change} 2024-01-01T00:00:{i:02d}Z Someone <someone@example.com> # step {i}")
        (root / "deploy" / f"{change}.sql").write_text("BEGIN;\n" + "\n".join(part) + "\nCOMMIT;\n", encoding="utf-8")
        (root / "revert" / f"{change}.sql").write_text(UNDO, encoding="utf-8")
        (root / "verify" / f"{change}.sql").write_text("SELECT 1/0;\n", encoding="utf-8")
    plan.insert(4, "@v0 2024-01-01T00:00:00Z Someone <someone@example.com> # a tag")
    (root / "sqitch.plan").write_text("\n".join(plan) + "\n", encoding="utf-8")


def numbered(root: Path) -> None:
    for i, part in enumerate(chunks(), 1):
        (root / f"{i}.sql").write_text("\n".join(part) + "\n", encoding="utf-8")


FORMATS: dict[str, Callable[[Path], None]] = {
    "golang-migrate": golang_migrate,
    "goose": goose,
    "dbmate": dbmate,
    "flyway": flyway,
    "sqitch": sqitch,
    "numbered": numbered,
}


@pytest.fixture(scope="module")
def rich_conn(pg_server: tuple[str, Cluster | None]) -> Iterator[psycopg.Connection]:
    with scratch_database(pg_server[0], schema=None) as url, psycopg.connect(url, autocommit=True) as conn:
        conn.execute(RICH_SCHEMA)
        yield conn


@pytest.mark.parametrize("tool", FORMATS)
def test_a_migrations_directory_gives_the_catalog_postgres_holds(
    tool: str, tmp_path: Path, rich_conn: psycopg.Connection
) -> None:
    FORMATS[tool](tmp_path)
    catalog, diagnostics = load_catalog(read_files(tmp_path))
    assert [d.format() for d in diagnostics if d.severity == "error"] == []
    assert_catalog_matches_postgres(catalog, rich_conn, indexes=False)


@pytest.mark.parametrize("tool", FORMATS)
def test_each_format_applied_in_order_is_what_postgres_accepts(
    tool: str, tmp_path: Path, pg_server: tuple[str, Cluster | None]
) -> None:
    """The order the catalog applies the files in is one PostgreSQL accepts: their Up parts,
    applied in that order to a fresh database, succeed."""
    FORMATS[tool](tmp_path)
    with scratch_database(pg_server[0], schema=None) as url, psycopg.connect(url, autocommit=True) as conn:
        for file in read_files(tmp_path):
            conn.execute(file.sql)


def test_natural_order_puts_2_before_10(tmp_path: Path) -> None:
    for name in ("10_c.sql", "2_b.sql", "1_a.sql", "2_b.down.sql", "notes.txt"):
        (tmp_path / name).write_text("SELECT 1;\n", encoding="utf-8")
    assert [p.name for p in migration_order(tmp_path)] == ["1_a.sql", "2_b.sql", "10_c.sql"]
    assert natural_key("v2") < natural_key("v10") and natural_key("a") < natural_key("b")


def test_an_empty_migrations_directory_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("migrations go here\n", encoding="utf-8")
    _, diagnostics = load_catalog(read_files(tmp_path), tmp_path)
    assert [d.message for d in diagnostics] == [
        f"migrations directory {tmp_path} holds no .sql migration (see docs/workflow.md)"
    ]


def test_down_sections_are_blanked_keeping_lines_and_columns() -> None:
    text = "-- migrate:up\nCREATE TABLE t (id int);\n-- migrate:down\nDROP TABLE t;\n"
    up = up_sections(text)
    assert len(up) == len(text) and up.count("\n") == text.count("\n")
    assert "CREATE TABLE t" in up and "DROP" not in up


def test_a_diagnostic_names_the_migration_file_line_and_column(tmp_path: Path) -> None:
    (tmp_path / "1_init.up.sql").write_text("CREATE TABLE a (id int);\n", encoding="utf-8")
    (tmp_path / "2_more.up.sql").write_text("-- a comment\nCREATE TABLE b (\n  x STRING\n);\n", encoding="utf-8")
    (tmp_path / "3_ref.up.sql").write_text("CREATE INDEX ON a (nope);\n", encoding="utf-8")
    _, diagnostics = load_catalog(read_files(tmp_path))
    assert [(Path(d.path).name, d.line, d.col, d.severity) for d in diagnostics] == [
        ("2_more.up.sql", 3, 5, "error"),
        ("3_ref.up.sql", 1, 20, "error"),
    ]


def test_schema_paths_stay_under_the_roots(tmp_path: Path) -> None:
    (tmp_path / "db").mkdir()
    roots = SchemaRoots((str(tmp_path),), "db")
    assert roots.find("db") == tmp_path / "db"
    assert roots.find("../etc") is None and roots.find("/etc") is None
    assert schema_path("pkg/x.proto", None, SchemaRoots((".",))) == "pkg/schema.sql"
    assert schema_path("pkg/x.proto", None, roots) == "db"
    assert schema_path("pkg/x.proto", "../db/schema.sql", roots) == "db/schema.sql"


PROTO = """syntax = "proto3";
package pkg;
import "pydb/v1/options.proto";
message Id { int64 id = 1; }
message User { int64 id = 1; string email = 2; }
service Users {
  rpc Get(Id) returns (User) {
    option (pydb.v1.sql) = {
      query: "SELECT id, email FROM users WHERE id = @id"
      cardinality: CARDINALITY_ONE
    };
  }
}
"""


def test_the_schema_parameter_points_the_plugin_at_a_migrations_directory(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "x.proto").write_text(PROTO, encoding="utf-8")
    migrations = tmp_path / "db" / "migrations"
    migrations.mkdir(parents=True)
    (migrations / "1_users.up.sql").write_text("CREATE TABLE Users (ID bigint PRIMARY KEY);\n", encoding="utf-8")
    (migrations / "1_users.down.sql").write_text("DROP TABLE users;\n", encoding="utf-8")
    (migrations / "2_email.up.sql").write_text("ALTER TABLE users ADD COLUMN email text NOT NULL;\n", encoding="utf-8")
    descriptors = compile_protos(tmp_path, ["pkg/x.proto"])
    outcome = run_plugin(descriptors, ["pkg/x.proto"], cwd=tmp_path, parameter="proto_path=.,schema=db/migrations")
    assert outcome.error == ""
    assert any(name.endswith("_pydb.py") for name in outcome.files)
    missing = run_plugin(descriptors, ["pkg/x.proto"], cwd=tmp_path)
    assert "schema file or migrations directory pkg/schema.sql not found" in missing.error
