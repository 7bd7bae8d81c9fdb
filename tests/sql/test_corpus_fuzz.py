"""Properties of the plugin on mutated inputs, starting from every case of the corpus that
generates (tests/corpus) and from the flagship queue (example_protos/generation/task/v1).

1. It never crashes: whatever happens to a valid annotation or schema (words renamed, tokens
   deleted, duplicated or inserted, garbage, truncation, a wrong or out-of-range cardinality or
   result field, a request/response field renamed, retyped, made repeated or deleted, an enum value
   renamed), it either generates files and reports no error, or reports errors compiler-style
   (`path:line:col: error: ...`) and generates nothing; never an internal error or a traceback.
2. What it accepts, PostgreSQL accepts: a valid statement broken the way people break them (a typo
   in a column name, a column swapped for another of the schema, a typo in an enum label) either
   gets an error from the SQL front end, or PREPAREs on PostgreSQL with the case's schema. The
   reverse is not asserted: the plugin is stricter on purpose in places (tests/sql/test_corpus.py).

The request goes through `pydb.plugin.main.generate` like protoc's would.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from corpus.run import KNOWN_GAPS, ROOT, Corpus, generating_cases, postgres_error, proto_name
from google.protobuf import descriptor_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydb.plugin.sql.analyzer.analyzer import analyze
from pydb.plugin.sql.catalog.model import Catalog
from pydb.v1 import options_pb2
from support.pg import Cluster, scratch_database
from support.plugin_harness import Outcome, compile_protos, run_plugin

REPO = ROOT.parent
CORPUS = Corpus()
GENERATING = generating_cases()


@dataclass(frozen=True)
class Base:
    """A valid .proto (parsed) and its schema: the starting point of every mutation."""

    descriptors: descriptor_pb2.FileDescriptorSet
    target: str
    schema_path: str  # relative to the proto root, as the plugin looks it up
    schema: str


def _bases() -> list[Base]:
    queue = "generation/task/v1/task.proto"
    queue_schema = REPO / "example_protos" / "generation/task/v1/schema.sql"
    bases = [
        Base(
            compile_protos(REPO / "example_protos", [queue]),
            queue,
            "generation/task/v1/schema.sql",
            queue_schema.read_text(encoding="utf-8"),
        )
    ]
    for case in GENERATING:
        schema = CORPUS.schema_path(case)
        rel = schema.relative_to(ROOT).as_posix()
        bases.append(Base(CORPUS.descriptors, proto_name(case), rel, schema.read_text(encoding="utf-8")))
    return bases


BASES = _bases()

# Words that make plausible-but-wrong SQL: names from the schemas, misspellings, keywords,
# operators, parameters and literals.
_WORDS = """
    idd statuss taks app2 generaton procesing runing nope frobnicate
    SELECT FROM WHERE AND OR NOT NULL IS IN ANY ALL JOIN LEFT ON GROUP BY ORDER HAVING LIMIT OFFSET
    RETURNING INSERT INTO UPDATE DELETE SET VALUES WITH AS CASE WHEN THEN ELSE END DISTINCT OVER
    PARTITION UNION EXISTS CAST INTERVAL COALESCE NULLIF count sum max now make_interval unnest
    CREATE TABLE TYPE ENUM INDEX UNIQUE PRIMARY KEY REFERENCES DEFAULT ALTER ADD DROP COLUMN CHECK COMMENT
    @id @ids @tool_id @task_id @user_id @kind @state @limit @nope @ ::uuid ::text[] ::jsonb ::int
    ::app.job_state ::generation.task_status 'queued' 'x' '{}' 42 0 -1 1.5 TRUE
    ( ) , ; * = <> ->> @> ? || + - $$ ' " -- /*
"""
VOCABULARY = sorted(
    {word for base in BASES for word in re.findall(r"[a-z_]+", base.schema)}
    | set(_WORDS.split())
    | {"INTERVAL '1 second'", "secs =>"}
)
TOKEN = re.compile(r"@?\w+|\s+|::\w+|.", re.S)


def mutate_text(data: st.DataObject, text: str) -> str:
    """One random edit of `text`: rename (one token or every whole-word use of it), delete or
    duplicate a token, insert a word or garbage, or truncate."""
    tokens = TOKEN.findall(text) or [""]
    i = data.draw(st.integers(0, len(tokens) - 1), label="position")
    action = data.draw(
        st.sampled_from(["rename", "rename_all", "delete", "duplicate", "insert", "garbage", "truncate"])
    )
    if action == "rename":
        tokens[i] = data.draw(st.sampled_from(VOCABULARY))
    elif action == "rename_all":
        old, new = tokens[i], data.draw(st.sampled_from(VOCABULARY))
        tokens = [new if token == old else token for token in tokens]
    elif action == "delete":
        del tokens[i : i + data.draw(st.integers(1, 4))]
    elif action == "duplicate":
        tokens.insert(i, tokens[i])
    elif action == "insert":
        tokens.insert(i, " " + data.draw(st.sampled_from(VOCABULARY)) + " ")
    elif action == "garbage":
        tokens.insert(i, data.draw(st.text(alphabet="abc_@:;'\"()[]{}$,.*=<>!?-+/ \n\\0é", max_size=12)))
    else:
        tokens = tokens[:i]
    return "".join(tokens)


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


def mutate_field(data: st.DataObject, message: descriptor_pb2.DescriptorProto) -> None:
    """Delete, rename, retype or toggle `repeated` on one field of `message`."""
    if not message.field:
        return
    field = message.field[data.draw(st.integers(0, len(message.field) - 1), label="field")]
    change = data.draw(st.sampled_from(["delete", "rename", "retype", "repeated"]))
    if change == "delete":
        message.field.remove(field)
    elif change == "rename":
        field.name = data.draw(
            st.sampled_from(["id", "idd", "status", "x", "task_id", "tags", field.name + "_renamed"])
        )
        field.json_name = field.name
    elif change == "retype":
        field.type = data.draw(st.sampled_from(SCALARS))
        field.ClearField("type_name")
    else:
        field.label = F.LABEL_OPTIONAL if field.label == F.LABEL_REPEATED else F.LABEL_REPEATED
        field.ClearField("oneof_index")
        field.proto3_optional = False


def mutate_proto(data: st.DataObject, base: Base) -> descriptor_pb2.FileDescriptorSet:
    out = descriptor_pb2.FileDescriptorSet()
    out.CopyFrom(base.descriptors)
    target = next(f for f in out.file if f.name == base.target)
    methods = [m for s in target.service for m in s.method if m.options.HasExtension(options_pb2.sql)]
    messages = [
        m for f in out.file if f.name == base.target or not f.name.startswith("google/") for m in f.message_type
    ]
    for _ in range(data.draw(st.integers(0, 3), label="edits")):
        what = data.draw(st.sampled_from(["sql", "sql", "sql", "cardinality", "result_field", "field", "enum"]))
        method = methods[data.draw(st.integers(0, len(methods) - 1), label="method")]
        opt = method.options.Extensions[options_pb2.sql]
        if what == "sql":
            opt.query = mutate_text(data, opt.query)
        elif what == "cardinality":
            opt.cardinality = data.draw(st.integers(0, 6))  # type: ignore[assignment]  # out of range on purpose
        elif what == "result_field":
            opt.result_field = data.draw(st.sampled_from(["", "task", "tasks", "job", "jobs", "nope", "id", "stats"]))
        elif what == "field" and messages:
            mutate_field(data, messages[data.draw(st.integers(0, len(messages) - 1), label="message")])
        else:
            enums = [e for f in out.file if not f.name.startswith("google/") for e in f.enum_type if len(e.value) > 1]
            if enums:
                enum = enums[data.draw(st.integers(0, len(enums) - 1), label="enum")]
                value = enum.value[data.draw(st.integers(0, len(enum.value) - 1), label="value")]
                value.name = data.draw(st.sampled_from(["BOGUS", enum.value[0].name + "_X"]))
    return out


def generate_with_schema(base: Base, descriptors: descriptor_pb2.FileDescriptorSet, schema: str) -> Outcome:
    """Generate `base.target` out of `descriptors`, with `schema` at the path the proto names
    (in a fresh proto_path root)."""
    with tempfile.TemporaryDirectory() as root:
        path = Path(root) / base.schema_path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(schema, encoding="utf-8")
        return run_plugin(descriptors, [base.target], parameter=f"proto_path={root}")


def generated_names(base: Base) -> set[str]:
    return {base.target.replace(".proto", "_pydb.py"), base.target.replace(".proto", "_pydb_server.py")}


@settings(
    # PYDB_FUZZ_EXAMPLES=5000 for a longer hunt; the default keeps `make test` quick.
    max_examples=int(os.environ.get("PYDB_FUZZ_EXAMPLES", "250")),
    deadline=None,
    database=None,  # nothing written into the repository
    derandomize=True,  # the same examples every run: CI must not flake
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_the_plugin_never_crashes_on_mutated_annotations_and_schema(data: st.DataObject) -> None:
    base = BASES[data.draw(st.integers(0, len(BASES) - 1), label="base")]
    descriptors = mutate_proto(data, base)
    schema = base.schema
    for _ in range(data.draw(st.integers(0, 2), label="schema edits")):
        schema = mutate_text(data, schema)
    outcome = generate_with_schema(base, descriptors, schema)  # must not raise
    report = outcome.error + outcome.warnings
    assert "internal error" not in report, report
    assert "Traceback" not in report, report
    if outcome.error:
        assert outcome.files == {}
        assert re.match(r"^\d+ errors? in ", outcome.error), outcome.error
        assert re.search(r"^\S+:\d+:\d+: error: ", outcome.error, re.M), outcome.error
    else:
        assert set(outcome.files) == generated_names(base)
        for name, content in outcome.files.items():
            compile(content, name, "exec")


@pytest.mark.parametrize("base", BASES, ids=lambda b: b.target)
def test_the_unmutated_bases_generate(base: Base) -> None:
    """The properties are only meaningful if the starting points are valid."""
    outcome = generate_with_schema(base, base.descriptors, base.schema)
    assert outcome.error == ""
    assert set(outcome.files) == generated_names(base)


# -- what the plugin accepts, PostgreSQL accepts ---------------------------------------------------


@dataclass(frozen=True)
class Statement:
    name: str
    sql: str
    schema: Path
    catalog: Catalog


def _statements() -> list[Statement]:
    out: list[Statement] = []
    # A known gap already disagrees with PostgreSQL (or its schema needs psql): no differential start.
    for case in (c for c in GENERATING if c not in KNOWN_GAPS):
        catalog = CORPUS.catalog(case)
        assert catalog is not None, case
        out.extend(
            Statement(f"{case}.{rpc.name}", rpc.query, CORPUS.schema_path(case), catalog) for rpc in CORPUS.rpcs(case)
        )
    return out


STATEMENTS = _statements()
COLUMNS = sorted({c.name for s in STATEMENTS for table in s.catalog.tables.values() for c in table.columns})
LABELS = sorted({label for s in STATEMENTS for labels in s.catalog.enums.values() for label in labels})
# A column name in use (bare or as in `t.x`): not a parameter (@x), a cast (::x), the start of
# a literal ('x) or a function name (x(...)).
_COLUMN_USE = re.compile(r"(?<![@:'\w])([a-z_]+)(?![\w(])")
_LABEL_USE = re.compile(r"'(\w+)'")


@dataclass(frozen=True)
class Broken:
    """Statement `index`, with its `spot`-th column (or label) use replaced per `how`."""

    index: int
    spot: int
    how: str  # "typo", "swap" or "label"
    position: int  # where the typo goes in the word
    other: int  # which column a swap puts in

    def apply(self) -> tuple[Statement, str] | None:
        statement = STATEMENTS[self.index % len(STATEMENTS)]
        pattern, known = (_LABEL_USE, LABELS) if self.how == "label" else (_COLUMN_USE, COLUMNS)
        spots = [m for m in pattern.finditer(statement.sql) if m.group(1) in known]
        if not spots:
            return None
        match = spots[self.spot % len(spots)]
        word = match.group(1)
        if self.how == "swap":
            new = COLUMNS[self.other % len(COLUMNS)]
        else:
            at = self.position % len(word)
            new = word[:at] + word[at + 1 :] if self.other % 2 else word[:at] + word[at] + word[at:]
        return statement, statement.sql[: match.start(1)] + new + statement.sql[match.end(1) :]


breakages = st.builds(
    Broken,
    index=st.integers(min_value=0, max_value=len(STATEMENTS) - 1),
    spot=st.integers(min_value=0, max_value=30),
    how=st.sampled_from(["typo", "swap", "label"]),
    position=st.integers(min_value=0, max_value=30),
    other=st.integers(min_value=0, max_value=len(COLUMNS) - 1),
)


def plugin_errors(statement: Statement, sql: str) -> list[str]:
    _, problems = analyze(sql, statement.catalog)
    return [p.message for p in problems if p.severity == "error"]


@pytest.fixture(scope="module")
def databases(pg_server: tuple[str, Cluster | None]) -> Iterator[dict[Path, psycopg.Connection]]:
    """A scratch database per schema the statements use."""
    with contextlib.ExitStack() as stack:
        out: dict[Path, psycopg.Connection] = {}
        for schema in sorted({s.schema for s in STATEMENTS}):
            url = stack.enter_context(scratch_database(pg_server[0], schema=schema))
            out[schema] = stack.enter_context(psycopg.connect(url, autocommit=True))
        yield out


def test_starting_points_are_valid_for_both(databases: dict[Path, psycopg.Connection]) -> None:
    assert len(STATEMENTS) >= 40
    for statement in STATEMENTS:
        assert plugin_errors(statement, statement.sql) == [], statement.name
        assert postgres_error(databases[statement.schema], statement.sql) is None, statement.name


@settings(
    max_examples=300,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(broken=breakages)
def test_what_the_plugin_accepts_postgres_accepts(databases: dict[Path, psycopg.Connection], broken: Broken) -> None:
    mutated = broken.apply()
    if mutated is None:
        return
    statement, sql = mutated
    if not plugin_errors(statement, sql):
        error = postgres_error(databases[statement.schema], sql)
        assert error is None, f"{statement.name}: the plugin accepts what PostgreSQL rejects ({error}):\n{sql}"
