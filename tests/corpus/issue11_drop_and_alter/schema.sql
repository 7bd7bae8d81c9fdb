CREATE TABLE scratch (id int);
DROP TABLE scratch;
CREATE TABLE posts (
    id int PRIMARY KEY,
    title text NOT NULL CONSTRAINT title_short CHECK (length(title) < 10),
    body text,
    obsolete int
);
ALTER TABLE posts RENAME TO articles;
ALTER TABLE articles RENAME COLUMN body TO content;
ALTER TABLE articles DROP CONSTRAINT title_short;
ALTER TABLE articles DROP COLUMN obsolete;
