"""Differential property against a real PostgreSQL: when the plugin accepts a statement,
Postgres accepts it too, i.e. a wrong annotation never reaches runtime.

hypothesis takes a valid corpus statement and breaks it the way people do: a typo in a
column name, a column swapped for another column of the schema, a typo in an enum label. If
the analyzer reports no error, `PREPARE` in Postgres (the corpus schema applied) must succeed.
The reverse is not asserted: the plugin is deliberately stricter in places (nullability, NOT
NULL columns an INSERT leaves out, duplicate result names).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import psycopg
from annotation_corpus.pgcheck import annotated_queries, postgres_error
from annotation_corpus.runner import CORPUS, case_names
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydb.plugin.sql.analyze import analyze
from pydb.plugin.sql.catalog import build_catalog

CATALOG, _ = build_catalog((CORPUS / "schema.sql").read_text(encoding="utf-8"))
STATEMENTS = [(f"{case}.{rpc}", sql) for case in case_names("valid") for rpc, sql in annotated_queries("valid", case)]
COLUMNS = sorted({c.name for table in CATALOG.tables.values() for c in table.columns})
LABELS = sorted({label for labels in CATALOG.enums.values() for label in labels})
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

    def apply(self) -> tuple[str, str] | None:
        name, sql = STATEMENTS[self.index % len(STATEMENTS)]
        pattern, known = (_LABEL_USE, LABELS) if self.how == "label" else (_COLUMN_USE, COLUMNS)
        spots = [m for m in pattern.finditer(sql) if m.group(1) in known]
        if not spots:
            return None
        match = spots[self.spot % len(spots)]
        word = match.group(1)
        if self.how == "swap":
            new = COLUMNS[self.other % len(COLUMNS)]
        else:
            at = self.position % len(word)
            new = word[:at] + word[at + 1 :] if self.other % 2 else word[:at] + word[at] + word[at:]
        return name, sql[: match.start(1)] + new + sql[match.end(1) :]


breakages = st.builds(
    Broken,
    index=st.integers(min_value=0, max_value=len(STATEMENTS) - 1),
    spot=st.integers(min_value=0, max_value=30),
    how=st.sampled_from(["typo", "swap", "label"]),
    position=st.integers(min_value=0, max_value=30),
    other=st.integers(min_value=0, max_value=len(COLUMNS) - 1),
)


def plugin_errors(sql: str) -> list[str]:
    _, problems = analyze(sql, CATALOG)
    return [p.message for p in problems if p.severity == "error"]


def test_starting_points_are_valid_for_both(corpus_db: psycopg.Connection) -> None:
    assert len(STATEMENTS) >= 20
    for name, sql in STATEMENTS:
        assert plugin_errors(sql) == [], name
        assert postgres_error(corpus_db, sql) is None, name


@settings(
    max_examples=300,
    deadline=None,
    database=None,
    derandomize=True,  # the same examples every run: CI must not flake
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(broken=breakages)
def test_what_the_plugin_accepts_postgres_accepts(corpus_db: psycopg.Connection, broken: Broken) -> None:
    mutated = broken.apply()
    if mutated is None:
        return
    name, sql = mutated
    if not plugin_errors(sql):
        error = postgres_error(corpus_db, sql)
        assert error is None, f"{name}: the plugin accepts what Postgres rejects ({error}):\n{sql}"
