"""How PostgreSQL names a function sqlglot parsed: sqlglot models some functions as nodes of
its own (`exp.CurrentTimestamp`, `exp.ArrayAgg`, ...) whose names are not PostgreSQL's."""

from __future__ import annotations

from sqlglot import exp

_FUNC_ALIASES = {
    "currenttimestamp": "now",
    "arrayagg": "array_agg",
    "groupconcat": "string_agg",
    "arraysize": "array_length",
    "logicaland": "bool_and",
    "logicalor": "bool_or",
    "rownumber": "row_number",
    "denserank": "dense_rank",
    "stddev": "stddev",
    "jsonbobjectagg": "jsonb_object_agg",
    "jsonobject": "json_build_object",
    "tojson": "to_jsonb",
    "lower": "lower",
    "upper": "upper",
    "trim": "trim",
    "substring": "substring",
    "datetrunc": "date_trunc",
    "timestamptrunc": "date_trunc",
    # sqlglot's names for Postgres functions it models.
    "timetostr": "to_char",
    "strposition": "strpos",
    "arrayconcat": "array_cat",
    "explode": "unnest",
    "unixtotime": "to_timestamp",
    "pad": "lpad",
    "jsonarrayagg": "json_agg",
    "sha2digest": "sha256",
    "rand": "random",
    "strtodate": "to_date",
    "explodinggenerateseries": "generate_series",
    "uuid": "gen_random_uuid",
    "pow": "power",
    "length": "length",
}


def function_name(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    key = type(node).__name__.lower()
    return _FUNC_ALIASES.get(key, node.sql_name().lower())
