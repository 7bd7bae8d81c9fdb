CREATE TYPE item_state AS ENUM ('draft', 'live', 'gone');
CREATE TABLE items (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    shop text NOT NULL,
    state item_state NOT NULL,
    price integer NOT NULL,
    added_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX items_shop_added ON items (shop, added_at, id);
CREATE INDEX items_state_added ON items (state, added_at, id);
CREATE INDEX items_price ON items (price, id);
