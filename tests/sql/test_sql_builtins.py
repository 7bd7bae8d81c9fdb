"""The built-in catalog data (sql/catalog/pgdata, sql/catalog/builtins.py) against PostgreSQL itself."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pglast
import psycopg
import pytest
from pydb.plugin.sql.catalog.builtins import load_builtins
from pydb.plugin.sql.catalog.types import PgType
from support.pg import ROOT, Cluster, scratch_database

SCRIPT = ROOT / "protoc-gen-pydb" / "scripts" / "extract_pg_catalog.py"
DATA = ROOT / "protoc-gen-pydb" / "pydb" / "plugin" / "sql" / "catalog" / "pgdata" / "pg15.json"
EXTENSIONS = ("citext", "hstore", "ltree", "cube", "seg", "isn", "pg_trgm", "intarray", "lo")


@pytest.fixture(scope="module")
def pg(pg_server: tuple[str, Cluster | None]) -> Iterator[psycopg.Connection]:
    with scratch_database(pg_server[0], schema=None) as url, psycopg.connect(url, autocommit=True) as conn:
        for ext in EXTENSIONS:
            conn.execute(f'CREATE EXTENSION IF NOT EXISTS "{ext}" CASCADE')
        yield conn


def test_every_type_has_postgresqls_display_name_and_category(pg: psycopg.Connection) -> None:
    b = load_builtins().with_extensions(EXTENSIONS)
    rows = pg.execute(
        """SELECT t.typname, format_type(t.oid, NULL), t.typcategory, t.typispreferred, t.typtype,
                  e.typname IS NOT NULL
           FROM pg_type t LEFT JOIN pg_type e ON e.typarray = t.oid
           WHERE t.typnamespace IN ('pg_catalog'::regnamespace, 'public'::regnamespace) AND t.typrelid = 0
             AND coalesce(e.typrelid, 0) = 0"""
    ).fetchall()
    assert len(rows) > 200
    for typname, display, category, preferred, typtype, is_array in rows:
        t = b.type_named(typname)
        assert t is not None, typname
        assert t.is_array is is_array, typname
        info = b.type_info(t)
        assert info is not None
        assert (info.display, info.category, info.preferred) == (display, category, preferred), typname
        if not is_array:
            assert info.typtype == typtype, typname


SPELLINGS = [
    "integer", "int", "int4", "smallint", "bigint", "real", "double precision", "float", "float(10)",
    "float(30)", "decimal", "dec(3,1)", "numeric(10,2)", "boolean", "bool", "character varying(3)",
    "varchar", "character", "char(2)", "national character varying", "bit", "bit varying(4)",
    "timestamp", "timestamp without time zone", "timestamp with time zone", "timestamptz",
    "time with time zone", "time", "interval", "interval year to month", "text", '"char"', "name",
    "int[]", "integer[3]", "text[]", "json", "jsonb", "uuid", "inet", "cidr", "macaddr", "macaddr8",
    "money", "tsvector", "tsquery", "int4range", "tstzmultirange", "xml", "bytea", "varbit", "oid",
    "regclass", "point", "pg_lsn", "citext", "hstore", "ltree", "cube", "isbn", "lo", "citext[]",
    "Character Varying(10)[]", "INT[][]", "timestamp(3) with time zone", "time(2) without time zone",
    "interval second(3)", "char", "NUMERIC(10, 2)[]", "double precision[]", "pg_catalog.text",
]  # fmt: skip


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_type_names_as_pglast_parses_them_resolve_like_postgresql(pg: psycopg.Connection, spelling: str) -> None:
    """pglast's TypeName (`pg_catalog.int4`, `[]` bounds) → type_named → PostgreSQL's name."""
    b = load_builtins().with_extensions(EXTENSIONS)
    stmt = pglast.parse_sql(f"SELECT NULL::{spelling}")[0].stmt
    assert isinstance(stmt, pglast.ast.SelectStmt) and stmt.targetList
    target = stmt.targetList[0]
    assert isinstance(target, pglast.ast.ResTarget) and isinstance(target.val, pglast.ast.TypeCast)
    type_name = target.val.typeName
    assert type_name is not None and type_name.names
    name = ".".join(str(n.sval) for n in type_name.names if isinstance(n, pglast.ast.String))
    t = b.type_named(name + ("[]" if type_name.arrayBounds else ""))
    assert t is not None, name
    row = pg.execute(f"SELECT format_type(pg_typeof(NULL::{spelling}), NULL)").fetchone()
    assert row is not None and b.display(t) == row[0]


# A bare `char` is the pg_type name (pglast's spelling of `"char"`): only the pglast test has it.
@pytest.mark.parametrize("spelling", [s for s in SPELLINGS if s != "char"])
def test_type_names_as_written_resolve_like_postgresql(pg: psycopg.Connection, spelling: str) -> None:
    """The raw spelling (as sqlglot or a user writes it, typmods and bounds included)."""
    b = load_builtins().with_extensions(EXTENSIONS)
    t = b.type_named(spelling)
    assert t is not None, spelling
    row = pg.execute(f"SELECT format_type(pg_typeof(NULL::{spelling}), NULL)").fetchone()
    assert row is not None and b.display(t) == row[0]


def test_sql_standard_spellings_resolve_directly() -> None:
    b = load_builtins()
    assert b.type_named("character varying") == PgType("varchar")
    assert b.type_named("double precision") == PgType("float8")
    assert b.type_named("timestamp with time zone") == PgType("timestamptz")
    assert b.type_named("_int4") == PgType("int4", True)
    assert b.type_named("no_such_type") is None
    assert b.type_named("citext") is None  # not installed in the core view
    assert b.with_extensions(["citext"]).type_named("citext") == PgType("citext")


def test_system_columns_are_postgresqls(pg: psycopg.Connection) -> None:
    pg.execute("CREATE TEMP TABLE sys_probe (a int)")
    rows = pg.execute(
        """SELECT attname, format_type(atttypid, NULL) FROM pg_attribute
           WHERE attrelid = 'sys_probe'::regclass AND attnum < 0 ORDER BY attnum DESC"""
    ).fetchall()
    b = load_builtins()
    assert [(n, b.display(t)) for n, t in b.system_columns] == rows
    assert [n for n, _ in b.system_columns] == ["ctid", "xmin", "cmin", "xmax", "cmax", "tableoid"]


@pytest.mark.parametrize("ext", EXTENSIONS)
def test_extension_objects_exist_in_postgresql(pg: psycopg.Connection, ext: str) -> None:
    b = load_builtins().with_extensions(EXTENSIONS)
    found = b.extension(ext)
    assert found is not None and found.functions
    for sig in found.functions:
        args = ", ".join(b.display(t) for t in sig.arg_types)
        row = pg.execute("SELECT to_regprocedure(%s) IS NOT NULL", [f"{sig.name}({args})"]).fetchone()
        assert row == (True,), f"{sig.name}({args})"
    for op in found.operators:
        left = b.display(op.left) if op.left is not None else "NONE"
        row = pg.execute(
            "SELECT to_regoperator(%s) IS NOT NULL", [f"{op.name}({left}, {b.display(op.right)})"]
        ).fetchone()
        assert row == (True,), op
    count = pg.execute(
        """SELECT count(*) FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
           WHERE d.classid = 'pg_proc'::regclass AND d.deptype = 'e' AND e.extname = %s""",
        [ext],
    ).fetchone()
    assert count is not None and 0 < len(found.functions) <= count[0]


def test_core_view_hides_extensions_until_installed() -> None:
    core = load_builtins()
    assert not any(s.extension for s in core.functions("similarity"))
    with_trgm = core.with_extensions(["pg_trgm"])
    assert [s.extension for s in with_trgm.functions("similarity")] == ["pg_trgm"]
    assert core.extension("no_such_extension") is None
    assert {"citext", "pgcrypto", "uuid-ossp", "hstore", "ltree", "pg_trgm"} <= set(core.extension_names)
    assert "" not in core.extension_names and list(core.extension_names) == sorted(core.extension_names)


def test_function_rows_carry_postgresqls_attributes() -> None:
    b = load_builtins()
    (each,) = b.functions("jsonb_each")
    assert each.returns_set and each.out_columns == (("key", PgType("text")), ("value", PgType("jsonb")))
    assert [s.volatility for s in b.functions("random")] == ["v"]
    make_interval = b.functions("make_interval")[0]
    assert make_interval.n_defaults == 7 and make_interval.arg_names[0] == "years"
    assert {s.kind for s in b.functions("rank")} == {"w", "a"}
    assert all(s.variadic for s in b.functions("concat"))
    assert not b.functions("int4in"), "type I/O support functions are not callable built-ins"


def test_loading_is_fast() -> None:
    """Every plugin run loads the catalog: measured in a fresh interpreter, after the imports
    the plugin makes anyway (the whole sql package, through sql/catalog/types.py)."""
    code = (
        "import pydb.plugin.sql.catalog.types; import time; t = time.perf_counter();"
        "from pydb.plugin.sql.catalog.builtins import load_builtins; b = load_builtins();"
        "[b.functions(n) for n in ('now', 'count', 'coalesce', 'jsonb_each', 'array_agg')];"
        "print(time.perf_counter() - t)"
    )
    elapsed = min(float(subprocess.check_output([sys.executable, "-c", code], text=True)) for _ in range(3))
    print(f"builtins import + load: {elapsed * 1000:.1f} ms")
    assert elapsed < 0.15


def _extract(url: str, out: Path) -> bytes:
    subprocess.run([sys.executable, str(SCRIPT), url, "-o", str(out)], check=True, capture_output=True)
    return out.read_bytes()


@pytest.mark.slow
def test_extraction_is_deterministic_and_matches_the_committed_file(
    pg_server: tuple[str, Cluster | None], tmp_path: Path
) -> None:
    started = time.perf_counter()
    first = _extract(pg_server[0], tmp_path / "a.json")
    second = _extract(pg_server[0], tmp_path / "b.json")
    assert first == second
    assert first == DATA.read_bytes(), "the committed pgdata is stale: run `make pgdata`"
    assert time.perf_counter() - started < 120
