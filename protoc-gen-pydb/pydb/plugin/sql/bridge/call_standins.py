"""How PostgreSQL names a function sqlglot parsed: sqlglot models some functions as nodes of
its own (`exp.CurrentTimestamp`, `exp.ArrayAgg`, ...) whose names are not PostgreSQL's."""

from __future__ import annotations

from collections.abc import Callable

from pglast import ast
from sqlglot import exp

from ..catalog.types import TIMESTAMPTZ, PgType
from ..syntax.pgtree import nodes_of

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


#: The same keywords by name, for where sqlglot reads one as a column or a table (`SELECT user`,
#: `FROM current_date`): reserved words in PostgreSQL, so unquoted they are never a name.
SQL_VALUE_KEYWORDS: dict[str, PgType] = {
    "current_date": PgType("date"),
    "current_time": PgType("timetz"),
    "current_timestamp": TIMESTAMPTZ,
    "localtime": PgType("time"),
    "localtimestamp": PgType("timestamp"),
    "current_role": PgType("name"),
    "current_user": PgType("name"),
    "session_user": PgType("name"),
    "user": PgType("name"),
    "current_catalog": PgType("name"),
    "current_schema": PgType("name"),  # NULL when no schema of the search_path exists
}


def function_name(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    key = type(node).__name__.lower()
    return _FUNC_ALIASES.get(key, node.sql_name().lower())


def function_calls(tree: ast.Node | None, original_offset: Callable[[int], int]) -> dict[int, ast.FuncCall]:
    """Every function call in PostgreSQL's parse tree, by where its name starts in the text:
    the call as PostgreSQL reads it (its name as written, argument count, named arguments,
    VARIADIC, OVER), whatever node sqlglot made of it (`div(a, b)` becomes a cast)."""
    calls: dict[int, ast.FuncCall] = {}
    for call in nodes_of(tree, ast.FuncCall):
        if call.location is not None and call.location >= 0:
            calls[original_offset(call.location)] = call
    return calls


#: Function names sqlglot reads as SQL/JSON constructs of PostgreSQL 16 and 17 (JSON_OBJECT(),
#: JSON_VALUE(...)), which in PostgreSQL 15 are plain calls (json_object(text[]) exists, the
#: others do not).
_SQLGLOT_CONSTRUCTS = frozenset(
    {"json_object", "json_array", "json_objectagg", "json_arrayagg", "json_value", "json_query", "json_exists"}
    | {"json_scalar", "json_serialize", "json_table"}
)


def with_call_standins(text: str, calls: dict[int, ast.FuncCall]) -> str:
    """`text` with the first letter of each such call's name changed (`zson_object`): sqlglot
    then reads a plain call, typed by the name PostgreSQL's tree holds (`calls`, by offset)."""
    chars = list(text)
    for offset, call in calls.items():
        names = [str(part.sval) for part in call.funcname or () if isinstance(part, ast.String)]
        if (
            len(names) == 1
            and names[0] in _SQLGLOT_CONSTRUCTS
            and text[offset : offset + len(names[0])].lower() == names[0]
        ):
            chars[offset] = "z"
    return "".join(chars)
