CREATE TABLE parent (id int, name text);
CREATE TABLE child (name int) INHERITS (parent);
