CREATE TABLE authors (
    author_id serial PRIMARY KEY,
    name text NOT NULL
);
CREATE UNIQUE INDEX authors_name ON authors (name);
CREATE TABLE books (
    id serial PRIMARY KEY,
    author_id int NOT NULL REFERENCES authors,
    title text NOT NULL,
    parent_id int REFERENCES books (id)
);
CREATE FUNCTION slugify(t text) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT lower(t) $$;
