"""Synthetic inputs for the codegen benchmark: a 100-table schema and N annotated RPCs over it.

The same statements are written twice: as a `.proto` for protoc-gen-pydb and as a `queries.sql`
plus `sqlc.yaml` for sqlc, so both tools generate code for exactly the same queries.
The RPCs cycle through six shapes (get by key, filtered list, insert, update, delete, join), each
on a different table, so the analyzer sees varied statements rather than one cached shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

TABLES = 100

# (column, SQL type, proto type, nullable)
_COLUMNS: tuple[tuple[str, str, str, bool], ...] = (
    ("id", "uuid PRIMARY KEY DEFAULT gen_random_uuid()", "string", False),
    ("parent_id", "uuid", "string", True),
    ("name", "text NOT NULL", "string", False),
    ("qty", "integer NOT NULL DEFAULT 0", "int32", False),
    ("amount", "bigint", "int64", True),
    ("flag", "boolean NOT NULL DEFAULT false", "bool", False),
    ("note", "text", "string", True),
    ("payload", "jsonb NOT NULL DEFAULT '{}'", "string", False),
    ("created_at", "timestamptz NOT NULL DEFAULT now()", "google.protobuf.Timestamp", False),
)
_SHAPES = ("Get", "List", "Create", "Rename", "Delete", "GetWithParent")


def table(i: int) -> str:
    return f"synth.t{i:03d}"


def row_message(i: int) -> str:
    return f"T{i:03d}"


def schema_sql(tables: int = TABLES) -> str:
    out = ["-- Synthetic schema for the codegen benchmark.", "CREATE SCHEMA synth;", ""]
    for i in range(tables):
        cols = []
        for name, sqltype, _, _ in _COLUMNS:
            if name == "parent_id" and i > 0:
                sqltype = f"uuid REFERENCES {table(i - 1)} (id)"
            cols.append(f"    {name} {sqltype}")
        out.append(f"CREATE TABLE {table(i)} (\n" + ",\n".join(cols) + "\n);")
        out.append(f"CREATE INDEX t{i:03d}_created ON {table(i)} (created_at);")
        out.append("")
    return "\n".join(out)


@dataclass(frozen=True)
class Query:
    """One statement, with what both generators need to know about it."""

    name: str  # RPC / sqlc query name
    sql: str  # with @param placeholders
    cardinality: str  # one | many | exec
    request_fields: tuple[tuple[str, str, bool], ...]  # (name, proto type, optional)
    response: str  # "row" (one row message), "rows" (repeated), "join", "empty"
    table_index: int


def queries(n: int, tables: int = TABLES) -> list[Query]:
    out: list[Query] = []
    for k in range(n):
        shape = _SHAPES[k % len(_SHAPES)]
        i = k % tables
        t = table(i)
        name = f"{shape}T{i:03d}N{k}"
        if shape == "Get":
            q = Query(name, f"SELECT * FROM {t} WHERE id = @id", "one", (("id", "string", False),), "row", i)
        elif shape == "List":
            q = Query(
                name,
                f"SELECT * FROM {t}\nWHERE qty >= @min_qty AND (flag OR note IS NOT NULL)\nORDER BY created_at DESC\nLIMIT @page_size",
                "many",
                (("min_qty", "int32", False), ("page_size", "int32", False)),
                "rows",
                i,
            )
        elif shape == "Create":
            q = Query(
                name,
                f"INSERT INTO {t} (name, qty, amount, note, payload)\n"
                "VALUES (@name, @qty, @amount, @note, COALESCE(@payload::jsonb, '{}'))\nRETURNING *",
                "one",
                (
                    ("name", "string", False),
                    ("qty", "int32", False),
                    ("amount", "int64", True),
                    ("note", "string", True),
                    ("payload", "string", True),
                ),
                "row",
                i,
            )
        elif shape == "Rename":
            q = Query(
                name,
                f"UPDATE {t} SET name = @name, qty = qty + 1 WHERE id = @id RETURNING *",
                "one",
                (("name", "string", False), ("id", "string", False)),
                "row",
                i,
            )
        elif shape == "Delete":
            q = Query(name, f"DELETE FROM {t} WHERE id = @id", "exec", (("id", "string", False),), "empty", i)
        else:
            p = table(i - 1 if i > 0 else 0)
            q = Query(
                name,
                f"SELECT c.id, c.name, c.qty, p.name AS parent_name\nFROM {t} AS c\n"
                f"LEFT JOIN {p} AS p ON p.id = c.parent_id\nWHERE c.id = @id",
                "one",
                (("id", "string", False),),
                "join",
                i,
            )
        out.append(q)
    return out


def _proto_string(sql: str) -> str:
    lines = sql.split("\n")
    parts = [line + ("\\n" if j < len(lines) - 1 else "") for j, line in enumerate(lines)]
    return "\n        ".join('"' + p.replace('"', '\\"') + '"' for p in parts)


def proto(n: int, tables: int = TABLES, package: str = "synth.v1") -> str:
    qs = queries(n, tables)
    used_tables = sorted({q.table_index for q in qs})
    out = [
        'syntax = "proto3";',
        "",
        f"package {package};",
        "",
        'import "google/protobuf/timestamp.proto";',
        'import "pydb/v1/options.proto";',
        "",
    ]
    for i in used_tables:
        fields = []
        for num, (name, _, ptype, nullable) in enumerate(_COLUMNS, start=1):
            label = "optional " if nullable and ptype != "google.protobuf.Timestamp" else ""
            fields.append(f"  {label}{ptype} {name} = {num};")
        out.append(f"message {row_message(i)} {{\n" + "\n".join(fields) + "\n}")
    out.append(
        "message JoinRow {\n  string id = 1;\n  string name = 2;\n  int32 qty = 3;\n  optional string parent_name = 4;\n}"
    )
    for q in qs:
        fields = [
            f"  {'optional ' if opt else ''}{ptype} {fname} = {num};"
            for num, (fname, ptype, opt) in enumerate(q.request_fields, start=1)
        ]
        out.append(f"message {q.name}Request {{\n" + "\n".join(fields) + "\n}")
        body = {
            "row": f"  {row_message(q.table_index)} row = 1;",
            "rows": f"  repeated {row_message(q.table_index)} rows = 1;",
            "join": "  JoinRow row = 1;",
            "empty": "",
        }[q.response]
        out.append(f"message {q.name}Response {{\n{body}\n}}" if body else f"message {q.name}Response {{}}")
    out.append("")
    out.append("service SynthService {")
    card = {"one": "CARDINALITY_ONE", "many": "CARDINALITY_MANY", "exec": "CARDINALITY_EXEC"}
    for q in qs:
        result = {"row": "row", "rows": "rows", "join": "row", "empty": ""}[q.response]
        result_line = f'\n      result_field: "{result}"' if result else ""
        out.append(
            f"  rpc {q.name}({q.name}Request) returns ({q.name}Response) {{\n"
            "    option (pydb.v1.sql) = {\n"
            f"      query:\n        {_proto_string(q.sql)}\n"
            f"      cardinality: {card[q.cardinality]}{result_line}\n"
            "    };\n  }"
        )
    out.append("}")
    return "\n".join(out) + "\n"


def sqlc_queries(n: int, tables: int = TABLES) -> str:
    card = {"one": ":one", "many": ":many", "exec": ":exec"}
    return "\n\n".join(f"-- name: {q.name} {card[q.cardinality]}\n{q.sql};" for q in queries(n, tables)) + "\n"


SQLC_YAML = """\
version: "2"
sql:
  - engine: "postgresql"
    schema: "schema.sql"
    queries: "queries.sql"
    gen:
      go:
        package: "db"
        out: "out"
"""


def write_pydb(root: Path, n: int, tables: int = TABLES) -> str:
    """Write `synth/v1/synth.proto` and its schema.sql under `root`; returns the proto's path."""
    d = root / "synth" / "v1"
    d.mkdir(parents=True, exist_ok=True)
    (d / "schema.sql").write_text(schema_sql(tables))
    (d / "synth.proto").write_text(proto(n, tables))
    return "synth/v1/synth.proto"


def write_sqlc(root: Path, schema: str, queries_sql: str) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "schema.sql").write_text(schema)
    (root / "queries.sql").write_text(queries_sql)
    (root / "sqlc.yaml").write_text(SQLC_YAML)
