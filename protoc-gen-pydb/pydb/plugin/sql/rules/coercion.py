"""PostgreSQL's coercion rules over `PgType`s, offline: a port of parse_coerce.c.

can_coerce_type / find_coercion_pathway (pg_cast by context, domains, arrays element-wise, I/O
conversion to and from string types, unknown to anything), check/enforce_generic_type_consistency
(polymorphic any* / anycompatible* types) and select_common_type. resolve.py builds function
and operator resolution on these; its docstring lists the public API.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from ..catalog.builtins import TypeInfo, load_builtins
from ..catalog.signatures import CastSig
from ..catalog.types import PgType

Context = Literal["i", "a", "e"]  # implicit < assignment < explicit, as pg_cast.castcontext
_RANK = {"i": 0, "a": 1, "e": 2}

UNKNOWN = PgType("unknown")
TEXT = PgType("text")
ANY = "any"  # the pseudo-type "any": accepts every argument, unknown ones stay unknown
_FAMILY1 = frozenset({"anyelement", "anyarray", "anynonarray", "anyenum", "anyrange", "anymultirange"})
_FAMILY2 = frozenset(
    {"anycompatible", "anycompatiblearray", "anycompatiblenonarray", "anycompatiblerange", "anycompatiblemultirange"}
)
POLYMORPHIC = _FAMILY1 | _FAMILY2


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


def type_env(env: TypeEnv | None) -> TypeEnv:
    return env if env is not None else load_builtins()


def is_unknown(t: PgType) -> bool:
    return t.name in ("unknown", "null") and not t.is_array


def info_of(t: PgType, env: TypeEnv) -> TypeInfo:
    if is_unknown(t):
        return TypeInfo(UNKNOWN, "unknown", "X", False, "p")
    info = env.type_info(t)
    if info is None:  # a schema type the environment does not describe: a user-defined base type
        return TypeInfo(t, str(t), "A" if t.is_array else "U", False, "b", element=t.element if t.is_array else None)
    return info


def display(t: PgType, env: TypeEnv | None = None) -> str:
    """PostgreSQL's name for a type in messages: `integer`, `character varying`, `unknown`."""
    return info_of(t, type_env(env)).display


def base_type(t: PgType, env: TypeEnv) -> PgType:
    """getBaseType: a domain's base type (recursively), else the type itself."""
    if t.domain is not None and not t.is_array:  # a domain column's type: its base, marked
        t = replace(t, domain=None)
    for _ in range(32):
        info = env.type_info(t)
        if info is None or info.base is None:
            return t
        t = info.base
    return t


def element_type(t: PgType) -> PgType | None:
    """get_element_type: the element of a true array type."""
    return t.element if t.is_array else None


def array_type(t: PgType) -> PgType | None:
    return None if t.is_array else t.array()


def is_complex(t: PgType, env: TypeEnv) -> bool:
    return info_of(t, env).typtype == "c" or (t.name == "record" and not t.is_array)


# ---------------------------------------------------------------------------------------------
# Coercion (parse_coerce.c)


def pathway(source: PgType, target: PgType, context: Context, env: TypeEnv) -> str:
    """find_coercion_pathway: "relabel", "func", "array", "io" or "" (none)."""
    if source == target:
        return "relabel"
    source, target = base_type(source, env), base_type(target, env)
    if source == target:
        return "relabel"
    cast = env.cast(source, target)
    if cast is not None:
        if _RANK[context] < _RANK[cast.context]:
            return ""
        return {"b": "relabel", "f": "func", "i": "io"}[cast.method]
    if target.is_array and source.is_array:
        source_elem, target_elem = element_type(source), element_type(target)
        if source_elem is not None and target_elem is not None and pathway(source_elem, target_elem, context, env):
            return "array"
    if _RANK[context] >= _RANK["a"] and info_of(target, env).category == "S":
        return "io"
    if _RANK[context] >= _RANK["e"] and info_of(source, env).category == "S":
        return "io"
    return ""


def can_coerce(source: PgType, target: PgType, context: Context = "i", *, env: TypeEnv | None = None) -> bool:
    """Can a value of `source` be coerced to `target` in `context` ("i" implicit, e.g. a function
    argument; "a" assignment, e.g. INSERT/UPDATE; "e" explicit, a CAST)? PostgreSQL's
    can_coerce_type for one argument: pg_cast, domains ↔ base types, arrays element-wise, I/O
    conversion to string types (assignment) and from them (explicit), unknown to anything."""
    return can_coerce_all((source,), (target,), context, type_env(env))


def can_coerce_all(inputs: Sequence[PgType], targets: Sequence[PgType], context: Context, env: TypeEnv) -> bool:
    have_generics = False
    for source, target in zip(inputs, targets, strict=True):
        if source == target or target.name == ANY:
            continue
        if target.name in POLYMORPHIC and not target.is_array:
            have_generics = True
            continue
        if is_unknown(source):
            continue
        if pathway(source, target, context, env):
            continue
        if source.name == "record" and not source.is_array and is_complex(target, env):
            continue
        if target.name == "record" and not target.is_array and is_complex(source, env):
            continue
        if target == PgType("record", True) and source.is_array and is_complex(source.element, env):
            continue
        return False
    return not have_generics or generic_bindings(inputs, targets, env) is not None


# ---------------------------------------------------------------------------------------------
# Polymorphism (check_generic_type_consistency / enforce_generic_type_consistency)


@dataclass
class Bindings:
    elem: PgType | None = None
    array: PgType | None = None
    range: PgType | None = None
    multirange: PgType | None = None
    compatible: PgType | None = None
    compatible_range: PgType | None = None
    compatible_multirange: PgType | None = None
    family1_unknown: bool = False
    family2_unknown: bool = False


#: The polymorphic pseudo-types every argument of which must be of one same type (domains as
#: their base type), by the field of `Bindings` that type is bound to.
_SAME_TYPE_SLOTS = {"anyarray": "array", "anyrange": "range", "anymultirange": "multirange"}


def generic_bindings(inputs: Sequence[PgType], declared: Sequence[PgType], env: TypeEnv) -> Bindings | None:
    """The polymorphic type variables the actual arguments bind, or None when inconsistent."""
    b = Bindings()
    have_nonarray = have_enum = have_compatible_nonarray = False
    compatible_inputs: list[PgType] = []
    for actual, decl in zip(inputs, declared, strict=True):
        d = decl.name if not decl.is_array else ""
        if d not in POLYMORPHIC:
            continue
        if is_unknown(actual):
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
        elif d in _SAME_TYPE_SLOTS:  # anyarray, anyrange, anymultirange: one type for all
            actual = base_type(actual, env)
            slot = _SAME_TYPE_SLOTS[d]
            bound = getattr(b, slot)
            if bound is not None and bound != actual:
                return None
            setattr(b, slot, actual)
        elif d in ("anycompatible", "anycompatiblenonarray"):
            have_compatible_nonarray |= d == "anycompatiblenonarray"
            compatible_inputs.append(actual)
        elif d == "anycompatiblearray":
            element = element_type(base_type(actual, env))
            if element is None:
                return None
            compatible_inputs.append(element)
        elif d == "anycompatiblerange":
            actual = base_type(actual, env)
            subtype = info_of(actual, env).range_subtype
            if subtype is None or (b.compatible_range is not None and b.compatible_range != actual):
                return None
            b.compatible_range = actual
            compatible_inputs.append(subtype)
        else:  # anycompatiblemultirange
            actual = base_type(actual, env)
            range_type = info_of(actual, env).range
            subtype = info_of(range_type, env).range_subtype if range_type is not None else None
            if subtype is None or (b.compatible_multirange is not None and b.compatible_multirange != actual):
                return None
            b.compatible_multirange = actual
            compatible_inputs.append(subtype)
    if b.array is not None:
        if b.array.name == "anyarray" and not b.array.is_array:
            pass  # a column of pseudo-type anyarray (pg_stats): nothing to deduce
        else:
            element = element_type(b.array)
            if element is None or (b.elem is not None and b.elem != element):
                return None
            b.elem = element
    if b.multirange is not None:
        range_type = info_of(b.multirange, env).range
        if range_type is None or (b.range is not None and b.range != range_type):
            return None
        b.range = range_type
    if b.range is not None:
        subtype = info_of(b.range, env).range_subtype
        if subtype is None or (b.elem is not None and b.elem != subtype):
            return None
        b.elem = subtype
    if b.elem is not None:
        if have_nonarray and b.elem.is_array:
            return None
        if have_enum and info_of(b.elem, env).typtype != "e":
            return None
    if compatible_inputs:
        try:
            common = select_common(compatible_inputs, None, env)
        except ResolveError:
            return None
        if common is None or not all(can_coerce_all((t,), (common,), "i", env) for t in compatible_inputs):
            return None
        if have_compatible_nonarray and common.is_array:
            return None
        for range_type in (b.compatible_range, _range_of(b.compatible_multirange, env)):
            if range_type is not None and info_of(range_type, env).range_subtype != common:
                return None
        b.compatible = common
    return b


def _range_of(multirange: PgType | None, env: TypeEnv) -> PgType | None:
    return info_of(multirange, env).range if multirange is not None else None


def substitute(decl: PgType, b: Bindings, env: TypeEnv) -> PgType:
    """The concrete type for a declared (possibly polymorphic) type, given the bindings."""
    d = decl.name if not decl.is_array else ""
    if d not in POLYMORPHIC:
        return decl
    if d in _FAMILY1:
        if d in ("anyelement", "anynonarray", "anyenum"):
            found = b.elem
        elif d == "anyarray":
            found = b.array if b.array is not None else (array_type(b.elem) if b.elem is not None else None)
        elif d == "anyrange":
            found = b.range
        else:
            found = b.multirange
            if found is None and b.range is not None:
                found = info_of(b.range, env).multirange
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
        array = array_type(common)
        if array is None:
            raise ResolveError("42704", f"could not find array type for data type {display(common, env)}")
        return array
    if d == "anycompatiblerange":
        if b.compatible_range is None:
            raise ResolveError("42804", f"could not determine polymorphic type {d} because input has type unknown")
        return b.compatible_range
    if b.compatible_multirange is not None:
        return b.compatible_multirange
    if b.compatible_range is not None and (m := info_of(b.compatible_range, env).multirange) is not None:
        return m
    raise ResolveError("42804", f"could not determine polymorphic type {d} because input has type unknown")


# ---------------------------------------------------------------------------------------------
# Common type (select_common_type)


def select_common(types: Sequence[PgType], construct: str | None, env: TypeEnv) -> PgType | None:
    if types and all(t == types[0] and t.domain == types[0].domain for t in types) and not is_unknown(types[0]):
        return types[0]
    ptype = base_type(types[0], env) if not is_unknown(types[0]) else UNKNOWN
    pinfo = info_of(ptype, env)
    for t in types[1:]:
        ntype = base_type(t, env) if not is_unknown(t) else UNKNOWN
        if is_unknown(ntype) or ntype == ptype:
            continue
        ninfo = info_of(ntype, env)
        if is_unknown(ptype):
            ptype, pinfo = ntype, ninfo
        elif ninfo.category != pinfo.category:
            if construct is None:
                return None
            raise ResolveError("42804", f"{construct} types {pinfo.display} and {ninfo.display} cannot be matched")
        elif (
            not pinfo.preferred
            and can_coerce_all((ptype,), (ntype,), "i", env)
            and not can_coerce_all((ntype,), (ptype,), "i", env)
        ):
            ptype, pinfo = ntype, ninfo
    return TEXT if is_unknown(ptype) else ptype


def common_type(types: Sequence[PgType], construct: str = "CASE", *, env: TypeEnv | None = None) -> PgType:
    """The type PostgreSQL gives UNION / CASE / COALESCE / GREATEST / ARRAY[] / VALUES branches
    (`construct` names it in messages): select_common_type, then every input must coerce to it
    implicitly. All unknown → text. Pass the inputs in PostgreSQL's order: a CASE without ELSE
    has an implicit ELSE NULL that comes first (`[unknown, *then_types]`), which is why
    `CASE WHEN .. THEN domain_value END` is the domain's base type. Only identical inputs keep a
    domain; note that the wire protocol describes a domain-typed result column as its base type. Raises ResolveError 42804 "CASE types integer and text cannot
    be matched" or 42846 "CASE could not convert type ... to ..."."""
    e = type_env(env)
    if not types:
        raise ValueError("common_type of no types")
    common = select_common(types, construct, e)
    assert common is not None  # construct given: a mismatch raised
    for t in types:
        if not can_coerce_all((t,), (common,), "i", e):
            where = "CASE/WHEN" if construct == "CASE" else construct  # as transformCaseExpr says it
            raise ResolveError("42846", f"{where} could not convert type {display(t, e)} to {display(common, e)}")
    return common


def _sort_support(t: PgType, env: TypeEnv, attribute: str) -> bool:
    """Whether PostgreSQL finds an ordering / equality operator for `t`: the data's answer for
    built-ins; a domain as its base type; an array as its element's array; otherwise yes (schema
    enums, composites over sortable columns)."""
    for _ in range(32):
        info = env.type_info(t)
        if info is None:
            return True
        found = getattr(info, attribute)
        if found is not None:
            return bool(found)
        if info.typtype == "p" and info.type.name != "record":  # void: no operators at all
            return False
        if info.base is not None:
            t = info.base
            continue
        if t.is_array and info.element is not None:
            element = env.type_info(info.element)
            if element is not None and element.base is not None:  # an array of a domain
                t = PgType(element.base.name, True, element.base.labels)
                continue
        return True
    return True


def require_ordering(t: PgType, *, env: TypeEnv | None = None) -> None:
    """ORDER BY (and an ordered-set aggregate's, a merge's) needs an ordering operator:
    raises ResolveError 42883 "could not identify an ordering operator for type json"."""
    e = type_env(env)
    if not is_unknown(t) and not _sort_support(t, e, "orderable"):
        raise ResolveError(
            "42883",
            f"could not identify an ordering operator for type {display(t, e)}",
            "Use an explicit ordering operator or modify the query.",
        )


def require_equality(t: PgType, *, env: TypeEnv | None = None) -> None:
    """GROUP BY, DISTINCT, UNION / INTERSECT / EXCEPT (without ALL) need an equality operator:
    raises ResolveError 42883 "could not identify an equality operator for type json"."""
    e = type_env(env)
    if not is_unknown(t) and not _sort_support(t, e, "equality"):
        raise ResolveError("42883", f"could not identify an equality operator for type {display(t, e)}")
