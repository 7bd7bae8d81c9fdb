"""PostgreSQL's function and operator resolution (sql/rules/resolution.py) against PostgreSQL itself:
curated and generated calls and operator expressions, every built-in signature, the operators of
contrib extensions, table functions' columns, schema-declared functions, `= ANY`, `IN`, NULLIF,
messages and hints. The harness is tests/support/sql_oracle.py."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator

import hypothesis
import psycopg
import pytest
from hypothesis import strategies as st
from pydb.plugin.sql.catalog.builtins import SchemaTypes, load_builtins
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
    EXTENSIONS,
    SCHEMA_TYPES,
    Call,
    Case,
    Op,
    Oracle,
    Outcome,
    case_sql,
    oracle_database,
    parses,
    predict,
    schema_env,
    value_sql,
)


@pytest.fixture(scope="module")
def pg(pg_server: tuple[str, Cluster | None]) -> Iterator[psycopg.Connection]:
    with oracle_database(pg_server[0]) as conn:
        yield conn


# ------------------------------------------------------------------------------------------
# The cases: curated ones (each a behaviour someone relies on), then generated cross products.

CURATED: list[Case] = [
    Call("random"),
    Call("random", ("int4",)),
    Call("random", ("?",)),
    Call("ln", ("'2.0'",)),
    Call("ln", ("numeric",)),
    Call("sqrt", ("numeric",)),
    Call("power", ("numeric", "numeric")),
    Call("log", ("int4",)),
    Call("log", ("numeric", "numeric")),
    Call("exp", ("int4",)),
    Call("pi"),
    Call("width_bucket", ("numeric", "numeric", "numeric", "int4")),
    Call("width_bucket", ("float8", "float8", "float8", "int4")),
    Call("width_bucket", ("int4", "int4[]")),
    Call("div", ("int4", "int4")),
    Call("ceiling", ("numeric",)),
    Call("ceiling", ("float8",)),
    Call("regexp_match", ("text", "'a+'")),
    Call("regexp_match", ("?", "?")),
    Call("regexp_matches", ("text", "text", "'g'")),
    Call("jsonb_each", ("jsonb",)),
    Call("jsonb_each_text", ("?",)),
    Call("to_tsvector", ("'x'",)),
    Call("to_tsvector", ("'english'", "text")),
    Call("plainto_tsquery", ("?",)),
    Call("nextval", ("'s'",)),
    Call("currval", ("?",)),
    Call("pg_advisory_lock", ("int4",)),
    Call("pg_advisory_lock", ("?",)),
    Call("pg_advisory_xact_lock", ("int4", "int4")),
    Call("pg_try_advisory_lock", ("int8",)),
    Call("json_build_array", ("int4", "'a'")),
    Call("json_build_object", ("'a'", "int4", "'b'", "text")),
    Call("jsonb_build_object"),
    Call("percentile_cont", ("numeric", "float8"), within_group=1),
    Call("percentile_cont", ("?", "interval"), within_group=1),
    Call("percentile_disc", ("float8", "text"), within_group=1),
    Call("percentile_disc", ("float8[]", "int4"), within_group=1),
    Call("mode", ("timestamptz",), within_group=1),
    Call("rank", ("int4", "int4"), within_group=1),
    Call("rank", (), over=True),
    Call("row_number", (), over=True),
    Call("lag", ("text",), over=True),
    Call("lag", ("int4", "int4", "?"), over=True),
    Call("first_value", ("numeric",), over=True),
    Call("ntile", ("?",), over=True),
    Call("array_agg", ("int4",)),
    Call("array_agg", ("int4[]",)),
    Call("array_agg", ("?",)),
    Call("string_agg", ("text", "','")),
    Call("string_agg", ("varchar", "?")),
    Call("string_agg", ("bytea", "bytea")),
    Call("count", ("text",)),
    Call("sum", ("int4",)),
    Call("sum", ("int8",)),
    Call("sum", ("numeric",)),
    Call("sum", ("interval",)),
    Call("sum", ("?",)),
    Call("avg", ("int4",)),
    Call("avg", ("float4",)),
    Call("max", ("text",)),
    Call("max", ("?",)),
    Call("bool_and", ("bool",)),
    Call("json_agg", ("int4",)),
    Call("jsonb_object_agg", ("text", "int4")),
    Call("array_append", ("int4[]", "int4")),
    Call("array_append", ("int4[]", "int8")),
    Call("array_append", ("int4[]", "?")),
    Call("array_append", ("?", "?")),
    Call("array_append", ("int4", "int4")),
    Call("array_prepend", ("?", "text[]")),
    Call("array_cat", ("int4[]", "int4[]")),
    Call("array_cat", ("int4[]", "int8[]")),
    Call("array_cat", ("int4[]", "text[]")),
    Call("array_position", ("text[]", "'a'")),
    Call("array_remove", ("int8[]", "int4")),
    Call("array_length", ("int4[]", "int4")),
    Call("unnest", ("int4[]",)),
    Call("unnest", ("?",)),
    Call("unnest", ("text[]", "int4[]")),
    Call("unnest", ("int4multirange",)),
    Call("cardinality", ("?",)),
    Call("concat", ("'a'", "int4", "null")),
    Call("concat", ("?",)),
    Call("concat", ("text[]",), variadic_call=True),
    Call("concat_ws", ("','", "int4", "text")),
    Call("format", ("'%s'", "int4")),
    Call("format", ("text",)),
    Call("format", ("'%s %s'", "text[]"), variadic_call=True),
    Call("num_nonnulls", ("int4", "text", "null")),
    Call("jsonb_extract_path", ("jsonb", "'a'", "'b'")),
    Call("jsonb_extract_path_text", ("jsonb", "text[]"), variadic_call=True),
    Call("jsonb_set", ("jsonb", "text[]", "jsonb")),
    Call("jsonb_set", ("jsonb", "?", "?")),
    Call("jsonb_set", ("jsonb", "text[]", "jsonb", "bool")),
    Call("make_interval", ("int4",), arg_names=("days",)),
    Call("make_interval", ("int4", "float8"), arg_names=("days", "secs")),
    Call("make_interval", ("int4", "int4"), arg_names=(None, "days")),
    Call("make_interval", ("int4",), arg_names=("nope",)),
    Call("make_timestamptz", ("int4", "int4", "int4", "int4", "int4", "float8")),
    Call("date_trunc", ("'day'", "timestamptz")),
    Call("date_trunc", ("'day'", "timestamp")),
    Call("date_trunc", ("'day'", "date")),
    Call("date_trunc", ("?", "?")),
    Call("date_part", ("'year'", "date")),
    Call("to_char", ("timestamptz", "'YYYY'")),
    Call("to_char", ("int4", "?")),
    Call("to_timestamp", ("float8",)),
    Call("to_timestamp", ("?",)),
    Call("to_timestamp", ("text", "text")),
    Call("age", ("timestamptz",)),
    Call("age", ("date", "date")),
    Call("now"),
    Call("clock_timestamp"),
    Call("gen_random_uuid"),
    Call("uuid_generate_v4"),
    Call("digest", ("text", "'sha256'")),
    Call("crypt", ("?", "?")),
    Call("similarity", ("text", "text")),
    Call("levenshtein", ("text", "?")),
    Call("generate_series", ("int4", "int4")),
    Call("generate_series", ("?", "?")),
    Call("generate_series", ("timestamptz", "timestamptz", "interval")),
    Call("generate_series", ("date", "date", "interval")),
    Call("generate_series", ("timestamp", "timestamptz", "interval")),
    Call("generate_subscripts", ("int4[]", "int4")),
    Call("length", ("?",)),
    Call("length", ("bytea",)),
    Call("length", ("bpchar",)),
    Call("lower", ("?",)),
    Call("lower", ("int4range",)),
    Call("lower", ("citext",)),
    Call("upper", ("tstzrange",)),
    Call("isempty", ("daterange",)),
    Call("range_merge", ("int4range", "int4range")),
    Call("int4range", ("int4", "int4")),
    Call("int4range", ("?", "?", "'[]'")),
    Call("tstzrange", ("timestamptz", "timestamptz")),
    Call("numrange", ("int4", "numeric")),
    Call("multirange", ("int8range",)),
    Call("host", ("inet",)),
    Call("host", ("cidr",)),
    Call("masklen", ("?",)),
    Call("set_masklen", ("cidr", "int4")),
    Call("abs", ("?",)),
    Call("abs", ("int2",)),
    Call("abs", ("text",)),
    Call("round", ("float8", "int4")),
    Call("round", ("numeric", "int4")),
    Call("round", ("int4",)),
    Call("round", ("?", "int4")),
    Call("trunc", ("float8",)),
    Call("trunc", ("macaddr",)),
    Call("mod", ("int4", "int8")),
    Call("mod", ("?", "int4")),
    Call("gcd", ("int4", "int8")),
    Call("greatest_common", ("int4",)),
    Call("ifnull", ("int4", "int4")),
    Call("nvl", ("text", "text")),
    Call("len", ("text",)),
    Call("getdate"),
    Call("substr", ("text", "int4")),
    Call("substr", ("?", "?", "?")),
    Call("substring", ("text", "'a.'")),
    Call("left", ("text", "int8")),
    Call("repeat", ("'ab'", "int4")),
    Call("split_part", ("text", "','", "int4")),
    Call("replace", ("?", "'a'", "'b'")),
    Call("quote_literal", ("int4",)),
    Call("quote_literal", ("?",)),
    Call("encode", ("bytea", "'hex'")),
    Call("decode", ("?", "'hex'")),
    Call("md5", ("?",)),
    Call("md5", ("bytea",)),
    Call("to_json", ("int4",)),
    Call("to_jsonb", ("?",)),
    Call("row_to_json", ("?",)),
    Call("jsonb_array_elements", ("jsonb",)),
    Call("json_array_length", ("json",)),
    Call("jsonb_typeof", ("json",)),
    Call("jsonb_path_query", ("jsonb", "'$.a'")),
    Call("array_to_string", ("int4[]", "','")),
    Call("string_to_array", ("text", "?")),
    Call("array_fill", ("int4", "int4[]")),
    Call("array_fill", ("?", "'{3}'")),
    Call("coalesce_nope", ()),
    Call("hstore", ("text[]", "text[]")),
    Call("akeys", ("hstore",)),
    Call("nlevel", ("ltree",)),
    Call("pg_sleep", ("int4",)),
    Call("set_config", ("?", "?", "bool")),
    Call("current_setting", ("'a'", "bool")),
    Call("txid_current"),
    Call("pg_typeof", ("int4",)),
    Call("xmlelement_nope", ("int4",)),
]

SCHEMA_CASES: list[Case] = [
    Call("abs", ("posint",)),
    Call("sum", ("posint",)),
    Call("array_agg", ("posint",)),
    Call("array_append", ("posint[]", "int4")),
    Call("array_append", ("posint[]", "?")),
    Call("lower", ("email",)),
    Call("length", ("email",)),
    Call("string_agg", ("email", "','")),
    Call("enum_first", ("mood",)),
    Call("enum_range", ("mood",)),
    Call("enum_range", ("mood", "?")),
    Call("array_agg", ("mood",)),
    Call("length", ("mood",)),
    Call("max", ("mood",)),
    Call("to_json", ("pair",)),
    Call("row_to_json", ("pair",)),
    Call("format", ("'%s'", "pair")),
    Call("array_agg", ("pair",)),
    Call("abs", ("pair",)),
    Call("text", ("mood",)),
    Call("text", ("posint",)),
    Call("int4", ("posint",)),
    Call("mood", ("'ok'",)),
    Op("+", "posint", "int4"),
    Op("+", "posint", "posint"),
    Op("+", "posint", "?"),
    Op("=", "posint", "?"),
    Op("=", "posint", "int8"),
    Op("||", "email", "'x'"),
    Op("||", "email", "int4"),
    Op("~~", "email", "?"),
    Op("=", "email", "text"),
    Op("=", "mood", "?"),
    Op("<", "mood", "'ok'"),
    Op("=", "mood", "text"),
    Op("||", "mood", "text"),
    Op("=", "pair", "pair"),
    Op("=", "pair", "?"),
    Op("@>", "posint[]", "int4[]"),
    Op("=", "mood[]", "?"),
]

OPERATORS_CURATED: list[Case] = [
    Op("@@", "tsvector", "tsquery"),
    Op("@@", "text", "tsquery"),
    Op("@@", "?", "tsquery"),
    Op("-", "timestamptz", "interval"),
    Op("-", "timestamptz", "timestamptz"),
    Op("-", "date", "date"),
    Op("-", "date", "int4"),
    Op("+", "date", "int4"),
    Op("+", "date", "interval"),
    Op("+", "date", "time"),
    Op("+", "timestamp", "?"),
    Op("||", "text", "int4"),
    Op("||", "int4", "text"),
    Op("||", "?", "?"),
    Op("||", "int4[]", "int4"),
    Op("||", "int4[]", "int4[]"),
    Op("||", "jsonb", "jsonb"),
    Op("||", "int4", "int4"),
    Op("+", "int4", "numeric"),
    Op("+", "int4", "int8"),
    Op("+", "int2", "int2"),
    Op("+", "float4", "numeric"),
    Op("+", "?", "?"),
    Op("+", "text", "int4"),
    Op("/", "int4", "int4"),
    Op("/", "int4", "float8"),
    Op("^", "int4", "int4"),
    Op("%", "numeric", "int4"),
    Op("->", "jsonb", "'a'"),
    Op("->", "jsonb", "int4"),
    Op("->", "json", "?"),
    Op("->>", "jsonb", "'a'"),
    Op("->>", "json", "int4"),
    Op("#>", "jsonb", "'{a,b}'"),
    Op("#>>", "jsonb", "text[]"),
    Op("?", "jsonb", "'a'"),
    Op("?|", "jsonb", "text[]"),
    Op("@>", "jsonb", "?"),
    Op("@>", "int4[]", "int4[]"),
    Op("@>", "int4range", "int4"),
    Op("@>", "tstzrange", "timestamptz"),
    Op("<@", "int4", "int4range"),
    Op("&&", "int4[]", "int4[]"),
    Op("&&", "daterange", "daterange"),
    Op("<<", "inet", "inet"),
    Op(">>=", "inet", "?"),
    Op("<<", "int4", "int4"),
    Op("&", "inet", "inet"),
    Op("-", "inet", "int8"),
    Op("-", "inet", "inet"),
    Op("==", "int4", "int4"),
    Op("!=", "int4", "int4"),
    Op("=", "int4", "?"),
    Op("=", "text", "int4"),
    Op("=", "varchar", "text"),
    Op("=", "bpchar", "text"),
    Op("=", "citext", "text"),
    Op("=", "uuid", "?"),
    Op("=", "int4[]", "int8[]"),
    Op("<", "date", "timestamptz"),
    Op("~~", "text", "?"),
    Op("~", "text", "'a.*'"),
    Op("~*", "varchar", "text"),
    Op("<->", "point", "point"),
    Op("<->", "text", "text"),
    Op("%", "text", "text"),
    Op("-", None, "int4"),
    Op("-", None, "?"),
    Op("-", None, "text"),
    Op("-", None, "interval"),
    Op("~", None, "int8"),
    Op("|/", None, "float8"),
    Op("@", None, "numeric"),
    Op("!!", None, "tsquery"),
    Op("+", None, "?"),
]


def _generated() -> list[Case]:
    """Cross products: common functions over a sample of types, operators over type pairs."""
    one = ["int2", "int4", "int8", "numeric", "float4", "float8", "text", "varchar", "?", "bool", "date"]
    one += ["timestamptz", "interval", "jsonb", "bytea", "int4[]", "text[]", "int4range", "inet", "uuid"]
    two = ["int4", "int8", "numeric", "float8", "text", "?", "timestamptz", "date", "interval", "int4[]", "jsonb"]
    unary_functions = [
        "abs", "ceil", "floor", "sign", "sqrt", "cbrt", "ln", "exp", "degrees", "length", "upper", "md5",
        "char_length", "btrim", "reverse", "initcap", "ascii", "to_hex", "factorial", "quote_ident",
        "to_jsonb", "array_ndims", "cardinality", "isfinite", "lower_inf", "family", "jsonb_pretty",
        "bit_length", "max", "min", "avg", "stddev", "bit_or", "json_agg", "every", "array_upper",
        "date", "text", "int8", "float8", "bpchar", "inet", "justify_days", "upper_inc", "array_dims",
    ]  # fmt: skip
    binary_functions = [
        "power", "mod", "div", "log", "round", "trunc", "atan2", "left", "repeat", "strpos", "substr",
        "regexp_replace", "date_part", "date_trunc", "to_char", "array_append", "array_prepend",
        "array_cat", "array_position", "array_remove", "jsonb_build_object", "concat_ws", "age",
        "gcd", "width_bucket", "overlaps_nope", "string_agg", "generate_series", "timezone", "format",
        "jsonb_extract_path", "range_merge", "lpad", "encode", "to_date", "array_length", "corr",
    ]  # fmt: skip
    symbols = ["+", "-", "*", "/", "%", "^", "||", "=", "<>", "<", ">=", "@>", "<@", "&&", "->", "->>", "#>"]
    symbols += ["?", "@@", "<<", "~", "~~", "#", "|", "&", "-|-", "<->"]
    prefix = ["-", "+", "~", "@", "|/", "!!", "@@", "#"]
    cases: list[Case] = []
    cases += [Call(f, (t,)) for f in unary_functions for t in one]
    cases += [Call(f, (a, c)) for f in binary_functions for a, c in itertools.product(two, two)]
    cases += [Op(s, a, c) for s in symbols for a, c in itertools.product(two, two)]
    three = ["int4", "numeric", "float8", "text", "?", "timestamptz", "interval", "int4[]", "jsonb", "text[]"]
    ternary_functions = [
        "substr", "regexp_replace", "split_part", "lpad", "jsonb_set", "make_date", "generate_series",
        "replace", "translate", "array_fill", "jsonb_insert", "date_bin", "array_position", "concat_ws",
        "json_build_object", "regexp_matches", "to_char", "range_merge", "numrange", "set_config",
    ]  # fmt: skip
    cases += [Call(f, args) for f in ternary_functions for args in itertools.product(three, three, three)]
    cases += [Op(s, None, t) for s in prefix for t in one]
    return cases


# Concrete stand-ins for polymorphic parameters when calling every signature with its own types.
_STAND_INS = {
    "anyelement": "int4",
    "anynonarray": "int4",
    "anyarray": "int4[]",
    "anyrange": "int4range",
    "anymultirange": "int4multirange",
    "anycompatible": "int4",
    "anycompatiblenonarray": "int4",
    "anycompatiblearray": "int8[]",
    "anycompatiblerange": "int8range",
    "anycompatiblemultirange": "int8multirange",
    "any": "int4",
}
_NOT_SPELLABLE = {"anyenum", "record", "cstring", "unknown", "opaque"}


def _every_signature() -> list[Case]:
    """Each built-in function (core + the test's extensions) called with its own declared
    argument types (polymorphic ones as concrete stand-ins) and with every argument untyped."""
    b = load_builtins().with_extensions(EXTENSIONS)
    names = sorted(b.function_names)
    cases: list[Case] = []
    for name in names:
        for sig in b.functions(name):
            if sig.kind == "p" or len(sig.arg_types) > 5 or sig.hypothetical:
                continue
            types = list(sig.arg_types)
            if sig.variadic:
                last = types[-1]
                types[-1] = (
                    last
                    if last.name == "any" and not last.is_array
                    else (last.element if last.is_array else PgType("anyelement"))
                )
            if any(t.name in _NOT_SPELLABLE and not t.is_array for t in types):
                continue
            spelled = tuple(_STAND_INS.get(t.name, t.name) + ("[]" if t.is_array else "") for t in types)
            if any(b.type_named(x) is None for x in spelled):
                continue
            within = len(types) - sig.n_direct_args if sig.ordered_set else 0
            over = sig.kind == "w"
            cases.append(Call(name, spelled, within_group=within, over=over))
            if types:
                cases.append(Call(name, ("?",) * len(types), within_group=within, over=over))
    # Names the grammar reserves (`numeric(x)`, `extract(a, b)`, `position(a, b)`) are syntax
    # errors as plain calls: PostgreSQL's parser decides which calls are expressible.
    env = schema_env()
    return sorted((c for c in set(cases) if parses(case_sql(c, env)[0])), key=repr)


def _extension_operators() -> list[Case]:
    """Every operator symbol the test's extensions add, over their types and the core's."""
    b = load_builtins().with_extensions(EXTENSIONS)
    symbols = sorted({op.name for ext in EXTENSIONS if (e := b.extension(ext)) for op in e.operators})
    types = ["citext", "hstore", "ltree", "lquery", "ltree[]", "int4[]", "text", "text[]", "int4", "?"]
    cases = [Op(s, a, c) for s in symbols for a, c in itertools.product(types, types)]
    cases += [Op(s, None, t) for s in symbols for t in types]
    env = schema_env()  # `% x`, `< x` are syntax errors: the grammar decides which prefix uses exist
    return [c for c in cases if c.left is not None or parses(case_sql(c, env)[0])]


def _disagreements(cases: list[Case], pg: psycopg.Connection) -> tuple[int, list[str]]:
    b = schema_env()
    oracle = Oracle(pg)
    wrong = []
    for case in cases:
        sql, _ = case_sql(case, b)
        expected = oracle.ask(sql)
        got = predict(case, b)
        if expected != got:
            wrong.append(f"{sql}: PostgreSQL {expected}, resolver {got}")
    return len(cases), wrong


def test_curated_calls_and_operators_agree_with_postgresql(pg: psycopg.Connection) -> None:
    total, wrong = _disagreements(CURATED + OPERATORS_CURATED + SCHEMA_CASES, pg)
    assert total >= 250
    assert not wrong, f"{len(wrong)}/{total} disagree:\n" + "\n".join(wrong)


@pytest.mark.slow
def test_generated_cross_products_agree_with_postgresql(pg: psycopg.Connection) -> None:
    total, wrong = _disagreements(_generated(), pg)
    print(f"resolver agrees with PostgreSQL on {total - len(wrong)}/{total} generated cases")
    assert not wrong, f"{len(wrong)}/{total} disagree:\n" + "\n".join(wrong)


@pytest.mark.slow
def test_extension_operators_agree_with_postgresql(pg: psycopg.Connection) -> None:
    total, wrong = _disagreements(_extension_operators(), pg)
    print(f"resolver agrees with PostgreSQL on {total - len(wrong)}/{total} extension operator expressions")
    assert not wrong, f"{len(wrong)}/{total} disagree:\n" + "\n".join(wrong)


@pytest.mark.slow
def test_every_builtin_signature_agrees_with_postgresql(pg: psycopg.Connection) -> None:
    total, wrong = _disagreements(_every_signature(), pg)
    print(f"resolver agrees with PostgreSQL on {total - len(wrong)}/{total} calls of built-in signatures")
    assert not wrong, f"{len(wrong)}/{total} disagree:\n" + "\n".join(wrong)


def _columns_predicted(case: Call, env: SchemaTypes) -> list[tuple[str, str]] | str:
    _, types = case_sql(case, env)
    try:
        fn = resolve_function(case.name, env.builtins.functions(case.name), types, env=env)
    except ResolveError as exc:
        return exc.sqlstate
    if fn.out_columns:
        return [(n, env.display(t)) for n, t in fn.out_columns]
    if fn.result == PgType("record"):
        return "42601"  # a column definition list is required
    return [(case.name, env.display(fn.result))]


@pytest.mark.slow
def test_table_functions_yield_postgresqls_columns(pg: psycopg.Connection) -> None:
    """`SELECT * FROM f(...)` for every set-returning or OUT-parameter built-in: the columns'
    names and types are the resolution's out_columns (or one column named after f)."""
    env = schema_env()
    names = Oracle(pg).names
    pgconn = pg.pgconn
    checked = 0
    wrong = []
    for case in _every_signature():
        if not isinstance(case, Call) or case.over or case.within_group:
            continue
        sigs = env.builtins.functions(case.name)
        if not any(s.returns_set or s.out_columns for s in sigs) or any(s.kind != "f" for s in sigs):
            continue
        select, _ = case_sql(case, env)
        sql = "SELECT * FROM " + select.removeprefix("SELECT ")
        res = pgconn.prepare(b"", sql.encode())
        if res.status == psycopg.pq.ExecStatus.COMMAND_OK:
            desc = pgconn.describe_prepared(b"")
            fields = [(bytes(desc.fname(i) or b"").decode(), names[desc.ftype(i)]) for i in range(desc.nfields)]
            expected: list[tuple[str, str]] | str = fields
        else:
            state = res.error_field(psycopg.pq.DiagnosticField.SQLSTATE)
            expected = state.decode() if state else "?"
        checked += 1
        got = _columns_predicted(case, env)
        if got != expected:
            wrong.append(f"{sql}: PostgreSQL {expected}, resolver {got}")
    print(f"table functions: {checked - len(wrong)}/{checked} agree on their columns")
    assert checked > 150
    assert not wrong, "\n".join(wrong)


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
