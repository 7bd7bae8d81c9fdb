"""Shared by the resolver's differential tests: calls and operator expressions as cases, their
SQL for PostgreSQL, the resolver's prediction, and PostgreSQL as the oracle (PREPARE + describe).

Every case is a function call or an operator expression over typed values (`NULL::integer`) and
untyped parameters (`$1`, which PostgreSQL resolves like an unknown literal). PostgreSQL
prepares the statement and describes it (result and parameter types) or rejects it; the
resolver must agree on the result type, on the type each parameter is coerced to, and on
failure: SQLSTATE, message and hint.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pglast
import psycopg
import pytest
from corpus.run import pg_type_names, positional
from pydb.plugin.sql.analyzer.analyzer import analyze
from pydb.plugin.sql.analyzer.result import Analysis
from pydb.plugin.sql.catalog.builtins import SchemaTypes, TypeInfo, load_builtins
from pydb.plugin.sql.catalog.model import Catalog
from pydb.plugin.sql.catalog.types import PgType
from pydb.plugin.sql.frontend import build_catalog
from pydb.plugin.sql.rules.resolution import ResolveError, resolve_function, resolve_operator

from support.pg import Cluster, scratch_database

EXTENSIONS = ("citext", "hstore", "ltree", "pg_trgm", "pgcrypto", "uuid-ossp", "fuzzystrmatch", "intarray")


@dataclass(frozen=True)
class Call:
    """`name(args)`: each arg a type spelling, `?` an untyped parameter, `'x'` a string literal."""

    name: str
    args: tuple[str, ...] = ()
    within_group: int = 0  # how many trailing args go in WITHIN GROUP (ORDER BY ...)
    over: bool = False
    arg_names: tuple[str | None, ...] | None = None
    variadic_call: bool = False


@dataclass(frozen=True)
class Op:
    symbol: str
    left: str | None  # None: a prefix operator
    right: str


Case = Call | Op
Outcome = tuple[str, ...]  # ("ok", result, param types...) or ("err", sqlstate, message, hint)


# Schema-declared types (created in the scratch database) as the catalog would describe them.
SCHEMA_DDL = """
CREATE DOMAIN posint AS int4 CHECK (VALUE > 0);
CREATE DOMAIN email AS text;
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TYPE pair AS (x int4, y text);
"""
SCHEMA_TYPES = {
    "posint": TypeInfo(PgType("posint"), "posint", "N", False, "d", has_array=True, base=PgType("int4")),
    "email": TypeInfo(PgType("email"), "email", "S", False, "d", has_array=True, base=PgType("text")),
    "mood": TypeInfo(PgType("mood", labels=("sad", "ok", "happy")), "mood", "E", False, "e", has_array=True),
    "pair": TypeInfo(PgType("pair"), "pair", "C", False, "c", has_array=True),
}


def schema_env() -> SchemaTypes:
    return SchemaTypes(load_builtins().with_extensions(EXTENSIONS), SCHEMA_TYPES.values())


def value_sql(spelling: str, params: list[str], b: SchemaTypes) -> tuple[str, PgType]:
    if spelling == "?":
        params.append(spelling)
        return f"${len(params)}", PgType("unknown")
    if spelling.startswith("'"):
        return spelling, PgType("unknown")
    if spelling == "null":
        return "NULL", PgType("unknown")
    name, array = spelling.removesuffix("[]"), spelling.endswith("[]")
    t = SCHEMA_TYPES[name].type if name in SCHEMA_TYPES else b.builtins.type_named(name)
    assert t is not None, spelling
    t = t.array() if array else t
    return f"NULL::{b.display(t)}", t


def case_sql(case: Case, b: SchemaTypes) -> tuple[str, list[PgType]]:
    params: list[str] = []
    values = []
    types = []
    if isinstance(case, Op):
        operands = [case.left, case.right] if case.left is not None else [case.right]
        for spelling in operands:
            sql, t = value_sql(spelling, params, b)
            values.append(sql)
            types.append(t)
        if case.left is None:
            return f"SELECT {case.symbol} {values[0]}", types
        return f"SELECT {values[0]} {case.symbol} {values[1]}", types
    for spelling in case.args:
        sql, t = value_sql(spelling, params, b)
        values.append(sql)
        types.append(t)
    if case.arg_names is not None:
        values = [f"{n} => {v}" if n else v for n, v in zip(case.arg_names, values, strict=True)]
    if case.variadic_call:
        values[-1] = f"VARIADIC {values[-1]}"
    n_direct = len(values) - case.within_group
    # count(*) is how SQL spells the parameterless aggregate call (PostgreSQL rejects count())
    text = f"{case.name}({', '.join(values[:n_direct]) or ('*' if case.name == 'count' else '')})"
    if case.within_group:
        text += f" WITHIN GROUP (ORDER BY {', '.join(values[n_direct:])})"
    if case.over:
        text += " OVER ()"
    return f"SELECT {text}", types


def predict(case: Case, b: SchemaTypes) -> Outcome:
    _, types = case_sql(case, b)
    param_slots = [
        i
        for i, s in enumerate(case.args if isinstance(case, Call) else [x for x in (case.left, case.right) if x])
        if s == "?"
    ]
    try:
        if isinstance(case, Op):
            left = types[0] if case.left is not None else None
            op = resolve_operator(case.symbol, b.builtins.operators(case.symbol), left, types[-1], env=b)
            coerced = [op.left, op.right] if left is not None else [op.right]
            result = op.result
        else:
            fn = resolve_function(
                case.name,
                b.builtins.functions(case.name),
                types,
                arg_names=case.arg_names,
                variadic_call=case.variadic_call,
                params=[s == "?" for s in case.args],
                env=b,
            )
            coerced = list(fn.arg_types)
            result = fn.result
    except ResolveError as exc:
        return ("err", exc.sqlstate, exc.message, exc.hint or "")
    params = []
    for n, i in enumerate(param_slots, 1):
        t = coerced[i]
        assert t is not None
        if t.name == "unknown":  # an untyped parameter passed to "any": PostgreSQL cannot type it
            return ("err", "42P18", f"could not determine data type of parameter ${n}", "")
        params.append(b.display(t))
    return ("ok", b.display(result), *params)


class Oracle:
    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn
        self.names: dict[int, str] = dict(
            conn.execute("SELECT oid::int8, format_type(oid, NULL) FROM pg_type").fetchall()
        )

    def ask(self, sql: str) -> Outcome:
        pgconn = self.conn.pgconn
        res = pgconn.prepare(b"", sql.encode())
        if res.status != psycopg.pq.ExecStatus.COMMAND_OK:
            fields = (psycopg.pq.DiagnosticField.MESSAGE_PRIMARY, psycopg.pq.DiagnosticField.MESSAGE_HINT)
            state = res.error_field(psycopg.pq.DiagnosticField.SQLSTATE)
            message, hint = (bytes(res.error_field(f) or b"").decode() for f in fields)
            return ("err", state.decode() if state else "?", message, hint)
        desc = pgconn.describe_prepared(b"")
        result = self.names[desc.ftype(0)] if desc.nfields else ""
        return ("ok", result, *(self.names[desc.param_type(i)] for i in range(desc.nparams)))


def parses(sql: str) -> bool:
    try:
        pglast.parse_sql(sql)
    except pglast.parser.ParseError:
        return False
    return True


@contextlib.contextmanager
def oracle_database(server_url: str) -> Iterator[psycopg.Connection]:
    """A scratch database with the test extensions, a sequence `s` and the schema types."""
    with scratch_database(server_url, schema=None) as url, psycopg.connect(url, autocommit=True) as conn:
        for ext in EXTENSIONS:
            conn.execute(f'CREATE EXTENSION IF NOT EXISTS "{ext}"')
        conn.execute("CREATE SEQUENCE s")
        conn.execute(SCHEMA_DDL)
        yield conn


def postgres(conn: psycopg.Connection, sql: str) -> tuple[dict[str, str], list[str]] | str:
    """A statement with `@name` parameters as PostgreSQL's PREPARE types it: parameter types by
    name and column types, or its error message."""
    text, order = positional(sql)
    prepared = conn.pgconn.prepare(b"", text.encode())
    if prepared.status != psycopg.pq.ExecStatus.COMMAND_OK:
        return (prepared.error_message or b"").decode().split("\n")[0].removeprefix("ERROR:").strip()
    described = conn.pgconn.describe_prepared(b"")
    names = pg_type_names(conn)
    params = {name: names[described.param_type(i)] for i, name in enumerate(order)}
    return params, [names[described.ftype(i)] for i in range(described.nfields)]


def analyzer(sql: str, catalog: Catalog) -> tuple[dict[str, str], list[str]] | str:
    """The same as the analyzer types it, or its first problem's message."""
    analysis, problems = analyze(sql, catalog)
    if problems:
        return problems[0].message
    assert analysis is not None
    return {p.name: p.type.pg_name for p in analysis.params if p.type}, [
        c.type.described_name if c.type else str(c.type) for c in analysis.columns or ()
    ]


def assert_typed_like_postgres(sql: str, catalog: Catalog, conn: psycopg.Connection) -> None:
    """PostgreSQL takes `sql`, and the analyzer gives the parameter and column types it describes."""
    expected = postgres(conn, sql)
    assert not isinstance(expected, str), f"PostgreSQL refuses {sql}: {expected}"
    assert analyzer(sql, catalog) == expected, sql


def assert_refused_like_postgres(sql: str, catalog: Catalog, conn: psycopg.Connection) -> None:
    """PostgreSQL refuses `sql`, and the analyzer refuses it with PostgreSQL's message (which
    it may follow with what PostgreSQL leaves out, in parentheses: the request field, the fix)."""
    expected = postgres(conn, sql)
    assert isinstance(expected, str), f"PostgreSQL takes {sql}: {expected}"
    got = analyzer(sql, catalog)
    assert isinstance(got, str) and (got == expected or got.startswith(expected + " (")), (sql, got)


def schema_fixtures(
    schema: str, *setup: str, conn_name: str = "conn"
) -> tuple[Callable[[], Catalog], Callable[[tuple[str, Cluster | None]], Iterator[psycopg.Connection]]]:
    """A differential test module's two fixtures, bound at module level as
    `catalog, conn = schema_fixtures(SCHEMA)`: `catalog`, the analyzer's catalog of `schema`
    (which must build without problems), and `conn` (or `conn_name`), a connection to a scratch
    database with `schema` and then each `setup` script applied (sample rows)."""

    @pytest.fixture(scope="module", name="catalog")
    def catalog_fixture() -> Catalog:
        built, problems = build_catalog(schema)
        assert not problems
        return built

    @pytest.fixture(scope="module", name=conn_name)
    def conn_fixture(pg_server: tuple[str, Cluster | None]) -> Iterator[psycopg.Connection]:
        with scratch_database(pg_server[0], schema=None) as url, psycopg.connect(url, autocommit=True) as connection:
            for script in (schema, *setup):
                connection.execute(script)
            yield connection

    return catalog_fixture, conn_fixture


def describe(conn: psycopg.Connection, sql: str) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """PostgreSQL's parameter types by name and (name, type) per output column."""
    text, order = positional(sql)
    prepared = conn.pgconn.prepare(b"", text.encode())
    assert prepared.status == psycopg.pq.ExecStatus.COMMAND_OK, (prepared.error_message or b"").decode()
    described = conn.pgconn.describe_prepared(b"")
    names = pg_type_names(conn)
    params = {name: names[described.param_type(i)] for i, name in enumerate(order)}
    columns = [((described.fname(i) or b"").decode(), names[described.ftype(i)]) for i in range(described.nfields)]
    return params, columns


def ours(analysis: Analysis) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """The analyzer's parameter types by name and (name, type) per output column, as `describe`."""
    params = {p.name: str(p.type) for p in analysis.params}
    columns = [(c.name, str(c.type)) for c in analysis.columns or ()]
    return params, columns
