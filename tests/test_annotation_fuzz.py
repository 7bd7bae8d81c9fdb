"""Property: whatever happens to a valid annotation or schema (renamed words, deleted or
inserted text, garbage, a wrong cardinality or result field), the plugin never crashes. It
either generates files or reports errors, never an internal error or a traceback, and never
both files and errors.

Starting points are the valid corpus cases; hypothesis mutates one RPC's statement and/or the
schema, and the request goes through `pydb.plugin.main.generate` like protoc's would.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from annotation_corpus.runner import CORPUS, Corpus, case_names, proto_name
from google.protobuf import descriptor_pb2
from google.protobuf.compiler import plugin_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from plugin_harness import plugin_request, run_request
from pydb.v1 import options_pb2

SCHEMA = (CORPUS / "schema.sql").read_text(encoding="utf-8")
VALID = case_names("valid")

#: Words a mutation may put in: the schema's names, SQL keywords, parameters, literals, and
#: punctuation. Near-valid text reaches deeper into the analyzer than random bytes do.
_SQL_WORDS = """
    SELECT FROM WHERE JOIN LEFT ON AND OR NOT NULL IS IN ANY GROUP BY ORDER HAVING LIMIT RETURNING
    INSERT INTO VALUES UPDATE SET DELETE WITH AS CASE WHEN THEN ELSE END UNION EXISTS DISTINCT OVER
    PARTITION CAST INTERVAL COALESCE count max now unnest make_interval CREATE TABLE TYPE ENUM INDEX
    UNIQUE PRIMARY KEY REFERENCES DEFAULT ALTER ADD DROP COLUMN CHECK COMMENT
    @id @ids @user_id @kind @state @nope 'queued' 'x' '{}' 1 0 -1 2.5 TRUE ::int ::uuid[] ::jsonb
    ::app.job_state ->> @> ? || * ( ) , ; . = < + $$ -- /* ' " \\
"""
VOCABULARY = sorted(set(re.findall(r"[a-z_]+", SCHEMA)) | set(_SQL_WORDS.split()))


@dataclass(frozen=True)
class Edit:
    """Replace `length` characters at `where` (a fraction of the text's length) with `text`."""

    where: float
    length: int
    text: str

    def apply(self, source: str) -> str:
        at = int(self.where * len(source))
        return source[:at] + self.text + source[at + self.length :]


words = st.sampled_from(VOCABULARY)
garbage = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6)
edits = st.builds(
    Edit,
    where=st.floats(min_value=0, max_value=1, allow_nan=False),
    length=st.integers(min_value=0, max_value=12),
    text=st.one_of(words.map(lambda w: f" {w} "), words, garbage, st.just("")),
)


def rename(source: str, old: str, new: str) -> str:
    """Rename every whole-word `old` (a schema or column name) to `new`."""
    return re.sub(rf"\b{re.escape(old)}\b", lambda _: new, source)


@dataclass(frozen=True)
class Mutation:
    case: str
    rpc: int
    query_edits: tuple[Edit, ...]
    schema_edits: tuple[Edit, ...]
    renames: tuple[tuple[str, str], ...]
    renames_in: str  # "query", "schema" or "both"
    cardinality: int | None
    result_field: str | None
    #: Change one field of the RPC's request or response message, or of the message the rows
    #: land in: (which, field index, change), change being a new scalar type (a
    #: FieldDescriptorProto.Type), RENAME or TOGGLE_REPEATED.
    field_edit: tuple[str, int, int] | None = None


RENAME, TOGGLE_REPEATED = -1, -2
F = descriptor_pb2.FieldDescriptorProto
SCALARS = [
    F.TYPE_DOUBLE,
    F.TYPE_FLOAT,
    F.TYPE_INT64,
    F.TYPE_UINT64,
    F.TYPE_INT32,
    F.TYPE_BOOL,
    F.TYPE_STRING,
    F.TYPE_BYTES,
]
field_edits = st.tuples(
    st.sampled_from(["request", "response", "row"]),
    st.integers(min_value=0, max_value=20),
    st.sampled_from([RENAME, TOGGLE_REPEATED, *SCALARS]),
)


mutations = st.builds(
    Mutation,
    case=st.sampled_from(VALID),
    rpc=st.integers(min_value=0, max_value=3),
    query_edits=st.lists(edits, max_size=3).map(tuple),
    schema_edits=st.lists(edits, max_size=2).map(tuple),
    renames=st.lists(st.tuples(words, words), max_size=2).map(tuple),
    renames_in=st.sampled_from(["query", "schema", "both"]),
    cardinality=st.one_of(st.none(), st.integers(min_value=0, max_value=5)),
    result_field=st.one_of(st.none(), st.sampled_from(["", "job", "jobs", "user", "id", "nope"])),
    field_edit=st.one_of(st.none(), field_edits),
)


def find_message(
    files: list[descriptor_pb2.FileDescriptorProto], full_name: str
) -> descriptor_pb2.DescriptorProto | None:
    for file in files:
        prefix = f"{file.package}." if file.package else ""
        for message in file.message_type:
            if prefix + message.name == full_name:
                return message
    return None


def edit_field(
    request: plugin_pb2.CodeGeneratorRequest, method: descriptor_pb2.MethodDescriptorProto, edit: tuple[str, int, int]
) -> None:
    which, index, change = edit
    files = list(request.proto_file)
    message = find_message(files, (method.input_type if which == "request" else method.output_type).lstrip("."))
    if message is not None and which == "row":
        nested = [f for f in message.field if f.type == F.TYPE_MESSAGE]
        message = find_message(files, nested[0].type_name.lstrip(".")) if nested else None
    if message is None or not message.field:
        return
    field = message.field[index % len(message.field)]
    if change == RENAME:
        field.name += "_renamed"
        field.json_name += "Renamed"
    elif change == TOGGLE_REPEATED:
        repeated = field.label == F.LABEL_REPEATED
        field.label = F.LABEL_OPTIONAL if repeated else F.LABEL_REPEATED
        field.ClearField("oneof_index")
        field.proto3_optional = False
    else:
        field.type = change  # type: ignore[assignment]  # a FieldDescriptorProto.Type value
        field.ClearField("type_name")


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return Corpus()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A proto_path root holding the (mutated) schema at the path the valid cases name."""
    root = tmp_path_factory.mktemp("fuzz")
    (root / CORPUS.name).mkdir()
    return root


def mutated_request(corpus: Corpus, m: Mutation) -> tuple[plugin_pb2.CodeGeneratorRequest, str]:
    target = proto_name("valid", m.case)
    request = plugin_request(corpus.descriptors, [target])
    file = next(f for f in request.proto_file if f.name == target)
    methods = [meth for svc in file.service for meth in svc.method]
    method: descriptor_pb2.MethodDescriptorProto = methods[m.rpc % len(methods)]
    sql = method.options.Extensions[options_pb2.sql]
    schema = SCHEMA
    for old, new in m.renames:
        if m.renames_in in ("query", "both"):
            sql.query = rename(sql.query, old, new)
        if m.renames_in in ("schema", "both"):
            schema = rename(schema, old, new)
    for edit in m.query_edits:
        sql.query = edit.apply(sql.query)
    for edit in m.schema_edits:
        schema = edit.apply(schema)
    if m.cardinality is not None:
        sql.cardinality = m.cardinality  # type: ignore[assignment]  # out-of-range values on purpose
    if m.result_field is not None:
        sql.result_field = m.result_field
    if m.field_edit is not None:
        edit_field(request, method, m.field_edit)
    return request, schema


@settings(
    max_examples=200,
    deadline=None,
    database=None,
    derandomize=True,  # the same examples every run: CI must not flake
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(m=mutations)
def test_plugin_never_crashes(corpus: Corpus, workdir: Path, m: Mutation) -> None:
    request, schema = mutated_request(corpus, m)
    (workdir / CORPUS.name / "schema.sql").write_text(schema, encoding="utf-8")
    outcome = run_request(request, cwd=workdir)
    assert "internal error" not in outcome.error, outcome.error
    assert "Traceback" not in outcome.error, outcome.error
    assert bool(outcome.error) != bool(outcome.files), (outcome.error, list(outcome.files))
    if outcome.error:
        assert re.match(r"^\d+ errors? in ", outcome.error), outcome.error
    for name, content in outcome.files.items():
        compile(content, name, "exec")


def test_unmutated_cases_generate(corpus: Corpus, workdir: Path) -> None:
    """The property's starting points are valid: without mutations every case generates."""
    for case in VALID:
        request, schema = mutated_request(corpus, Mutation(case, 0, (), (), (), "query", None, None))
        (workdir / CORPUS.name / "schema.sql").write_text(schema, encoding="utf-8")
        outcome = run_request(request, cwd=workdir)
        assert outcome.error == "" and outcome.files, (case, outcome.error)
