"""PostgreSQL's coercion rules (sql/rules/coercion.py) against PostgreSQL itself: can_coerce by context,
common types of UNION / CASE / COALESCE / ARRAY / VALUES / GREATEST / LEAST, polymorphic enum
arguments, and which types ORDER BY / GROUP BY can use."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from pydb.plugin.sql.catalog.builtins import load_builtins
from pydb.plugin.sql.catalog.types import PgType
from pydb.plugin.sql.rules.resolution import (
    ResolveError,
    can_coerce,
    common_type,
    require_equality,
    require_ordering,
    resolve_function,
)
from support.pg import Cluster
from support.sql_oracle import (
    EXTENSIONS,
    SCHEMA_TYPES,
    Oracle,
    Outcome,
    oracle_database,
    schema_env,
    value_sql,
)


@pytest.fixture(scope="module")
def pg(pg_server: tuple[str, Cluster | None]) -> Iterator[psycopg.Connection]:
    with oracle_database(pg_server[0]) as conn:
        yield conn


def test_enum_arguments_bind_anyenum() -> None:
    b = load_builtins()
    status = PgType("app.status", labels=("a", "b"))
    got = resolve_function("enum_range", b.functions("enum_range"), [status])
    assert got.result == status.array()
    assert can_coerce(status, PgType("text"), "a", env=b) and not can_coerce(status, PgType("text"), env=b)
    assert can_coerce(PgType("text"), status, "e", env=b) and not can_coerce(PgType("text"), status, "a", env=b)


CONSTRUCTS = {
    "UNION": lambda vs: " UNION ".join(f"SELECT {v}" for v in vs),
    "CASE": lambda vs: "SELECT CASE " + " ".join(f"WHEN random() < 0.5 THEN {v}" for v in vs) + " END",
    "COALESCE": lambda vs: f"SELECT COALESCE({', '.join(vs)})",
    "ARRAY": lambda vs: f"SELECT ARRAY[{', '.join(vs)}]",
    "VALUES": lambda vs: "VALUES " + ", ".join(f"({v})" for v in vs),
    "GREATEST": lambda vs: f"SELECT GREATEST({', '.join(vs)})",
    "LEAST": lambda vs: f"SELECT LEAST({', '.join(vs)})",
}
COMMON_TYPE_CASES = [
    ("int4", "numeric"),
    ("int4", "int8", "int2"),
    ("null", "null"),
    ("null", "int4"),
    ("int4", "text"),
    ("text", "varchar"),
    ("varchar", "bpchar"),
    ("bpchar", "varchar"),
    ("float4", "numeric"),
    ("numeric", "float4"),
    ("date", "timestamptz"),
    ("timestamp", "timestamptz"),
    ("int4[]", "int8[]"),
    ("int4[]", "int4"),
    ("jsonb", "json"),
    ("interval", "null", "interval"),
    ("bool", "int4"),
    ("inet", "cidr"),
    ("posint", "posint"),
    ("posint", "int4"),
    ("email", "text"),
    ("mood", "null"),
    ("mood", "text"),
    ("pair", "pair"),
    ("uuid", "text"),
    ("citext", "text"),
]


@pytest.mark.parametrize("construct", sorted(CONSTRUCTS))
@pytest.mark.parametrize("types", COMMON_TYPE_CASES)
def test_common_type_agrees_with_postgresql(pg: psycopg.Connection, types: tuple[str, ...], construct: str) -> None:
    """select_common_type for each construct: the type, or PostgreSQL's error message."""
    env = schema_env()
    values, pg_types = zip(*(value_sql(t, [], env) for t in types), strict=True)
    # pg_typeof, not the row description: the protocol reports a domain as its base type
    sql = f"SELECT pg_typeof(x)::text FROM ({CONSTRUCTS[construct](list(values))}) s(x) LIMIT 1"
    try:
        row = pg.execute(sql).fetchone()
        assert row is not None
        expected = str(row[0])
    except psycopg.Error as exc:
        expected = f"error {exc.diag.message_primary}"
    try:
        # CASE without ELSE has an implicit ELSE NULL, which PostgreSQL considers first
        inputs = [PgType("unknown"), *pg_types] if construct == "CASE" else list(pg_types)
        common = common_type(inputs, construct, env=env)
        got = env.display(common.array() if construct == "ARRAY" and not common.is_array else common)
    except ResolveError as exc:
        got = f"error {exc.message}"
    assert got == expected


def test_category_mismatch_message() -> None:
    with pytest.raises(ResolveError) as info:
        common_type([PgType("int4"), PgType("text")], "CASE")
    assert (info.value.sqlstate, info.value.message) == ("42804", "CASE types integer and text cannot be matched")


COERCIONS = [
    ("int4", "int8"),
    ("int8", "int4"),
    ("int4", "text"),
    ("text", "int4"),
    ("varchar", "text"),
    ("text", "varchar"),
    ("int4[]", "int8[]"),
    ("int8[]", "int4[]"),
    ("int4[]", "text"),
    ("text", "int4[]"),
    ("jsonb", "int4"),
    ("json", "jsonb"),
    ("date", "timestamptz"),
    ("timestamptz", "date"),
    ("uuid", "text"),
    ("text", "uuid"),
    ("bool", "int4"),
    ("int4", "bool"),
    ("numeric", "float8"),
    ("float8", "numeric"),
    ("inet", "cidr"),
    ("cidr", "inet"),
    ("int4", "regclass"),
    ("text", "regclass"),
    ("bytea", "text"),
    ("interval", "time"),
    ("citext", "text"),
    ("text", "citext"),
    ("hstore", "json"),
    ("int4range", "text"),
    ("point", "box"),
    ("int2", "numeric"),
    ("bpchar", "varchar"),
    ("name", "text"),
    ("text", "name"),
    ("posint", "int4"),
    ("int4", "posint"),
    ("posint", "int8"),
    ("int8", "posint"),
    ("email", "text"),
    ("text", "email"),
    ("email", "varchar"),
    ("mood", "text"),
    ("text", "mood"),
    ("mood", "varchar"),
    ("pair", "text"),
    ("text", "pair"),
    ("int4[]", "posint[]"),
    ("mood[]", "text[]"),
    ("text[]", "mood[]"),
]


@pytest.mark.parametrize(("source", "target"), COERCIONS)
def test_can_coerce_agrees_with_postgresql(pg: psycopg.Connection, source: str, target: str) -> None:
    """Implicit: a function taking `target` called with `source`; assignment: INSERT into a
    `target` column; explicit: CAST."""
    b = schema_env()
    s, t = value_sql(source, [], b)[1], value_sql(target, [], b)[1]
    fn = f"accepts_{t.name}{'_array' if t.is_array else ''}"
    pg.execute(f"CREATE FUNCTION pg_temp.{fn}(x {b.display(t)}) RETURNS int LANGUAGE sql AS 'SELECT 1'")
    pg.execute(f"CREATE TEMP TABLE {fn} (c {b.display(t)})")
    try:
        oracle = Oracle(pg)
        value = f"NULL::{b.display(s)}"
        statements = {
            "i": f"SELECT pg_temp.{fn}({value})",
            "a": f"INSERT INTO {fn} (c) VALUES ({value})",
            "e": f"SELECT CAST({value} AS {b.display(t)})",
        }
        for context, sql in statements.items():
            expected = oracle.ask(sql)[0] == "ok"
            assert can_coerce(s, t, context, env=b) is expected, (context, sql)  # type: ignore[arg-type]
    finally:
        pg.execute(f"DROP FUNCTION pg_temp.{fn}")
        pg.execute(f"DROP TABLE {fn}")


def _sortable_types() -> list[str]:
    b = load_builtins().with_extensions(EXTENSIONS)
    names = [info.type.name for info in (b.type_info(n) for n in sorted(b.type_names)) if info and info.typtype != "p"]
    return sorted({*names, *(f"{n}[]" for n in names if (i := b.type_info(n)) and i.has_array), *SCHEMA_TYPES})


def test_ordering_and_equality_operators_agree_with_postgresql(pg: psycopg.Connection) -> None:
    """ORDER BY needs an ordering operator, GROUP BY an equality one: every built-in type (and
    its array) and the schema's domains, enums and composites (and their arrays)."""
    env = schema_env()
    oracle = Oracle(pg)
    wrong = []
    spellings = [*_sortable_types(), "posint[]", "email[]", "mood[]", "pair[]"]
    for spelling in spellings:
        sql_value, t = value_sql(spelling, [], env)
        for clause, check in (("ORDER BY x", require_ordering), ("GROUP BY x", require_equality)):
            expected = oracle.ask(f"SELECT x FROM (SELECT {sql_value} AS x) s {clause}")
            try:
                check(t, env=env)
                got: Outcome = ("ok",)
            except ResolveError as exc:
                got = ("err", exc.sqlstate, exc.message, exc.hint or "")
            # success is all that counts (the wire describes a domain as its base type)
            if got != (expected[:1] if expected[0] == "ok" else expected):
                wrong.append(f"{clause} {spelling}: PostgreSQL {expected}, resolver {got}")
    assert len(spellings) > 150
    assert not wrong, "\n".join(wrong)
