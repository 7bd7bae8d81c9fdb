"""Unit tests of the plugin, without protoc: FileDescriptorProtos are built in Python (with the
source_code_info protoc would attach), put in a CodeGeneratorRequest and handed to
`pydb.plugin.main.generate`. Also the catalog, the analyzer's typing and the type tables."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2, wrappers_pb2
from pydb.plugin.bind import compiler
from pydb.plugin.bind import typemap as t
from pydb.plugin.diagnostics import Diagnostic, SqlSpan
from pydb.plugin.sql.analyzer.analyzer import analyze
from pydb.plugin.sql.catalog.types import PgType
from pydb.plugin.sql.frontend import build_catalog
from pydb.v1 import options_pb2
from support.plugin_harness import run_plugin

F = descriptor_pb2.FieldDescriptorProto
SCHEMA = """
CREATE SCHEMA app;
CREATE TYPE app.mood AS ENUM ('happy', 'sad');
CREATE TABLE app.people (
    id bigint PRIMARY KEY,
    name text NOT NULL,
    nick text,
    mood app.mood NOT NULL DEFAULT 'happy'
);
"""

# FileDescriptorProto.service = 6, .method = 2, .options = 4; (pydb.v1.sql) = 58470.
SQL_OPTION = [6, 0, 2, 0, 4, options_pb2.sql.number]


def field(name: str, number: int, kind: F.Type.ValueType, type_name: str = "", *, repeated: bool = False) -> F:
    label = F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL
    return F(name=name, number=number, type=kind, type_name=type_name, label=label)


def person_file(
    sql: str, *, cardinality: int = options_pb2.CARDINALITY_ONE, syntax: str = "proto3"
) -> descriptor_pb2.FileDescriptorProto:
    """people.proto: a Person message, a request with `id`, one RPC `Get` carrying `sql`; its
    option is recorded at line 20, column 5 (0-based 19, 4)."""
    f = descriptor_pb2.FileDescriptorProto(name="people.proto", package="people", syntax=syntax)
    f.enum_type.add(name="Mood").value.extend(
        [
            descriptor_pb2.EnumValueDescriptorProto(name="MOOD_UNSPECIFIED", number=0),
            descriptor_pb2.EnumValueDescriptorProto(name="MOOD_HAPPY", number=1),
            descriptor_pb2.EnumValueDescriptorProto(name="MOOD_SAD", number=2),
        ]
    )
    person = f.message_type.add(name="Person")
    person.field.extend(
        [
            field("id", 1, F.TYPE_INT64),
            field("name", 2, F.TYPE_STRING),
            field("nick", 3, F.TYPE_MESSAGE, ".google.protobuf.StringValue"),
            field("mood", 4, F.TYPE_ENUM, ".people.Mood"),
        ]
    )
    f.message_type.add(name="GetRequest").field.append(field("id", 1, F.TYPE_INT64))
    f.message_type.add(name="GetResponse").field.append(field("person", 1, F.TYPE_MESSAGE, ".people.Person"))
    f.dependency.append("google/protobuf/wrappers.proto")
    method = f.service.add(name="People").method.add(
        name="Get", input_type=".people.GetRequest", output_type=".people.GetResponse"
    )
    opt = method.options.Extensions[options_pb2.sql]
    opt.query = sql
    opt.cardinality = cardinality  # type: ignore[assignment]
    opt.result_field = "person"
    f.source_code_info.location.add(path=[6, 0, 2, 0], span=[18, 2, 22, 3])
    f.source_code_info.location.add(path=SQL_OPTION, span=[19, 4, 21, 6])
    return f


def wrappers_file() -> descriptor_pb2.FileDescriptorProto:
    out = descriptor_pb2.FileDescriptorProto()
    wrappers_pb2.DESCRIPTOR.CopyToProto(out)
    return out


def run(tmp_path: Path, *files: descriptor_pb2.FileDescriptorProto, schema: str = SCHEMA) -> tuple[str, str, list[str]]:
    """(error, stderr, generated file names) for generating the last of `files`."""
    (tmp_path / "schema.sql").write_text(schema, encoding="utf-8")
    outcome = run_plugin([wrappers_file(), *files], [files[-1].name], parameter=f"proto_path={tmp_path}")
    return outcome.error, outcome.warnings, list(outcome.files)


def test_a_valid_rpc_generates(tmp_path: Path) -> None:
    error, warnings, files = run(tmp_path, person_file("SELECT id, name, nick, mood FROM app.people WHERE id = @id"))
    assert (error, warnings) == ("", "")
    assert files == ["people_pydb.py", "people_pydb_server.py"]


def test_the_location_is_the_option_from_source_code_info(tmp_path: Path) -> None:
    error, _, files = run(tmp_path, person_file("SELECT id, name FROM app.peple WHERE id = @id"))
    assert files == []
    assert error == (
        "1 error in SQL annotations:\n"
        "people.proto:20:5: error: Get: table app.peple does not exist; did you mean app.people?\n"
        "    SELECT id, name FROM app.peple WHERE id = @id\n"
        "                         ^^^^^^^^^\n"
        "    (SQL line 1, column 22)"
    )


def test_without_the_option_location_the_method_is_named(tmp_path: Path) -> None:
    f = person_file("SELECT id FROM app.people WHERE id = @nope")
    del f.source_code_info.location[1]
    error, _, _ = run(tmp_path, f)
    assert error.splitlines()[1].startswith("people.proto:19:3: error: Get: parameter @nope is not a field")


def test_without_source_code_info_the_location_is_1_1(tmp_path: Path) -> None:
    f = person_file("SELECT id FROM app.people WHERE id = @nope")
    f.ClearField("source_code_info")
    error, _, _ = run(tmp_path, f)
    assert error.splitlines()[1].startswith("people.proto:1:1: error: Get: parameter @nope")


def test_presence_nullable_columns_need_wrappers_optional_or_proto2(tmp_path: Path) -> None:
    # `nick` is nullable: it lands in the StringValue wrapper field `nick`...
    error, _, _ = run(tmp_path, person_file("SELECT id, name, nick, mood FROM app.people WHERE id = @id"))
    assert error == ""
    # ...but not in the plain string field `name`.
    error, _, _ = run(tmp_path, person_file("SELECT id, nick AS name FROM app.people WHERE id = @id"))
    assert "result column name may be NULL, but people.Person.name (string) cannot tell NULL" in error
    # In proto2 an `optional` scalar has presence.
    sql = "SELECT id, nick AS name, nick, mood FROM app.people WHERE id = @id"
    error, _, _ = run(tmp_path, person_file(sql, syntax="proto2"))
    assert error == ""


def test_a_crash_in_one_rpc_is_an_internal_error_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(*args: object, **kwargs: object) -> object:
        raise KeyError("boom")

    monkeypatch.setattr(compiler, "analyze", explode)
    error, _, files = run(tmp_path, person_file("SELECT id FROM app.people WHERE id = @id"))
    assert files == []
    assert "people.proto:20:5: error: internal error in protoc-gen-pydb while compiling RPC Get: KeyError: 'boom'" in (
        error
    )
    assert "This is a bug in protoc-gen-pydb, not in your proto; please report it" in error
    assert "Traceback" not in error


def test_a_crash_reading_the_schema_is_an_internal_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(*args: object) -> object:
        raise ValueError("bad")

    monkeypatch.setattr(compiler, "load_catalog", explode)
    error, _, _ = run(tmp_path, person_file("SELECT id FROM app.people WHERE id = @id"))
    assert f"internal error in protoc-gen-pydb while compiling schema {tmp_path}/schema.sql: ValueError: bad" in error
    assert "Traceback" not in error


def test_schema_errors_name_the_schema_line(tmp_path: Path) -> None:
    schema = SCHEMA + "CREATE TABLE app.broken (id int PRIMARY KEY, x text DEFAULT);\nCREATE TABLE app.s (id STRING);\n"
    sql = "SELECT id, name, nick, mood FROM app.people WHERE id = @id"
    error, _, files = run(tmp_path, person_file(sql), schema=schema)
    assert files == []
    lines = [row for row in error.splitlines() if ": error: " in row]
    assert lines == [
        f'{tmp_path}/schema.sql:10:60: error: syntax error at or near ")"',
        f"{tmp_path}/schema.sql:11:24: error: type string does not exist (column id); PostgreSQL calls it text",
    ]


def test_enum_values_map_label_by_label(tmp_path: Path) -> None:
    f = person_file("SELECT id, mood FROM app.people WHERE id = @id")
    f.enum_type[0].value.add(name="MOOD_BORED", number=3)
    error, _, _ = run(tmp_path, f)
    assert "people.Mood.MOOD_BORED has no label in app.mood (happy, sad)" in error
    f = person_file("SELECT id, mood FROM app.people WHERE id = @id")
    del f.enum_type[0].value[2]
    error, _, _ = run(tmp_path, f)
    assert "label 'sad' of app.mood has no value MOOD_SAD in people.Mood" in error


def test_errors_then_warnings_and_each_sorted_by_location() -> None:
    from pydb.plugin.diagnostics import format_all

    out = format_all(
        [
            Diagnostic("b.proto", 3, 1, "w", "warning"),
            Diagnostic("b.proto", 9, 1, "e2"),
            Diagnostic("a.proto", 5, 2, "e1"),
        ]
    )
    assert out.splitlines() == ["a.proto:5:2: error: e1", "b.proto:9:1: error: e2", "b.proto:3:1: warning: w"]


def test_the_caret_sits_under_the_fragment_on_its_own_line() -> None:
    sql = "SELECT id\nFROM t\nWHERE nme = 1"
    d = Diagnostic("x.proto", 4, 5, "E: column nme does not exist", sql=sql, span=SqlSpan(23, 25))
    assert d.format().splitlines() == [
        "x.proto:4:5: error: E: column nme does not exist",
        "    WHERE nme = 1",
        "          ^^^",
        "    (SQL line 3, column 7)",
    ]


# -- the catalog -------------------------------------------------------------------------------


def test_the_catalog_reads_the_supported_ddl() -> None:
    catalog, problems = build_catalog(
        """
        CREATE SCHEMA IF NOT EXISTS s;
        CREATE TYPE s.kind AS ENUM ('a', 'b');
        CREATE TABLE s.t (
            id bigserial PRIMARY KEY,
            code varchar(12) NOT NULL UNIQUE,
            ratio double precision,
            at timestamp with time zone NOT NULL DEFAULT now(),
            tags text[] NOT NULL DEFAULT '{}',
            kind s.kind,
            blob bytea, born date, wake time, span interval, doc json, n numeric(10, 2), small int2,
            CONSTRAINT positive CHECK (ratio > 0)
        );
        CREATE TABLE s.u (id int PRIMARY KEY, t_id bigint REFERENCES s.t (id), UNIQUE (t_id, id));
        COMMENT ON TABLE s.t IS 'x';
        COMMENT ON COLUMN s.t.code IS 'y';
        ALTER TABLE s.t ADD COLUMN note text NOT NULL DEFAULT '';
        ALTER TABLE s.t ALTER COLUMN ratio SET NOT NULL;
        ALTER TABLE s.t ALTER COLUMN note DROP DEFAULT;
        ALTER TABLE s.t ALTER COLUMN small TYPE int8;
        ALTER TABLE s.t DROP COLUMN blob;
        ALTER TYPE s.kind ADD VALUE 'c' BEFORE 'b';
        CREATE UNIQUE INDEX t_note ON s.t (note);
        CREATE INDEX t_live ON s.t (at) WHERE kind = 'a';
        CREATE FUNCTION s.f() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END; $$;
        CREATE TRIGGER t_f BEFORE UPDATE ON s.t FOR EACH ROW EXECUTE FUNCTION s.f();
        """
    )
    assert problems == []
    table = catalog.table("s.t")
    assert table is not None
    cols = {c.name: (str(c.type), c.not_null, c.has_default) for c in table.columns}
    assert cols == {
        "id": ("int8", True, True),
        "code": ("varchar", True, False),
        "ratio": ("float8", True, False),
        "at": ("timestamptz", True, True),
        "tags": ("text[]", True, True),
        "kind": ("s.kind", False, False),
        "born": ("date", False, False),
        "wake": ("time", False, False),
        "span": ("interval", False, False),
        "doc": ("json", False, False),
        "n": ("numeric", False, False),
        "small": ("int8", False, False),
        "note": ("text", True, False),
    }
    assert table.primary_key == ("id",)
    assert set(table.unique_keys) == {("code",), ("id",), ("note",)}
    assert catalog.enums["s.kind"] == ("a", "c", "b")
    kind = table.column("kind")
    assert kind is not None and kind.type.labels == ("a", "c", "b")
    assert catalog.indexes["s.t_live"].partial
    u = catalog.table("s.u")
    assert u is not None and ("t_id", "id") in u.unique_keys


# -- the analyzer's typing ---------------------------------------------------------------------


ANALYZER_SCHEMA = """
CREATE SCHEMA app;
CREATE TYPE app.mood AS ENUM ('happy', 'sad');
CREATE TABLE app.t (
    id bigint PRIMARY KEY, name text NOT NULL, nick text, mood app.mood NOT NULL,
    at timestamptz NOT NULL, data jsonb NOT NULL, tags text[] NOT NULL, n int4 NOT NULL
);
CREATE TABLE app.u (id uuid PRIMARY KEY, t_id bigint NOT NULL, label text NOT NULL);
"""


@pytest.mark.parametrize(
    ("sql", "params", "columns"),
    [
        ("SELECT id FROM app.t WHERE name = @a AND n > @b", {"a": "text", "b": "int4"}, [("id", "int8", False)]),
        ("SELECT nick FROM app.t WHERE id = ANY(@ids)", {"ids": "int8[]"}, [("nick", "text", True)]),
        ("SELECT id FROM app.t WHERE at + @age > now()", {"age": "interval"}, [("id", "int8", False)]),
        ("SELECT id FROM app.t WHERE at > now() - make_interval(secs => @s)", {"s": "float8"}, [("id", "int8", False)]),
        ("SELECT id FROM app.t WHERE mood = @m LIMIT @lim", {"m": "app.mood", "lim": "int8"}, [("id", "int8", False)]),
        ("SELECT data ->> @k AS v FROM app.t", {"k": "text"}, [("v", "text", True)]),
        ("SELECT data @> @f AS v FROM app.t", {"f": "jsonb"}, [("v", "bool", False)]),
        ("SELECT COALESCE(nick, @d) AS v FROM app.t", {"d": "text"}, [("v", "text", False)]),
        (
            "SELECT t.id, u.label FROM app.t t LEFT JOIN app.u u ON u.t_id = t.id",
            {},
            [("id", "int8", False), ("label", "text", True)],
        ),
        (
            "SELECT count(*) AS c, sum(n) AS s, avg(n) AS a FROM app.t",
            {},
            [("c", "int8", False), ("s", "int8", True), ("a", "numeric", True)],
        ),
        ("SELECT sum(n) OVER (ORDER BY at) AS s FROM app.t", {}, [("s", "int8", False)]),
        ("SELECT x FROM unnest(@xs::uuid[]) AS u(x)", {"xs": "uuid[]"}, [("x", "uuid", False)]),
        ("SELECT tag FROM app.t, unnest(tags) AS u(tag)", {}, [("tag", "text", True)]),
        (
            "UPDATE app.t SET name = @name WHERE id = @id RETURNING at + INTERVAL '1 day' AS due",
            {"name": "text", "id": "int8"},
            [("due", "timestamptz", False)],
        ),
        (
            "INSERT INTO app.u (id, t_id, label) SELECT @id, id, @l FROM app.t RETURNING id",
            {"id": "uuid", "l": "text"},
            [("id", "uuid", False)],
        ),
    ],
)
def test_parameter_and_column_types_are_inferred(
    sql: str, params: dict[str, str], columns: list[tuple[str, str, bool]]
) -> None:
    catalog, problems = build_catalog(ANALYZER_SCHEMA)
    assert problems == []
    analysis, problems = analyze(sql, catalog)
    assert problems == []
    assert analysis is not None
    assert {p.name: str(p.type) for p in analysis.params} == params
    assert [(c.name, str(c.type), c.nullable) for c in analysis.columns or ()] == columns


def test_an_unknown_table_reports_once_not_once_per_column() -> None:
    catalog, _ = build_catalog(ANALYZER_SCHEMA)
    _, problems = analyze("SELECT *, name, x.y FROM app.nope WHERE id = @id AND nick = 'a'", catalog)
    assert [p.message for p in problems] == ["table app.nope does not exist"]


# -- the pg <-> proto table --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pg", "proto", "reads", "binds"),
    [
        ("int4", "int32", True, True),
        ("int4", "int64", True, False),  # a wider field may hold it, but may not feed it
        ("int8", "int32", False, True),
        ("int8", "int64", True, True),
        ("numeric", "string", True, True),
        ("numeric", "double", True, True),
        ("uuid", "string", True, True),
        ("uuid", "bytes", False, False),
        ("timestamptz", t.TIMESTAMP_MSG, True, True),
        ("interval", t.DURATION_MSG, True, True),
        ("jsonb", "string", True, True),
        ("text", "google.protobuf.StringValue", True, True),
        ("bool", "int32", False, False),
    ],
)
def test_the_type_table(pg: str, proto: str, reads: bool, binds: bool) -> None:
    assert t.compatible(PgType(pg), proto) is reads
    assert t.param_compatible(PgType(pg), proto) is binds


# -- docs/diagnostics.md shows the tables the code uses ------------------------------------------

DOC = Path(__file__).resolve().parents[2] / "docs" / "diagnostics.md"


def render_type_table() -> str:
    return t.markdown_table()


@pytest.mark.parametrize(("marker", "render"), [("type-table", render_type_table)])
def test_the_docs_show_the_tables_the_code_uses(marker: str, render: object) -> None:
    assert callable(render)
    text = DOC.read_text(encoding="utf-8")
    m = re.search(rf"<!-- BEGIN {marker} -->\n(.*?)\n<!-- END {marker} -->", text, re.S)
    assert m is not None, f"docs/diagnostics.md has no {marker} section"
    if os.environ.get("PYDB_UPDATE_EXPECTED") == "1":
        DOC.write_text(text[: m.start(1)] + render() + text[m.end(1) :], encoding="utf-8")
        text = DOC.read_text(encoding="utf-8")
        m = re.search(rf"<!-- BEGIN {marker} -->\n(.*?)\n<!-- END {marker} -->", text, re.S)
        assert m is not None
    assert m.group(1) == render()
