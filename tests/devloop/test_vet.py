"""`protoc-gen-pydb vet`: each opt-in rule has a statement it flags and one it passes; the output
is the diagnostic format or SARIF; seq-scan reads the plan on a real PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from pydb.plugin.check import Checker
from pydb.plugin.vet import RULES, main, vet
from support.pg import Cluster, scratch_database

SCHEMA = """CREATE TABLE jobs (id bigint PRIMARY KEY, state text NOT NULL, owner text);
CREATE TABLE big (id bigint PRIMARY KEY, tag text NOT NULL);
"""
HEAD = """syntax = "proto3";
package vet.v1;
import "pydb/v1/options.proto";
message Id { int64 id = 1; }
message Tag { string tag = 1; }
message Job { int64 id = 1; string state = 2; optional string owner = 3; }
message Jobs { repeated Job jobs = 1; }
message Empty {}
service Vet {
"""
RPC = """  rpc {name}({req}) returns ({resp}) {{
    option (pydb.v1.sql) = {{ query: "{sql}" cardinality: {card}{result} }};
  }}
"""
NAME = "vet/v1/vet.proto"

# rule -> (flagged, passed): (request, response, sql, cardinality)
CASES = {
    "update-without-where": (
        ("Empty", "Empty", "UPDATE jobs SET state = 'done'", "CARDINALITY_EXEC"),
        ("Id", "Empty", "UPDATE jobs SET state = 'done' WHERE id = @id", "CARDINALITY_EXEC"),
    ),
    "delete-without-where": (
        ("Empty", "Empty", "DELETE FROM jobs", "CARDINALITY_EXEC"),
        ("Id", "Empty", "DELETE FROM jobs WHERE id = @id", "CARDINALITY_EXEC"),
    ),
    "star-in-writer": (
        ("Id", "Job", "UPDATE jobs SET state = 'run' WHERE id = @id RETURNING *", "CARDINALITY_ONE"),
        ("Id", "Job", "UPDATE jobs SET state = 'run' WHERE id = @id RETURNING id, state, owner", "CARDINALITY_ONE"),
    ),
    "limit-without-order-by": (
        ("Empty", "Jobs", "UPDATE jobs SET state = 'run' WHERE id IN (SELECT id FROM jobs WHERE state = 'new' "
         "LIMIT 10 FOR UPDATE SKIP LOCKED) RETURNING id, state, owner", "CARDINALITY_MANY"),
        ("Empty", "Jobs", "UPDATE jobs SET state = 'run' WHERE id IN (SELECT id FROM jobs WHERE state = 'new' "
         "ORDER BY id LIMIT 10 FOR UPDATE SKIP LOCKED) RETURNING id, state, owner", "CARDINALITY_MANY"),
    ),
    "seq-scan": (
        ("Tag", "Empty", "DELETE FROM big WHERE tag = @tag", "CARDINALITY_EXEC"),
        ("Id", "Empty", "DELETE FROM big WHERE id = @id", "CARDINALITY_EXEC"),
    ),
}  # fmt: skip


def write(root: Path, rule: str, which: int) -> None:
    req, resp, sql, card = CASES[rule][which]
    result = ' result_field: "jobs"' if resp == "Jobs" else ""
    body = RPC.format(name="Run", req=req, resp=resp, sql=sql, card=card, result=result)
    (root / "vet/v1").mkdir(parents=True, exist_ok=True)
    (root / "vet/v1/schema.sql").write_text(SCHEMA)
    (root / NAME).write_text(HEAD + body + "}\n")


@pytest.fixture(scope="module")
def database(pg_server: tuple[str, Cluster | None], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    schema = tmp_path_factory.mktemp("vet") / "schema.sql"
    schema.write_text(SCHEMA)
    with scratch_database(pg_server[0], schema=schema) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("INSERT INTO big SELECT i, 't' || i FROM generate_series(1, 50000) i")
            conn.execute("ANALYZE big")
        yield url


@pytest.mark.parametrize("rule", sorted(RULES))
def test_rule_flags_and_passes(rule: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database: str) -> None:
    monkeypatch.chdir(tmp_path)
    url = database if rule == "seq-scan" else None
    write(tmp_path, rule, 0)
    [found] = vet(Checker((".",)), [NAME], {rule}, url, 10_000)
    assert found.severity == "warning" and found.message.endswith(f"[{rule}]"), found
    assert found.line == 11 and found.col >= 38  # at the token, inside the literal (which opens at 37)
    write(tmp_path, rule, 1)
    assert vet(Checker((".",)), [NAME], {rule}, url, 10_000) == []
    # every other rule is off: only what was asked for is reported
    write(tmp_path, rule, 0)
    others = set(RULES) - {rule, "seq-scan"}
    assert not [d for d in vet(Checker((".",)), [NAME], others, None, 10_000) if d.message.endswith(f"[{rule}]")]


def test_sarif(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "delete-without-where", 0)
    printed: list[str] = []
    assert main(["--rule", "delete-without-where", "--format", "sarif", NAME], printed.append) == 1
    log = json.loads(printed[0])
    assert log["version"] == "2.1.0"
    [result] = log["runs"][0]["results"]
    assert result["ruleId"] == "delete-without-where" and result["level"] == "warning"
    region = result["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["endLine"], region["endColumn"] - region["startColumn"]) == (11, 11, 6)
    assert {r["id"] for r in log["runs"][0]["tool"]["driver"]["rules"]} == set(RULES)
    write(tmp_path, "delete-without-where", 1)
    assert main(["--rule", "delete-without-where", NAME], printed.append) == 0
    assert printed[-1] == "0 errors, 0 warnings"
