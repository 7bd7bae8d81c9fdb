"""The catalog being built while DDL is applied: mutable dictionaries, the session's search path,
the problems found, and the lookups and type resolution every DDL statement needs."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ...diagnostics import Problem, Severity, SqlSpan
from ..catalog.identifiers import (
    DEFAULT_SEARCH_PATH,
    PG_CATALOG,
    PG_TEMP,
    QualifiedName,
    candidates,
    did_you_mean,
    fold,
    split_name,
)
from ..catalog.model import (
    Catalog,
    CompositeType,
    Domain,
    Index,
    RangeType,
    Table,
    builtin_type,
)
from ..catalog.model import (
    Sequence as SequenceObj,
)
from ..catalog.signatures import FunctionSig, OperatorSig
from ..catalog.types import PgType
from ..syntax.pgparse import scan

#: A pglast AST node. pglast declares every field Optional; which fields are set is the
#: grammar's guarantee for each statement kind, so the DDL code reads them directly.
PgNode = Any


def strings(nodes: PgNode) -> list[str]:
    """The values of a list of String nodes (a dotted name, a column list)."""
    return [str(n.sval) for n in nodes or ()]


#: PostgreSQL's NAMEDATALEN - 1: longer identifiers are truncated.
MAX_IDENTIFIER = 63

#: The `serial` pseudo-types of CREATE TABLE / ADD COLUMN and the integer type each stands for.
SERIALS = {
    "serial": "int4",
    "serial4": "int4",
    "bigserial": "int8",
    "serial8": "int8",
    "smallserial": "int2",
    "serial2": "int2",
}


class QueryColumn(Protocol):
    """One result column of a query, as the statement analyzer types it."""

    @property
    def name(self) -> str: ...
    @property
    def type(self) -> PgType | None: ...
    @property
    def nullable(self) -> bool: ...


class QueryTyper(Protocol):
    """What types a view's (or CREATE TABLE AS's) query: the statement analyzer, handed in by
    whoever builds a catalog (`sql/frontend.py`), so that schema/ never imports the analyzer,
    which reads the catalogs schema/ builds (sqlc's `columnGenerator`, the same seam). Returns
    the query's columns (None when it has none) and the messages of its errors."""

    def __call__(self, sql: str, catalog: Catalog) -> tuple[Sequence[QueryColumn] | None, list[str]]: ...


def _no_analyzer(sql: str, catalog: Catalog) -> tuple[Sequence[QueryColumn] | None, list[str]]:
    return None, ["no statement analyzer was handed to the schema"]


@dataclass
class ConstraintInfo:
    #: pg_constraint.contype: p(rimary), u(nique), f(oreign), c(heck), x (exclusion), n (not null).
    kind: str
    columns: tuple[str, ...]
    #: A foreign key's referenced table (`schema.name`): DROP TABLE of it needs CASCADE.
    references: str | None = None
    #: A foreign key's referenced columns (DROP COLUMN of one needs CASCADE).
    ref_columns: tuple[str, ...] = ()
    #: CHECK ... NO INHERIT: inheriting tables and partitions do not get it.
    no_inherit: bool = False


@dataclass
class State:
    schemas: set[str] = field(default_factory=lambda: {"public", PG_TEMP})
    enums: dict[str, tuple[str, ...]] = field(default_factory=dict)
    tables: dict[str, Table] = field(default_factory=dict)
    indexes: dict[str, Index] = field(default_factory=dict)
    types: dict[str, PgType] = field(default_factory=dict)
    domains: dict[str, Domain] = field(default_factory=dict)
    composites: dict[str, CompositeType] = field(default_factory=dict)
    ranges: dict[str, RangeType] = field(default_factory=dict)
    sequences: dict[str, SequenceObj] = field(default_factory=dict)
    routines: dict[str, list[FunctionSig]] = field(default_factory=dict)
    operators: list[OperatorSig] = field(default_factory=list)
    extensions: dict[str, str] = field(default_factory=dict)
    #: Constraints by table (`schema.name`) and constraint name.
    constraints: dict[str, dict[str, ConstraintInfo]] = field(default_factory=dict)
    #: Views and materialized views -> the relations their query reads (DROP needs CASCADE).
    view_deps: dict[str, set[str]] = field(default_factory=dict)
    #: Views and materialized views -> the types their query names (casts) and the column names
    #: it refers to (`*` for a star): DROP TYPE finds the views that depend on a type or on a
    #: column it takes with it.
    view_types: dict[str, set[str]] = field(default_factory=dict)
    view_columns: dict[str, set[str]] = field(default_factory=dict)
    #: pg_depend of what reads columns by name: an index's keys, expressions and predicate (by
    #: index), a generated column's expression (by table, then column). DROP COLUMN takes
    #: those indexes with it and refuses (or with CASCADE takes) those generated columns.
    index_reads: dict[str, set[str]] = field(default_factory=dict)
    generated_reads: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    #: Inheritance: child table -> [(parent, is_partition)] (INHERITS, PARTITION OF, ATTACH).
    parents: dict[str, list[tuple[str, bool]]] = field(default_factory=dict)
    #: pg_depend's partition dependencies (`inherit.py`): a partition's index -> the parent's
    #: index it is a partition of; an inherited CHECK or foreign key (table, name) -> the
    #: parent's (table, name).
    index_parent: dict[str, str] = field(default_factory=dict)
    #: Identity columns (table, column), ALWAYS or BY DEFAULT: LIKE copies them only INCLUDING IDENTITY.
    identities: set[tuple[str, str]] = field(default_factory=set)
    constraint_parent: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    #: Extensions created that the catalog has no data for: their objects are unknown.
    unknown_extensions: list[str] = field(default_factory=list)
    #: The session's search path (SET search_path / set_config change it for what follows).
    search_path: tuple[str, ...] = DEFAULT_SEARCH_PATH
    problems: list[tuple[str, Problem]] = field(default_factory=list)
    #: Types the queries of views and CREATE TABLE AS (see `QueryTyper`).
    query_typer: QueryTyper = _no_analyzer
    #: The file being applied and the statement's range in it.
    path: str = ""
    text: str = ""
    stmt_start: int = 0
    stmt_end: int = 0
    #: Added to node locations: the offset of the text the parser saw within the file.
    base: int = 0

    # -- problems --------------------------------------------------------------------------
    def report(
        self,
        message: str,
        location: int | None = None,
        length: int = 1,
        severity: Severity = "error",
        word: str | None = None,
    ) -> None:
        """A problem at `location` (a parser offset) spanning `length` characters; else at the
        identifier `word` in the statement; else on the statement's first line."""
        if (location is None or location < 0) and word is not None:
            found = self._locate(word)
            if found is not None:
                location, length = found - self.base, len(word)
        if location is None or location < 0:
            line_end = self.text.find("\n", self.stmt_start, self.stmt_end)
            end = (line_end if line_end > self.stmt_start else self.stmt_end) - 1
            span = SqlSpan(self.stmt_start, max(self.stmt_start, end))
        else:
            start = self.base + location
            span = SqlSpan(start, start + max(length, 1) - 1)
        self.problems.append((self.path, Problem(message, span, severity)))

    def _locate(self, word: str) -> int | None:
        """The file offset of the last identifier token spelling `word` in the statement (the
        last: a name being used comes after the name of what is being changed)."""
        text = self.text[self.stmt_start : self.stmt_end]
        try:
            tokens = scan(text)
        except Exception:
            return None
        found = None
        for tok in tokens:
            spelled = text[tok.start : tok.end + 1]
            name = spelled[1:-1].replace('""', '"') if spelled.startswith('"') else fold(spelled)
            if name == word and (tok.name == "IDENT" or tok.kind != "NO_KEYWORD"):
                found = self.stmt_start + tok.start
        return found

    def error(self, message: str, location: int | None = None, length: int = 1, word: str | None = None) -> None:
        self.report(message, location, length, "error", word)

    def warning(self, message: str, location: int | None = None, length: int = 1, word: str | None = None) -> None:
        self.report(message, location, length, "warning", word)

    # -- names -----------------------------------------------------------------------------
    def creation_schema(self, schema: str | None, location: int | None) -> str | None:
        """Where CREATE puts an object: its schema, or the first existing schema of the search
        path; the schema must exist."""
        if schema is None:
            schema = next((s for s in self.search_path if s in self.schemas), None)
            if schema is None:
                self.error("no schema has been selected to create in (the search_path is empty)", location)
                return None
        elif schema not in self.schemas:
            self.error(
                f"schema {schema} does not exist{did_you_mean(schema, sorted(self.schemas))} (CREATE SCHEMA {schema} first)",
                location,
                len(schema),
            )
            return None
        return schema

    def find_key(self, schema: str | None, name: str, objects: Collection[str], relation: bool = False) -> str | None:
        for q in candidates(schema, name, self.search_path, relation):
            if str(q) in objects:
                return str(q)
        return None

    def relation_key(self, rv: PgNode) -> str | None:
        """The `schema.name` of an existing table, view or materialized view."""
        return self.find_key(rv.schemaname, rv.relname, self.tables, relation=True)

    def new_relation(
        self, rv: PgNode, if_not_exists: bool = False, *, types_too: bool = False, or_replace_view: bool = False
    ) -> tuple[str, str] | None:
        """Where CREATE [TEMP] TABLE/VIEW/SEQUENCE puts the relation, as (schema, key); None when
        it is not created: no such schema, or the name is taken (`relation_taken`), unless
        CREATE OR REPLACE VIEW replaces a view."""
        schema = self.creation_schema(PG_TEMP if rv.relpersistence == "t" else rv.schemaname, rv.location)
        if schema is None:
            return None
        key = f"{schema}.{rv.relname}"
        existing = self.tables.get(key)
        if or_replace_view and existing is not None and existing.kind == "view":
            return schema, key
        if self.relation_taken(key, rv, if_not_exists, types_too):
            return None
        return schema, key

    def relation_exists(self, key: str) -> bool:
        return key in self.tables or key in self.indexes or key in self.sequences

    def relation_taken(self, key: str, rv: PgNode, if_not_exists: bool = False, types_too: bool = False) -> bool:
        """Whether the relation `key` a CREATE names (at `rv`) already exists (or, `types_too`,
        a type of that name): PostgreSQL's error unless IF NOT EXISTS, which passes over it."""
        if not self.relation_exists(key) and not (types_too and key in self.types):
            return False
        if not if_not_exists:
            self.error(f"relation {key} already exists", rv.location, len(rv.relname))
        return True

    def missing_relation(self, rv: PgNode, what: str = "relation") -> None:
        shown = f"{rv.schemaname}.{rv.relname}" if rv.schemaname else rv.relname
        known = sorted(self.tables) if rv.schemaname else sorted({t.name for t in self.tables.values()})
        self.error(f"{what} {shown} does not exist{did_you_mean(shown, known)}", rv.location, len(shown))

    def children(self, key: str, partitions_only: bool = False) -> list[str]:
        """The tables inheriting from `key` directly."""
        return [
            c
            for c, links in self.parents.items()
            if any(p == key and (part or not partitions_only) for p, part in links)
        ]

    def descendants(self, key: str, partitions_only: bool = False) -> list[str]:
        """The tables inheriting from `key`, recursively (PostgreSQL recurses ALTER TABLE to
        them unless ONLY is written)."""
        out: list[str] = []
        todo = [key]
        while todo:
            parent = todo.pop()
            for child, links in self.parents.items():
                if child not in out and any(p == parent and (part or not partitions_only) for p, part in links):
                    out.append(child)
                    todo.append(child)
        return out

    # -- types -----------------------------------------------------------------------------
    def type_key(self, schema: str | None, name: str) -> str | None:
        return self.find_key(schema, name, self.types)

    def resolve_type(self, tn: PgNode, what: str = "", column: tuple[str, str] | None = None) -> PgType:
        """A TypeName as the type its values have; an unknown name is an error at its location
        (a warning when an extension the catalog has no data for may have created it) and an
        opaque type, so the rest of the statement still applies."""
        names = [n.sval for n in tn.names or ()]
        if tn.pct_type:
            found = self.pct_type(names, tn.location)
            base = found if found is not None else PgType("unknown")
        else:
            schema, name = split_name(names)
            found = self.named_type(schema, name)
            if found is None:
                shown = ".".join(names)
                context = f" ({what})" if what else ""
                if self.unknown_extensions:
                    self.warning(
                        f"type {shown} does not exist{context}; it may come from extension "
                        f"{', '.join(self.unknown_extensions)}, which the catalog has no data for",
                        tn.location,
                        len(shown),
                    )
                else:
                    self.error(
                        f"type {shown} does not exist{context}{_type_hint(name, self.types)}",
                        tn.location,
                        len(shown),
                    )
                found = PgType(name)
            base = found
        if tn.arrayBounds and not base.is_array:
            return base.array()
        return base

    def named_type(self, schema: str | None, name: str) -> PgType | None:
        if schema in (None, PG_CATALOG):
            found = builtin_type(name)
            if found is not None:
                return found
        key = self.type_key(schema, name)
        if key is not None:
            return self.types[key]
        if name.startswith("_"):
            key = self.type_key(schema, name[1:])
            if key is not None:
                return self.types[key].array()
        return None

    def pct_type(self, names: Sequence[str], location: int | None) -> PgType | None:
        """`table.column%TYPE`."""
        if len(names) < 2:
            self.error(f"improper %TYPE reference: {'.'.join(names)}", location)
            return None
        schema, table = split_name(names[:-1])
        key = self.find_key(schema, table, self.tables)
        col = self.tables[key].column(names[-1]) if key else None
        if col is None:
            self.error(f"column {'.'.join(names)} of %TYPE does not exist", location)
            return None
        return col.type

    def retype(self, key: str, new: PgType | None) -> None:
        """A type changed (enum labels, rename) or was dropped: columns, attributes and
        signatures holding it follow. `new` None leaves them as they are (a DROP ... CASCADE
        drops the columns in PostgreSQL; the catalog keeps them opaque)."""
        if new is None:
            return

        def swap(t: PgType) -> PgType:
            if t.name != key:
                return t
            return replace(new.array() if t.is_array else new, domain=t.domain)

        for tkey, table in list(self.tables.items()):
            if any(c.type.name == key for c in table.columns):
                cols = tuple(replace(c, type=swap(c.type)) for c in table.columns)
                self.tables[tkey] = replace(table, columns=cols)
        for ckey, comp in list(self.composites.items()):
            if any(t.name == key for _, t in comp.attributes):
                self.composites[ckey] = replace(comp, attributes=tuple((n, swap(t)) for n, t in comp.attributes))
        for dkey, dom in list(self.domains.items()):
            if dom.base.name == key:
                self.domains[dkey] = replace(dom, base=swap(dom.base))
                self.types[dkey] = replace(self.domains[dkey].base, domain=dkey)
        for fkey, sigs in self.routines.items():
            self.routines[fkey] = [
                replace(
                    s,
                    arg_types=tuple(swap(a) for a in s.arg_types),
                    return_type=swap(s.return_type),
                    out_columns=tuple((n, swap(t)) for n, t in s.out_columns),
                )
                for s in sigs
            ]

    # -- the result ------------------------------------------------------------------------
    def freeze(self, search_path: tuple[str, ...] = DEFAULT_SEARCH_PATH) -> Catalog:
        """The catalog so far; `search_path` is the one its lookups use (the session's, for
        analysing a view's query while the schema is applied)."""
        return Catalog(
            schemas=frozenset(self.schemas),
            enums=dict(self.enums),
            tables=dict(self.tables),
            indexes=dict(self.indexes),
            types=dict(self.types),
            domains=dict(self.domains),
            composites=dict(self.composites),
            ranges=dict(self.ranges),
            sequences=dict(self.sequences),
            routines={k: tuple(v) for k, v in self.routines.items() if v},
            operators=tuple(self.operators),
            extensions=dict(self.extensions),
            search_path=search_path,
        )


def qualified(key: str) -> QualifiedName:
    schema, _, name = key.partition(".")
    return QualifiedName(schema, name)


def object_name(name1: str, name2: str, label: str) -> str:
    """PostgreSQL's makeObjectName: `name1_name2_label` cut to 63 bytes by shortening the longer
    of name1 and name2 first (for the names of implicit indexes, constraints and sequences)."""
    overhead = len(label) + 1 + (1 if name2 else 0)
    n1, n2 = name1, name2
    while len(n1.encode()) + len(n2.encode()) + overhead > MAX_IDENTIFIER:
        if len(n1.encode()) > len(n2.encode()):
            n1 = n1[:-1]
        else:
            n2 = n2[:-1]
    return "_".join(part for part in (n1, n2, label) if part)


def choose_name(name1: str, name2: str, label: str, taken: Callable[[str], bool]) -> str:
    """PostgreSQL's ChooseRelationName: makeObjectName, then a number until the name is free."""
    name = object_name(name1, name2, label)
    n = 0
    while taken(name):
        n += 1
        name = object_name(name1, name2, f"{label}{n}")
    return name


#: Other databases' type names and PostgreSQL's for them.
_OTHER_DIALECTS = {
    "string": "text",
    "datetime": "timestamp",
    "nvarchar": "varchar",
    "tinyint": "int2",
    "mediumint": "int4",
    "blob": "bytea",
    "longtext": "text",
    "double": "float8",
    "long": "int8",
    "int64": "int8",
    "boolean_t": "bool",
}
#: The built-in types a misspelt name is most likely meant to be.
_COMMON_TYPES = [
    "int2",
    "int4",
    "int8",
    "numeric",
    "float4",
    "float8",
    "bool",
    "text",
    "varchar",
    "bpchar",
    "bytea",
    "date",
    "time",
    "timetz",
    "timestamp",
    "timestamptz",
    "interval",
    "uuid",
    "json",
    "jsonb",
    "inet",
    "cidr",
    "macaddr",
    "bit",
    "varbit",
    "money",
    "xml",
    "tsvector",
    "tsquery",
    "int4range",
    "tstzrange",
]


def _type_hint(name: str, declared: Collection[str]) -> str:
    if name in _OTHER_DIALECTS:
        return f"; PostgreSQL calls it {_OTHER_DIALECTS[name]}"
    return did_you_mean(name, sorted({*_COMMON_TYPES, *(k.split(".", 1)[1] for k in declared)}))
