"""PostgreSQL's resolution rules (sql/resolve.py) against PostgreSQL itself.

Every case is a function call or an operator expression over typed values (`NULL::integer`) and
untyped parameters (`$1`, which PostgreSQL resolves like an unknown literal). PostgreSQL
prepares the statement and describes it (result and parameter types) or rejects it (SQLSTATE);
the resolver must agree on the result type, on the type each parameter is coerced to, and on
failure: SQLSTATE, message and hint (42883 no such function/operator, 42725 not unique, 42804 /
42P18 undeterminable type).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import pglast
import psycopg
import pytest
from pg import Cluster, scratch_database
from pydb.plugin.sql.builtins import SchemaTypes, TypeInfo, load_builtins
from pydb.plugin.sql.resolve import (
    DIALECT_HINTS,
    ResolveError,
    can_coerce,
    common_type,
    resolve_function,
    resolve_operator,
)
from pydb.plugin.sql.signatures import FunctionSig
from pydb.plugin.sql.types import PgType

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


def _env() -> SchemaTypes:
    return SchemaTypes(load_builtins().with_extensions(EXTENSIONS), SCHEMA_TYPES.values())


def _value_sql(spelling: str, params: list[str], b: SchemaTypes) -> tuple[str, PgType]:
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


def _sql(case: Case, b: SchemaTypes) -> tuple[str, list[PgType]]:
    params: list[str] = []
    values = []
    types = []
    if isinstance(case, Op):
        operands = [case.left, case.right] if case.left is not None else [case.right]
        for spelling in operands:
            sql, t = _value_sql(spelling, params, b)
            values.append(sql)
            types.append(t)
        if case.left is None:
            return f"SELECT {case.symbol} {values[0]}", types
        return f"SELECT {values[0]} {case.symbol} {values[1]}", types
    for spelling in case.args:
        sql, t = _value_sql(spelling, params, b)
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


def _predict(case: Case, b: SchemaTypes) -> Outcome:
    _, types = _sql(case, b)
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


@pytest.fixture(scope="module")
def pg(pg_server: tuple[str, Cluster | None]) -> Iterator[psycopg.Connection]:
    with scratch_database(pg_server[0], schema=None) as url, psycopg.connect(url, autocommit=True) as conn:
        for ext in EXTENSIONS:
            conn.execute(f'CREATE EXTENSION IF NOT EXISTS "{ext}"')
        conn.execute("CREATE SEQUENCE s")
        conn.execute(SCHEMA_DDL)
        yield conn


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
    env = _env()
    return sorted((c for c in set(cases) if _parses(_sql(c, env)[0])), key=repr)


def _parses(sql: str) -> bool:
    try:
        pglast.parse_sql(sql)
    except pglast.parser.ParseError:
        return False
    return True


def _extension_operators() -> list[Case]:
    """Every operator symbol the test's extensions add, over their types and the core's."""
    b = load_builtins().with_extensions(EXTENSIONS)
    symbols = sorted({op.name for ext in EXTENSIONS if (e := b.extension(ext)) for op in e.operators})
    types = ["citext", "hstore", "ltree", "lquery", "ltree[]", "int4[]", "text", "text[]", "int4", "?"]
    cases = [Op(s, a, c) for s in symbols for a, c in itertools.product(types, types)]
    cases += [Op(s, None, t) for s in symbols for t in types]
    env = _env()  # `% x`, `< x` are syntax errors: the grammar decides which prefix uses exist
    return [c for c in cases if c.left is not None or _parses(_sql(c, env)[0])]


def _disagreements(cases: list[Case], pg: psycopg.Connection) -> tuple[int, list[str]]:
    b = _env()
    oracle = Oracle(pg)
    wrong = []
    for case in cases:
        sql, _ = _sql(case, b)
        expected = oracle.ask(sql)
        got = _predict(case, b)
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
    _, types = _sql(case, env)
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
    env = _env()
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
        select, _ = _sql(case, env)
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
    env = _env()
    declared = _schema_functions()
    oracle = Oracle(pg)
    wrong = []
    try:
        for case in SCHEMA_FUNCTION_CASES:
            sql, types = _sql(case, env)
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
    env = _env()
    values, pg_types = zip(*(_value_sql(t, [], env) for t in types), strict=True)
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
]


@pytest.mark.parametrize(("source", "target"), COERCIONS)
def test_can_coerce_agrees_with_postgresql(pg: psycopg.Connection, source: str, target: str) -> None:
    """Implicit: a function taking `target` called with `source`; assignment: INSERT into a
    `target` column; explicit: CAST."""
    b = load_builtins().with_extensions(EXTENSIONS)
    s, t = b.type_named(source), b.type_named(target)
    assert s is not None and t is not None
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
