"""PostgreSQL's function and operator resolution (sql/rules/resolution.py) against PostgreSQL itself,
the forms beyond plain calls: schema-declared functions (defaults, VARIADIC, named arguments,
polymorphism, OUT/TABLE columns, overloads beside the built-ins), `= ANY`, `IN`, NULLIF, and the
messages and hints resolution gives. Plain calls, operators and every built-in signature are in
test_sql_resolve.py; the harness is tests/support/sql_oracle.py."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import hypothesis
import psycopg
import pytest
from hypothesis import strategies as st
from pydb.plugin.sql.catalog.builtins import load_builtins
from pydb.plugin.sql.catalog.signatures import FunctionSig
from pydb.plugin.sql.catalog.types import PgType
from pydb.plugin.sql.rules.resolution import (
    DIALECT_HINTS,
    ResolveError,
    common_type,
    resolve_function,
    resolve_in_list,
    resolve_operator,
    resolve_scalar_array_op,
)
from support.pg import Cluster
from support.sql_oracle import (
    SCHEMA_TYPES,
    Call,
    Oracle,
    Outcome,
    case_sql,
    oracle_database,
    schema_env,
    value_sql,
)


@pytest.fixture(scope="module")
def pg(pg_server: tuple[str, Cluster | None]) -> Iterator[psycopg.Connection]:
    with oracle_database(pg_server[0]) as conn:
        yield conn


# Schema-declared functions, as the catalog would describe them: defaults, VARIADIC, named
# arguments, polymorphism, OUT/TABLE columns, and overloads beside the built-ins.
FUNCTIONS_DDL = """
CREATE FUNCTION f_def(a int, b int DEFAULT 1) RETURNS int LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION f_def(a int) RETURNS text LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION f_var(VARIADIC nums numeric[]) RETURNS numeric LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION f_var(n numeric) RETURNS text LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION f_named(a int, b text) RETURNS int LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION f_named(b text, a int) RETURNS text LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION f_opt(a int, b text DEFAULT 'x', c bool DEFAULT true) RETURNS int LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION f_poly(x anyelement, xs anyarray) RETURNS anyarray LANGUAGE sql AS 'SELECT xs';
CREATE FUNCTION f_out(x int, OUT y text, OUT z int) LANGUAGE sql AS 'SELECT 1::text, 1';
CREATE FUNCTION f_tab(n int) RETURNS TABLE (k int, v text) LANGUAGE sql AS 'SELECT 1, 1::text';
CREATE FUNCTION lower(x text) RETURNS int LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION lower(m mood) RETURNS mood LANGUAGE sql AS 'SELECT m';
"""


def _schema_functions() -> list[FunctionSig]:
    i4, num, text, mood = PgType("int4"), PgType("numeric"), PgType("text"), SCHEMA_TYPES["mood"].type
    return [
        FunctionSig("public", "f_def", (i4, i4), ("a", "b"), i4, n_defaults=1),
        FunctionSig("public", "f_def", (i4,), ("a",), text),
        FunctionSig("public", "f_var", (num.array(),), ("nums",), num, variadic=True),
        FunctionSig("public", "f_var", (num,), ("n",), text),
        FunctionSig("public", "f_named", (i4, text), ("a", "b"), i4),
        FunctionSig("public", "f_named", (text, i4), ("b", "a"), text),
        FunctionSig("public", "f_opt", (i4, text, PgType("bool")), ("a", "b", "c"), i4, n_defaults=2),
        FunctionSig("public", "f_poly", (PgType("anyelement"), PgType("anyarray")), ("x", "xs"), PgType("anyarray")),
        FunctionSig("public", "f_out", (i4,), ("x",), PgType("record"), out_columns=(("y", text), ("z", i4))),
        FunctionSig(
            "public", "f_tab", (i4,), ("n",), PgType("record"), returns_set=True, out_columns=(("k", i4), ("v", text))
        ),
        FunctionSig("public", "lower", (text,), ("x",), i4),
        FunctionSig("public", "lower", (mood,), ("m",), mood),
    ]


SCHEMA_FUNCTION_CASES = [
    Call("f_def", ("int4",)),
    Call("f_def", ("int4", "int4")),
    Call("f_def", ("?",)),
    Call("f_var", ("int4",)),
    Call("f_var", ("numeric",)),
    Call("f_var", ("int4", "numeric")),
    Call("f_var", ("numeric[]",), variadic_call=True),
    Call("f_var", ()),
    Call("f_named", ("int4", "text")),
    Call("f_named", ("text", "int4")),
    Call("f_named", ("int4", "text"), arg_names=("a", "b")),
    Call("f_named", ("int4", "?"), arg_names=(None, "b")),
    Call("f_named", ("?", "int4"), arg_names=("b", "a")),
    Call("f_opt", ("int4",)),
    Call("f_opt", ("int4", "bool"), arg_names=(None, "c")),
    Call("f_opt", ("int4", "?", "?")),
    Call("f_opt", ("bool",), arg_names=("c",)),
    Call("f_poly", ("int4", "int4[]")),
    Call("f_poly", ("?", "text[]")),
    Call("f_poly", ("int8", "int4[]")),
    Call("f_poly", ("?", "?")),
    Call("f_out", ("int4",)),
    Call("f_tab", ("?",)),
    Call("lower", ("text",)),
    Call("lower", ("?",)),
    Call("lower", ("varchar",)),
    Call("lower", ("mood",)),
    Call("lower", ("int4range",)),
    Call("f_nope", ("int4",)),
]


def test_schema_functions_resolve_like_postgresql(pg: psycopg.Connection) -> None:
    pg.execute(FUNCTIONS_DDL)
    env = schema_env()
    declared = _schema_functions()
    oracle = Oracle(pg)
    wrong = []
    try:
        for case in SCHEMA_FUNCTION_CASES:
            sql, types = case_sql(case, env)
            expected = oracle.ask(sql)
            candidates = [*env.builtins.functions(case.name), *(f for f in declared if f.name == case.name)]
            try:
                fn = resolve_function(
                    case.name,
                    candidates,
                    types,
                    arg_names=case.arg_names,
                    variadic_call=case.variadic_call,
                    params=[s == "?" for s in case.args],
                    env=env,
                )
                slots = [i for i, s in enumerate(case.args) if s == "?"]
                if any(fn.arg_types[i].name == "unknown" for i in slots):
                    got: Outcome = ("err", "42P18")
                else:
                    got = ("ok", env.display(fn.result), *(env.display(fn.arg_types[i]) for i in slots))
            except ResolveError as exc:
                got = ("err", exc.sqlstate)
            if got != expected[: len(got)] or (got[0] == "ok" and got != expected):
                wrong.append(f"{sql}: PostgreSQL {expected}, resolver {got}")
    finally:
        for f in declared:
            pg.execute(f"DROP FUNCTION {f.schema}.{f.name}({', '.join(env.display(t) for t in f.arg_types)})")
    assert not wrong, "\n".join(wrong)


ANY_CASES = [
    ("=", "int4", "?"),
    ("=", "int4", "int8[]"),
    ("=", "text", "varchar[]"),
    ("=", "?", "int4[]"),
    ("=", "int4", "int4"),
    ("~~", "text", "?"),
    ("=", "uuid", "?"),
    ("+", "int4", "int4[]"),
    ("<", "int4", "numeric[]"),
    ("=", "mood", "?"),
    ("=", "mood", "mood[]"),
    ("=", "posint", "?"),
    ("@>", "int4range", "int4[]"),
    ("=", "int4[]", "?"),
    ("==", "int4", "int4[]"),
]


@pytest.mark.parametrize(("symbol", "left", "right"), ANY_CASES)
def test_scalar_array_op_agrees_with_postgresql(pg: psycopg.Connection, symbol: str, left: str, right: str) -> None:
    env = schema_env()
    params: list[str] = []
    (l_sql, l_t), (r_sql, r_t) = value_sql(left, params, env), value_sql(right, params, env)
    expected = Oracle(pg).ask(f"SELECT {l_sql} {symbol} ANY ({r_sql})")
    try:
        op = resolve_scalar_array_op(symbol, env.builtins.operators(symbol), l_t, r_t, env=env)
        coerced = [t for t, s in ((op.left, left), (op.right, right)) if s == "?"]
        if any(t is None or t.name == "unknown" for t in coerced):
            got: Outcome = ("err", "42P18")
        else:
            got = ("ok", env.display(op.result), *(env.display(t) for t in coerced if t is not None))
    except ResolveError as exc:
        got = ("err", exc.sqlstate, exc.message)
    assert got == expected[: len(got)] and (got[0] == "err" or got == expected)


IN_CASES = [
    ("int4", ("?", "?")),
    ("int4", ("int4", "numeric")),
    ("?", ("int4", "int4")),
    ("text", ("?",)),
    ("int4", ("text", "text")),
    ("mood", ("?", "?")),
    ("date", ("timestamptz", "?")),
    ("int8", ("?", "int4", "?")),
    ("?", ("?", "?")),
    ("uuid", ("?", "?")),
]


@pytest.mark.parametrize("negated", [False, True])
@pytest.mark.parametrize(("left", "items"), IN_CASES)
def test_in_list_agrees_with_postgresql(
    pg: psycopg.Connection, left: str, items: tuple[str, ...], negated: bool
) -> None:
    env = schema_env()
    params: list[str] = []
    l_sql, l_t = value_sql(left, params, env)
    values = [value_sql(item, params, env) for item in items]
    keyword = "NOT IN" if negated else "IN"
    expected = Oracle(pg).ask(f"SELECT {l_sql} {keyword} ({', '.join(v for v, _ in values)})")
    symbol = "<>" if negated else "="
    try:
        left_type, item_types = resolve_in_list(
            symbol, env.builtins.operators(symbol), l_t, [t for _, t in values], env=env
        )
        coerced = ([left_type] if left == "?" else []) + [t for t, s in zip(item_types, items, strict=True) if s == "?"]
        if any(t.name == "unknown" for t in coerced):
            got: Outcome = ("err", "42P18")
        else:
            got = ("ok", "boolean", *(env.display(t) for t in coerced))
    except ResolveError as exc:
        got = ("err", exc.sqlstate, exc.message)
    assert got == expected[: len(got)] and (got[0] == "err" or got == expected)


# ------------------------------------------------------------------------------------------
# Messages, hints and the other entry points.


def _error(name: str, *args: PgType) -> ResolveError:
    b = load_builtins()
    with pytest.raises(ResolveError) as info:
        resolve_function(name, b.functions(name), list(args))
    return info.value


def test_no_such_overload_names_postgresql_message_and_the_candidates() -> None:
    err = _error("random", PgType("int4"))
    assert err.sqlstate == "42883"
    assert err.message == "function random(integer) does not exist"
    assert (
        err.hint == "No function matches the given name and argument types. You might need to add explicit type casts."
    )
    assert err.note == "candidates: random()"


def test_other_dialects_names_get_a_teaching_note() -> None:
    assert _error("ifnull", PgType("int4"), PgType("int4")).note == "did you mean COALESCE?"
    assert _error("nvl", PgType("text"), PgType("text")).note == "did you mean COALESCE?"
    assert _error("len", PgType("text")).note == "did you mean length()?"
    assert _error("getdate").note == "did you mean now()?"


def test_a_misspelt_name_gets_the_closest_function() -> None:
    b = load_builtins()
    with pytest.raises(ResolveError) as info:
        resolve_function("to_tsvectr", (), [PgType("text")], known_names=b.function_names)
    assert info.value.message == "function to_tsvectr(text) does not exist"
    assert info.value.note == "did you mean to_tsvector()?"
    with pytest.raises(ResolveError) as info:
        resolve_function("zzzqqq", (), [], known_names=b.function_names)
    assert info.value.note is None


def test_teaching_notes_name_only_functions_postgresql_lacks() -> None:
    b = load_builtins().with_extensions(load_builtins().extension_names)
    assert not [name for name in DIALECT_HINTS if b.functions(name)]


def test_ambiguous_call_is_not_unique() -> None:
    b = load_builtins()
    with pytest.raises(ResolveError) as info:
        resolve_operator("+", b.operators("+"), PgType("unknown"), PgType("unknown"))
    assert info.value.sqlstate == "42725"
    assert info.value.message == "operator is not unique: unknown + unknown"


def test_double_equals_is_taught() -> None:
    b = load_builtins()
    with pytest.raises(ResolveError) as info:
        resolve_operator("==", b.operators("=="), PgType("int4"), PgType("int4"))
    assert info.value.message == "operator does not exist: integer == integer"
    assert info.value.note == "did you mean =?"


def test_out_columns_and_kinds() -> None:
    b = load_builtins()
    each = resolve_function("jsonb_each", b.functions("jsonb_each"), [PgType("jsonb")])
    assert each.returns_set and [n for n, _ in each.out_columns] == ["key", "value"]
    assert [str(t) for _, t in each.out_columns] == ["text", "jsonb"]
    pct = resolve_function("percentile_cont", b.functions("percentile_cont"), [PgType("numeric"), PgType("float8")])
    assert pct.kind == "ordered_set" and pct.sig.n_direct_args == 1
    assert resolve_function("rank", b.functions("rank"), []).kind == "window"
    assert resolve_function("count", b.functions("count"), []).kind == "aggregate"
    unnest = resolve_function("unnest", b.functions("unnest"), [PgType("int4", True)])
    assert unnest.result == PgType("int4") and unnest.returns_set


_POOL = [
    "int2", "int4", "int8", "numeric", "float8", "text", "varchar", "bpchar", "bool", "date", "timestamptz",
    "interval", "jsonb", "json", "bytea", "uuid", "inet", "int4range", "int4multirange", "tsvector",
    "record", "anyelement", "unknown", "null", "void", "cstring", "xml", "money", "point", "oid",
]  # fmt: skip
_POOL_TYPES = (
    [PgType(n) for n in _POOL] + [PgType(n, True) for n in _POOL[:12]] + [info.type for info in SCHEMA_TYPES.values()]
)


@hypothesis.settings(max_examples=400, deadline=None, derandomize=True)
@hypothesis.given(
    name=st.sampled_from(sorted(load_builtins().function_names)),
    args=st.lists(st.sampled_from(_POOL_TYPES), max_size=4),
    named=st.booleans(),
    symbol=st.sampled_from(sorted({"+", "-", "=", "||", "@>", "->", "?", "~", "&&", "<->", "#", "@@"})),
)
def test_resolution_only_ever_raises_resolve_error(name: str, args: list[PgType], named: bool, symbol: str) -> None:
    """Any argument types, any function or operator: a resolution or a ResolveError, never a crash."""
    env = schema_env()
    names = [f"a{k}" if named else None for k in range(len(args))]
    for attempt in (
        lambda: resolve_function(name, env.builtins.functions(name), args, arg_names=names, env=env),
        lambda: resolve_operator(
            symbol,
            env.builtins.operators(symbol),
            args[0] if args else None,
            args[-1] if args else PgType("int4"),
            env=env,
        ),
        lambda: common_type(args or [PgType("unknown")], "CASE", env=env),
        lambda: resolve_in_list("=", env.builtins.operators("="), args[0] if args else PgType("int4"), args, env=env),
    ):
        with contextlib.suppress(ResolveError):
            attempt()


@pytest.mark.parametrize(
    ("left", "right"),
    [("int4", "numeric"), ("?", "int4"), ("int4", "?"), ("text", "varchar"), ("json", "json"), ("mood", "?")],
)
def test_nullif_is_equality_typed_as_its_coerced_left(pg: psycopg.Connection, left: str, right: str) -> None:
    env = schema_env()
    params: list[str] = []
    (l_sql, l_t), (r_sql, r_t) = value_sql(left, params, env), value_sql(right, params, env)
    expected = Oracle(pg).ask(f"SELECT NULLIF({l_sql}, {r_sql})")
    try:
        op = resolve_operator("=", env.builtins.operators("="), l_t, r_t, env=env)
        assert op.left is not None
        coerced = [t for t, s in ((op.left, left), (op.right, right)) if s == "?"]
        got: Outcome = ("ok", env.display(op.left), *(env.display(t) for t in coerced if t is not None))
    except ResolveError as exc:
        got = ("err", exc.sqlstate, exc.message, exc.hint or "")
    assert got == expected
