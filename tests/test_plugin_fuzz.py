"""Property test: whatever is done to valid annotations and schema — identifiers renamed,
tokens deleted, garbage inserted, options and fields changed — the plugin never crashes. It
either generates files (and reports no error) or reports errors compiler-style (and generates
nothing); it never reports an internal error and never prints a traceback."""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from plugin_harness import Outcome, compile_protos, run_plugin
from pydb.v1 import options_pb2
from test_diagnostics import CORPUS

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Base:
    """A valid .proto (parsed) and its schema: the starting point of every mutation."""

    descriptors: descriptor_pb2.FileDescriptorSet
    target: str
    schema_path: str  # relative to the proto root, as the plugin looks it up
    schema: str


def _bases() -> list[Base]:
    queue = "generation/task/v1/task.proto"
    tricky = "valid/tricky.proto"
    return [
        Base(
            compile_protos(ROOT / "example_protos", [queue]),
            queue,
            "generation/task/v1/schema.sql",
            (ROOT / "example_protos" / "generation/task/v1/schema.sql").read_text(encoding="utf-8"),
        ),
        Base(
            compile_protos(CORPUS, [tricky]), tricky, "schema.sql", (CORPUS / "schema.sql").read_text(encoding="utf-8")
        ),
    ]


BASES = _bases()

# Words that make plausible-but-wrong SQL: names from the schemas, misspellings, keywords,
# operators and parameters.
VOCABULARY = [
    *(  # noqa: SIM905 (one word list reads better than a column of strings)
        "id tool_id status priority created_at input output tags name tasks tools events app generation "
        "idd statuss taks app2 generaton queued procesing completed failed nope "
        "SELECT FROM WHERE AND OR NOT NULL IN ANY ALL JOIN LEFT ON GROUP BY ORDER LIMIT HAVING "
        "RETURNING INSERT UPDATE DELETE SET VALUES WITH AS CASE WHEN THEN ELSE END DISTINCT OVER "
        "count sum max now make_interval unnest COALESCE NULLIF frobnicate "
        "@tool_id @task_id @limit @nope @ ::uuid ::text[] ::jsonb ::generation.task_status 'queued' 'x' 42 1.5 "
        "( ) , ; * = <> ->> @> ? || + - $$ ' \" -- /*"
    ).split(),
    "INTERVAL '1 second'",
    "secs =>",
]
TOKEN = re.compile(r"@?\w+|\s+|::\w+|.", re.S)


def mutate_text(data: st.DataObject, text: str) -> str:
    """One random edit of `text`: rename, delete or duplicate a token, or insert garbage."""
    tokens = TOKEN.findall(text) or [""]
    i = data.draw(st.integers(0, len(tokens) - 1), label="position")
    action = data.draw(st.sampled_from(["rename", "delete", "duplicate", "insert", "garbage", "truncate"]))
    if action == "rename":
        tokens[i] = data.draw(st.sampled_from(VOCABULARY))
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


def mutate_proto(data: st.DataObject, base: Base) -> descriptor_pb2.FileDescriptorSet:
    out = descriptor_pb2.FileDescriptorSet()
    out.CopyFrom(base.descriptors)
    target = next(f for f in out.file if f.name == base.target)
    methods = [m for s in target.service for m in s.method if m.options.HasExtension(options_pb2.sql)]
    for _ in range(data.draw(st.integers(0, 3), label="edits")):
        what = data.draw(st.sampled_from(["sql", "sql", "sql", "cardinality", "result_field", "field", "enum"]))
        method = methods[data.draw(st.integers(0, len(methods) - 1), label="method")]
        opt = method.options.Extensions[options_pb2.sql]
        if what == "sql":
            opt.query = mutate_text(data, opt.query)
        elif what == "cardinality":
            opt.cardinality = data.draw(st.integers(0, 6))  # type: ignore[assignment]
        elif what == "result_field":
            opt.result_field = data.draw(st.sampled_from(["", "task", "tasks", "tool", "nope", "id", "stats"]))
        elif what == "field":
            message = target.message_type[data.draw(st.integers(0, len(target.message_type) - 1), label="message")]
            if message.field:
                victim = message.field[data.draw(st.integers(0, len(message.field) - 1), label="field")]
                if data.draw(st.booleans(), label="delete field"):
                    message.field.remove(victim)
                else:
                    victim.name = data.draw(st.sampled_from(["id", "idd", "status", "x", "task_id", "tags"]))
        elif target.enum_type:
            enum = target.enum_type[data.draw(st.integers(0, len(target.enum_type) - 1), label="enum")]
            if len(enum.value) > 1:
                victim_value = enum.value[data.draw(st.integers(0, len(enum.value) - 1), label="value")]
                victim_value.name = data.draw(st.sampled_from(["BOGUS", enum.value[0].name + "_X"]))
    return out


def generate_with_schema(base: Base, descriptors: descriptor_pb2.FileDescriptorSet, schema: str) -> Outcome:
    """Generate `base.target` out of `descriptors`, with `schema` at the path the proto names
    (in a fresh proto_path root)."""
    with tempfile.TemporaryDirectory() as root:
        path = Path(root) / base.schema_path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(schema, encoding="utf-8")
        return run_plugin(descriptors, [base.target], parameter=f"proto_path={root}")


@settings(
    # PYDB_FUZZ_EXAMPLES=5000 for a longer hunt; the default keeps `make test` quick.
    max_examples=int(os.environ.get("PYDB_FUZZ_EXAMPLES", "120")),
    deadline=None,
    database=None,  # nothing written into the repository
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
        assert len(outcome.files) == 0
        assert re.search(r"^\S+:\d+:\d+: error: ", outcome.error, re.M), outcome.error
    else:
        assert set(outcome.files) == {
            base.target.replace(".proto", "_pydb.py"),
            base.target.replace(".proto", "_pydb_server.py"),
        }


@pytest.mark.parametrize("base", BASES, ids=lambda b: b.target)
def test_the_unmutated_bases_generate(base: Base) -> None:
    """The property above is only meaningful if the starting points are valid."""
    outcome = generate_with_schema(base, base.descriptors, base.schema)
    assert outcome.error == ""
    assert len(outcome.files) == 2
