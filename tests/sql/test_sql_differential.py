"""benchmarks/sql_differential.py on a few sqlc-style cases written here: it translates sqlc's
parameters, asks PostgreSQL, builds the proto, runs the plugin and counts what it should."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from support.pg import Cluster

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import sql_differential as differential  # type: ignore[import-not-found]  # benchmarks/ is not a package

SCHEMA = """
CREATE SCHEMA app;
CREATE TYPE app.mood AS ENUM ('happy', 'sad');
CREATE TABLE app.authors (
  id bigserial PRIMARY KEY,
  name text NOT NULL,
  bio text,
  mood app.mood NOT NULL DEFAULT 'happy',
  tags text[] NOT NULL DEFAULT '{}'
);
"""

QUERIES = """
-- name: GetAuthor :one
SELECT id, name, bio FROM app.authors WHERE id = sqlc.arg(id);

-- name: ListAuthors :many
SELECT id, name, mood FROM app.authors WHERE name = @name OR bio = sqlc.narg('bio') ORDER BY id;

-- name: DeleteAuthor :exec
DELETE FROM app.authors WHERE id = $1;

-- name: RenameReturning :exec
UPDATE app.authors SET name = $2 WHERE id = $1 RETURNING id;

-- name: Embedded :one
SELECT sqlc.embed(app.authors) FROM app.authors WHERE id = $1;

-- name: Unnamed :one
SELECT 1 + 1;

/* name: CopyAuthors :copyfrom */
INSERT INTO app.authors (name, bio) VALUES ($1, $2);
"""


def write_case(root: Path, name: str, schema: str, queries: str, *, failing: bool = False) -> None:
    case = root / name
    case.mkdir(parents=True)
    (case / "schema.sql").write_text(schema, encoding="utf-8")
    (case / "query.sql").write_text(queries, encoding="utf-8")
    config = {"version": "1", "packages": [{"path": "db", "schema": "schema.sql", "queries": "query.sql"}]}
    (case / "sqlc.json").write_text(json.dumps(config), encoding="utf-8")
    if failing:
        (case / "stderr.txt").write_text("# package db\nquery.sql:1:1: an error\n", encoding="utf-8")


def test_translate_maps_sqlc_parameters_to_pydb_and_postgres() -> None:
    t = differential.translate("SELECT a @> b FROM t WHERE x = sqlc.arg(x)::int AND y = @y AND z = $1 AND w = @y")
    assert t.pydb_sql == "SELECT a @> b FROM t WHERE x = @x::int AND y = @y AND z = @p1 AND w = @y"
    assert t.pg_sql == "SELECT a @> b FROM t WHERE x = $1::int AND y = $2 AND z = $3 AND w = $2"
    assert t.params == ["x", "y", "p1"]
    narg = differential.translate("SELECT * FROM t WHERE b = sqlc.narg('bio')")
    assert (narg.pydb_sql, narg.nullable) == ("SELECT * FROM t WHERE b = @bio", {"bio"})
    assert differential.translate("SELECT * FROM t WHERE id IN (sqlc.slice(ids))").unexpressible == "sqlc.slice()"


def test_statements_split_on_markers_and_semicolons_outside_strings() -> None:
    found = differential.statements("CREATE TABLE t (a text DEFAULT ';');\n-- name: A :one\nSELECT ';' AS a;", "q.sql")
    assert [(n.name, n.command, n.sql) for n in found] == [
        (None, None, "CREATE TABLE t (a text DEFAULT ';')"),
        ("A", ":one", "SELECT ';' AS a"),
    ]


def test_the_differential_counts_what_it_should(pg_server: tuple[str, Cluster | None], tmp_path: Path) -> None:
    write_case(tmp_path, "good", SCHEMA, QUERIES)
    write_case(
        tmp_path, "bad_column", SCHEMA, "-- name: Bad :one\nSELECT nam FROM app.authors WHERE id = $1;\n", failing=True
    )
    write_case(
        tmp_path, "bad_schema", "CREATE TABLE t (a nosuchtype);", "-- name: A :many\nSELECT a FROM t;\n", failing=True
    )
    summary, records = differential.run(tmp_path, pg_server[0], jobs=1)
    by_name = {s["name"]: s for r in records for s in r["statements"]}
    assert summary["internal_errors"] == []
    assert summary["cases"] == 3
    assert [r["case"] for r in summary["schemas_refused_by_postgres"]] == ["bad_schema#0"]
    # GetAuthor, ListAuthors, DeleteAuthor and RenameReturning (an :exec returning rows, read as :many).
    assert summary["expressible"] == 4
    assert {n: by_name[n]["status"] for n in ("GetAuthor", "ListAuthors", "DeleteAuthor", "RenameReturning")} == {
        n: "accepted" for n in ("GetAuthor", "ListAuthors", "DeleteAuthor", "RenameReturning")
    }
    assert summary["accepted"] == summary["accepted_same_as_postgres"] == 4
    assert by_name["ListAuthors"]["postgres_columns"] == [("id", "int8"), ("name", "text"), ("mood", "app.mood")]
    assert set(summary["not_expressible"]) == {
        "sqlc.embed()",
        "a result column PostgreSQL names ?column? (a field needs an alias)",
        differential.UNEXPRESSIBLE_COMMANDS[":copyfrom"],
    }
    assert summary["expected_failures_postgres_rejects"] == 2
    assert summary["caught"] == 2 and summary["missed"] == []
    assert by_name["Bad"]["status"] == "caught"
    text = differential.render_text(summary, records)
    assert "accepted 4 / 4 (100.0%)" in text
    assert "caught 2 (100.0%), missed 0" in text
    markdown = differential.render_markdown(summary, records)
    assert "**Accepted: 4 of 4 (100.0%)**" in markdown
    assert "SELECT" not in markdown, "the docs name cases and messages, never the cases' SQL"


def test_rejections_are_sorted_by_cause() -> None:
    cause = differential._cause
    unmapped = {"errors": ["result column v is trigger, which does not fit R.v (optional string); see the type table"]}
    assert cause(unmapped, "SELECT v FROM t", "") == ("a pg type with no proto mapping (bind/typemap.py)", "trigger")
    unknown = {"errors": ["column nam does not exist; did you mean name?"]}
    assert cause(unknown, "SELECT nam FROM t", "") == ("statement error", "column X does not exist")
    schema = {"errors": [], "schema_errors": ["type mood does not exist (column m)"]}
    assert cause(schema, "SELECT 1", "CREATE TABLE t (m mood)") == ("schema refused", "type X does not exist")


@pytest.mark.parametrize("message", ["column nam does not exist; did you mean name?", "column nam does not exist"])
def test_message_classes_mask_the_statement_s_names(message: str) -> None:
    assert differential.message_class(message, "SELECT nam FROM app.authors") == "column X does not exist"


def dying_run_case(case: differential.Case, server_url: str) -> dict[str, object]:
    """Stands in for run_case: the worker process dies on the case named `dies`."""
    if case.id.startswith("dies"):
        os._exit(1)
    return {"case": case.id, "duplicates": [], "expects_failure": None, "statements": []}


def test_a_worker_that_dies_is_recorded_and_the_run_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(differential, "run_case", dying_run_case)
    cases = [differential.Case(name, Path(name), [], [], None) for name in ("a#0", "dies#0", "b#0", "c#0")]
    records = differential.run_parallel(cases, "postgresql://unused", jobs=2)
    assert [r["case"] for r in records] == ["a#0", "dies#0", "b#0", "c#0"]
    assert [r.get("harness_error") for r in records] == [None, "worker died", None, None]


def test_schema_text_is_what_psql_sends() -> None:
    dump = "\\restrict abc\nCREATE TABLE t (a int);\n\\unrestrict abc\n"
    assert differential.schema_text(dump) == "\nCREATE TABLE t (a int);\n\n"
    goose = "-- +goose Up\nCREATE TABLE t (a int);\n-- +goose Down\nDROP TABLE t;\n"
    assert differential.schema_text(goose) == "-- +goose Up\nCREATE TABLE t (a int);"
