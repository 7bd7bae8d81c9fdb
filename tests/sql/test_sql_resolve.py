"""PostgreSQL's function and operator resolution (sql/rules/resolution.py) against PostgreSQL itself:
curated and generated calls and operator expressions, every built-in signature, the operators of
contrib extensions and table functions' columns. Schema-declared functions, `= ANY`, `IN`, NULLIF
and resolution's messages are in test_sql_resolve_forms.py. The harness is
tests/support/sql_oracle.py."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import psycopg
import pytest
from pydb.plugin.sql.catalog.builtins import SchemaTypes, load_builtins
from pydb.plugin.sql.catalog.types import PgType
from pydb.plugin.sql.rules.resolution import (
    ResolveError,
    resolve_function,
)
from support.pg import Cluster
from support.sql_oracle import (
    EXTENSIONS,
    Call,
    Case,
    Op,
    Oracle,
    case_sql,
    oracle_database,
    parses,
    predict,
    schema_env,
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
