"""Which types meet without an explicit cast (implicit and assignment coercion) and which casts
exist, by PostgreSQL's rules (resolve.can_coerce over the built-in catalog); how types are
written in messages."""

from __future__ import annotations

from sqlglot import exp

from ..catalog import types as t
from ..catalog.builtins import load_builtins
from ..catalog.types import PgType
from .coercion import TypeEnv, can_coerce


def assignable(value: PgType, target: PgType, assignment: bool = False, env: TypeEnv | None = None) -> bool:
    """Whether a value of type `value` may be stored in, or compared with, `target` without an
    explicit cast: PostgreSQL's implicit coercions (pg_cast and its other rules, resolve.py);
    with `assignment`, also the assignment casts of INSERT and UPDATE (anything to text).
    `env`: the built-ins with the schema's extensions (their casts); the core ones by default."""
    if value in (t.UNKNOWN, t.NULL) or value == target:
        return True
    return can_coerce(value, target, "a" if assignment else "i", env=env or load_builtins())


def castable(value: PgType, target: PgType) -> bool:
    """Whether `value::target` exists (an explicit cast, PostgreSQL's rules)."""
    if value in (t.UNKNOWN, t.NULL) or value == target:
        return True
    return can_coerce(value, target, "e", env=load_builtins())


def same_family(a: PgType, b: PgType) -> bool:
    """Whether one parameter may serve as both types: PostgreSQL fixes its type at the first
    use and coerces it implicitly at the others."""
    return assignable(a, b) or assignable(b, a)


def wider(a: PgType, b: PgType) -> PgType:
    order = ["int2", "int4", "int8", "numeric", "float4", "float8"]
    return a if order.index(a.name) >= order.index(b.name) else b


def describe(p: PgType) -> str:
    """A type in a message, as PostgreSQL's messages write it (format_type: `integer`,
    `timestamp with time zone`); an enum says it is one."""
    if p.is_enum:
        return f"enum {p.name}" + ("[]" if p.is_array else "")
    if p == t.NULL:
        return str(p)
    return load_builtins().display(p)


def is_untyped(node: exp.Expr | None) -> bool:
    """Parameters, string literals and NULL take their type from the context."""
    if isinstance(node, exp.Paren):
        return is_untyped(node.this)
    return isinstance(node, (exp.Parameter, exp.Null)) or (isinstance(node, exp.Literal) and node.is_string)
