"""SQL constructs, differentially against PostgreSQL: for each statement, the analyzer's
parameter types, output column names and types must be what PostgreSQL's describe says; where
nullability matters the statement is run on sample rows holding NULLs. The `*` expansions
handed to bind must describe exactly like the statement they rewrite."""

from __future__ import annotations

import psycopg
import pytest
from corpus.run import positional
from pydb.plugin.sql.analyzer.analyzer import analyze
from pydb.plugin.sql.analyzer.result import Analysis
from pydb.plugin.sql.catalog.model import Catalog
from pydb.plugin.sql.syntax.colnames import OutputNames
from pydb.plugin.sql.syntax.grammar import check_statement
from support.sql_oracle import describe, ours, schema_fixtures

SCHEMA = """
CREATE TYPE public.mood AS ENUM ('calm', 'busy');
CREATE TABLE customers (
    id bigserial PRIMARY KEY,
    name text NOT NULL,
    email text,
    code varchar(8),
    mood public.mood NOT NULL DEFAULT 'calm'
);
CREATE UNIQUE INDEX customers_name ON customers (name);
CREATE TABLE orders (
    id bigserial PRIMARY KEY,
    customer_id bigint NOT NULL REFERENCES customers (id),
    total numeric NOT NULL,
    note text,
    tags text[] NOT NULL DEFAULT '{}',
    meta jsonb,
    placed_at timestamptz NOT NULL DEFAULT now()
);
CREATE FUNCTION with_tax(amount numeric) RETURNS numeric LANGUAGE sql IMMUTABLE AS $$ SELECT amount * 1.2 $$;
CREATE FUNCTION customer_orders(customer bigint) RETURNS TABLE (order_id bigint, order_total numeric)
    LANGUAGE sql STABLE AS $$ SELECT id, total FROM orders WHERE customer_id = customer $$;
CREATE FUNCTION touch(order_id bigint) RETURNS void LANGUAGE sql AS $$ UPDATE orders SET note = note WHERE id = order_id $$;
CREATE TABLE payments (
    payment_id bigserial PRIMARY KEY,
    customer_id bigint NOT NULL,
    amount numeric NOT NULL
);
"""

#: Rows holding NULLs where the schema allows them, and customers without orders, so an
#: outer join yields NULLs: a column the analyzer calls NOT NULL must show none.
SAMPLE_ROWS = """
INSERT INTO customers (name, email) VALUES ('ann', 'ann@example.com'), ('bob', NULL), ('cy', NULL);
INSERT INTO orders (customer_id, total, note) VALUES (1, 10.5, NULL), (1, 2, 'gift'), (2, 7, NULL);
INSERT INTO payments (customer_id, amount) VALUES (1, 3), (3, 4);
"""


catalog, conn = schema_fixtures(SCHEMA, SAMPLE_ROWS)


def analysed(sql: str, catalog: Catalog) -> Analysis:
    analysis, problems = analyze(sql, catalog)
    assert not problems, [p.message for p in problems]
    assert analysis is not None
    return analysis


def expanded(sql: str, analysis: Analysis) -> str:
    out, pos = [], 0
    for expansion in analysis.expansions:
        out.append(sql[pos : expansion.span.start] + expansion.text)
        pos = expansion.span.end + 1
    return "".join(out) + sql[pos:]


# -- `*` expansions and whole-row references (the hand-off to bind) ----------------------------

STARS = [
    "SELECT * FROM orders",
    "SELECT o.* FROM orders o WHERE o.id = @id",
    "SELECT *, 1 AS one FROM customers c LEFT JOIN payments p ON p.customer_id = c.id",
    "SELECT * FROM customers c RIGHT JOIN payments p ON p.customer_id = c.id",
    "SELECT c.*, o.id AS order_id FROM customers AS c JOIN orders AS o ON o.customer_id = c.id",
    'SELECT "O".* FROM orders "O"',
    "SELECT * FROM orders JOIN payments USING (customer_id)",
    "SELECT * FROM orders o FULL JOIN payments p USING (customer_id)",
    "SELECT * FROM orders o RIGHT JOIN payments p USING (customer_id)",
    "SELECT * FROM orders NATURAL JOIN payments",
    "SELECT * FROM (SELECT id, total * 2 AS doubled FROM orders) AS s",
    "WITH big AS (SELECT * FROM orders WHERE total > 5) SELECT * FROM big",
    "SELECT * FROM orders UNION ALL SELECT * FROM orders",
    "INSERT INTO payments (customer_id, amount) VALUES (@customer, @amount) RETURNING *",
    "UPDATE orders SET note = @note WHERE id = @id RETURNING *",
    "UPDATE orders o SET note = @note FROM customers c WHERE c.id = o.customer_id RETURNING o.*, c.name",
    "DELETE FROM payments p WHERE p.payment_id = @id RETURNING p.*",
]


@pytest.mark.parametrize("sql", STARS)
def test_star_expansion_describes_like_the_star(sql: str, catalog: Catalog, conn: psycopg.Connection) -> None:
    analysis = analysed(sql, catalog)
    assert analysis.expansions, "every top-level * is expanded"
    rewritten = expanded(sql, analysis)
    assert describe(conn, rewritten) == describe(conn, sql)
    assert ours(analysis)[1] == describe(conn, sql)[1]


def test_only_the_statements_own_lists_are_expanded(catalog: Catalog) -> None:
    sql = "SELECT s.id FROM (SELECT * FROM orders) s WHERE EXISTS (SELECT * FROM payments)"
    assert analysed(sql, catalog).expansions == ()


def test_whole_row_reference_is_an_embedded_column(catalog: Catalog, conn: psycopg.Connection) -> None:
    sql = "SELECT o.*, c FROM orders o LEFT JOIN customers c ON c.id = o.customer_id"
    analysis = analysed(sql, catalog)
    assert analysis.columns is not None
    row = analysis.columns[-1]
    assert row.name == "c"
    assert row.embedded is not None
    assert [(e.name, str(e.type), e.nullable) for e in row.embedded] == [
        ("id", "int8", False),
        ("name", "text", False),
        ("email", "text", True),
        ("code", "varchar", True),
        ("mood", "public.mood", False),
    ]
    assert row.nullable  # the far side of a LEFT JOIN may be absent
    inner = analysed("SELECT c FROM customers c JOIN orders o ON o.customer_id = c.id", catalog)
    assert inner.columns is not None and not inner.columns[0].nullable
    rewritten = expanded(sql, analysis)
    assert describe(conn, rewritten)[1] == [
        *describe(conn, "SELECT o.* FROM orders o")[1],
        *describe(conn, "SELECT c.* FROM customers c")[1],
    ]


#: (statement, the function it calls that might be volatile, whether it only reads)
READ_ONLY = [
    ("SELECT * FROM orders", None, True),
    ("SELECT count(*) FROM orders o JOIN customers c ON c.id = o.customer_id", "count", True),
    ("SELECT now(), id FROM orders", "now", True),
    ("SELECT * FROM orders FOR UPDATE", None, False),
    ("SELECT * FROM orders WHERE id IN (SELECT id FROM orders FOR SHARE)", None, False),
    ("WITH gone AS (DELETE FROM payments RETURNING payment_id) SELECT count(*) FROM gone", "count", False),
    ("SELECT random()", "random", False),
    ("SELECT gen_random_uuid()", "gen_random_uuid", False),
    ("SELECT pg_advisory_xact_lock(@key)", "pg_advisory_xact_lock", False),
    ("UPDATE orders SET note = 'x' WHERE id = @id", None, False),
    ("SELECT with_tax(total) FROM orders", "with_tax", True),
    ("SELECT touch(@id)", "touch", False),
]


@pytest.mark.parametrize(("sql", "function", "read_only"), READ_ONLY)
def test_read_only(sql: str, function: str | None, read_only: bool, catalog: Catalog, conn: psycopg.Connection) -> None:
    assert analysed(sql, catalog).read_only is read_only
    # PostgreSQL agrees: a read-only transaction runs it (nothing is written or locked), and
    # the function it calls is not volatile (pg_proc.provolatile).
    volatile = function is not None and conn.execute(
        "SELECT bool_or(provolatile = 'v') FROM pg_proc WHERE proname = %s", [function]
    ).fetchone() == (True,)
    text, order = positional(sql)
    pgconn = conn.pgconn
    pgconn.exec_(b"BEGIN READ ONLY")
    try:
        result = pgconn.exec_params(text.encode(), [b"1"] * len(order))
    finally:
        pgconn.exec_(b"ROLLBACK")
    assert (
        result.status == psycopg.pq.ExecStatus.TUPLES_OK
        or result.error_field(psycopg.pq.DiagnosticField.SQLSTATE) == b"25006"
    ), (result.error_message or b"").decode()
    writes = result.status != psycopg.pq.ExecStatus.TUPLES_OK
    assert read_only == (not writes and not volatile)


# -- output names (PostgreSQL's FigureColname) ---------------------------------------------------

NAMED_ITEMS = [
    "true",
    "NULL",
    "1",
    "'a'",
    "@x::text",
    "1::int",
    "id::int",
    "'a'::varchar(3)",
    "1.5::double precision",
    "now()::timestamp with time zone",
    "EXISTS (SELECT 1)",
    "CASE WHEN true THEN 1 ELSE total END",
    "CASE WHEN true THEN total ELSE 0 END",
    "ARRAY[1]",
    "ARRAY(SELECT 1)",
    "ROW(1, 2)",
    "coalesce(note, 'x')",
    "greatest(1, 2)",
    "least(1, 2)",
    "nullif(note, 'x')",
    "(SELECT count(*) FROM payments)",
    "(SELECT 1)",
    "(SELECT p.amount AS paid FROM payments p LIMIT 1)",
    "ceiling(1.5)",
    "div(9, 4)",
    "count(*)",
    "trim(both from note)",
    "extract(year from placed_at)",
    "position('a' in note)",
    "substring(note from 2)",
    "placed_at AT TIME ZONE 'utc'",
    "current_date",
    "current_timestamp",
    "localtimestamp",
    "tags[1]",
    "-total",
    "NOT true",
    "note IS NULL",
    "total IN (1, 2)",
    "interval '1 day'",
    "date '2020-01-01'",
    "CAST(id AS text)",
    'note COLLATE "C"',
    "pg_catalog.now()",
    "row_number() OVER ()",
    "count(*) FILTER (WHERE true)",
    "total + 1",
    "(total)",
    "note || 'x'",
    "@ids::int[]",
    "(id = 0) AS Inserted",
    'id AS "MaxDate"',
    "id AS MaxDate",
]


@pytest.mark.parametrize("item", NAMED_ITEMS)
def test_output_names_are_postgresql_s(item: str, conn: psycopg.Connection) -> None:
    sql = f"SELECT {item}, 1 AS two FROM orders"
    check = check_statement(sql)
    names = OutputNames(check.tree, check.original_offset)
    found = names.names([7, len(f"SELECT {item}, ")])
    assert found is not None
    assert list(found) == [name for name, _ in describe(conn, sql)[1]]


def test_nested_lists_are_told_apart(conn: psycopg.Connection, catalog: Catalog) -> None:
    sql = "SELECT (SELECT count(*) FROM payments), s.n FROM (SELECT id::text AS n FROM orders) s"
    assert ours(analysed(sql, catalog))[1] == describe(conn, sql)[1]


# -- constructs: parameter types, names, types and nullability as PostgreSQL's ------------------

#: (statement, the nullability of each output column): compared as is, and where the statement
#: takes no parameters it is also run on the sample rows, where a column called NOT NULL must
#: hold no NULL.
CONSTRUCTS: list[tuple[str, list[bool]]] = [
    ("SELECT ID, Total AS MaxTotal FROM ORDERS", [False, False]),
    ('SELECT id AS "MaxDate" FROM orders', [False]),
    ("SELECT total AS t FROM orders ORDER BY t", [False]),
    ("SELECT customer_id, count(*) FROM orders JOIN payments USING (customer_id) GROUP BY customer_id", [False, False]),
    ("SELECT customer_id, note, sum(total) FROM orders GROUP BY ROLLUP (customer_id, note)", [True, True, True]),
    ("SELECT customer_id, sum(total) FROM orders GROUP BY CUBE (customer_id)", [True, True]),
    ("SELECT customer_id, sum(total) FROM orders GROUP BY GROUPING SETS ((customer_id), ())", [True, True]),
    ("SELECT customer_id, note, count(*) FROM orders GROUP BY customer_id, ROLLUP (note)", [False, True, False]),
    ("SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY total) FROM orders", [True]),
    ("SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY total) FROM orders", [True]),
    ("SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY placed_at - placed_at) FROM orders", [True]),
    (
        "DELETE FROM payments USING customers c JOIN orders o ON o.customer_id = c.id WHERE c.id = payments.customer_id",
        [],
    ),
    ("SELECT u.x, u.ord FROM unnest(@xs::int[]) WITH ORDINALITY AS u(x, ord)", [False, False]),
    ("SELECT xmin, xmax, cmin, cmax, ctid, tableoid FROM orders", [False] * 6),
    (
        "INSERT INTO customers (name) VALUES (@name) ON CONFLICT (name) DO UPDATE SET email = EXCLUDED.email "
        "RETURNING id, (xmax = 0) AS inserted",
        [False, False],
    ),
    (
        "UPDATE orders SET note = c.name FROM customers c JOIN payments p ON p.customer_id = c.id "
        "WHERE orders.customer_id = c.id RETURNING orders.id, p.amount",
        [False, False],
    ),
    ("UPDATE orders SET (note, total) = (@note, @total) WHERE id = @id RETURNING note", [True]),
    ("UPDATE orders SET (note, total) = (SELECT name, 1.5 FROM customers WHERE id = @c) WHERE id = @id", []),
    ("UPDATE orders SET tags[@i] = @v WHERE id = @id RETURNING tags", [False]),
    (
        "WITH RECURSIVE r AS (SELECT 1 AS n, NULL AS p UNION ALL SELECT n + 1, 'a' FROM r WHERE n < 3) SELECT * FROM r",
        [False, True],
    ),
    (
        "WITH RECURSIVE r AS (SELECT NULL::bigint AS parent, id FROM customers UNION ALL "
        "SELECT r.id, c.id FROM r JOIN customers c ON c.id = r.parent) SELECT * FROM r",
        [True, False],
    ),
    ("SELECT (SELECT count(*) FROM orders) AS n, (SELECT total FROM orders LIMIT 1) AS t", [False, True]),
    ("SELECT (SELECT max(total) FROM orders WHERE customer_id = c.id) FROM customers c", [True]),
    ("SELECT count(*), max(total) FROM orders", [False, True]),
    ("SELECT c.name, p.amount FROM customers c LEFT JOIN payments p ON p.customer_id = c.id", [False, True]),
    # functions and operators, typed by PostgreSQL's overload resolution
    ("SELECT id FROM orders WHERE to_tsvector('english', note) @@ plainto_tsquery('english', @q)", [False]),
    ("SELECT to_tsvector('english', name) @@ plainto_tsquery(@q) AS hit FROM customers", [False]),
    ("SELECT regexp_match(name, '(a)') FROM customers", [True]),
    ("SELECT e.key, e.value FROM orders o, jsonb_each(o.meta) AS e", [True, True]),
    ("SELECT key, value FROM jsonb_each_text(@doc::jsonb)", [True, True]),
    ("SELECT pg_advisory_lock(@k)", [False]),
    ("SELECT nextval('orders_id_seq')", [False]),
    ("SELECT json_build_array(1, 'a', note) FROM orders", [False]),
    ("SELECT log(2.0), log(2, 8) AS log2, exp(1.0), pi(), width_bucket(5.0, 0.0, 10.0, 5)", [False] * 5),
    ("SELECT ln(2.0), sqrt(2.0), power(9.0, 3.0), ln(2) AS ln2, sqrt(@x::float8) AS sqrt2", [False] * 5),
    ("SELECT ceiling(total), div(9, 4), mod(9, 4), round(total, 1) FROM orders", [False] * 4),
    (
        "SELECT @x::text, 1::int, id::text AS t, EXISTS (SELECT 1 FROM payments) FROM orders",
        [False] * 4,
    ),
    ("SELECT lower(note), length(name) FROM orders JOIN customers c ON c.id = orders.customer_id", [True, False]),
    ("SELECT g FROM generate_series(1, @n) AS g", [False]),
    ("SELECT concat(note, '!'), concat_ws(',', note, 'x') FROM orders", [False, False]),
    (
        "SELECT mode() WITHIN GROUP (ORDER BY note), rank(3) WITHIN GROUP (ORDER BY total), "
        "percentile_cont(@f) WITHIN GROUP (ORDER BY total) AS p, "
        "percentile_cont(ARRAY[0.5, 0.9]) WITHIN GROUP (ORDER BY total) AS ps FROM orders",
        [True, False, True, True],
    ),
    ("SELECT id FROM orders WHERE xmax = 0 AND tableoid = @t", [False]),
    (
        "SELECT concat_ws(',', VARIADIC ARRAY['a', 'b']), trim(note), trim(leading 'x' from note) AS l FROM orders",
        [False, True, True],
    ),
    ("SELECT array_agg(DISTINCT note), string_agg(note, ',' ORDER BY id) FROM orders", [True, True]),
    (
        "WITH ready AS (SELECT id FROM orders WHERE total > 1) DELETE FROM payments "
        "WHERE customer_id IN (SELECT * FROM ready) RETURNING payment_id, amount * 2",
        [False, False],
    ),
    ("SELECT id FROM customers WHERE code = @code OR @code2 = code OR mood = @mood", [False]),
    ("SELECT EXISTS ( SELECT 1 FROM orders WHERE id = @id )", [False]),
    ("SELECT NOT EXISTS (SELECT id FROM orders) AS none, (SELECT max(id) FROM orders)", [False, True]),
    ("SELECT CASE WHEN total > 1 THEN (SELECT count(*) FROM payments) ELSE 0 END FROM orders", [False]),
    ("SELECT id FROM orders UNION SELECT payment_id FROM payments ORDER BY 1 LIMIT @n OFFSET @o", [False]),
    ("SELECT 1 AS n UNION SELECT 2.5 UNION SELECT NULL", [True]),
    ("SELECT 'a' AS s UNION ALL SELECT 'b'", [False]),
    ("SELECT code AS c FROM customers UNION SELECT name FROM customers", [True]),
    ("SELECT coalesce(customer_id, 1.5), greatest(total, 2), least(@a, 2, 3.5) FROM orders", [False, False, False]),
    ("SELECT coalesce(note, @fallback), nullif(note, 'x') FROM orders", [False, True]),
    (
        "SELECT CASE WHEN total > 5 THEN total ELSE 0 END AS a, CASE WHEN true THEN 1 ELSE 2.5 END AS b FROM orders",
        [False, False],
    ),
    ("SELECT CASE WHEN total > 5 THEN @big ELSE note END AS c FROM orders", [True]),
    ("SELECT v.a, v.b FROM (VALUES (1, 'x'), (2.5, NULL)) AS v(a, b)", [False, True]),
    (
        "SELECT sum(id), sum(total) AS t, avg(id), sum(placed_at - placed_at) AS i FROM orders",
        [True, True, True, True],
    ),
    (
        "SELECT sum(id) OVER () AS running, sum(total) OVER (PARTITION BY customer_id) AS per_customer FROM orders",
        [False, False],
    ),
    (
        "SELECT date_trunc('day', placed_at) AS d, date_trunc('month', placed_at::date) AS m, "
        "date_trunc('hour', placed_at::timestamp) AS h FROM orders",
        [False, False, False],
    ),
    (
        "SELECT 1.5::float4 + total AS a, 1::int2 + 1::int2 AS b, id * 2 AS c, 5 % 2.0 AS d, total / 3 AS e FROM orders",
        [False] * 5,
    ),
    # functions the schema declares: their body may return NULL whatever the arguments
    ("SELECT with_tax(amount => total) AS taxed, with_tax(amount => @a) AS named FROM orders", [True, True]),
    ("SELECT with_tax(total) FROM orders", [True]),
    ("SELECT with_tax(@amount)", [True]),
    ("SELECT o.order_id, o.order_total FROM customer_orders(@customer) AS o", [True, True]),
]


@pytest.mark.parametrize(("sql", "nullable"), CONSTRUCTS)
def test_construct_is_typed_as_postgresql_types_it(
    sql: str, nullable: list[bool], catalog: Catalog, conn: psycopg.Connection
) -> None:
    analysis = analysed(sql, catalog)
    assert ours(analysis) == describe(conn, sql)
    assert [c.nullable for c in analysis.columns or ()] == nullable
    if analysis.params or analysis.columns is None:
        return
    with conn.transaction(force_rollback=True):
        rows = conn.execute(sql.encode()).fetchall()
    for row in rows:
        for value, may_be_null in zip(row, nullable, strict=True):
            assert may_be_null or value is not None, row


#: Statements PostgreSQL rejects (parse analysis, or planning for ON CONFLICT): so must the analyzer.
REJECTED = [
    "INSERT INTO customers (name) VALUES (@name) ON CONFLICT DO UPDATE SET email = 'x'",
    "INSERT INTO orders (customer_id, total) VALUES (1, 1) ON CONFLICT (note) DO NOTHING",
    "WITH RECURSIVE r(n) AS (SELECT NULL UNION ALL SELECT 1 FROM r WHERE false) SELECT n FROM r",
    "WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n::bigint + 1 FROM r WHERE n < 3) SELECT * FROM r",
    "UPDATE orders SET (note, total) = (@note) WHERE id = @id",
    "UPDATE orders SET total[1] = 2 WHERE id = @id",
    "SELECT random(1)",
    "SELECT id::STRING FROM orders",
    "SELECT row_number() FROM orders",
    "SELECT lower(1) FROM orders",
    "SELECT name FROM customers UNION SELECT id FROM customers",
    "SELECT coalesce(name, 1) FROM customers",
    "SELECT sum(id), sum(id) OVER () FROM orders",
    "SELECT * FROM (VALUES (1), ('x'::text)) AS v(a)",
    "SELECT o.id FROM orders o JOIN (VALUES (@first), (@second)) AS v(id) ON v.id = o.id",
    "SELECT CASE WHEN true THEN name ELSE 1 END FROM customers",
    "SELECT percentile_cont(@f) WITHIN GROUP (ORDER BY placed_at - placed_at) FROM orders",
]


@pytest.mark.parametrize("sql", REJECTED)
def test_what_postgresql_rejects_is_an_error(sql: str, catalog: Catalog, conn: psycopg.Connection) -> None:
    _, problems = analyze(sql, catalog)
    assert problems
    text, order = positional(sql)
    pgconn = conn.pgconn
    pgconn.exec_(b"BEGIN")
    try:
        result = pgconn.prepare(b"", text.encode())
        if result.status == psycopg.pq.ExecStatus.COMMAND_OK:
            result = pgconn.exec_prepared(b"", [None] * len(order))  # type: ignore[list-item]
    finally:
        pgconn.exec_(b"ROLLBACK")
    assert result.status == psycopg.pq.ExecStatus.FATAL_ERROR
