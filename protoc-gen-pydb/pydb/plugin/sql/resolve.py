"""PostgreSQL's type-resolution rules (the docs' "Type Conversion" chapter), offline.

A port of parse_func.c (func_get_detail, func_select_candidate), parse_oper.c
(oper_select_candidate) and parse_coerce.c (can_coerce_type, find_coercion_pathway,
check/enforce_generic_type_consistency, select_common_type) over `PgType`s.

Argument types: `PgType("unknown")` (or `types.NULL`) stands for an untyped string literal, NULL
or an untyped `@param`: PostgreSQL resolves an untyped parameter like an unknown literal.

Public API:
    resolve_function(name, candidates, args, *, arg_names=None, variadic_call=False, params=None,
                     env=None) -> FunctionResolution     raises ResolveError (42883 / 42725 / 42804 / 42704)
    resolve_operator(symbol, candidates, left, right, *, env=None) -> OperatorResolution
                                         left=None for a prefix operator; raises ResolveError
    can_coerce(source, target, context="i", *, env=None) -> bool     context: "i" / "a" / "e"
    common_type(types, construct="CASE", *, env=None) -> PgType       raises ResolveError (42804 / 42846)
    signature_text(sig, env=None) -> str     "random()", "percentile_cont(double precision) WITHIN GROUP (...)"
    display(t, env=None) -> str              PostgreSQL's type name in messages: "integer"
    ResolveError(sqlstate, message, hint, note)   note: ours (the candidates, "did you mean COALESCE?")
`candidates` are every function (operator) visible under the name: `Builtins.functions(name)`
first (pg_catalog leads the search path), then the schema's own. `env` is anything with
`type_info(PgType) -> TypeInfo | None` and `cast(src, dst) -> CastSig | None`: a
`builtins.Builtins`, or `builtins.SchemaTypes` to add the schema's domains, enums, composites
and casts; it defaults to the core built-ins.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from .builtins import TypeInfo, load_builtins
from .signatures import CastSig, FunctionSig, OperatorSig
from .types import PgType

Context = Literal["i", "a", "e"]  # implicit < assignment < explicit, as pg_cast.castcontext
FunctionKindName = Literal["function", "aggregate", "window", "procedure", "ordered_set", "hypothetical", "cast"]
_RANK = {"i": 0, "a": 1, "e": 2}

UNKNOWN = PgType("unknown")
TEXT = PgType("text")
_ANY = "any"
_FAMILY1 = frozenset({"anyelement", "anyarray", "anynonarray", "anyenum", "anyrange", "anymultirange"})
_FAMILY2 = frozenset(
    {"anycompatible", "anycompatiblearray", "anycompatiblenonarray", "anycompatiblerange", "anycompatiblemultirange"}
)
POLYMORPHIC = _FAMILY1 | _FAMILY2

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


class TypeEnv(Protocol):
    def type_info(self, t: PgType) -> TypeInfo | None: ...
    def cast(self, source: PgType, target: PgType) -> CastSig | None: ...


class ResolveError(Exception):
    """PostgreSQL would reject this: its SQLSTATE, message and hint, plus `note` (ours: the
    candidates, or the PostgreSQL spelling of another dialect's name)."""

    def __init__(self, sqlstate: str, message: str, hint: str | None = None, note: str | None = None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.message = message
        self.hint = hint
        self.note = note


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


def _env(env: TypeEnv | None) -> TypeEnv:
    return env if env is not None else load_builtins()


def _is_unknown(t: PgType) -> bool:
    return t.name in ("unknown", "null") and not t.is_array


def _info(t: PgType, env: TypeEnv) -> TypeInfo:
    if _is_unknown(t):
        return TypeInfo(UNKNOWN, "unknown", "X", False, "p")
    info = env.type_info(t)
    if info is None:  # a schema type the environment does not describe: a user-defined base type
        return TypeInfo(t, str(t), "A" if t.is_array else "U", False, "b", element=t.element if t.is_array else None)
    return info


def display(t: PgType, env: TypeEnv | None = None) -> str:
    """PostgreSQL's name for a type in messages: `integer`, `character varying`, `unknown`."""
    return _info(t, _env(env)).display


def _base(t: PgType, env: TypeEnv) -> PgType:
    """getBaseType: a domain's base type (recursively), else the type itself."""
    for _ in range(32):
        info = env.type_info(t)
        if info is None or info.base is None:
            return t
        t = info.base
    return t


def _element(t: PgType) -> PgType | None:
    """get_element_type: the element of a true array type."""
    return t.element if t.is_array else None


def _array_of(t: PgType) -> PgType | None:
    return None if t.is_array else t.array()


def _is_complex(t: PgType, env: TypeEnv) -> bool:
    return _info(t, env).typtype == "c" or (t.name == "record" and not t.is_array)


# ---------------------------------------------------------------------------------------------
# Coercion (parse_coerce.c)


def _pathway(source: PgType, target: PgType, context: Context, env: TypeEnv) -> str:
    """find_coercion_pathway: "relabel", "func", "array", "io" or "" (none)."""
    if source == target:
        return "relabel"
    source, target = _base(source, env), _base(target, env)
    if source == target:
        return "relabel"
    cast = env.cast(source, target)
    if cast is not None:
        if _RANK[context] < _RANK[cast.context]:
            return ""
        return {"b": "relabel", "f": "func", "i": "io"}[cast.method]
    if target.is_array and source.is_array:
        source_elem, target_elem = _element(source), _element(target)
        if source_elem is not None and target_elem is not None and _pathway(source_elem, target_elem, context, env):
            return "array"
    if _RANK[context] >= _RANK["a"] and _info(target, env).category == "S":
        return "io"
    if _RANK[context] >= _RANK["e"] and _info(source, env).category == "S":
        return "io"
    return ""


def can_coerce(source: PgType, target: PgType, context: Context = "i", *, env: TypeEnv | None = None) -> bool:
    """Can a value of `source` be coerced to `target` in `context` ("i" implicit, e.g. a function
    argument; "a" assignment, e.g. INSERT/UPDATE; "e" explicit, a CAST)? PostgreSQL's
    can_coerce_type for one argument: pg_cast, domains ↔ base types, arrays element-wise, I/O
    conversion to string types (assignment) and from them (explicit), unknown to anything."""
    return _can_coerce_all((source,), (target,), context, _env(env))


def _can_coerce_all(inputs: Sequence[PgType], targets: Sequence[PgType], context: Context, env: TypeEnv) -> bool:
    have_generics = False
    for source, target in zip(inputs, targets, strict=True):
        if source == target or target.name == _ANY:
            continue
        if target.name in POLYMORPHIC and not target.is_array:
            have_generics = True
            continue
        if _is_unknown(source):
            continue
        if _pathway(source, target, context, env):
            continue
        if source.name == "record" and not source.is_array and _is_complex(target, env):
            continue
        if target.name == "record" and not target.is_array and _is_complex(source, env):
            continue
        if target == PgType("record", True) and source.is_array and _is_complex(source.element, env):
            continue
        return False
    return not have_generics or _generic_bindings(inputs, targets, env) is not None


# ---------------------------------------------------------------------------------------------
# Polymorphism (check_generic_type_consistency / enforce_generic_type_consistency)


@dataclass
class _Bindings:
    elem: PgType | None = None
    array: PgType | None = None
    range: PgType | None = None
    multirange: PgType | None = None
    compatible: PgType | None = None
    compatible_range: PgType | None = None
    compatible_multirange: PgType | None = None
    family1_unknown: bool = False
    family2_unknown: bool = False


def _generic_bindings(inputs: Sequence[PgType], declared: Sequence[PgType], env: TypeEnv) -> _Bindings | None:
    """The polymorphic type variables the actual arguments bind, or None when inconsistent."""
    b = _Bindings()
    have_nonarray = have_enum = have_compatible_nonarray = False
    compatible_inputs: list[PgType] = []
    for actual, decl in zip(inputs, declared, strict=True):
        d = decl.name if not decl.is_array else ""
        if d not in POLYMORPHIC:
            continue
        if _is_unknown(actual):
            if d in _FAMILY1:
                b.family1_unknown = True
            else:
                b.family2_unknown = True
            continue
        if d in ("anyelement", "anynonarray", "anyenum"):
            have_nonarray |= d == "anynonarray"
            have_enum |= d == "anyenum"
            if b.elem is not None and b.elem != actual:
                return None
            b.elem = actual
        elif d == "anyarray":
            actual = _base(actual, env)
            if b.array is not None and b.array != actual:
                return None
            b.array = actual
        elif d == "anyrange":
            actual = _base(actual, env)
            if b.range is not None and b.range != actual:
                return None
            b.range = actual
        elif d == "anymultirange":
            actual = _base(actual, env)
            if b.multirange is not None and b.multirange != actual:
                return None
            b.multirange = actual
        elif d in ("anycompatible", "anycompatiblenonarray"):
            have_compatible_nonarray |= d == "anycompatiblenonarray"
            compatible_inputs.append(actual)
        elif d == "anycompatiblearray":
            element = _element(_base(actual, env))
            if element is None:
                return None
            compatible_inputs.append(element)
        elif d == "anycompatiblerange":
            actual = _base(actual, env)
            subtype = _info(actual, env).range_subtype
            if subtype is None or (b.compatible_range is not None and b.compatible_range != actual):
                return None
            b.compatible_range = actual
            compatible_inputs.append(subtype)
        else:  # anycompatiblemultirange
            actual = _base(actual, env)
            range_type = _info(actual, env).range
            subtype = _info(range_type, env).range_subtype if range_type is not None else None
            if subtype is None or (b.compatible_multirange is not None and b.compatible_multirange != actual):
                return None
            b.compatible_multirange = actual
            compatible_inputs.append(subtype)
    if b.array is not None:
        if b.array.name == "anyarray" and not b.array.is_array:
            pass  # a column of pseudo-type anyarray (pg_stats): nothing to deduce
        else:
            element = _element(b.array)
            if element is None or (b.elem is not None and b.elem != element):
                return None
            b.elem = element
    if b.multirange is not None:
        range_type = _info(b.multirange, env).range
        if range_type is None or (b.range is not None and b.range != range_type):
            return None
        b.range = range_type
    if b.range is not None:
        subtype = _info(b.range, env).range_subtype
        if subtype is None or (b.elem is not None and b.elem != subtype):
            return None
        b.elem = subtype
    if b.elem is not None:
        if have_nonarray and b.elem.is_array:
            return None
        if have_enum and _info(b.elem, env).typtype != "e":
            return None
    if compatible_inputs:
        try:
            common = _select_common(compatible_inputs, None, env)
        except ResolveError:
            return None
        if common is None or not all(_can_coerce_all((t,), (common,), "i", env) for t in compatible_inputs):
            return None
        if have_compatible_nonarray and common.is_array:
            return None
        for range_type in (b.compatible_range, _info_range(b.compatible_multirange, env)):
            if range_type is not None and _info(range_type, env).range_subtype != common:
                return None
        b.compatible = common
    return b


def _info_range(multirange: PgType | None, env: TypeEnv) -> PgType | None:
    return _info(multirange, env).range if multirange is not None else None


def _substitute(decl: PgType, b: _Bindings, env: TypeEnv) -> PgType:
    """The concrete type for a declared (possibly polymorphic) type, given the bindings."""
    d = decl.name if not decl.is_array else ""
    if d not in POLYMORPHIC:
        return decl
    if d in _FAMILY1:
        if d in ("anyelement", "anynonarray", "anyenum"):
            found = b.elem
        elif d == "anyarray":
            found = b.array if b.array is not None else (_array_of(b.elem) if b.elem is not None else None)
        elif d == "anyrange":
            found = b.range
        else:
            found = b.multirange
            if found is None and b.range is not None:
                found = _info(b.range, env).multirange
        if found is None:
            if b.elem is None and b.range is None:
                raise ResolveError("42804", f"could not determine polymorphic type because input has type {'unknown'}")
            what = d.removeprefix("any").removeprefix("non")
            raise ResolveError("42704", f"could not find {what} type for data type {display(b.elem or UNKNOWN, env)}")
        return found
    common = b.compatible if b.compatible is not None else TEXT
    if d in ("anycompatible", "anycompatiblenonarray"):
        return common
    if d == "anycompatiblearray":
        array = _array_of(common)
        if array is None:
            raise ResolveError("42704", f"could not find array type for data type {display(common, env)}")
        return array
    if d == "anycompatiblerange":
        if b.compatible_range is None:
            raise ResolveError("42804", f"could not determine polymorphic type {d} because input has type unknown")
        return b.compatible_range
    if b.compatible_multirange is not None:
        return b.compatible_multirange
    if b.compatible_range is not None and (m := _info(b.compatible_range, env).multirange) is not None:
        return m
    raise ResolveError("42804", f"could not determine polymorphic type {d} because input has type unknown")


# ---------------------------------------------------------------------------------------------
# Common type (select_common_type)


def _select_common(types: Sequence[PgType], construct: str | None, env: TypeEnv) -> PgType | None:
    if types and all(t == types[0] for t in types) and not _is_unknown(types[0]):
        return types[0]
    ptype = _base(types[0], env) if not _is_unknown(types[0]) else UNKNOWN
    pinfo = _info(ptype, env)
    for t in types[1:]:
        ntype = _base(t, env) if not _is_unknown(t) else UNKNOWN
        if _is_unknown(ntype) or ntype == ptype:
            continue
        ninfo = _info(ntype, env)
        if _is_unknown(ptype):
            ptype, pinfo = ntype, ninfo
        elif ninfo.category != pinfo.category:
            if construct is None:
                return None
            raise ResolveError("42804", f"{construct} types {pinfo.display} and {ninfo.display} cannot be matched")
        elif (
            not pinfo.preferred
            and _can_coerce_all((ptype,), (ntype,), "i", env)
            and not _can_coerce_all((ntype,), (ptype,), "i", env)
        ):
            ptype, pinfo = ntype, ninfo
    return TEXT if _is_unknown(ptype) else ptype


def common_type(types: Sequence[PgType], construct: str = "CASE", *, env: TypeEnv | None = None) -> PgType:
    """The type PostgreSQL gives UNION / CASE / COALESCE / GREATEST / ARRAY[] / VALUES branches
    (`construct` names it in messages): select_common_type, then every input must coerce to it
    implicitly. All unknown → text. Pass the inputs in PostgreSQL's order: a CASE without ELSE
    has an implicit ELSE NULL that comes first (`[unknown, *then_types]`), which is why
    `CASE WHEN .. THEN domain_value END` is the domain's base type. Only identical inputs keep a
    domain; note that the wire protocol describes a domain-typed result column as its base type. Raises ResolveError 42804 "CASE types integer and text cannot
    be matched" or 42846 "CASE could not convert type ... to ..."."""
    e = _env(env)
    if not types:
        raise ValueError("common_type of no types")
    common = _select_common(types, construct, e)
    assert common is not None  # construct given: a mismatch raised
    for t in types:
        if not _can_coerce_all((t,), (common,), "i", e):
            where = "CASE/WHEN" if construct == "CASE" else construct  # as transformCaseExpr says it
            raise ResolveError("42846", f"{where} could not convert type {display(t, e)} to {display(common, e)}")
    return common


# ---------------------------------------------------------------------------------------------
# Candidate selection (func_select_candidate)


def _select_candidate(inputs: Sequence[PgType], candidates: list[tuple[PgType, ...]], env: TypeEnv) -> int | None:
    """Index into `candidates` (all of which accept `inputs` implicitly) of the best one, or None
    when PostgreSQL's heuristics leave more than one."""
    nargs = len(inputs)
    base = [UNKNOWN if _is_unknown(t) else _base(t, env) for t in inputs]
    n_unknown = sum(1 for t in base if _is_unknown(t))
    alive = list(range(len(candidates)))

    def keep_best(score: list[int]) -> None:
        best = max(score)
        alive[:] = [i for i, s in zip(alive, score, strict=True) if s == best]

    # 1. most exact matches on known inputs
    keep_best([sum(1 for k in range(nargs) if not _is_unknown(base[k]) and candidates[i][k] == base[k]) for i in alive])
    if len(alive) == 1:
        return alive[0]
    # 2. most exact-or-preferred matches at the arguments needing coercion
    slot_category = [_info(t, env).category for t in base]
    scores = []
    for i in alive:
        n = 0
        for k in range(nargs):
            if _is_unknown(base[k]):
                continue
            cinfo = _info(candidates[i][k], env)
            if candidates[i][k] == base[k] or (cinfo.category == slot_category[k] and cinfo.preferred):
                n += 1
        scores.append(n)
    keep_best(scores)
    if len(alive) == 1:
        return alive[0]
    if n_unknown == 0:
        return None
    # 4. unknown inputs: the category the candidates agree on (string wins), preferred types first
    resolved = True
    slot_preferred = [False] * nargs
    for k in range(nargs):
        if not _is_unknown(base[k]):
            continue
        category: str | None = None
        conflict = False
        for i in alive:
            cinfo = _info(candidates[i][k], env)
            if category is None:
                category, slot_preferred[k] = cinfo.category, cinfo.preferred
            elif cinfo.category == category:
                slot_preferred[k] |= cinfo.preferred
            elif cinfo.category == "S":
                category, slot_preferred[k] = "S", cinfo.preferred
            else:
                conflict = True
        if conflict and category != "S":
            resolved = False
            break
        slot_category[k] = category or "X"
    if resolved:
        kept = []
        for i in alive:
            ok = True
            for k in range(nargs):
                if not _is_unknown(base[k]):
                    continue
                cinfo = _info(candidates[i][k], env)
                if cinfo.category != slot_category[k] or (slot_preferred[k] and not cinfo.preferred):
                    ok = False
                    break
            if ok:
                kept.append(i)
        if kept:
            alive = kept
        if len(alive) == 1:
            return alive[0]
    # 5. all known inputs of one type: assume the unknown ones are that type too
    if n_unknown < nargs:
        known = {t for t in base if not _is_unknown(t)}
        if len(known) == 1:
            (only,) = known
            assumed = [only] * nargs
            matching = [i for i in alive if _can_coerce_all(assumed, candidates[i], "i", env)]
            if len(matching) == 1:
                return matching[0]
    return None


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
    if last.name == _ANY and not last.is_array:
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
    e = _env(env)
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
    env: TypeEnv | None = None,
) -> FunctionResolution:
    """Choose among `candidates` (every function visible under `name`, built-ins first as
    pg_catalog leads the search path) for a call with argument types `args`, as PostgreSQL does:
    candidates by argument count (defaults, VARIADIC expansion, named arguments `arg_names[k]`
    (None = positional)), an exact match, else those accepting the arguments by implicit
    coercion, then func_select_candidate's heuristics; the result type with polymorphic types
    substituted. `variadic_call`: the call spells `VARIADIC arr` for the last argument.
    `params[k]`: argument k is an untyped parameter rather than a literal (PostgreSQL reads
    `typename('literal')` as a cast, `typename($1)` only when the cast needs no function).
    Raises ResolveError: 42883 no such function, 42725 not unique, 42804 polymorphic unknown."""
    e = _env(env)
    nargs = len(args)
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
        note = _candidates_note(candidates, e) if candidates else DIALECT_HINTS.get(name.lower())
        return ResolveError(
            "42883", f"function {_call_text(name, args, arg_names, e)} does not exist", _NO_FUNCTION_HINT, note
        )

    def not_unique() -> ResolveError:
        return ResolveError(
            "42725",
            f"function {_call_text(name, args, arg_names, e)} is not unique",
            _NOT_UNIQUE_FUNCTION_HINT,
            _candidates_note([c.sig for c in cands], e),
        )

    chosen = next((c for c in cands if c.types == tuple(args)), None)
    if chosen is None and nargs == 1 and not (arg_names and any(arg_names)):
        coercion = _type_coercion(name, args[0], bool(params and params[0]), e)
        if coercion is not None:
            return coercion
    if chosen is None:
        matching = [c for c in cands if _can_coerce_all(args, c.types, "i", e)]
        if not matching:
            raise not_found()
        if len(matching) == 1:
            chosen = matching[0]
        else:
            best = _select_candidate(args, [c.types for c in matching], e)
            if best is None:
                raise not_unique()
            chosen = matching[best]
    if chosen.types in ambiguous:
        raise not_unique()
    sig = chosen.sig
    declared = list(chosen.types)
    bindings = _generic_bindings(args, declared, e) or _Bindings()
    needs = [*declared, sig.return_type, *(t for _, t in sig.out_columns)]
    if any(t.name in POLYMORPHIC and not t.is_array for t in needs):
        coerced = tuple(
            _substitute(d, bindings, e) if d.name != _ANY else a for d, a in zip(declared, args, strict=True)
        )
        result = _substitute(sig.return_type, bindings, e)
        outs = tuple((n, _substitute(t, bindings, e)) for n, t in sig.out_columns)
    else:
        coerced = tuple(a if d.name == _ANY and not d.is_array else d for d, a in zip(declared, args, strict=True))
        result, outs = sig.return_type, sig.out_columns
    return FunctionResolution(sig, result, coerced, outs, sig.returns_set, _kind(sig), chosen.variadic_expanded)


def _type_coercion(name: str, arg: PgType, is_param: bool, env: TypeEnv) -> FunctionResolution | None:
    """func_get_detail's "function call that is really a type coercion": `text(x)`, `int8(x)`."""
    info = env.type_info(PgType(name))
    if info is None or info.typtype in ("p", "c"):
        return None
    target = info.type
    if not (_is_unknown(arg) and not is_param):
        path = _pathway(arg, target, "e", env)
        if path == "io" and _is_complex(arg, env) and info.category == "S":
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
    (note: "did you mean =?" for other dialects' spellings) or 42725 "operator is not unique"."""
    e = _env(env)
    if symbol == "!=":  # PostgreSQL's lexer reads != as <>
        symbol = "<>"
    sigs = [s for s in candidates if (s.left is None) == (left is None)]
    l_t, r_t = left, right
    if left is not None:
        if _is_unknown(left) and not _is_unknown(right):
            l_t = right
        elif _is_unknown(right) and not _is_unknown(left):
            r_t = left
    exact = next((s for s in sigs if s.left == l_t and s.right == r_t), None)
    if exact is None and left is not None and l_t == r_t and (_is_unknown(left) != _is_unknown(right)):
        assert l_t is not None
        base = _base(l_t, e)
        if base != l_t:
            exact = next((s for s in sigs if s.left == base and s.right == base), None)
    if exact is None:
        inputs = [left, right] if left is not None else [right]
        declared = [[s.left, s.right] if s.left is not None else [s.right] for s in sigs]
        matching = [i for i, d in enumerate(declared) if _can_coerce_all(inputs, d, "i", e)]
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
            best = _select_candidate(inputs, [tuple(declared[i]) for i in matching], e)
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
    bindings = _generic_bindings(actual, declared_args, e) or _Bindings()
    result = _substitute(sig.result, bindings, e)
    coerced = [_substitute(d, bindings, e) for d in declared_args]
    return OperatorResolution(sig, result, coerced[0] if left is not None else None, coerced[-1])
