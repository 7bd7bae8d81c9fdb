"""Binding checks, through protoc (real source locations): every response field is filled (or
left unset on purpose with a typed NULL, `NULL::int AS field`), an `optional` request field does not feed a NOT NULL
column as is, and a problem of a message shared by several RPCs is reported once, at the field."""

from __future__ import annotations

from pathlib import Path

from goldens.harness import generate, write_tree

SCHEMA = """
CREATE SCHEMA app;
CREATE TYPE app.mood AS ENUM ('happy', 'sad');
CREATE TABLE app.people (
    id bigint PRIMARY KEY,
    name text NOT NULL,
    nick text,
    mood app.mood NOT NULL DEFAULT 'happy',
    age int NOT NULL
);
"""


def run(tmp_path: Path, body: str) -> str:
    """The error text (empty on success) for a proto whose messages and service are `body`."""
    proto = 'syntax = "proto3";\npackage checks.v1;\nimport "pydb/v1/options.proto";\n' + body
    write_tree(tmp_path, {"checks/v1/p.proto": proto, "checks/v1/schema.sql": SCHEMA})
    return generate(tmp_path, "checks/v1/p.proto").error


def line_of(tmp_path: Path, text: str) -> int:
    lines = (tmp_path / "checks/v1/p.proto").read_text().split("\n")
    return next(i for i, row in enumerate(lines, start=1) if text in row)


PERSON = """
enum Mood { MOOD_UNSPECIFIED = 0; MOOD_HAPPY = 1; MOOD_SAD = 2; }
message Person {
  int64 id = 1;
  string name = 2;
  optional string nick = 3;
  Mood mood = 4;
  int32 age = 5;
}
message GetRequest { int64 id = 1; }
message GetResponse { Person person = 1; }
"""


def get(name: str, sql: str, response: str = "GetResponse", result_field: str = "person") -> str:
    field = f' result_field: "{result_field}"' if result_field else ""
    return (
        f"  rpc {name}(GetRequest) returns ({response}) {{\n"
        f'    option (pydb.v1.sql) = {{ query: "{sql}" cardinality: CARDINALITY_ONE{field} }};\n'
        "  }\n"
    )


def test_every_response_field_is_filled_once_at_the_field(tmp_path: Path) -> None:
    """A field no column fills is an error, reported once at the field for every RPC sharing
    the message (it used to be left empty without a word)."""
    sql = "SELECT id, name, nick FROM app.people WHERE id = @id"
    error = run(tmp_path, PERSON + "service People {\n" + get("GetA", sql) + get("GetB", sql) + "}\n")
    mood, age = line_of(tmp_path, "Mood mood = 4"), line_of(tmp_path, "int32 age = 5")
    assert error.splitlines() == [
        "2 errors in SQL annotations:",
        f"checks/v1/p.proto:{mood}:3: error: checks.v1.Person.mood: no result column fills it; select a column named "
        "mood, or leave the field unset on purpose with a typed NULL, `NULL::<type> AS mood` (see docs/diagnostics.md) "
        "(used by RPCs GetA, GetB)",
        f"checks/v1/p.proto:{age}:3: error: checks.v1.Person.age: no result column fills it; select a column named "
        "age, or leave the field unset on purpose with a typed NULL, `NULL::<type> AS age` (see docs/diagnostics.md) "
        "(used by RPCs GetA, GetB)",
    ]


def test_null_as_field_leaves_it_unset_on_purpose(tmp_path: Path) -> None:
    sql = "SELECT id, name, nick, NULL::app.mood AS mood, NULL::int AS age FROM app.people WHERE id = @id"
    assert run(tmp_path, PERSON + "service People {\n" + get("Get", sql) + "}\n") == ""


def test_the_rest_of_a_response_with_result_field_is_never_filled(tmp_path: Path) -> None:
    body = PERSON.replace(
        "message GetResponse { Person person = 1; }", "message GetResponse { Person person = 1; string token = 2; }"
    )
    sql = "SELECT id, name, nick, mood, age FROM app.people WHERE id = @id"
    error = run(tmp_path, body + "service People {\n" + get("Get", sql) + "}\n")
    assert f"p.proto:{line_of(tmp_path, 'string token = 2')}:" in error
    assert "checks.v1.GetResponse.token: is never filled: the rows go into person" in error


def test_an_enum_that_does_not_pair_is_reported_once_at_the_field(tmp_path: Path) -> None:
    body = PERSON.replace("MOOD_SAD = 2;", "MOOD_SAD = 2; MOOD_BORED = 3;")
    sql = "SELECT id, name, nick, mood, age FROM app.people WHERE id = @id"
    error = run(tmp_path, body + "service People {\n" + get("GetA", sql) + get("GetB", sql) + get("GetC", sql) + "}\n")
    assert error.count("MOOD_BORED") == 1, error
    assert (
        f"p.proto:{line_of(tmp_path, 'Mood mood = 4')}:3: error: checks.v1.Person.mood: checks.v1.Mood.MOOD_BORED has "
        "no label in app.mood (happy, sad) (used by RPCs GetA, GetB, GetC)"
    ) in error


ADD = """
message AddRequest { int64 id = 1; optional string name = 2; optional int32 age = 3; optional Mood mood = 4; }
message AddResponse {}
service People {
  rpc Add(AddRequest) returns (AddResponse) {
    option (pydb.v1.sql) = { query: "%s" cardinality: CARDINALITY_EXEC };
  }
}
"""


def test_an_optional_field_stored_as_is_in_a_not_null_column_is_an_error(tmp_path: Path) -> None:
    sql = "INSERT INTO app.people (id, name, age, mood) VALUES (@id, @name, @age::int, @mood)"
    error = run(tmp_path, PERSON + ADD % sql)
    assert error.count(": error: ") == 2, error  # name and age; mood has a default
    assert (
        "Add: parameter @name: checks.v1.AddRequest.name is optional, but it is stored as is in column name of "
        "app.people, which is NOT NULL and has no default: an unset field would fail the statement; drop `optional` "
        "from the field, or give the column a value when it is unset (COALESCE(@name, ...))"
    ) in error
    assert "parameter @age: checks.v1.AddRequest.age is optional" in error
    # The fixes it names: a value when unset, or a non-optional field.
    fixed = "INSERT INTO app.people (id, name, age, mood) VALUES (@id, COALESCE(@name, ''), COALESCE(@age, 0), @mood)"
    assert run(tmp_path, PERSON + ADD % fixed) == ""
    update = "UPDATE app.people SET name = @name, age = 1 WHERE id = @id"
    error = run(tmp_path, PERSON + ADD.replace("optional int32 age = 3; optional Mood mood = 4; ", "") % update)
    assert "column name of app.people, which is NOT NULL: an unset field" in error


LIMITED = """
message LimitedRequest { int64 id = 1; %s limit = 2; }
service People {
  rpc Limited(LimitedRequest) returns (GetResponse) {
    option (pydb.v1.sql) = { query: "%s" cardinality: CARDINALITY_ONE result_field: "person" };
  }
}
"""


def test_a_64_bit_field_into_a_parameter_postgresql_types_int4_is_refused_with_the_fix(tmp_path: Path) -> None:
    # PostgreSQL types @limit from NULLIF's 0 (int4), not from LIMIT's bigint: an int64 value
    # could overflow at run time, so the compiler says so and names the two fixes.
    select = "SELECT id, name, nick, mood, age FROM app.people WHERE id = @id LIMIT COALESCE(NULLIF(%s, 0), 1)"
    error = run(tmp_path, PERSON + LIMITED % ("int64", select % "@limit"))
    assert (
        "Limited: parameter @limit: PostgreSQL types @limit as int4, so a 64-bit int64 value may not fit it; "
        "make the field int32, or cast the parameter (@limit::bigint) so PostgreSQL types it bigint"
    ) in error, error
    assert run(tmp_path, PERSON + LIMITED % ("int32", select % "@limit")) == ""
    assert run(tmp_path, PERSON + LIMITED % ("int64", select % "@limit::bigint")) == ""
    # A bare parameter takes LIMIT's bigint: the int64 field binds as is.
    bare = "SELECT id, name, nick, mood, age FROM app.people WHERE id = @id LIMIT @limit"
    assert run(tmp_path, PERSON + LIMITED % ("int64", bare)) == ""
