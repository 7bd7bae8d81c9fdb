"""The SQL pygen writes: the analyzer's `*` expansions and the parameters applied in one pass of
non-overlapping rewrites, `%` doubled for psycopg, the probe's names quoted."""

from __future__ import annotations

import pytest
from pydb.plugin.bind import ir
from pydb.plugin.bind.compiler import statement
from pydb.plugin.diagnostics import SqlSpan
from pydb.plugin.pygen.lower import _probe, psycopg_sql
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
        'SELECT t.id, t."100%", t.u, u.id FROM t JOIN u ON u.id = t.u WHERE t.id = ',
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
