"""Optional blocks, a caller's sort and AIP-158 page tokens on a real PostgreSQL (tests/goldens/shapes):
every combination of filters and every sort, paged at several sizes, lists exactly the rows
PostgreSQL's own query of the same filters and order gives (the oracle is the `(@x IS NULL OR
col = @x)` idiom, run directly); tokens are opaque and checked (tampered, replayed with other
filters, negative sizes, unknown sorts: INVALID_ARGUMENT); and a variant is planned with its own
index where the OR idiom's generic plan scans the table (EXPLAIN of the very statement the
handler prepared)."""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
import pytest
from goldens.harness import generate, importable
from pydb import runtime as rt
from support.pg import Cluster, scratch_database

GOLDEN = Path(__file__).resolve().parents[1] / "goldens" / "shapes"

ORDERS = {  # the proto's sort -> the ORDER BY the oracle writes
    0: "added_at DESC, id DESC",
    1: "added_at, id",
    2: "price, id",
    3: "price DESC, id",
}
ORACLE = (
    "SELECT id FROM items WHERE (%(shop)s::text IS NULL OR shop = %(shop)s)"
    " AND (%(state)s::item_state IS NULL OR state = %(state)s)"
    " AND (%(max_price)s::int IS NULL OR price <= %(max_price)s) ORDER BY {order}"
)


@pytest.fixture(scope="module")
def shapes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    out = tmp_path_factory.mktemp("shapes")
    outcome = generate(GOLDEN, "goldens_shapes.proto", out)
    assert outcome.error == "", outcome.error
    with importable(out, "goldens_shapes_pydb") as handlers:
        yield handlers


def _pb(handlers: ModuleType) -> Any:
    return handlers.__dict__["goldens_shapes_pb2"]


SEED = """
INSERT INTO items (shop, state, price, added_at)
SELECT 'shop-' || (g % 3), (ARRAY['draft', 'live', 'gone'])[1 + (g / 3) % 3]::item_state, (g * 37) % 50,
       timestamptz '2026-01-01' + (g / 2) * interval '1 minute'   -- two rows per minute: ties on added_at
FROM generate_series(1, %s) AS g
"""


async def all_pages(handlers: ModuleType, url: str, request: Any) -> list[list[int]]:
    pages = []
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        while True:
            got = await handlers.find_items(conn, request)
            pages.append([i.id for i in got.items])
            if not got.next_page_token:
                return pages
            following = type(request)()
            following.CopyFrom(request)
            following.page_token = got.next_page_token
            request = following


async def test_every_filter_combination_and_sort_pages_through_the_oracles_rows(
    shapes: ModuleType, pg_server: tuple[str, Cluster | None]
) -> None:
    pb = _pb(shapes)
    with scratch_database(pg_server[0], schema=GOLDEN / "schema.sql") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(SEED.replace("%s", "61"))
        combos = itertools.product(
            (None, "shop-1"), (None, pb.ITEM_STATE_LIVE), (None, 30), ORDERS, (7, 61, 0)
        )  # fmt: skip
        for shop, state, max_price, order, size in combos:
            request = pb.FindItemsRequest(order=order, page_size=size)
            if shop is not None:
                request.shop = shop
            if state is not None:
                request.state = state
            if max_price is not None:
                request.max_price.value = max_price
            pages = await all_pages(shapes, url, request)
            label = {pb.ITEM_STATE_LIVE: "live"}.get(state) if state is not None else None
            with psycopg.connect(url) as conn:
                expected = [
                    r[0]
                    for r in conn.execute(
                        ORACLE.format(order=ORDERS[order]),
                        {"shop": shop, "state": label, "max_price": max_price},
                    )
                ]
            assert [i for p in pages for i in p] == expected, (shop, state, max_price, order, size)
            per_page = size or 20
            assert (all(len(p) == per_page for p in pages[:-1]) and 0 < len(pages[-1]) <= per_page) or expected == []
            # An exact multiple ends without a token rather than with an empty page.
            assert pages[-1] or len(pages) == 1


async def test_tokens_are_checked(shapes: ModuleType, pg_server: tuple[str, Cluster | None]) -> None:
    pb = _pb(shapes)
    with scratch_database(pg_server[0], schema=GOLDEN / "schema.sql") as url:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(SEED.replace("%s", "30"))
            first = await shapes.find_items(conn, pb.FindItemsRequest(shop="shop-1", page_size=3))
            token = first.next_page_token
            assert token and "shop" not in token and "2026" not in token  # opaque
            ok = await shapes.find_items(conn, pb.FindItemsRequest(shop="shop-1", page_size=5, page_token=token))
            assert ok.items  # another page size with the same token is fine (AIP-158)
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            payload = json.loads(raw[16:])
            payload[2][1] = str(int(payload[2][1]) + 1)
            forged = base64.urlsafe_b64encode(raw[:16] + json.dumps(payload, separators=(",", ":")).encode()).decode()
            flipped = token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]
            bad = [
                pb.FindItemsRequest(shop="shop-1", page_token=flipped),
                pb.FindItemsRequest(shop="shop-1", page_token=token[:10]),
                pb.FindItemsRequest(shop="shop-1", page_token="!!not base64!!"),
                pb.FindItemsRequest(shop="shop-1", page_token=forged),
                pb.FindItemsRequest(shop="shop-2", page_token=token),  # other filters
                pb.FindItemsRequest(shop="shop-1", order=pb.ITEM_ORDER_OLDEST, page_token=token),  # another sort
                pb.FindItemsRequest(page_size=-1),
                pb.FindItemsRequest(order=99),
            ]
            for request in bad:
                with pytest.raises(rt.InvalidArgument):
                    await shapes.find_items(conn, request)
            big = await shapes.find_items(conn, pb.FindItemsRequest(page_size=10_000))
            assert len(big.items) == 30 and not big.next_page_token  # lowered to max_size (100)
            count = await shapes.count_items(conn, pb.CountItemsRequest(shop="shop-0"))
            everything = await shapes.count_items(conn, pb.CountItemsRequest())
            cur = await conn.execute("SELECT count(*) FILTER (WHERE shop = 'shop-0'), count(*) FROM items")
            assert (count.items, everything.items) == await cur.fetchone()


async def test_a_variant_uses_its_index_where_the_or_idiom_scans(
    shapes: ModuleType, pg_server: tuple[str, Cluster | None]
) -> None:
    pb = _pb(shapes)
    with scratch_database(pg_server[0], schema=GOLDEN / "schema.sql") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(SEED.replace("%s", "200000"))
            conn.execute("ANALYZE items")
        async with await psycopg.AsyncConnection.connect(url) as aconn:
            await shapes.find_items(aconn, pb.FindItemsRequest(shop="shop-1", page_size=20))
            cur = await aconn.execute("SELECT name, statement FROM pg_prepared_statements WHERE NOT from_sql")
            prepared = await cur.fetchall()
            assert len(prepared) == 1
            name, text = prepared[0]
            assert "shop = $1" in text and "state" not in text.split("FROM")[1]  # only the set filter's clause
            await aconn.execute("SET plan_cache_mode = force_generic_plan")
            cur = await aconn.execute(f"EXPLAIN (ANALYZE, TIMING OFF) EXECUTE {name}('shop-1', 21)")
            variant = "\n".join(r[0] for r in await cur.fetchall())
            await aconn.execute(
                "PREPARE or_idiom(text, item_state, int, int) AS SELECT id, shop, state, price, added_at FROM items"
                " WHERE ($1::text IS NULL OR shop = $1) AND ($2::item_state IS NULL OR state = $2)"
                " AND ($3::int IS NULL OR price <= $3) ORDER BY added_at DESC, id DESC LIMIT $4"
            )
            cur = await aconn.execute("EXPLAIN (ANALYZE, TIMING OFF) EXECUTE or_idiom('shop-1', NULL, NULL, 21)")
            idiom = "\n".join(r[0] for r in await cur.fetchall())
        print("variant plan:\n" + variant + "\nOR idiom plan:\n" + idiom)
        assert "Index Scan Backward using items_shop_added" in variant and "Seq Scan" not in variant, variant
        assert "Seq Scan on items" in idiom, idiom
