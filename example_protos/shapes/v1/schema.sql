-- The schema of the query-shapes example (shapes.proto): an inventory of items, for the
-- streamed read (ExportItems) and the COPY write (LoadItems) shapes; readings for bulk loads.
CREATE SCHEMA shapes;

CREATE TYPE shapes.item_kind AS ENUM ('tool', 'part');

CREATE TABLE shapes.items (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  sku text NOT NULL UNIQUE,
  kind shapes.item_kind NOT NULL,
  quantity integer NOT NULL CHECK (quantity >= 0),
  note text,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Append-only measurements, the usual target of a bulk load: no key, no secondary index.
CREATE TABLE shapes.readings (
  sensor text NOT NULL,
  seq bigint NOT NULL,
  value double precision NOT NULL
);

-- An order and its lines, for the one-to-many shape (GetOrder): each line one row of
-- shapes.order_lines, read into a repeated nested message.
CREATE TABLE shapes.orders (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  customer text NOT NULL,
  placed_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE shapes.order_lines (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  order_id bigint NOT NULL REFERENCES shapes.orders (id) ON DELETE CASCADE,
  sku text NOT NULL,
  quantity integer NOT NULL CHECK (quantity > 0),
  kind shapes.item_kind NOT NULL,
  note text,
  shipped_at timestamptz
);
