"""The SQL pygen writes: the analyzer's `*` expansions and the parameters applied in one pass of
non-overlapping rewrites, `%` doubled for psycopg, the probe's names quoted."""

from __future__ import annotations

import re

import pytest
from pydb.plugin.bind import ir
from pydb.plugin.bind.compiler import column_list, statement
from pydb.plugin.diagnostics import SqlSpan
from pydb.plugin.pygen.lower import SQL_WIDTH, _probe, psycopg_sql
from pydb.plugin.sql.analyzer.result import Analysis, Expansion, Param
from pydb.plugin.sql.catalog.identifiers import QualifiedName
from pydb.plugin.sql.catalog.types import PgType


def analysis(sql: str, params: dict[str, list[str]], stars: dict[str, str]) -> Analysis:
    """An Analysis of `sql` whose parameters sit where `@name` is written and whose `stars`
    (text -> replacement) are expansions."""
    found = []
    for name, occurrences in params.items():
        spans, start = [], 0
        for _ in occurrences:
            at = sql.index("@" + name, start)
            spans.append(SqlSpan(at, at + len(name)))
            start = at + 1
        found.append(Param(name, PgType("int8"), tuple(spans)))
    expansions = tuple(
        sorted(
            (Expansion(SqlSpan(sql.index(text), sql.index(text) + len(text) - 1), out) for text, out in stars.items()),
            key=lambda e: e.span.start,
        )
    )
    return Analysis("select", tuple(found), None, None, None, False, (), expansions)


def test_expansions_and_parameters_rewrite_the_statement_in_one_pass() -> None:
    sql = "SELECT t.*, u.* FROM t JOIN u ON u.id = t.u WHERE t.id = @id AND t.name LIKE '10%' OR t.id = @id"
    a = analysis(sql, {"id": ["", ""]}, {"t.*": 't.id, t."100%", t.u', "u.*": "u.id"})
    st = statement(sql, a)
    assert st.pieces == (
        "SELECT ",
        ir.ColumnList(("t.id", 't."100%"', "t.u")),
        ", ",
        ir.ColumnList(("u.id",)),
        " FROM t JOIN u ON u.id = t.u WHERE t.id = ",
        ir.ParamRef("id"),
        " AND t.name LIKE '10%' OR t.id = ",
        ir.ParamRef("id"),
    )
    assert psycopg_sql(st) == (
        "SELECT t.id, t.\"100%%\", t.u, u.id FROM t JOIN u ON u.id = t.u WHERE t.id = %(id)s AND t.name LIKE '10%%' "
        "OR t.id = %(id)s"
    )


def test_overlapping_rewrites_are_a_bug_not_a_statement() -> None:
    sql = "SELECT * FROM t WHERE id = @id"
    a = analysis(sql, {"id": [""]}, {"* FROM t WHERE id = @": "x"})
    with pytest.raises(ValueError, match="overlapping"):
        statement(sql, a)


def test_the_probe_quotes_names_and_escapes_percent() -> None:
    rpc = ir.Rpc(
        name="SetLimit",
        request=ir.TypeRef("p.R", "p.proto", "R"),
        response=ir.TypeRef("p.S", "p.proto", "S"),
        comment="",
        statement=ir.Statement(("UPDATE ...",)),
        cardinality=ir.Cardinality.ONE,
        params=(),
        row=None,
        result_field=None,
        probe=ir.Probe(QualifiedName("Shop", 'Order "100%"'), "Id", "id"),
        conflict_do_nothing=False,
        writes=True,
    )
    probe = _probe(rpc, "SET_LIMIT_EXISTS_SQL")
    assert probe is not None
    assert probe.sql == 'SELECT 1 FROM "Shop"."Order ""100%%""" WHERE "Id" = %(id)s'
    params = {"id": 7}
    assert eval(probe.missing, {"params": params}) == 'Shop.Order "100%" 7 does not exist'
    assert eval(probe.wrong_state, {"params": params}) == (
        'SetLimit does not apply to Shop.Order "100%" 7 in its current state'
    )


@pytest.mark.parametrize(
    ("text", "items"),
    [
        ("a", ("a",)),
        ('t.a, t."b, c", "d""(", f(x, y)', ("t.a", 't."b, c"', '"d""("', "f(x, y)")),
        ("ROW(a, 'x,)'), b", ("ROW(a, 'x,)')", "b")),
    ],
)
def test_an_expansion_splits_at_its_own_commas(text: str, items: tuple[str, ...]) -> None:
    assert column_list(text) == items


def _spaced(sql: str) -> str:
    return re.sub(r"\s+", " ", sql).strip()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM t WHERE id = @id",
        "  SELECT * FROM t WHERE id = @id AND name = 'a    b'",
        "INSERT INTO t VALUES (@id) RETURNING *",
        "SELECT 1 AS one, 2 AS two, 3 AS three, 4 AS four, 5 AS five, 6 AS six, 7 AS seven, eight, * FROM t",
    ],
)
def test_long_column_lists_wrap_and_only_whitespace_changes(sql: str) -> None:
    columns = ", ".join(f't.column_number_{i}, t."100% {i}"' for i in range(12))
    st = statement(sql, analysis(sql, {"id": [""]} if "@id" in sql else {}, {"*": columns}))
    wrapped = psycopg_sql(st)
    flat = "".join(p if isinstance(p, str) else f"%({p.name})s" if isinstance(p, ir.ParamRef) else ", ".join(p.columns) for p in st.pieces)  # fmt: skip
    assert _spaced(wrapped) == _spaced(flat.replace("%", "%%").replace("%%(id)s", "%(id)s"))
    assert "'a    b'" in wrapped or "'a" not in sql  # a string literal keeps its spaces
    assert max(len(line) for line in wrapped.splitlines()) <= SQL_WIDTH
    assert len(wrapped.splitlines()) > 2
