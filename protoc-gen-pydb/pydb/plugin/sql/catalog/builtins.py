"""PostgreSQL's built-in catalog, loaded from `pgdata/pg15.json`.

The data is extracted from a real PostgreSQL 15 by `scripts/extract_pg_catalog.py` (`make
pgdata`): pg_type, pg_proc (+ pg_aggregate), pg_operator, pg_cast and the system columns, for the
core `pg_catalog` and for every contrib extension (tagged by extension). It is parsed once per
process (`load_builtins()` is cached); signatures are built lazily, per name, on first lookup.

Public API:
    load_builtins() -> Builtins                  the core catalog (pg_catalog only)
    Builtins.with_extensions(names) -> Builtins  core + those extensions (CREATE EXTENSION)
    Builtins.functions(name) -> tuple[FunctionSig, ...]
    Builtins.function_names -> frozenset[str]
    Builtins.type_names -> frozenset[str]
    Builtins.operators(symbol) -> tuple[OperatorSig, ...]
    Builtins.cast(source, target) -> CastSig | None
    Builtins.type_info(PgType | str) -> TypeInfo | None
    Builtins.type_named(name) -> PgType | None   any spelling: int4, integer, pg_catalog.int4, int[] ...
    Builtins.display(PgType) -> str              PostgreSQL's format_type: "integer", "character varying[]"
    Builtins.system_columns -> tuple[tuple[str, PgType], ...]   ctid, xmin, cmin, xmax, cmax, tableoid
    Builtins.extension(name) -> Extension | None   its functions, operators, types, casts
    Builtins.relation(schema, name) -> BuiltinRelation | None   a table or view of pg_catalog or
        information_schema (pg_tables, pg_stat_activity, information_schema.columns, ...)
    Builtins.extension_names -> tuple[str, ...]
    SchemaTypes(builtins, types=[TypeInfo...], casts=[CastSig...])   built-ins + schema domains,
        composites, enums and casts: an `env` for resolve.py (type_info, cast, display)
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from .signatures import CastContext, CastSig, FunctionKind, FunctionSig, OperatorSig, Volatility
from .types import PgType

_DATA_FILE = Path(__file__).with_name("pgdata") / "pg15.json"
_SETTINGS_FILE = Path(__file__).with_name("pgdata") / "pg15_settings.txt"  # scripts/extract_pg_names.py
_INFOSCHEMA_DOMAINS_FILE = Path(__file__).with_name("pgdata") / "pg15_infoschema_domains.txt"  # the same

#: pg_type.typtype: base, composite, domain, enum, pseudo, range, multirange.
TYPTYPE_NAMES = {
    "b": "base",
    "c": "composite",
    "d": "domain",
    "e": "enum",
    "p": "pseudo",
    "r": "range",
    "m": "multirange",
}

# Spellings the SQL standard (and PostgreSQL's grammar) gives built-in types beyond their pg_type
# names and format_type display names; pglast already maps most to `pg_catalog.<typname>`.
_ALIASES = {
    "int": "int4",
    "integer": "int4",
    "smallint": "int2",
    "bigint": "int8",
    "real": "float4",
    "float": "float8",
    "double precision": "float8",
    "decimal": "numeric",
    "dec": "numeric",
    "boolean": "bool",
    "character varying": "varchar",
    "char varying": "varchar",
    "national character varying": "varchar",
    "national char varying": "varchar",
    "nchar varying": "varchar",
    "character": "bpchar",
    "char": "bpchar",
    "national character": "bpchar",
    "national char": "bpchar",
    "nchar": "bpchar",
    "bit varying": "varbit",
    "timestamp without time zone": "timestamp",
    "timestamp with time zone": "timestamptz",
    "time without time zone": "time",
    "time with time zone": "timetz",
    '"char"': "char",
}


@dataclass(frozen=True)
class TypeInfo:
    """What resolution needs to know about a type (pg_type + pg_range)."""

    type: PgType
    display: str  # format_type: "integer", "character varying", "integer[]"
    category: str  # pg_type.typcategory: N numeric, S string, D datetime, A array, E enum, ...
    preferred: bool  # pg_type.typispreferred within its category
    typtype: str  # b c d e p r m (see TYPTYPE_NAMES)
    element: PgType | None = None  # for an array type: its element type
    has_array: bool = False  # an array type over this one exists
    range_subtype: PgType | None = None  # range: its subtype
    multirange: PgType | None = None  # range: its multirange type
    range: PgType | None = None  # multirange: its range type
    base: PgType | None = None  # domain: its base type
    extension: str = ""  # "" for the core catalog
    array_category: str = "A"  # the category of its array type (record[] is a pseudo-type: P)
    #: ORDER BY finds an ordering operator / GROUP BY, DISTINCT, UNION an equality operator for
    #: it (json, xml, point: no); None where not known (the resolver then assumes yes).
    orderable: bool | None = None
    equality: bool | None = None
    array_orderable: bool | None = None  # the same for its array type
    array_equality: bool | None = None


#: The schemas whose relations the data file describes.
BUILTIN_RELATION_SCHEMAS = ("pg_catalog", "information_schema")


@dataclass(frozen=True)
class BuiltinRelation:
    """A system catalog or view: pg_class.relkind and its columns (name, type, NOT NULL)."""

    schema: str
    name: str
    relkind: str
    columns: tuple[tuple[str, PgType, bool], ...]


@dataclass(frozen=True)
class Extension:
    """The objects one contrib extension adds (CREATE EXTENSION name)."""

    name: str
    functions: tuple[FunctionSig, ...]
    operators: tuple[OperatorSig, ...]
    types: tuple[TypeInfo, ...]
    casts: tuple[CastSig, ...]


class _Data:
    """The parsed data file with type-name decoding shared by every Builtins view."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw
        self.type_rows: dict[str, tuple[str, list[Any]]] = {}  # typname -> (owner, row)
        self.array_of: dict[str, str] = {}  # array typname -> element typname
        for owner, rows in raw["types"].items():
            for row in rows:
                self.type_rows[row[0]] = (owner, row)
                if row[5]:
                    self.array_of[row[5]] = row[0]
        self.owners: tuple[str, ...] = tuple(sorted((set(raw["procs"]) | set(raw["types"]) | set(raw["ops"])) - {""}))

    @functools.cache  # noqa: B019 - one _Data per process
    def pgtype(self, typname: str) -> PgType:
        element = self.array_of.get(typname)
        return PgType(element, True) if element is not None else PgType(typname)

    @functools.cache  # noqa: B019
    def info(self, typname: str) -> TypeInfo | None:
        found = self.type_rows.get(typname)
        if found is None:
            return None
        owner, (name, display, category, preferred, typtype, array_name, extra, array_category, sort_ops) = found
        t = PgType(name)
        return TypeInfo(
            type=t,
            display=display,
            category=category,
            preferred=bool(preferred),
            typtype=typtype,
            has_array=bool(array_name),
            range_subtype=self.pgtype(extra[0]) if typtype == "r" else None,
            multirange=self.pgtype(extra[1]) if typtype == "r" else None,
            range=self.pgtype(extra[0]) if typtype == "m" else None,
            base=self.pgtype(extra[0]) if typtype == "d" else None,
            extension=owner,
            array_category=array_category or "A",
            orderable="o" in sort_ops if typtype != "p" else None,
            equality="e" in sort_ops if typtype != "p" else None,
            array_orderable="O" in sort_ops if array_name else None,
            array_equality="E" in sort_ops if array_name else None,
        )

    def function(self, owner: str, row: list[Any]) -> FunctionSig:
        name, args, ret, flags, n_defaults, arg_names, outs, n_direct = row
        arg_types = tuple(self.pgtype(a) for a in args.split()) if args else ()
        names = tuple("" if n == "-" else n for n in arg_names.split()) if arg_names else ("",) * len(arg_types)
        kind, volatility, strict, retset, variadic, aggkind = flags
        return FunctionSig(
            schema="pg_catalog" if not owner else "public",
            name=name,
            arg_types=arg_types,
            arg_names=names,
            return_type=self.pgtype(ret),
            returns_set=retset == "t",
            kind=cast(FunctionKind, kind),
            variadic=variadic == "t",
            n_defaults=n_defaults,
            out_columns=tuple((n, self.pgtype(t)) for n, t in outs),
            volatility=cast(Volatility, volatility),
            strict=strict == "t",
            ordered_set=aggkind in ("o", "h"),
            hypothetical=aggkind == "h",
            n_direct_args=n_direct,
            extension=owner,
        )

    def operator(self, owner: str, row: list[Any]) -> OperatorSig:
        name, left, right, result = row
        return OperatorSig(
            schema="pg_catalog" if not owner else "public",
            name=name,
            left=self.pgtype(left) if left else None,
            right=self.pgtype(right),
            result=self.pgtype(result),
            extension=owner,
        )

    def cast_sig(self, owner: str, row: list[Any]) -> CastSig:
        source, target, context, method = row
        return CastSig(self.pgtype(source), self.pgtype(target), cast(CastContext, context), method, owner)


@functools.cache
def _data() -> _Data:
    return _Data(json.loads(_DATA_FILE.read_bytes()))


@functools.cache
def setting_names() -> frozenset[str]:
    """PostgreSQL 15's configuration parameters (lower case; placeholders with a dot not listed)."""
    return frozenset(_SETTINGS_FILE.read_text(encoding="utf-8").split())


@functools.cache
def infoschema_domains() -> dict[tuple[str, str], str]:
    """(view, column) -> the information_schema domain the column of that view is typed as."""
    lines = _INFOSCHEMA_DOMAINS_FILE.read_text(encoding="utf-8").splitlines()
    return {(rel, col): domain for rel, col, domain in (line.split(" ") for line in lines)}


class Builtins:
    """The built-in catalog as seen by a database with the given extensions installed."""

    def __init__(self, data: _Data, extensions: frozenset[str]) -> None:
        self._data = data
        self.extensions = extensions
        owners = {"", *extensions}
        self._procs: dict[str, list[tuple[str, list[Any]]]] = {}
        self._ops: dict[str, list[tuple[str, list[Any]]]] = {}
        self._casts: dict[tuple[str, str], CastSig] = {}
        self._types: set[str] = set()
        raw = data.raw
        for owner in sorted(owners):
            for row in raw["procs"].get(owner, ()):
                self._procs.setdefault(row[0], []).append((owner, row))
            for row in raw["ops"].get(owner, ()):
                self._ops.setdefault(row[0], []).append((owner, row))
            for row in raw["casts"].get(owner, ()):
                self._casts[(row[0], row[1])] = data.cast_sig(owner, row)
            self._types.update(row[0] for row in raw["types"].get(owner, ()))
        self._functions_cache: dict[str, tuple[FunctionSig, ...]] = {}
        self._operators_cache: dict[str, tuple[OperatorSig, ...]] = {}

    def with_extensions(self, names: Iterable[str]) -> Builtins:
        """This catalog plus the named extensions (unknown names are ignored: see extension())."""
        return _with_extensions(self.extensions | frozenset(n for n in names if n in self._data.owners))

    @property
    def extension_names(self) -> tuple[str, ...]:
        """Every extension the data file knows (whether or not installed in this view)."""
        return self._data.owners

    def functions(self, name: str) -> tuple[FunctionSig, ...]:
        """Every function/aggregate/window function/procedure named `name` (folded, unqualified)."""
        found = self._functions_cache.get(name)
        if found is None:
            found = tuple(self._data.function(owner, row) for owner, row in self._procs.get(name, ()))
            self._functions_cache[name] = found
        return found

    @functools.cached_property
    def type_names(self) -> frozenset[str]:
        """Every type name in this view (pg_type names; array types not listed)."""
        return frozenset(self._types)

    @functools.cached_property
    def function_names(self) -> frozenset[str]:
        """Every function name in this view (for "did you mean" suggestions)."""
        return frozenset(self._procs)

    def operators(self, symbol: str) -> tuple[OperatorSig, ...]:
        """Every operator spelled `symbol` (prefix operators have `left=None`); `!=` is `<>`."""
        if symbol == "!=":  # PostgreSQL's lexer reads != as <>
            symbol = "<>"
        found = self._operators_cache.get(symbol)
        if found is None:
            found = tuple(self._data.operator(owner, row) for owner, row in self._ops.get(symbol, ()))
            self._operators_cache[symbol] = found
        return found

    def cast(self, source: PgType, target: PgType) -> CastSig | None:
        """The pg_cast entry from `source` to `target`, if any (no entry ≠ no coercion: see
        resolve.can_coerce for PostgreSQL's other rules)."""
        return self._casts.get((self._typname(source), self._typname(target)))

    def type_info(self, t: PgType | str) -> TypeInfo | None:
        """Category, preferred flag, display name, element/range relations of a type known to
        this view; None for a type it does not know (schema-defined types other than enums)."""
        if isinstance(t, str):
            named = self.type_named(t)
            if named is None:
                return None
            t = named
        if t.is_enum:
            if t.is_array:
                return TypeInfo(t, f"{t.name}[]", "A", False, "b", element=t.element, orderable=True, equality=True)
            return TypeInfo(t, t.name, "E", False, "e", has_array=True, orderable=True, equality=True)
        if t.name not in self._types:
            return None
        element = self._data.info(t.name)
        if element is None:
            return None
        if t.is_array:
            typtype = "p" if element.array_category == "P" else "b"
            return TypeInfo(
                t,
                f"{element.display}[]",
                element.array_category,
                False,
                typtype,
                element.type,
                extension=element.extension,
                orderable=element.array_orderable,
                equality=element.array_equality,
            )
        return element

    def type_named(self, name: str) -> PgType | None:
        """The PgType for a type name as written in SQL or produced by pglast/sqlglot: `int4`,
        `integer`, `pg_catalog.int4`, `character varying`, `_int4`, `int[]`, `timestamptz`.
        A pg_type name wins over an SQL keyword spelling: `char` is the one-byte `"char"` type (as
        pglast writes a quoted `"char"`); the keyword CHAR(n) is `bpchar` (pglast: `pg_catalog.bpchar`)."""
        spelled, dims, typmod = _split_type_spelling(name)
        if dims:
            element = self.type_named(spelled + (f"({typmod})" if typmod is not None else ""))
            return element.array() if element is not None and not element.is_array else None
        if typmod is not None and spelled == "float":  # float(p): the precision picks the type
            return PgType("float4" if typmod.strip().isdigit() and int(typmod) <= 24 else "float8")
        if typmod is not None and spelled in _ALIASES:  # char(2) is the keyword, not "char"
            return PgType(_ALIASES[spelled])
        if spelled.startswith("interval "):  # interval year to month, interval second(3), ...
            spelled = "interval"
        if spelled.startswith("pg_catalog."):
            spelled = spelled[len("pg_catalog.") :]
        # A pg_type name first, as PostgreSQL looks up a TypeName (pglast writes `"char"` as
        # `char`, and keywords such as `character` as `pg_catalog.bpchar`); then SQL spellings.
        typname = spelled if spelled in self._types else _ALIASES.get(spelled, spelled)
        if typname in self._types:
            return PgType(typname)
        if typname in self._data.array_of and self._data.array_of[typname] in self._types:
            return self._data.pgtype(typname)
        by_display = _display_names(self._data).get(spelled)
        if by_display is not None and by_display in self._types:
            return PgType(by_display)
        return None

    def display(self, t: PgType) -> str:
        """PostgreSQL's name for `t` in messages (format_type): `integer`, `character varying[]`."""
        if t.name == "null":
            return "unknown"
        info = self.type_info(t)
        return info.display if info is not None else str(t)

    @functools.cached_property
    def system_columns(self) -> tuple[tuple[str, PgType], ...]:
        """Every table's hidden columns, in attnum order -1, -2, ...: ctid, xmin, cmin, xmax, cmax, tableoid."""
        return tuple((name, self._data.pgtype(t)) for name, t in self._data.raw["system_columns"])

    def relation(self, schema: str, name: str) -> BuiltinRelation | None:
        """The table or view `schema.name` of pg_catalog or information_schema, if there is one."""
        return _relation(schema, name)

    def extension(self, name: str) -> Extension | None:
        """The functions, operators, types and casts extension `name` adds; None if unknown."""
        return _extension(name)

    def _typname(self, t: PgType) -> str:
        if t.is_array:
            info = self._data.info(t.name)
            return f"_{t.name}" if info is None else self._data.type_rows[t.name][1][5]
        return t.name


def _split_type_spelling(name: str) -> tuple[str, int, str | None]:
    """`Character Varying(10)[]` → ("character varying", 1 array dimension, "10"): the name
    folded and without its typmod and array bounds."""
    words: list[str] = []
    typmod: str | None = None
    dims = 0
    depth = 0
    current: list[str] = []
    for ch in name.strip():
        if ch in "([":
            if depth == 0 and ch == "[":
                dims += 1
            depth += 1
            if depth == 1:
                words.append("".join(current))
                current = []
                continue
        elif ch in ")]":
            depth -= 1
            if depth == 0:
                if ch == ")" and typmod is None:
                    typmod = "".join(current)
                current = []
                continue
        current.append(ch)
    words.append("".join(current))
    return " ".join(" ".join(words).lower().split()), dims, typmod


@functools.cache
def _display_names(data: _Data) -> dict[str, str]:
    return {row[1]: name for name, (_, row) in data.type_rows.items()}


@functools.cache
def _extension(name: str) -> Extension | None:
    data = _data()
    if name not in data.owners:
        return None
    raw = data.raw
    return Extension(
        name=name,
        functions=tuple(data.function(name, row) for row in raw["procs"].get(name, ())),
        operators=tuple(data.operator(name, row) for row in raw["ops"].get(name, ())),
        types=tuple(info for row in raw["types"].get(name, ()) if (info := data.info(row[0])) is not None),
        casts=tuple(data.cast_sig(name, row) for row in raw["casts"].get(name, ())),
    )


@functools.cache
def _relation(schema: str, name: str) -> BuiltinRelation | None:
    data = _data()
    found = data.raw["relations"].get(f"{schema}.{name}")
    if found is None:
        return None
    relkind, columns = found
    return BuiltinRelation(schema, name, relkind, tuple((c, data.pgtype(t), bool(nn)) for c, t, nn in columns))


@functools.cache
def _with_extensions(extensions: frozenset[str]) -> Builtins:
    return Builtins(_data(), extensions)


def load_builtins() -> Builtins:
    """The core built-in catalog (pg_catalog; no extension installed). Cached per process."""
    return _with_extensions(frozenset())


class SchemaTypes:
    """The built-ins plus the types and casts a schema declares (domains, composite types, enums
    with their TypeInfo, CREATE CAST): what resolve.py's `env` needs for schema objects.

    `SchemaTypes(builtins, [TypeInfo(PgType("app.posint"), "app.posint", "N", False, "d",
    base=PgType("int4"))])` makes a domain resolve through its base type, as PostgreSQL does."""

    def __init__(self, builtins: Builtins, types: Iterable[TypeInfo] = (), casts: Iterable[CastSig] = ()) -> None:
        self.builtins = builtins
        # keyed by name: an enum's PgType carries its labels, a bare PgType(name) finds it too
        self._types = {info.type.name: info for info in types}
        self._casts = {(c.source, c.target): c for c in casts}

    def type_info(self, t: PgType | str) -> TypeInfo | None:
        if isinstance(t, str):
            return self._types.get(t) or self.builtins.type_info(t)
        own = self._types.get(t.name)
        if own is None:
            return self.builtins.type_info(t)
        if t.is_array:
            return TypeInfo(t, f"{own.display}[]", own.array_category, False, "b", element=own.type)
        return own

    def cast(self, source: PgType, target: PgType) -> CastSig | None:
        return self._casts.get((source, target)) or self.builtins.cast(source, target)

    def display(self, t: PgType) -> str:
        info = self.type_info(t)
        return info.display if info is not None else self.builtins.display(t)
