#!/usr/bin/env python3
"""Extract PostgreSQL's built-in catalog into `pydb/plugin/sql/catalog/pgdata/pg15.json`.

Usage: extract_pg_catalog.py [DSN] [-o OUT]   (DSN also from $PGDATA_DSN; default
postgresql://postgres@127.0.0.1:5432/postgres). Needs a superuser on PostgreSQL 15.

Creates a scratch database, installs every contrib extension the server ships (those that
install), reads pg_type, pg_proc (+ pg_aggregate), pg_operator, pg_cast and the system columns,
drops the database and writes one compact JSON file. The output is deterministic: every list is
sorted and the JSON is written with fixed separators, so two runs against the same server give
the same bytes.

Layout (each object type grouped by owner: "" for the core pg_catalog, else the extension name):
  types:  {owner: [[name, display, category, preferred, typtype, array_name, extra, array_category,
                    sort_ops], ...]}
          extra: range → [subtype, multirange]; multirange → [range]; domain → [base]; else []
          sort_ops: what PostgreSQL finds when asked to ORDER BY ("o") and GROUP BY ("e") a value
                    of the type, and "O" / "E" for its array type (asked by preparing both)
  procs:  {owner: [[name, "argtype argtype", return_type, flags, n_defaults, "argname ...",
                    [[out_name, out_type], ...], n_direct_args], ...]}
          flags: prokind (f/a/w/p), provolatile (i/s/v), strict (t/f), retset (t/f),
                 variadic (t/f), aggkind (n/o/h, "-" for non-aggregates)
  ops:    {owner: [[symbol, left ("" for prefix), right, result], ...]}
  casts:  {owner: [[source, target, context (i/a/e), method (f/b/i)], ...]}
  system_columns: [[name, type], ...]
  relations: {"schema.relname": [relkind, [[column, type, not_null], ...]]}
          the tables and views of pg_catalog and information_schema, columns in attnum order;
          a domain-typed column (information_schema.sql_identifier) as its base type, which is
          what PostgreSQL describes a result column as; not_null from pg_attribute.attnotnull
Types are referred to by pg_type.typname (arrays as `_int4`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
OUT = Path(__file__).resolve().parent.parent / "pydb" / "plugin" / "sql" / "catalog" / "pgdata" / "pg15.json"
EXTENSION_DIR = Path("/usr/share/postgresql/15/extension")

# Pseudo-types no SQL caller can produce or consume: a function taking or returning one is not
# callable from a query (support functions for indexes, languages, triggers, aggregates' states).
UNCALLABLE_TYPES = (
    "internal",
    "trigger",
    "event_trigger",
    "language_handler",
    "fdw_handler",
    "index_am_handler",
    "tsm_handler",
    "table_am_handler",
)

# The owner of an object: "" for the core catalog, else the extension it belongs to.
OWNER = """
coalesce((select e.extname from pg_depend d join pg_extension e on e.oid = d.refobjid
          where d.classid = '{catalog}'::regclass and d.objid = {obj}.oid
            and d.refclassid = 'pg_extension'::regclass and d.deptype = 'e'), '')
"""

TYPES = f"""
select t.typname, format_type(t.oid, null), t.typcategory, t.typispreferred, t.typtype,
       coalesce(a.typname, ''),
       case t.typtype
         when 'r' then array[(select s.typname from pg_range r join pg_type s on s.oid = r.rngsubtype
                              where r.rngtypid = t.oid),
                             (select m.typname from pg_range r join pg_type m on m.oid = r.rngmultitypid
                              where r.rngtypid = t.oid)]
         when 'm' then array[(select g.typname from pg_range r join pg_type g on g.oid = r.rngtypid
                              where r.rngmultitypid = t.oid)]
         when 'd' then array[(select b.typname from pg_type b where b.oid = t.typbasetype)]
         else array[]::name[]
       end,
       coalesce(a.typcategory::text, ''),
       {OWNER.format(catalog="pg_type", obj="t")} as owner
from pg_type t
left join pg_type a on a.oid = t.typarray
where (t.typnamespace = 'pg_catalog'::regnamespace or {OWNER.format(catalog="pg_type", obj="t")} <> '')
  -- array types are described by their element; relation row types are not built-ins
  and not exists (select 1 from pg_type e where e.typarray = t.oid)
  and (t.typrelid = 0 or (select c.relkind from pg_class c where c.oid = t.typrelid) = 'c')
"""

PROCS = f"""
with io as (
  select unnest(array[typinput, typoutput, typreceive, typsend, typmodin, typmodout, typanalyze,
                      typsubscript])::oid as oid
  from pg_type
)
select p.proname,
       (select coalesce(string_agg(t.typname, ' ' order by i), '')
        from unnest(p.proargtypes::oid[]) with ordinality as a(typ, i) join pg_type t on t.oid = a.typ),
       r.typname,
       p.prokind::text || p.provolatile::text || case when p.proisstrict then 't' else 'f' end
         || case when p.proretset then 't' else 'f' end
         || case when p.provariadic <> 0 then 't' else 'f' end
         || coalesce(g.aggkind::text, '-'),
       p.pronargdefaults,
       (select coalesce(string_agg(coalesce(nullif(n, ''), '-'), ' ' order by i), '')
        from unnest(p.proargnames) with ordinality as a(n, i)
        where coalesce(p.proargmodes[i], 'i') in ('i', 'b', 'v')),
       (select coalesce(json_agg(json_build_array(p.proargnames[i], t.typname) order by i), '[]')
        from unnest(p.proallargtypes) with ordinality as a(typ, i) join pg_type t on t.oid = a.typ
        where p.proargmodes[i] in ('o', 'b', 't')),
       coalesce(g.aggnumdirectargs, 0),
       {OWNER.format(catalog="pg_proc", obj="p")} as owner
from pg_proc p
join pg_type r on r.oid = p.prorettype
left join pg_aggregate g on g.aggfnoid = p.oid
where (p.pronamespace = 'pg_catalog'::regnamespace or {OWNER.format(catalog="pg_proc", obj="p")} <> '')
  and p.oid not in (select oid from io)
  and r.typname <> all(%(uncallable)s)
  and not exists (select 1 from unnest(coalesce(p.proallargtypes, p.proargtypes::oid[])) a(typ)
                  join pg_type t on t.oid = a.typ where t.typname = any(%(uncallable)s))
"""

OPERATORS = f"""
select o.oprname, coalesce(l.typname, ''), r.typname, res.typname,
       {OWNER.format(catalog="pg_operator", obj="o")} as owner
from pg_operator o
left join pg_type l on l.oid = o.oprleft
join pg_type r on r.oid = o.oprright
join pg_type res on res.oid = o.oprresult
where (o.oprnamespace = 'pg_catalog'::regnamespace or {OWNER.format(catalog="pg_operator", obj="o")} <> '')
  and o.oprcode <> 0
  and res.typname <> all(%(uncallable)s)
  and coalesce(l.typname, '') <> all(%(uncallable)s) and r.typname <> all(%(uncallable)s)
"""

CASTS = f"""
select s.typname, t.typname, c.castcontext, c.castmethod,
       {OWNER.format(catalog="pg_cast", obj="c")} as owner
from pg_cast c join pg_type s on s.oid = c.castsource join pg_type t on t.oid = c.casttarget
"""

SYSTEM_COLUMNS = """
select a.attname, t.typname from pg_attribute a join pg_type t on t.oid = a.atttypid
where a.attrelid = 'pg_class'::regclass and a.attnum < 0 order by a.attnum desc
"""


# The system catalogs and views statements may read (pg_tables, pg_stat_activity,
# information_schema.columns, ...), not those an extension adds.
RELATIONS = f"""
select n.nspname || '.' || c.relname, c.relkind::text,
       (select json_agg(json_build_array(a.attname,
                                         case when t.typtype = 'd' then b.typname else t.typname end,
                                         case when a.attnotnull then 1 else 0 end) order by a.attnum)
        from pg_attribute a join pg_type t on t.oid = a.atttypid left join pg_type b on b.oid = t.typbasetype
        where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped)
from pg_class c join pg_namespace n on n.oid = c.relnamespace
where n.nspname in ('pg_catalog', 'information_schema') and c.relkind in ('r', 'v', 'm', 'p', 'f')
  and {OWNER.format(catalog="pg_class", obj="c")} = ''
order by 1
"""


def sort_ops(conn: psycopg.Connection[Any], row: tuple[Any, ...]) -> str:
    """Ask PostgreSQL whether ORDER BY / GROUP BY of a value of the type (and of its array)
    find an ordering / equality operator: "could not identify an ordering operator for type json"."""
    display, typtype, array_name = row[1], row[4], row[5]
    if typtype == "p":
        return ""
    flags = ""
    for spelled, order, equal in ((display, "o", "e"), (f"{display}[]", "O", "E")):
        if spelled != display and not array_name:
            continue
        for clause, flag in (("ORDER BY x", order), ("GROUP BY x", equal)):
            sql = f"SELECT x FROM (SELECT NULL::{spelled} AS x) s {clause}"
            if conn.pgconn.prepare(b"", sql.encode()).status == psycopg.pq.ExecStatus.COMMAND_OK:
                flags += flag
    return flags


def with_dbname(dsn: str, dbname: str) -> str:
    parts = {k: str(v) for k, v in conninfo_to_dict(dsn).items() if v is not None}
    parts["dbname"] = dbname
    return make_conninfo("", **parts)


def install_extensions(conn: psycopg.Connection[Any]) -> list[str]:
    """CREATE EXTENSION each contrib extension the server ships; the names that installed."""
    available = sorted(
        row[0] for row in conn.execute("select name from pg_available_extensions where name <> 'plpgsql'").fetchall()
    )
    installed = []
    for name in available:
        try:
            with conn.transaction():
                conn.execute(f'create extension if not exists "{name}" cascade')
            installed.append(name)
        except psycopg.Error as exc:
            print(f"extension {name} not installed: {exc}".strip(), file=sys.stderr)
    return installed


def grouped(rows: list[tuple[Any, ...]]) -> dict[str, list[list[Any]]]:
    """Rows whose last column is the owner → {owner: sorted rows without it}."""
    out: dict[str, list[list[Any]]] = {}
    for row in rows:
        *fields, owner = row
        out.setdefault(owner, []).append([_plain(f) for f in fields])
    return {owner: sorted(items, key=lambda r: json.dumps(r)) for owner, items in sorted(out.items())}


def _plain(value: Any) -> Any:
    if isinstance(value, bool):
        return 1 if value else 0
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def extract(dsn: str) -> dict[str, Any]:
    scratch = f"pydb_pgdata_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        major = admin.info.server_version // 10000
        admin.execute(f'create database "{scratch}"')
    try:
        with psycopg.connect(with_dbname(dsn, scratch), autocommit=True) as conn:
            install_extensions(conn)
            params = {"uncallable": list(UNCALLABLE_TYPES)}
            types = [(*row[:-1], sort_ops(conn, row), row[-1]) for row in conn.execute(TYPES).fetchall()]
            procs = conn.execute(PROCS, params).fetchall()
            ops = conn.execute(OPERATORS, params).fetchall()
            casts = conn.execute(CASTS).fetchall()
            syscols = conn.execute(SYSTEM_COLUMNS).fetchall()
            relations = conn.execute(RELATIONS).fetchall()
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'drop database if exists "{scratch}" with (force)')
    names = [t[0] for t in types]
    if len(names) != len(set(names)):
        raise SystemExit("type names collide between pg_catalog and an extension: the data file keys on typname")
    # Functions with their OUT columns as JSON text from the query: decode for a stable re-encode.
    procs = [(*p[:6], json.loads(p[6]) if isinstance(p[6], str) else p[6], *p[7:]) for p in procs]
    return {
        "postgresql": major,
        "types": grouped(types),
        "procs": grouped(procs),
        "ops": grouped(ops),
        "casts": grouped(casts),
        "system_columns": [list(row) for row in syscols],
        "relations": {
            name: [kind, json.loads(cols) if isinstance(cols, str) else cols] for name, kind, cols in relations
        },
    }


def dumps(data: dict[str, Any]) -> bytes:
    """The data file's bytes: compact, one owner group per line so diffs stay readable."""
    lines = ["{"]
    keys = list(data)
    for i, key in enumerate(keys):
        end = "," if i < len(keys) - 1 else ""
        value = data[key]
        if isinstance(value, dict):
            lines.append(f"{json.dumps(key)}:{{")
            owners = list(value)
            for j, owner in enumerate(owners):
                sep = "," if j < len(owners) - 1 else ""
                body = json.dumps(value[owner], separators=(",", ":"), ensure_ascii=False)
                lines.append(f"{json.dumps(owner)}:{body}{sep}")
            lines.append("}" + end)
        else:
            lines.append(f"{json.dumps(key)}:{json.dumps(value, separators=(',', ':'))}{end}")
    lines.append("}")
    return ("\n".join(lines) + "\n").encode()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("dsn", nargs="?", default=os.environ.get("PGDATA_DSN", DEFAULT_DSN))
    ap.add_argument("-o", "--output", type=Path, default=OUT)
    args = ap.parse_args(argv)
    data = dumps(extract(args.dsn))
    if str(args.output) == "-":
        sys.stdout.buffer.write(data)
    else:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_bytes(data)
        print(f"wrote {args.output} ({len(data)} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
