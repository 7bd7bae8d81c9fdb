CREATE SCHEMA app;

CREATE TABLE app.ok (id int PRIMARY KEY);

-- The next statement does not parse; the rest of the file is still read.
CREATE TABLE app.broken (
    id int PRIMARY KEY,
    name text NOT NULL DEFAULT
);

CREATE INDEX ok_missing ON app.ok (nope);
