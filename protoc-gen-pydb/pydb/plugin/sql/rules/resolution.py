"""PostgreSQL's type-resolution rules (the docs' "Type Conversion" chapter), offline.

A port of parse_func.c (func_get_detail, func_select_candidate), parse_oper.c
(oper_select_candidate) and parse_coerce.c (can_coerce_type, find_coercion_pathway,
check/enforce_generic_type_consistency, select_common_type) over `PgType`s.

Argument types: `PgType("unknown")` (or `types.NULL`) stands for an untyped string literal, NULL
or an untyped `@param`: PostgreSQL resolves an untyped parameter like an unknown literal.

Public API:
    resolve_function(name, candidates, args, *, arg_names=None, variadic_call=False, params=None,
                     known_names=(), env=None) -> FunctionResolution     raises ResolveError (42883 / 42725 / 42804 / 42704)
    resolve_operator(symbol, candidates, left, right, *, env=None) -> OperatorResolution
                                         left=None for a prefix operator; raises ResolveError
    resolve_scalar_array_op(symbol, candidates, left, right, *, env=None) -> OperatorResolution
                                         `left = ANY (right)`: right is the array (maybe unknown)
    resolve_in_list(symbol, candidates, left, items, *, has_columns=None, env=None)
        -> (left type, item types)       `left IN (items...)`, e.g. to type `x IN (@a, @b)`
    can_coerce(source, target, context="i", *, env=None) -> bool     context: "i" / "a" / "e"
    common_type(types, construct="CASE", *, env=None) -> PgType       raises ResolveError (42804 / 42846)
    signature_text(sig, env=None) -> str     "random()", "percentile_cont(double precision) WITHIN GROUP (...)"
    display(t, env=None) -> str              PostgreSQL's type name in messages: "integer"
    require_ordering(t, *, env=None) / require_equality(t, *, env=None)   ORDER BY / GROUP BY,
        DISTINCT, UNION need them: ResolveError 42883 "could not identify an ordering operator
        for type json" (the data asks PostgreSQL about every built-in type and its array)
    ResolveError(sqlstate, message, hint, note)   note: ours (the candidates, "did you mean COALESCE?")
`candidates` are every function (operator) visible under the name: `Builtins.functions(name)`
first (pg_catalog leads the search path), then the schema's own. `env` is anything with
`type_info(PgType) -> TypeInfo | None` and `cast(src, dst) -> CastSig | None`: a
`builtins.Builtins`, or `builtins.SchemaTypes` to add the schema's domains, enums, composites
and casts; it defaults to the core built-ins.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from ..catalog.identifiers import closest
from ..catalog.signatures import FunctionSig, OperatorSig
from ..catalog.types import PgType
from .candidates import select_candidate
from .coercion import (
    ANY,
    POLYMORPHIC,
    UNKNOWN,
    Bindings,
    Context,
    ResolveError,
    TypeEnv,
    array_type,
    base_type,
    can_coerce,
    can_coerce_all,
    common_type,
    display,
    element_type,
    generic_bindings,
    is_complex,
    is_unknown,
    pathway,
    require_equality,
    require_ordering,
    select_common,
    substitute,
    type_env,
)

__all__ = [
    "DIALECT_HINTS",
    "OPERATOR_HINTS",
    "Context",
    "FunctionKindName",
    "FunctionResolution",
    "OperatorResolution",
    "ResolveError",
    "TypeEnv",
    "can_coerce",
    "common_type",
    "display",
    "require_equality",
    "require_ordering",
    "resolve_function",
    "resolve_in_list",
    "resolve_operator",
    "resolve_scalar_array_op",
    "signature_text",
]

FunctionKindName = Literal["function", "aggregate", "window", "procedure", "ordered_set", "hypothetical", "cast"]

# Other dialects' function names with an obvious PostgreSQL spelling.
DIALECT_HINTS = {
    "ifnull": "did you mean COALESCE?",
    "nvl": "did you mean COALESCE?",
    "isnull": "did you mean COALESCE?",
    "nvl2": "use CASE WHEN a IS NOT NULL THEN b ELSE c END",
    "iif": "use CASE WHEN ... THEN ... ELSE ... END",
    "len": "did you mean length()?",
    "getdate": "did you mean now()?",
    "sysdate": "did you mean now()?",
    "curdate": "did you mean current_date?",
    "curtime": "did you mean current_time?",
    "getutcdate": "did you mean now() AT TIME ZONE 'UTC'?",
    "dateadd": "add an interval instead: ts + interval '1 day'",
    "date_add": "add an interval instead: ts + interval '1 day'",
    "datediff": "subtract instead: a - b (or age(a, b))",
    "datepart": "did you mean date_part() or EXTRACT(field FROM ts)?",
    "ucase": "did you mean upper()?",
    "lcase": "did you mean lower()?",
    "instr": "did you mean strpos()?",
    "charindex": "did you mean strpos()?",
    "locate": "did you mean strpos()?",
    "rand": "did you mean random()?",
    "group_concat": "did you mean string_agg()?",
    "listagg": "did you mean string_agg()?",
    "truncate": "did you mean trunc()?",
    "mid": "did you mean substring()?",
    "uuid": "did you mean gen_random_uuid()?",
    "newid": "did you mean gen_random_uuid()?",
    "date_format": "did you mean to_char()?",
    "str_to_date": "did you mean to_date() or to_timestamp()?",
    "unix_timestamp": "did you mean extract(epoch FROM ts)?",
    "from_unixtime": "did you mean to_timestamp()?",
    "json_extract": "use the -> / ->> operators or jsonb_extract_path()",
    "last_insert_id": "use RETURNING (or lastval())",
    "substring_index": "did you mean split_part()?",
    "string_split": "did you mean string_to_array() or regexp_split_to_table()?",
}
OPERATOR_HINTS = {"==": "did you mean =?", "===": "did you mean =?", "!==": "did you mean <>?"}

_NO_FUNCTION_HINT = "No function matches the given name and argument types. You might need to add explicit type casts."
_NOT_UNIQUE_FUNCTION_HINT = "Could not choose a best candidate function. You might need to add explicit type casts."
_NO_OPERATOR_HINT = "No operator matches the given name and argument types. You might need to add explicit type casts."
_NO_PREFIX_OPERATOR_HINT = (
    "No operator matches the given name and argument type. You might need to add an explicit type cast."
)
_NOT_UNIQUE_OPERATOR_HINT = "Could not choose a best candidate operator. You might need to add explicit type casts."


@dataclass(frozen=True)
class FunctionResolution:
    sig: FunctionSig
    #: The concrete result type (polymorphic types substituted; `record` for OUT/TABLE functions).
    result: PgType
    #: What each actual argument is coerced to (unknown literals / @params get their type here;
    #: an argument to `"any"` keeps its own type, unknown included).
    arg_types: tuple[PgType, ...]
    #: OUT / TABLE columns with polymorphic types substituted: `SELECT * FROM f(...)`.
    out_columns: tuple[tuple[str, PgType], ...]
    returns_set: bool
    #: "cast": `typename(x)` read as a coercion (`text(1)`, `date('2020-01-01')`), as PostgreSQL does
    #: when no function of that name takes the argument's exact type; `sig` is then synthetic.
    kind: FunctionKindName
    #: The call matched the VARIADIC parameter with a list of separate arguments.
    variadic_expanded: bool


@dataclass(frozen=True)
class OperatorResolution:
    sig: OperatorSig
    result: PgType
    left: PgType | None  # what the left operand is coerced to (None: prefix operator)
    right: PgType


# ---------------------------------------------------------------------------------------------
# Functions (func_get_detail)


@dataclass(frozen=True)
class _Candidate:
    sig: FunctionSig
    types: tuple[PgType, ...]  # declared types in call order
    variadic_expanded: bool
    uses_defaults: bool


def _variadic_element(sig: FunctionSig) -> PgType:
    last = sig.arg_types[-1]
    if last.name == ANY and not last.is_array:
        return last
    if last.name == "anyarray" and not last.is_array:
        return PgType("anyelement")
    if last.name == "anycompatiblearray" and not last.is_array:
        return PgType("anycompatible")
    return last.element


def _candidate(
    sig: FunctionSig, nargs: int, arg_names: Sequence[str | None] | None, variadic_call: bool
) -> _Candidate | None:
    pronargs = len(sig.arg_types)
    if arg_names is not None and any(n is not None for n in arg_names):
        # named notation: positional arguments first, then each name maps to a parameter
        positional = sum(1 for n in arg_names if n is None)
        if nargs > pronargs:
            return None
        order = list(range(positional))
        for name in arg_names[positional:]:
            if name is None or name not in sig.arg_names[positional:]:
                return None
            position = sig.arg_names.index(name, positional)
            if position >= pronargs:  # a malformed signature: more names than arguments
                return None
            if position in order:
                return None
            order.append(position)
        missing = set(range(pronargs)) - set(order)
        if any(p < pronargs - sig.n_defaults for p in missing):
            return None
        return _Candidate(sig, tuple(sig.arg_types[p] for p in order), False, bool(missing))
    if sig.variadic and not variadic_call and pronargs <= nargs:
        element = _variadic_element(sig)
        return _Candidate(sig, sig.arg_types[:-1] + (element,) * (nargs - pronargs + 1), True, False)
    if pronargs > nargs:
        if nargs + sig.n_defaults < pronargs:
            return None
        return _Candidate(sig, sig.arg_types[:nargs], False, True)
    if pronargs != nargs:
        return None
    return _Candidate(sig, sig.arg_types, False, False)


def signature_text(sig: FunctionSig, env: TypeEnv | None = None) -> str:
    """`name(type, ...)` with PostgreSQL's display names, VARIADIC marked, as in \\df."""
    e = type_env(env)
    args = [display(t, e) for t in sig.arg_types]
    if sig.variadic and args:
        args[-1] = f"VARIADIC {args[-1]}"
    if sig.ordered_set and sig.n_direct_args <= len(args):
        direct, ordered = args[: sig.n_direct_args], args[sig.n_direct_args :]
        return f"{sig.name}({', '.join(direct)}) WITHIN GROUP (ORDER BY {', '.join(ordered)})"
    return f"{sig.name}({', '.join(args)})"


def _call_text(name: str, args: Sequence[PgType], arg_names: Sequence[str | None] | None, env: TypeEnv) -> str:
    parts = []
    for k, t in enumerate(args):
        label = arg_names[k] if arg_names is not None and k < len(arg_names) else None
        parts.append(f"{label} => {display(t, env)}" if label else display(t, env))
    return f"{name}({', '.join(parts)})"


def _candidates_note(sigs: Sequence[FunctionSig], env: TypeEnv) -> str | None:
    if not sigs:
        return None
    shown = sorted({signature_text(s, env) for s in sigs})
    more = f", and {len(shown) - 8} more" if len(shown) > 8 else ""
    return "candidates: " + ", ".join(shown[:8]) + more


def _kind(sig: FunctionSig) -> FunctionKindName:
    if sig.hypothetical:
        return "hypothetical"
    if sig.ordered_set:
        return "ordered_set"
    return {"f": "function", "a": "aggregate", "w": "window", "p": "procedure"}[sig.kind]  # type: ignore[return-value]


def resolve_function(
    name: str,
    candidates: Sequence[FunctionSig],
    args: Sequence[PgType],
    *,
    arg_names: Sequence[str | None] | None = None,
    variadic_call: bool = False,
    params: Sequence[bool] | None = None,
    known_names: Collection[str] = (),
    env: TypeEnv | None = None,
    schema: str | None = None,
) -> FunctionResolution:
    """Choose among `candidates` (every function visible under `name`, built-ins first as
    pg_catalog leads the search path) for a call with argument types `args`, as PostgreSQL does:
    candidates by argument count (defaults, VARIADIC expansion, named arguments `arg_names[k]`
    (None = positional)), an exact match, else those accepting the arguments by implicit
    coercion, then func_select_candidate's heuristics; the result type with polymorphic types
    substituted. `variadic_call`: the call spells `VARIADIC arr` for the last argument.
    `params[k]`: argument k is an untyped parameter rather than a literal (PostgreSQL reads
    `typename('literal')` as a cast, `typename($1)` only when the cast needs no function).
    `known_names`: every function name visible (e.g. `Builtins.function_names`), to suggest a
    close spelling when nothing is named `name` (`to_tsvectr` → "did you mean to_tsvector?").
    `schema`: the call's qualifier as written, which PostgreSQL's messages show.
    Raises ResolveError: 42883 no such function, 42725 not unique, 42804 polymorphic unknown."""
    e = type_env(env)
    nargs = len(args)
    shown = f"{schema}.{name}" if schema else name
    # FuncnameGetCandidates: one entry per effective signature; same signature twice → the
    # earlier in the search path, a non-expanded one over a variadic expansion.
    cands: list[_Candidate] = []
    ambiguous: set[tuple[PgType, ...]] = set()
    for sig in candidates:
        cand = _candidate(sig, nargs, arg_names, variadic_call)
        if cand is None:
            continue
        same = next((i for i, c in enumerate(cands) if c.types == cand.types), None)
        if same is None:
            cands.append(cand)
        elif cands[same].sig.schema == cand.sig.schema:
            if cands[same].variadic_expanded and not cand.variadic_expanded:
                cands[same] = cand
            elif cands[same].variadic_expanded == cand.variadic_expanded:
                # f(int) beside f(int, int DEFAULT 1), or f(a int, b text) beside f(b text, a int)
                ambiguous.add(cand.types)

    def not_found() -> ResolveError:
        if candidates:
            note = _candidates_note(candidates, e)
        else:
            close = closest(name.lower(), sorted(known_names), cutoff=0.8)
            note = DIALECT_HINTS.get(name.lower()) or (f"did you mean {close}()?" if close else None)
        return ResolveError(
            "42883", f"function {_call_text(shown, args, arg_names, e)} does not exist", _NO_FUNCTION_HINT, note
        )

    def not_unique() -> ResolveError:
        return ResolveError(
            "42725",
            f"function {_call_text(shown, args, arg_names, e)} is not unique",
            _NOT_UNIQUE_FUNCTION_HINT,
            _candidates_note([c.sig for c in cands], e),
        )

    chosen = next((c for c in cands if c.types == tuple(args)), None)
    if chosen is None and nargs == 1 and not (arg_names and any(arg_names)):
        coercion = _type_coercion(name, args[0], bool(params and params[0]), e)
        if coercion is not None:
            return coercion
    if chosen is None:
        matching = [c for c in cands if can_coerce_all(args, c.types, "i", e)]
        if not matching:
            raise not_found()
        if len(matching) == 1:
            chosen = matching[0]
        else:
            best = select_candidate(args, [c.types for c in matching], e)
            if best is None:
                raise not_unique()
            chosen = matching[best]
    if chosen.types in ambiguous:
        raise not_unique()
    sig = chosen.sig
    declared = list(chosen.types)
    bindings = generic_bindings(args, declared, e) or Bindings()
    needs = [*declared, sig.return_type, *(t for _, t in sig.out_columns)]
    if any(t.name in POLYMORPHIC and not t.is_array for t in needs):
        coerced = tuple(substitute(d, bindings, e) if d.name != ANY else a for d, a in zip(declared, args, strict=True))
        result = substitute(sig.return_type, bindings, e)
        outs = tuple((n, substitute(t, bindings, e)) for n, t in sig.out_columns)
    else:
        coerced = tuple(a if d.name == ANY and not d.is_array else d for d, a in zip(declared, args, strict=True))
        result, outs = sig.return_type, sig.out_columns
    return FunctionResolution(sig, result, coerced, outs, sig.returns_set, _kind(sig), chosen.variadic_expanded)


def _type_coercion(name: str, arg: PgType, is_param: bool, env: TypeEnv) -> FunctionResolution | None:
    """func_get_detail's "function call that is really a type coercion": `text(x)`, `int8(x)`."""
    info = env.type_info(PgType(name))
    if info is None or info.typtype in ("p", "c"):
        return None
    target = info.type
    if not (is_unknown(arg) and not is_param):
        path = pathway(arg, target, "e", env)
        if path == "io" and is_complex(arg, env) and info.category == "S":
            return None
        if path not in ("relabel", "io"):
            return None
    sig = FunctionSig("pg_catalog", name, (target,), ("",), target, volatility="i", strict=True)
    return FunctionResolution(sig, target, (target,), (), False, "cast", False)


# ---------------------------------------------------------------------------------------------
# Operators (oper / left_oper)


def _operator_text(symbol: str, left: PgType | None, right: PgType, env: TypeEnv) -> str:
    return (
        f"{display(left, env)} {symbol} {display(right, env)}"
        if left is not None
        else f"{symbol} {display(right, env)}"
    )


def resolve_operator(
    symbol: str,
    candidates: Sequence[OperatorSig],
    left: PgType | None,
    right: PgType,
    *,
    env: TypeEnv | None = None,
) -> OperatorResolution:
    """Choose among `candidates` (every operator visible as `symbol`) for `left symbol right`
    (`left=None`: prefix operator), as PostgreSQL's oper(): an exact match (an unknown operand
    assumed to have the other's type, then that type's domain base), else implicit coercion and
    func_select_candidate. Raises ResolveError 42883 "operator does not exist: integer == integer"
    (note: "did you mean =?" for other dialects' spellings) or 42725 "operator is not unique".
    NULLIF(a, b) is `a = b` typed as what `a` is coerced to (`resolution.left`): NULLIF(1, 2.5)
    is numeric."""
    e = type_env(env)
    if symbol == "!=":  # PostgreSQL's lexer reads != as <>
        symbol = "<>"
    sigs = [s for s in candidates if (s.left is None) == (left is None)]
    l_t, r_t = left, right
    if left is not None:
        if is_unknown(left) and not is_unknown(right):
            l_t = right
        elif is_unknown(right) and not is_unknown(left):
            r_t = left
    exact = next((s for s in sigs if s.left == l_t and s.right == r_t), None)
    if exact is None and left is not None and l_t == r_t and (is_unknown(left) != is_unknown(right)):
        assert l_t is not None
        base = base_type(l_t, e)
        if base != l_t:
            exact = next((s for s in sigs if s.left == base and s.right == base), None)
    if exact is None:
        inputs = [left, right] if left is not None else [right]
        declared = [[s.left, s.right] if s.left is not None else [s.right] for s in sigs]
        matching = [i for i, d in enumerate(declared) if can_coerce_all(inputs, d, "i", e)]
        if not matching:
            note = OPERATOR_HINTS.get(symbol) if not sigs else None
            raise ResolveError(
                "42883",
                f"operator does not exist: {_operator_text(symbol, left, right, e)}",
                _NO_OPERATOR_HINT if left is not None else _NO_PREFIX_OPERATOR_HINT,
                note,
            )
        if len(matching) == 1:
            exact = sigs[matching[0]]
        else:
            best = select_candidate(inputs, [tuple(declared[i]) for i in matching], e)
            if best is None:
                raise ResolveError(
                    "42725",
                    f"operator is not unique: {_operator_text(symbol, left, right, e)}",
                    _NOT_UNIQUE_OPERATOR_HINT,
                )
            exact = sigs[matching[best]]
    sig = exact
    declared_args = [sig.left, sig.right] if sig.left is not None else [sig.right]
    actual = [left, right] if left is not None else [right]
    bindings = generic_bindings(actual, declared_args, e) or Bindings()
    result = substitute(sig.result, bindings, e)
    coerced = [substitute(d, bindings, e) for d in declared_args]
    return OperatorResolution(sig, result, coerced[0] if left is not None else None, coerced[-1])


def resolve_scalar_array_op(
    symbol: str,
    candidates: Sequence[OperatorSig],
    left: PgType,
    right: PgType,
    *,
    env: TypeEnv | None = None,
) -> OperatorResolution:
    """`left symbol ANY (right)` / `ALL (right)` (make_scalar_array_op): the operator is resolved
    against the element type of the array `right` (an unknown `right`, e.g. an untyped @param,
    stays unknown and becomes the array of the operator's right type). The resolution's `right`
    is the array type the right operand is coerced to; its `result` is boolean. Raises
    ResolveError 42809 when `right` is not an array or the operator does not yield boolean."""
    e = type_env(env)
    if is_unknown(right):
        element = UNKNOWN
    else:
        found = element_type(base_type(right, e))
        if found is None:
            raise ResolveError("42809", "op ANY/ALL (array) requires array on right side")
        element = found
    op = resolve_operator(symbol, candidates, left, element, env=e)
    if op.result != PgType("bool"):
        raise ResolveError("42809", "op ANY/ALL (array) requires operator to yield boolean")
    # enforce_generic_type_consistency gives an unknown operand its resolved type; a known one
    # matched to a polymorphic parameter keeps the array type it has
    declared = op.right if is_unknown(element) else op.sig.right
    if declared.name in POLYMORPHIC and not declared.is_array:
        array = right
    else:
        found_array = array_type(declared)
        if found_array is None:
            raise ResolveError("42704", f"could not find array type for data type {display(declared, e)}")
        array = found_array
    return OperatorResolution(op.sig, op.result, op.left, array)


def resolve_in_list(
    symbol: str,
    candidates: Sequence[OperatorSig],
    left: PgType,
    items: Sequence[PgType],
    *,
    has_columns: Sequence[bool] | None = None,
    env: TypeEnv | None = None,
) -> tuple[PgType, tuple[PgType, ...]]:
    """`left IN (items...)` (symbol "=") / `NOT IN` ("<>"), as transformAExprIn: the items
    that reference no column (`has_columns[k]` False: literals, @params), when more than one,
    are unified with `left` by select_common_type and compared as `= ANY (ARRAY[...])`; every
    other item is its own `left = item`. Returns (what `left` is coerced to in the ANY
    comparison, or `left` itself; what each item is coerced to). Raises ResolveError as
    resolve_operator does."""
    e = type_env(env)
    columns = list(has_columns) if has_columns is not None else [False] * len(items)
    plain = [k for k, t in enumerate(items) if not columns[k]]
    coerced: list[PgType | None] = [None] * len(items)
    left_type = left
    if len(plain) > 1:
        inputs = [left, *(items[k] for k in plain)]
        common = select_common(inputs, None, e)
        if common is not None and not all(can_coerce_all((t,), (common,), "i", e) for t in inputs):
            common = None
        array = array_type(common) if common is not None and common.name != "record" else None
        if common is not None and array is not None:
            op = resolve_scalar_array_op(symbol, candidates, left, array, env=e)
            left_type = op.left or left
            for k in plain:
                coerced[k] = common
    for k, t in enumerate(items):
        if coerced[k] is None:
            op = resolve_operator(symbol, candidates, left, t, env=e)
            coerced[k] = op.right
    return left_type, tuple(c for c in coerced if c is not None)
