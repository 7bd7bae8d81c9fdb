CREATE TABLE notes (
    id bigint PRIMARY KEY,
    body text,
    stars int,
    weight float8,
    pinned bool,
    raw bytea
);
