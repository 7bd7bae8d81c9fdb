"""Nested messages: a joined table's whole row (`SELECT o.*, customer FROM app.orders o LEFT JOIN
app.customers customer ...`) fills the message field named like it; after an outer join that
finds nothing the field is absent. Run on a real PostgreSQL, with live tables whose columns are
in another order than schema.sql's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from goldens.harness import generate, write_tree
from support.pg import Cluster
from test_bind_runtime import HEADER, built, database, pb2, rpc

SCHEMA = """
CREATE SCHEMA app;
CREATE TABLE app.customers (id bigint PRIMARY KEY, name text NOT NULL, note text);
CREATE TABLE app.orders (id bigint PRIMARY KEY, customer_id bigint REFERENCES app.customers, total int NOT NULL);
"""
#: The live tables after migrations: columns in another order.
LIVE = """
CREATE SCHEMA app;
CREATE TABLE app.customers (note text, name text NOT NULL, id bigint PRIMARY KEY);
CREATE TABLE app.orders (total int NOT NULL, id bigint PRIMARY KEY, customer_id bigint REFERENCES app.customers);
"""
SQL = (
    "SELECT o.*, customer FROM app.orders o LEFT JOIN app.customers customer ON customer.id = o.customer_id "
    "WHERE o.id = @id"
)
PROTO = (
    HEADER.format(package="bind_nested.v1")
    + """
message Customer { int64 id = 1; string name = 2; optional string note = 3; }
message OrderView { int64 id = 1; optional int64 customer_id = 2; int32 total = 3; Customer customer = 4; }
message GetOrderRequest { int64 id = 1; }
service Orders {
"""
    + rpc("GetOrder", "GetOrderRequest", "OrderView", SQL, "ONE")
    + "}\n"
)


@pytest.fixture
def orders(pg_server: tuple[str, Cluster | None], tmp_path: Path) -> Iterator[tuple[Any, str]]:
    with built(tmp_path, "bind_nested.v1", PROTO, SCHEMA) as handlers, database(pg_server, tmp_path, LIVE) as url:
        yield handlers, url


async def test_a_joined_row_fills_a_nested_message(orders: tuple[Any, str]) -> None:
    handlers, url = orders
    m = pb2(handlers)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("INSERT INTO app.customers (id, name, note) VALUES (7, 'Ada', NULL)")
        await conn.execute("INSERT INTO app.orders (id, customer_id, total) VALUES (1, 7, 30), (2, NULL, 40)")
        with_customer = await handlers.get_order(conn, m.GetOrderRequest(id=1))
        assert (with_customer.id, with_customer.customer_id, with_customer.total) == (1, 7, 30)
        assert with_customer.HasField("customer")
        assert (with_customer.customer.id, with_customer.customer.name) == (7, "Ada")
        assert not with_customer.customer.HasField("note")
        # The LEFT JOIN finds nothing: the field is absent, not an empty Customer.
        without = await handlers.get_order(conn, m.GetOrderRequest(id=2))
        assert (without.id, without.total) == (2, 40) and not without.HasField("customer_id")
        assert not without.HasField("customer")


def compile_error(tmp_path: Path, proto: str) -> str:
    write_tree(tmp_path, {"bind_nested_bad/v1/svc.proto": proto, "bind_nested_bad/v1/schema.sql": SCHEMA})
    return generate(tmp_path, "bind_nested_bad/v1/svc.proto").error


def test_a_joined_row_needs_a_singular_message_field(tmp_path: Path) -> None:
    proto = PROTO.replace("bind_nested.v1", "bind_nested_bad.v1").replace(
        "Customer customer = 4;", "string customer = 4;"
    )
    error = compile_error(tmp_path, proto)
    assert "result column customer is a whole row, which fills a singular message field, but " in error
    assert "bind_nested_bad.v1.OrderView.customer is string" in error


def test_the_nested_message_is_checked_like_a_row(tmp_path: Path) -> None:
    proto = PROTO.replace("bind_nested.v1", "bind_nested_bad.v1").replace(
        "optional string note = 3;", "string note = 3;"
    )
    error = compile_error(tmp_path, proto)
    assert "result column note may be NULL, but bind_nested_bad.v1.Customer.note (string) cannot tell NULL" in error


def test_an_aliased_whole_row_reference_is_refused_with_the_form_that_works(tmp_path: Path) -> None:
    """`c AS customer` stays a record in the SQL (it is not written out as columns): reading it
    column by column would be wrong, so the binder names the form that works."""
    proto = PROTO.replace("bind_nested.v1", "bind_nested_bad.v1").replace(
        SQL,
        "SELECT o.*, c AS customer FROM app.orders o LEFT JOIN app.customers c ON c.id = o.customer_id WHERE o.id = @id",
    )
    error = compile_error(tmp_path, proto)
    assert "the whole-row reference customer is not written out as its columns" in error
    assert "name the FROM item after the field instead: `JOIN ... customer ON ...` and select `customer`" in error


def test_a_row_constructor_is_a_record_not_a_nested_message(tmp_path: Path) -> None:
    """`ROW(c.id, c.name, c.note)` is an anonymous record (PostgreSQL's type `record`): it reads
    as its text output, never into a message field."""
    proto = PROTO.replace("bind_nested.v1", "bind_nested_bad.v1").replace(
        SQL,
        "SELECT o.*, ROW(c.id, c.name, c.note) AS customer FROM app.orders o "
        "LEFT JOIN app.customers c ON c.id = o.customer_id WHERE o.id = @id",
    )
    error = compile_error(tmp_path, proto)
    assert "result column customer is record, which does not fit bind_nested_bad.v1.OrderView.customer" in error
