"""The catalog against PostgreSQL, the oracle.

A rich database (every object kind the catalog models, contrib extensions included) is built in
a scratch database; the real `pg_dump --schema-only` of it is fed to the catalog, and the
catalog must hold what pg_catalog holds: every relation's columns with their types and NOT NULL,
unique keys, enum labels in order, domains, composite types, sequences, functions. Statements over
every object are then analysed and compared with PostgreSQL's own description of them
(PREPARE + describe). Issue 11's examples and the catalog's own behaviours are in
test_sql_catalog_ddl.py.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from corpus.run import positional
from pydb.plugin.sql.analyzer.analyzer import analyze
from pydb.plugin.sql.catalog.model import Catalog
from pydb.plugin.sql.frontend import build_catalog, load_catalog
from pydb.plugin.sql.schema.source import read_files
from pydb.plugin.sql.syntax.grammar import parameter_spans
from support.pg import Cluster, scratch_database

#: Every object kind the catalog models, built the way people build them (unqualified names in
#: public, mixed case, renames, ALTER TYPE, INHERITS, partitions, LIKE, views, functions, ...).
RICH_SCHEMA = """
CREATE EXTENSION IF NOT EXISTS citext;
CREATE EXTENSION IF NOT EXISTS pgcrypto;
CREATE EXTENSION IF NOT EXISTS "uuid-ossp";
CREATE EXTENSION IF NOT EXISTS hstore;
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE EXTENSION IF NOT EXISTS btree_gist;
CREATE SCHEMA app;
CREATE TYPE Status AS ENUM ('new', 'done');
ALTER TYPE status ADD VALUE 'running' BEFORE 'done';
CREATE TYPE app.mood AS ENUM ('happy', 'sad');
ALTER TYPE app.mood RENAME VALUE 'sad' TO 'blue';
CREATE TYPE app.old_name AS ENUM ('x');
ALTER TYPE app.old_name RENAME TO renamed;
CREATE DOMAIN app.positive AS int NOT NULL CHECK (VALUE > 0);
CREATE DOMAIN email AS citext CHECK (VALUE LIKE '%@%');
CREATE TYPE app.address AS (street text, zip varchar(10));
CREATE TYPE app.floatrange AS RANGE (subtype = float8);
CREATE SEQUENCE app.ticket_seq AS int;
CREATE TABLE app.Users (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    "groupId" int,
    Email email NOT NULL UNIQUE,
    mood app.mood,
    status status NOT NULL DEFAULT 'new',
    home app.address,
    tags text[],
    attrs hstore,
    flags bit(3),
    bits bit varying(8),
    addr inet,
    net cidr,
    mac macaddr,
    score app.positive,
    token uuid DEFAULT gen_random_uuid(),
    legacy uuid DEFAULT uuid_generate_v4(),
    during tstzrange,
    fr app.floatrange,
    kind app.renamed,
    created_at timestamptz NOT NULL DEFAULT now(),
    name_upper text GENERATED ALWAYS AS (upper(email::text)) STORED,
    ticket int DEFAULT nextval('app.ticket_seq')
);
ALTER SEQUENCE app.ticket_seq OWNED BY app.users.ticket;
CREATE TABLE app.events (
    id bigserial,
    user_id bigint REFERENCES app.users (id),
    at date NOT NULL,
    payload jsonb,
    PRIMARY KEY (id, at)
) PARTITION BY RANGE (at);
CREATE TABLE app.events_2024 PARTITION OF app.events FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
CREATE TABLE app.base (id int NOT NULL, note text);
CREATE TABLE app.derived (extra bool) INHERITS (app.base);
CREATE TABLE app.copy (LIKE app.base INCLUDING ALL, more int);
ALTER TABLE app.base RENAME COLUMN note TO remark;
ALTER TABLE app.base ADD COLUMN added_later numeric(10, 2);
CREATE TABLE app.booking (room int, during tstzrange, EXCLUDE USING gist (room WITH =, during WITH &&));
CREATE TABLE app.uniq (a int, b int, UNIQUE NULLS NOT DISTINCT (a, b), CHECK (a < 100));
CREATE UNIQUE INDEX uniq_a_partial ON app.uniq (a) WHERE b IS NULL;
CREATE INDEX users_email_trgm ON app.users USING gin ((email::text) gin_trgm_ops);
CREATE VIEW app.active_users AS SELECT id, email, mood, "groupId" AS group_id FROM app.users WHERE status <> 'done';
CREATE MATERIALIZED VIEW app.user_counts AS SELECT status, count(*) AS n FROM app.users GROUP BY status;
CREATE TABLE app.snapshot AS SELECT id, created_at FROM app.users;
CREATE FUNCTION app.add(a int, b int DEFAULT 1) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT a + b';
CREATE FUNCTION app.user_ids(since timestamptz) RETURNS TABLE (id bigint, at timestamptz) LANGUAGE sql STABLE
    AS 'SELECT id, created_at FROM app.users WHERE created_at >= since';
CREATE FUNCTION app.touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER users_touch BEFORE UPDATE ON app.users FOR EACH ROW EXECUTE FUNCTION app.touch();
CREATE PROCEDURE app.noop(n int) LANGUAGE sql AS 'SELECT 1';
CREATE TABLE app.dropme (x int);
DROP TABLE app.dropme;
COMMENT ON TABLE app.users IS 'people';
COMMENT ON COLUMN app.users.email IS 'login';
GRANT SELECT ON app.users TO PUBLIC;
"""

#: Statements over every object; each is analysed and described by PostgreSQL.
STATEMENTS = [
    "SELECT * FROM app.users WHERE id = @id",
    "SELECT * FROM app.events WHERE at >= @since",
    "SELECT * FROM app.events_2024",
    "SELECT * FROM app.base",
    "SELECT * FROM app.derived WHERE extra = @extra",
    "SELECT * FROM app.copy",
    "SELECT * FROM app.booking",
    "SELECT * FROM app.uniq",
    "SELECT * FROM app.active_users",
    "SELECT * FROM app.user_counts",
    "SELECT * FROM app.snapshot",
    "SELECT u.id, e.payload FROM app.users u JOIN app.events e ON e.user_id = u.id WHERE u.mood = @mood",
    'INSERT INTO app.users (email, mood, status, "groupId", flags, addr, score) '
    "VALUES (@email, @mood, @status, @group_id, @flags, @addr, @score) RETURNING id, name_upper, ticket",
    "UPDATE app.base SET remark = @remark, added_later = @amount WHERE id = @id RETURNING *",
    "INSERT INTO app.uniq (a, b) VALUES (@a, @b) ON CONFLICT (a, b) DO NOTHING",
    "DELETE FROM app.events_2024 WHERE id = @id AND at = @at RETURNING user_id",
]


def _pg_bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    if not candidates:
        pytest.fail(f"{name} not found: install the PostgreSQL client")
    return str(candidates[-1])


@pytest.fixture(scope="module")
def rich_db(pg_server: tuple[str, Cluster | None]) -> Iterator[str]:
    with scratch_database(pg_server[0], schema=None) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(RICH_SCHEMA)
        yield url


@pytest.fixture(scope="module")
def dump(rich_db: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dump") / "schema.sql"
    text = subprocess.run(
        [_pg_bin("pg_dump"), "--schema-only", "--dbname", rich_db], check=True, capture_output=True, text=True
    ).stdout
    out.write_text(text, encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def conn(rich_db: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(rich_db, autocommit=True) as c:
        yield c


@pytest.fixture(scope="module")
def restored(pg_server: tuple[str, Cluster | None], dump: Path) -> Iterator[psycopg.Connection]:
    """The dump restored by psql into a database of its own: what PostgreSQL makes of the dump
    (it does not keep everything, e.g. the column order of a table that inherits a column added
    to its parent later)."""
    with scratch_database(pg_server[0], schema=None) as url:
        subprocess.run(
            [_pg_bin("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(dump), "--dbname", url],
            check=True,
            capture_output=True,
        )
        with psycopg.connect(url, autocommit=True) as c:
            yield c


@pytest.fixture(scope="module")
def dumped_catalog(dump: Path) -> Catalog:
    catalog, diagnostics = load_catalog(read_files(dump))
    assert [d.format() for d in diagnostics if d.severity == "error"] == []
    return catalog


# -- what PostgreSQL holds, spelled the catalog's way ---------------------------------------------
class PgTypes:
    """OID -> the catalog's spelling: built-in and extension types by name (`int4`, `citext`),
    arrays with `[]`, schema-declared types qualified (`app.mood`), domains as their base type
    (what a result column of a domain type is described as)."""

    def __init__(self, conn: psycopg.Connection) -> None:
        rows = conn.execute(
            """SELECT t.oid, t.typname, t.typelem, n.nspname, t.typtype, t.typbasetype,
                      EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_type'::regclass
                              AND d.objid = t.oid AND d.deptype = 'e')
               FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace"""
        ).fetchall()
        self.raw = {row[0]: row[1:] for row in rows}

    def spell(self, oid: int) -> str:
        name, elem, schema, kind, base, from_extension = self.raw[oid]
        if kind == "d":
            return self.spell(base)
        if name.startswith("_") and elem:
            element = self.raw[elem]
            if not (element[0].startswith("_") or element[3] == "d"):
                return self.spell(elem) + "[]"
        if schema == "pg_catalog" or from_extension:
            return str(name)
        return f"{schema}.{name}"


def _relations(conn: psycopg.Connection, schemas: list[str]) -> dict[str, tuple[str, list[tuple[str, str, bool]]]]:
    """`schema.name` -> (relkind, [(column, type, NOT NULL incl. a NOT NULL domain)])."""
    types = PgTypes(conn)
    out: dict[str, tuple[str, list[tuple[str, str, bool]]]] = {}
    rows = conn.execute(
        """SELECT n.nspname || '.' || c.relname, c.relkind, a.attname, a.atttypid,
                  a.attnotnull OR coalesce(t.typnotnull, false)
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
           JOIN pg_type t ON t.oid = a.atttypid
           WHERE n.nspname = ANY(%(schemas)s) AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
             AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
                             AND d.objid = c.oid AND d.deptype = 'e')
           ORDER BY 1, a.attnum""",
        {"schemas": schemas},
    ).fetchall()
    for key, kind, column, type_oid, not_null in rows:
        out.setdefault(key, (kind, []))[1].append((column, types.spell(type_oid), not_null))
    return out


_KINDS = {"r": "table", "p": "partitioned_table", "v": "view", "m": "materialized_view", "f": "foreign_table"}


def assert_catalog_matches_postgres(
    catalog: Catalog,
    conn: psycopg.Connection,
    schemas: tuple[str, ...] = ("app", "public"),
    indexes: bool = True,
) -> None:
    """Relations, keys, enums, domains, composites, sequences and the functions of `schemas`
    (but public's functions: public holds the extensions', which are builtins.py's)."""
    types = PgTypes(conn)
    named = {"schemas": list(schemas)}
    relations = _relations(conn, list(schemas))
    assert sorted(catalog.tables) == sorted(relations)
    for key, (kind, columns) in relations.items():
        table = catalog.tables[key]
        assert table.kind == _KINDS[kind], key
        ours = [(c.name, str(c.type), c.not_null) for c in table.columns]
        if kind in ("v", "m"):  # a view's NOT NULL is inferred from its query, PostgreSQL records none
            assert [c[:2] for c in ours] == [c[:2] for c in columns], key
        else:
            assert ours == columns, key
    unique = conn.execute(
        """SELECT n.nspname || '.' || c.relname, array_agg(a.attname ORDER BY k.ord)
           FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
           CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
           JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
           WHERE i.indisunique AND i.indpred IS NULL AND n.nspname = ANY(%(schemas)s)
             AND NOT EXISTS (SELECT 1 FROM unnest(i.indkey) z WHERE z = 0)
           GROUP BY i.indexrelid, 1""",
        named,
    ).fetchall()
    expected_keys: dict[str, set[tuple[str, ...]]] = {}
    for key, cols in unique:
        expected_keys.setdefault(key, set()).add(tuple(cols))
    ours_keys = {k: set(t.unique_keys) for k, t in catalog.tables.items() if t.unique_keys}
    assert ours_keys == expected_keys
    if indexes:  # (an index PostgreSQL creates on a partition for its parent's key is not modelled)
        pg_indexes = conn.execute(
            """SELECT n.nspname || '.' || c.relname, tn.nspname || '.' || t.relname, i.indisunique,
                      i.indpred IS NOT NULL
               FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
               JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace tn ON tn.oid = t.relnamespace
               WHERE n.nspname = ANY(%(schemas)s)""",
            named,
        ).fetchall()
        assert {k: (i.table, i.unique, i.partial) for k, i in catalog.indexes.items()} == {
            name: (table, unique, partial) for name, table, unique, partial in pg_indexes
        }
    enums = conn.execute(
        """SELECT n.nspname || '.' || t.typname, array_agg(e.enumlabel ORDER BY e.enumsortorder)
           FROM pg_enum e JOIN pg_type t ON t.oid = e.enumtypid JOIN pg_namespace n ON n.oid = t.typnamespace
           GROUP BY 1"""
    ).fetchall()
    assert catalog.enums == {name: tuple(labels) for name, labels in enums}
    domains = conn.execute(
        """SELECT n.nspname || '.' || t.typname, t.typbasetype, t.typnotnull FROM pg_type t
           JOIN pg_namespace n ON n.oid = t.typnamespace WHERE t.typtype = 'd' AND n.nspname = ANY(%(schemas)s)""",
        named,
    ).fetchall()
    assert {k: (str(d.base), d.not_null) for k, d in catalog.domains.items()} == {
        name: (types.spell(base), not_null) for name, base, not_null in domains
    }
    composites = conn.execute(
        """SELECT n.nspname || '.' || t.typname, array_agg(a.attname || ' ' || a.atttypid ORDER BY a.attnum)
           FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
           JOIN pg_class c ON c.oid = t.typrelid AND c.relkind = 'c'
           JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
           WHERE n.nspname = ANY(%(schemas)s) GROUP BY 1""",
        named,
    ).fetchall()
    assert {k: [(n, str(t)) for n, t in c.attributes] for k, c in catalog.composites.items()} == {
        name: [(a.split()[0], types.spell(int(a.split()[1]))) for a in attrs] for name, attrs in composites
    }
    sequences = conn.execute(
        """SELECT n.nspname || '.' || c.relname, s.seqtypid,
                  (SELECT tn.nspname || '.' || tc.relname || '.' || ta.attname FROM pg_depend d
                   JOIN pg_class tc ON tc.oid = d.refobjid JOIN pg_namespace tn ON tn.oid = tc.relnamespace
                   JOIN pg_attribute ta ON ta.attrelid = tc.oid AND ta.attnum = d.refobjsubid
                   WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i'))
           FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid JOIN pg_namespace n ON n.oid = c.relnamespace"""
    ).fetchall()
    assert {k: (str(s.type), ".".join(s.owned_by) if s.owned_by else None) for k, s in catalog.sequences.items()} == {
        name: (types.spell(oid), owner) for name, oid, owner in sequences
    }
    functions = conn.execute(
        """SELECT n.nspname || '.' || p.proname, p.proargtypes::oid[], p.prorettype, p.proretset, p.provolatile,
                  p.prokind, p.pronargdefaults, p.provariadic <> 0
           FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
           WHERE n.nspname = ANY(%(schemas)s) AND n.nspname <> 'public' ORDER BY 1""",
        named,
    ).fetchall()
    our_functions = sorted(
        (
            f"{sig.schema}.{sig.name}",
            [str(a) for a in sig.arg_types],
            str(sig.return_type),
            sig.returns_set,
            sig.volatility,
            sig.kind,
            sig.n_defaults,
            sig.variadic,
        )
        for key, sigs in catalog.routines.items()
        if key.split(".", 1)[0] in schemas and not key.startswith("public.")
        for sig in sigs
    )
    assert our_functions == sorted(
        (name, [types.spell(a) for a in args], types.spell(ret), retset, vol, kind, ndefaults, variadic)
        for name, args, ret, retset, vol, kind, ndefaults, variadic in functions
    )


def test_pg_dump_of_a_rich_database_is_accepted_as_is(dump: Path) -> None:
    _, diagnostics = load_catalog(read_files(dump))
    assert [d.format() for d in diagnostics if d.severity == "error"] == []
    notes = [d.message for d in diagnostics if d.severity == "warning" and "psql meta-command" in d.message]
    assert notes and all("\\restrict" in n or "\\unrestrict" in n for n in notes)


def test_the_dumped_catalog_holds_what_pg_catalog_holds(dumped_catalog: Catalog, restored: psycopg.Connection) -> None:
    assert_catalog_matches_postgres(dumped_catalog, restored)


def test_the_hand_written_schema_gives_the_same_catalog(conn: psycopg.Connection) -> None:
    catalog, problems = build_catalog(RICH_SCHEMA)
    assert [p.message for p in problems if p.severity == "error"] == []
    assert_catalog_matches_postgres(catalog, conn, indexes=False)


#: ALTER, RENAME, SET SCHEMA and DROP of every kind, in an order that makes each depend on the
#: ones before it.
ALTERATIONS = """
CREATE SCHEMA s1;
CREATE SCHEMA s2;
CREATE TYPE s1.color AS ENUM ('red', 'green');
CREATE TABLE s1.paint (id serial PRIMARY KEY, c s1.color NOT NULL, code int UNIQUE, note text, legacy int);
CREATE INDEX paint_note ON s1.paint (note);
ALTER TYPE s1.color RENAME TO colour;
ALTER TYPE s1.colour ADD VALUE 'blue' AFTER 'red';
ALTER TABLE s1.paint RENAME TO pigment;
ALTER TABLE s1.pigment RENAME COLUMN note TO remark;
ALTER TABLE s1.pigment DROP COLUMN legacy;
ALTER TABLE s1.pigment ALTER COLUMN code TYPE bigint;
ALTER TABLE s1.pigment ALTER COLUMN remark SET NOT NULL;
ALTER TABLE s1.pigment DROP CONSTRAINT paint_code_key;
ALTER TABLE s1.pigment ADD CONSTRAINT pigment_remark_key UNIQUE (remark);
ALTER TABLE s1.pigment SET SCHEMA s2;
ALTER SCHEMA s1 RENAME TO s3;
CREATE DOMAIN s2.short AS varchar(5);
ALTER DOMAIN s2.short SET NOT NULL;
CREATE TABLE s2.labels (l s2.short, n int);
CREATE TYPE s2.gone AS ENUM ('x');
CREATE TABLE s2.uses_gone (g s2.gone, keep int);
DROP TYPE s2.gone CASCADE;
CREATE TABLE s2.p (id int NOT NULL, at date NOT NULL) PARTITION BY RANGE (at);
CREATE TABLE s2.p_2020 (id int NOT NULL, at date NOT NULL);
ALTER TABLE s2.p ATTACH PARTITION s2.p_2020 FOR VALUES FROM ('2020-01-01') TO ('2021-01-01');
ALTER TABLE s2.p ADD COLUMN extra text;
CREATE TABLE s2.parent (a int);
CREATE TABLE s2.child (a int, b int);
ALTER TABLE s2.child INHERIT s2.parent;
ALTER TABLE s2.parent ADD COLUMN c text;
CREATE FUNCTION s2.f(x int) RETURNS int LANGUAGE sql AS 'SELECT x';
CREATE FUNCTION s2.f(x text) RETURNS text LANGUAGE sql AS 'SELECT x';
DROP FUNCTION s2.f(int);
ALTER FUNCTION s2.f(text) RENAME TO g;
CREATE SEQUENCE s2.counter;
ALTER SEQUENCE s2.counter RENAME TO ticker;
CREATE VIEW s2.v AS SELECT id, c FROM s2.pigment;
ALTER VIEW s2.v RENAME TO w;
CREATE TABLE s2.tmp (x int);
DROP TABLE s2.tmp, s2.labels;
ALTER TABLE s2.pigment ADD COLUMN tag text;
ALTER TABLE s2.pigment ALTER COLUMN tag SET DEFAULT 'x';
"""


def test_alter_rename_set_schema_and_drop_give_what_postgres_holds(pg_server: tuple[str, Cluster | None]) -> None:
    catalog, problems = build_catalog(ALTERATIONS)
    assert problems == []
    with scratch_database(pg_server[0], schema=None) as url, psycopg.connect(url, autocommit=True) as conn:
        conn.execute(ALTERATIONS)
        assert_catalog_matches_postgres(catalog, conn, ("s2", "s3"))


def describe(conn: psycopg.Connection, sql: str) -> tuple[dict[str, str], list[tuple[str, str]]]:
    types = PgTypes(conn)
    order: list[str] = []
    for _, name in sorted((s.start, n) for n, found in parameter_spans(sql).items() for s in found):
        if name not in order:
            order.append(name)
    conn.pgconn.prepare(b"", positional(sql)[0].encode())
    described = conn.pgconn.describe_prepared(b"")
    params = {name: types.spell(described.param_type(i)) for i, name in enumerate(order)}
    columns = [
        ((described.fname(i) or b"").decode(), types.spell(described.ftype(i))) for i in range(described.nfields)
    ]
    return params, columns


@pytest.mark.parametrize("sql", STATEMENTS)
def test_statements_over_every_object_get_the_types_postgres_reports(
    dumped_catalog: Catalog, restored: psycopg.Connection, sql: str
) -> None:
    analysis, problems = analyze(sql, dumped_catalog)
    assert [p.message for p in problems if p.severity == "error"] == []
    assert analysis is not None
    params, columns = describe(restored, sql)
    assert {p.name: str(p.type) for p in analysis.params} == params
    assert [(c.name, str(c.type)) for c in analysis.columns or ()] == columns
