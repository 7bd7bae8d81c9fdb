"""Signatures of functions, operators and casts, built-in or declared in the schema.

Built-ins are data extracted from a real PostgreSQL (pg_proc, pg_operator, pg_cast, pg_type);
functions and operators declared in schema.sql become the same objects, so one resolver
(PostgreSQL's overload rules) serves both."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .types import PgType

#: pg_proc.prokind: function, aggregate, window, procedure.
FunctionKind = Literal["f", "a", "w", "p"]
#: pg_proc.provolatile: immutable, stable, volatile.
Volatility = Literal["i", "s", "v"]
#: pg_cast.castcontext: implicit, assignment, explicit.
CastContext = Literal["i", "a", "e"]
#: pg_cast.castmethod: function, binary-coercible, I/O conversion.
CastMethod = Literal["f", "b", "i"]


@dataclass(frozen=True)
class FunctionSig:
    schema: str  # "pg_catalog" for built-ins
    name: str  # as PostgreSQL stores it (folded)
    #: Input argument types (IN, INOUT and VARIADIC), polymorphic ones as `anyelement`, ...
    arg_types: tuple[PgType, ...]
    arg_names: tuple[str, ...]  # "" where unnamed; same length as arg_types
    return_type: PgType
    returns_set: bool = False
    kind: FunctionKind = "f"
    #: The last argument is VARIADIC (its type is the array type).
    variadic: bool = False
    #: How many trailing arguments have defaults.
    n_defaults: int = 0
    #: OUT / INOUT / TABLE columns, in order: what `SELECT * FROM f(...)` yields.
    out_columns: tuple[tuple[str, PgType], ...] = ()
    volatility: Volatility = "v"
    strict: bool = False
    #: An ordered-set aggregate (`WITHIN GROUP (ORDER BY ...)`), incl. hypothetical-set ones.
    ordered_set: bool = False
    #: A hypothetical-set aggregate (`rank(3) WITHIN GROUP (ORDER BY x)`): pg_aggregate.aggkind 'h'.
    hypothetical: bool = False
    #: Ordered-set aggregates: how many leading arguments are direct (before WITHIN GROUP).
    n_direct_args: int = 0
    #: The contrib extension that provides it ("" for the core catalog and schema-declared ones).
    extension: str = ""
    #: A procedure's every parameter (IN, INOUT, OUT, VARIADIC), in order, as (name, type): since
    #: PostgreSQL 14, CALL passes OUT parameters too and resolution matches all of them.
    call_args: tuple[tuple[str, PgType], ...] = ()
    #: The name of a function's one OUT parameter: the column `SELECT * FROM f(...)` yields is
    #: named so (not after the function or its alias). "" when it has none or it is unnamed.
    out_name: str = ""


@dataclass(frozen=True)
class OperatorSig:
    schema: str
    name: str  # the operator symbol: "+", "@@", "->>"
    left: PgType | None  # None for a prefix operator
    right: PgType
    result: PgType
    extension: str = ""


@dataclass(frozen=True)
class CastSig:
    source: PgType
    target: PgType
    context: CastContext
    #: pg_cast.castmethod: f (function), b (binary-coercible), i (I/O conversion).
    method: CastMethod = "f"
    extension: str = ""
