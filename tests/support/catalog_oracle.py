"""The catalog differential: a schema applied to PostgreSQL and to pydb's catalog, compared after
every file (each migration of a chain).

What is compared, as pg_catalog holds it on PostgreSQL's side and as the catalog models it:
relations (kind); columns (type, NOT NULL, default present, generated, identity ALWAYS);
constraints (name, kind, columns, referenced table); indexes (name, table, unique, keys,
predicate present); enum labels in order; domains (base type, NOT NULL); view columns and types
(columns of every relation); functions and procedures (name, argument types, result, SETOF).
Objects of extensions are left out on both sides (the catalog takes them from data extracted from
PostgreSQL, not from the DDL). Typmods and a foreign key's referenced columns are compared once
the catalog carries them (`Column.typmod`, `ConstraintInfo.ref_columns`).

The catalog is reached only through the imports below (the layout of pydb/plugin/sql/ changes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from pydb.plugin.sql.catalog.types import PgType
from pydb.plugin.sql.frontend import query_columns as _query_columns
from pydb.plugin.sql.schema import apply as _ddl
from pydb.plugin.sql.schema.state import State as _State
from pydb.plugin.sql.syntax.pgparse import PgSyntaxError as _PgSyntaxError
from pydb.plugin.sql.syntax.pgparse import parse as _parse

#: An object's facts, comparable: a kind of object -> key -> value.
Snapshot = dict[str, dict[str, Any]]

KINDS = ("relations", "columns", "constraints", "indexes", "enums", "domains", "functions")
USER_SCHEMAS = "n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_(toast|temp)'"


def _not_extension(catalog: str, oid: str) -> str:
    return (
        f"NOT EXISTS (SELECT 1 FROM pg_depend e WHERE e.classid = '{catalog}'::regclass "
        f"AND e.objid = {oid} AND e.deptype = 'e')"
    )


# -- the catalog's side --------------------------------------------------------------------------


class CatalogSide:
    """pydb's catalog being built file by file (one session, as the plugin applies a chain)."""

    def __init__(self) -> None:
        self.state = _State(query_typer=_query_columns)  # views typed as the plugin types them

    def apply(self, path: str, sql: str) -> list[str]:
        """Applies one file; returns its error messages."""
        before = len(self.state.problems)
        self.state.path, self.state.text = path, sql
        _ddl._apply_text(self.state, _ddl.skip_meta_lines(self.state, sql))
        return [p.message for _, p in self.state.problems[before:] if p.severity == "error"]

    def snapshot(self) -> Snapshot:
        state = self.state
        catalog = state.freeze()
        out: Snapshot = {kind: {} for kind in KINDS}
        for key, table in catalog.tables.items():
            out["relations"][key] = table.kind
            for col in table.columns:
                typmod = getattr(col, "typmod", None)
                out["columns"][f"{key}.{col.name}"] = (
                    _type_text(col.type),
                    col.not_null,
                    col.has_default,
                    col.generated,
                    col.identity_always,
                    *((typmod,) if typmod is not None else ()),
                )
        for table_key, constraints in state.constraints.items():
            for name, info in constraints.items():
                if info.kind not in "pufcx":
                    continue
                ref_columns = getattr(info, "ref_columns", None)
                out["constraints"][f"{table_key}.{name}"] = (
                    info.kind,
                    tuple(info.columns) if info.kind in "puf" else (),
                    info.references or "",
                    *((tuple(ref_columns),) if ref_columns is not None else ()),
                )
        for key, index in catalog.indexes.items():
            keys = tuple("(expr)" if c.startswith("(") else c for c in index.columns)
            out["indexes"][key] = (index.table, index.unique, keys, index.partial)
        out["enums"] = {key: tuple(labels) for key, labels in catalog.enums.items()}
        out["domains"] = {key: (_type_text(d.base), d.not_null) for key, d in catalog.domains.items()}
        for key, sigs in catalog.routines.items():
            for sig in sigs:
                if sig.extension:
                    continue
                args = ", ".join(_type_text(t) for t in sig.arg_types)
                result = _type_text(sig.return_type)
                out["functions"][f"{key}({args})"] = (sig.kind, ("SETOF " if sig.returns_set else "") + result)
        return out


def _type_text(t: PgType) -> str:
    """`name[]`, a schema's type qualified (an extension's bare, as the catalog names it),
    `domain(base)` for a domain."""
    text = t.name + ("[]" if t.is_array else "")
    return f"{t.domain}({text})" if t.domain else text


# -- PostgreSQL's side ---------------------------------------------------------------------------


def pg_snapshot(conn: psycopg.Connection[Any]) -> Snapshot:
    """What pg_catalog holds of the user's objects, in CatalogSide.snapshot's form."""
    types = _pg_types(conn)
    out: Snapshot = {kind: {} for kind in KINDS}
    relkinds = {"r": "table", "p": "partitioned_table", "v": "view", "m": "materialized_view", "f": "foreign_table"}
    for schema, name, relkind in conn.execute(
        f"""SELECT n.nspname, c.relname, c.relkind::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND {USER_SCHEMAS} AND {_not_extension("pg_class", "c.oid")}"""
    ):
        out["relations"][f"{schema}.{name}"] = relkinds[relkind]
    for schema, rel, col, typid, not_null, has_default, identity, generated, typmod in conn.execute(
        f"""SELECT n.nspname, c.relname, a.attname, a.atttypid, a.attnotnull, a.atthasdef,
            a.attidentity::text, a.attgenerated::text, a.atttypmod
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND a.attnum > 0 AND NOT a.attisdropped AND {USER_SCHEMAS}
            AND {_not_extension("pg_class", "c.oid")}"""
    ):
        out["columns"][f"{schema}.{rel}.{col}"] = (
            types[typid],
            not_null,
            has_default or identity != "",
            generated == "s",
            identity == "a",
            typmod,
        )
    for schema, rel, name, kind, columns, ref, ref_columns in conn.execute(
        f"""SELECT n.nspname, c.relname, k.conname, k.contype::text,
            ARRAY(SELECT a.attname FROM unnest(k.conkey) WITH ORDINALITY u(num, pos)
                  JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.num ORDER BY u.pos),
            CASE WHEN k.confrelid <> 0 THEN (SELECT rn.nspname || '.' || r.relname FROM pg_class r
                 JOIN pg_namespace rn ON rn.oid = r.relnamespace WHERE r.oid = k.confrelid) ELSE '' END,
            ARRAY(SELECT a.attname FROM unnest(k.confkey) WITH ORDINALITY u(num, pos)
                  JOIN pg_attribute a ON a.attrelid = k.confrelid AND a.attnum = u.num ORDER BY u.pos)
        FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE k.contype IN ('p', 'u', 'f', 'c', 'x') AND {USER_SCHEMAS} AND {_not_extension("pg_class", "c.oid")}"""
    ):
        out["constraints"][f"{schema}.{rel}.{name}"] = (
            kind,
            tuple(columns) if kind in "puf" else (),
            ref,
            tuple(ref_columns),
        )
    for schema, name, table_schema, table, unique, keys, partial in conn.execute(
        f"""SELECT n.nspname, ic.relname, tn.nspname, t.relname, i.indisunique,
            ARRAY(SELECT CASE WHEN u.num = 0 THEN '(expr)' ELSE a.attname::text END
                  FROM unnest(i.indkey::int2[]) WITH ORDINALITY u(num, pos)
                  LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = u.num
                  WHERE u.pos <= i.indnkeyatts ORDER BY u.pos),
            i.indpred IS NOT NULL
        FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_namespace n ON n.oid = ic.relnamespace
        JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace tn ON tn.oid = t.relnamespace
        WHERE {USER_SCHEMAS} AND {_not_extension("pg_class", "t.oid")}"""
    ):
        out["indexes"][f"{schema}.{name}"] = (f"{table_schema}.{table}", unique, tuple(keys), partial)
    for schema, name, labels in conn.execute(
        f"""SELECT n.nspname, t.typname, ARRAY(SELECT e.enumlabel::text FROM pg_enum e WHERE e.enumtypid = t.oid
                   ORDER BY e.enumsortorder)
        FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
        WHERE t.typtype = 'e' AND {USER_SCHEMAS} AND {_not_extension("pg_type", "t.oid")}"""
    ):
        out["enums"][f"{schema}.{name}"] = tuple(labels)
    for schema, name, base, not_null in conn.execute(
        f"""SELECT n.nspname, t.typname, t.typbasetype, t.typnotnull FROM pg_type t
        JOIN pg_namespace n ON n.oid = t.typnamespace
        WHERE t.typtype = 'd' AND {USER_SCHEMAS} AND {_not_extension("pg_type", "t.oid")}"""
    ):
        out["domains"][f"{schema}.{name}"] = (types[base], not_null)
    for schema, name, kind, args, result, retset in conn.execute(
        f"""SELECT n.nspname, p.proname, p.prokind::text, p.proargtypes::oid[], p.prorettype, p.proretset
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE {USER_SCHEMAS} AND {_not_extension("pg_proc", "p.oid")}"""
    ):
        signature = f"{schema}.{name}({', '.join(types[a] for a in args)})"
        out["functions"][signature] = (kind, ("SETOF " if retset else "") + types[result])
    return out


def _pg_types(conn: psycopg.Connection[Any]) -> dict[int, str]:
    """Every type's name as CatalogSide spells it: pg_catalog's and extensions' bare, the user's
    qualified, arrays as `elem[]`, a domain as `domain(base)`."""
    rows = {
        oid: (schema, name, typtype, elem, base, ext)
        for oid, schema, name, typtype, elem, base, ext in conn.execute(
            f"""SELECT t.oid, n.nspname, t.typname, t.typtype::text,
                CASE WHEN t.typcategory = 'A' AND t.typlen = -1 THEN t.typelem ELSE 0 END, t.typbasetype,
                NOT {_not_extension("pg_type", "t.oid")}
            FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace"""
        )
    }

    def name(oid: int) -> str:
        schema, typname, typtype, elem, base, ext = rows[oid]
        if elem:
            inner = name(elem)
            if inner.endswith(")"):  # an array over a domain: the domain names it
                domain, _, base_text = inner.partition("(")
                return f"{domain}({base_text[:-1]}[])"
            return inner + "[]"
        if typtype == "d":
            return f"{schema}.{typname}({name(base)})"
        return typname if schema == "pg_catalog" or ext else f"{schema}.{typname}"

    return {oid: name(oid) for oid in rows}


def pg_statements(text: str) -> list[str]:
    """A file as psql applies it, one statement at a time (psql's meta-lines blanked)."""
    text = _ddl.skip_meta_lines(_State(), text)
    try:
        statements = _parse(text)
    except _PgSyntaxError:
        return [text]
    return [text[stmt.start : stmt.end] for stmt in statements]


def pg_apply(conn: psycopg.Connection[Any], sql: str) -> list[str]:
    """Applies a file statement by statement (autocommit); returns PostgreSQL's errors."""
    errors = []
    for statement in pg_statements(sql):
        try:
            conn.execute(statement)
        except psycopg.Error as err:
            errors.append(str(err).split("\n")[0])
    return errors


# -- the comparison ------------------------------------------------------------------------------


@dataclass
class Step:
    """One file of a chain: both sides' errors and where their snapshots differ."""

    path: str
    pg_errors: list[str]
    catalog_errors: list[str]
    differences: list[str] = field(default_factory=list)


def compare(pg: Snapshot, ours: Snapshot) -> list[str]:
    """`kind key: PostgreSQL value != catalog value`, one line per difference, sorted."""
    out = []
    for kind in KINDS:
        a, b = pg.get(kind, {}), ours.get(kind, {})
        for key in sorted(a.keys() | b.keys()):
            if kind == "columns" and key in a and key in b and _is_view_column(pg, key):
                # pg_attribute keeps no NOT NULL for a view's columns; the catalog's is inferred.
                a = {**a, key: (a[key][0], b[key][1], *a[key][2:])}
            if key not in b:
                out.append(f"{kind} {key}: in PostgreSQL {a[key]}, missing from the catalog")
            elif key not in a:
                out.append(f"{kind} {key}: in the catalog {b[key]}, not in PostgreSQL")
            elif _comparable(a[key], b[key]) != b[key]:
                out.append(f"{kind} {key}: PostgreSQL {a[key]} != catalog {b[key]}")
    return out


def _is_view_column(pg: Snapshot, column_key: str) -> bool:
    relation = column_key.rsplit(".", 1)[0]
    return pg["relations"].get(relation) in ("view", "materialized_view")


def _comparable(pg: Any, ours: Any) -> Any:
    """PostgreSQL's value cut to what the catalog models (a column's typmod, an FK's referenced
    columns: present on the catalog's side only once it carries them)."""
    if isinstance(pg, tuple) and isinstance(ours, tuple) and len(ours) < len(pg):
        return pg[: len(ours)]
    return pg


def run_chain(url: str, files: Sequence[tuple[str, str]]) -> list[Step]:
    """Applies each (path, sql) to the database at `url` and to a fresh catalog; compares after each."""
    side = CatalogSide()
    steps = []
    with psycopg.connect(url, autocommit=True) as conn:
        for path, sql in files:
            pg_errors = pg_apply(conn, sql)
            catalog_errors = side.apply(path, sql)
            step = Step(path, pg_errors, catalog_errors)
            step.differences = compare(pg_snapshot(conn), side.snapshot())
            steps.append(step)
    return steps
