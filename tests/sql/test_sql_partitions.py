"""Partitioning DDL, the catalog against PostgreSQL: each schema below is applied to a real
PostgreSQL (in a transaction rolled back) and to the catalog; both accept it, or both refuse it
with PostgreSQL's message (the catalog's spelling: no quotes, PostgreSQL's DETAIL in parentheses).
The corpus cases issue15_partition_* cover the same checks end to end; these are the branches
one case each would be too many for."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from pydb.plugin.sql.frontend import build_catalog
from support.pg import Cluster, scratch_database

HASHED = "CREATE TABLE h (id int NOT NULL, k int NOT NULL) PARTITION BY HASH (k);\n"
LISTED = "CREATE TABLE l (id int NOT NULL, k text) PARTITION BY LIST (k);\n"
RANGED = "CREATE TABLE r (id int NOT NULL, a int NOT NULL, b date NOT NULL) PARTITION BY RANGE (a, b);\n"

CASES: dict[str, tuple[str, str | None]] = {
    "hash modulus that is not a factor of a larger one": (
        HASHED
        + "CREATE TABLE h0 PARTITION OF h FOR VALUES WITH (MODULUS 6, REMAINDER 0);\n"
        + "CREATE TABLE h1 PARTITION OF h FOR VALUES WITH (MODULUS 4, REMAINDER 1);",
        "every hash partition modulus must be a factor of the next larger modulus",
    ),
    "hash modulus zero": (
        HASHED + "CREATE TABLE h0 PARTITION OF h FOR VALUES WITH (MODULUS 0, REMAINDER 0);",
        "modulus for hash partition must be an integer value greater than zero",
    ),
    "hash remainder past the modulus": (
        HASHED + "CREATE TABLE h0 PARTITION OF h FOR VALUES WITH (MODULUS 2, REMAINDER 2);",
        "remainder for hash partition must be less than modulus",
    ),
    "hash default partition": (
        HASHED + "CREATE TABLE hd PARTITION OF h DEFAULT;",
        "a hash-partitioned table may not have a default partition",
    ),
    "hash remainders apart modulo the smaller modulus": (
        HASHED
        + "CREATE TABLE h0 PARTITION OF h FOR VALUES WITH (MODULUS 2, REMAINDER 0);\n"
        + "CREATE TABLE h1 PARTITION OF h FOR VALUES WITH (MODULUS 4, REMAINDER 1);\n"
        + "CREATE TABLE h3 PARTITION OF h FOR VALUES WITH (MODULUS 4, REMAINDER 3);",
        None,
    ),
    "list on two columns": (
        "CREATE TABLE l2 (a int, b int) PARTITION BY LIST (a, b);",
        "cannot use list partition strategy with more than one column",
    ),
    "list NULL twice": (
        LISTED
        + "CREATE TABLE l1 PARTITION OF l FOR VALUES IN (NULL);\n"
        + "CREATE TABLE l2 PARTITION OF l FOR VALUES IN ('x', NULL);",
        "partition l2 would overlap partition l1",
    ),
    "list attached over a sibling": (
        LISTED
        + "CREATE TABLE l1 PARTITION OF l FOR VALUES IN ('a');\n"
        + "CREATE TABLE l2 (id int NOT NULL, k text);\n"
        + "ALTER TABLE l ATTACH PARTITION l2 FOR VALUES IN ('b', 'a');",
        "partition l2 would overlap partition l1",
    ),
    "range bound with a NULL": (
        RANGED + "CREATE TABLE r1 PARTITION OF r FOR VALUES FROM (1, NULL) TO (2, '2026-01-01');",
        "cannot specify NULL in range bound",
    ),
    "range bound of the wrong length": (
        RANGED + "CREATE TABLE r1 PARTITION OF r FOR VALUES FROM (1) TO (2, '2026-01-01');",
        "FROM must specify exactly one value per partitioning column",
    ),
    "range overlap on the second column": (
        RANGED
        + "CREATE TABLE r1 PARTITION OF r FOR VALUES FROM (1, '2026-01-01') TO (1, '2026-06-01');\n"
        + "CREATE TABLE r2 PARTITION OF r FOR VALUES FROM (1, '2026-05-01') TO (2, MINVALUE);",
        "partition r2 would overlap partition r1",
    ),
    "range upper bound below the lower": (
        RANGED + "CREATE TABLE r1 PARTITION OF r FOR VALUES FROM (2, MINVALUE) TO (1, MAXVALUE);",
        "empty range bound specified for partition r1",
    ),
    "range over an enum, by label order": (
        "CREATE TYPE st AS ENUM ('queued', 'done', 'archived');\n"
        "CREATE TABLE e (id int, s st NOT NULL) PARTITION BY RANGE (s);\n"
        "CREATE TABLE e1 PARTITION OF e FOR VALUES FROM ('queued') TO ('archived');\n"
        "CREATE TABLE e2 PARTITION OF e FOR VALUES FROM ('done') TO (MAXVALUE);",
        "partition e2 would overlap partition e1",
    ),
    "exclusion constraint added later": (
        LISTED + "ALTER TABLE l ADD EXCLUDE USING btree (id WITH =);",
        "exclusion constraints are not supported on partitioned tables",
    ),
    "unique key added later without the key": (
        HASHED + "ALTER TABLE h ADD CONSTRAINT h_id UNIQUE (id);",
        "unique constraint on partitioned table must include all partitioning columns "
        "(UNIQUE constraint on table h lacks column k which is part of the partition key)",
    ),
    "unique index with the key as an expression only": (
        HASHED + "CREATE UNIQUE INDEX ON h (id, (k + 0));",
        "unique constraint on partitioned table must include all partitioning columns",
    ),
    "renamed key column, unique key by the new name": (
        HASHED + "ALTER TABLE h RENAME COLUMN k TO kk;\nALTER TABLE h ADD PRIMARY KEY (id, kk);",
        None,
    ),
}


@pytest.fixture(scope="module")
def oracle(pg_server: tuple[str, Cluster | None]) -> Iterator[psycopg.Connection]:
    with scratch_database(pg_server[0], None) as url, psycopg.connect(url) as conn:
        yield conn


def postgres_error(conn: psycopg.Connection, sql: str) -> str | None:
    """PostgreSQL's message for `sql` (primary, then DETAIL in parentheses), or None if it applies."""
    try:
        for statement in sql.split(";\n"):
            conn.execute(statement)
    except psycopg.Error as e:
        message, detail = str(e.diag.message_primary), e.diag.message_detail
        if detail:  # a sentence's capital lower-cased, a keyword's (PRIMARY KEY) kept
            first = detail[0].lower() if detail[1:2].islower() else detail[0]
            message += f" ({first}{detail[1:].rstrip('.')})"
        return message.replace('"', "")
    finally:
        conn.rollback()
    return None


@pytest.mark.parametrize("name", list(CASES))
def test_partitioning_ddl_as_postgres(oracle: psycopg.Connection, name: str) -> None:
    sql, expected = CASES[name]
    _, problems = build_catalog(sql)
    errors = [p.message for p in problems if p.severity == "error"]
    postgres = postgres_error(oracle, sql)
    if expected is None:
        assert postgres is None and errors == []
        return
    assert postgres is not None and postgres.startswith(expected), postgres
    assert len(errors) == 1 and errors[0].startswith(expected), errors
    # The catalog says what PostgreSQL says, DETAIL included.
    assert errors[0] == postgres, (errors[0], postgres)
