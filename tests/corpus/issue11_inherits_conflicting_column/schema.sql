CREATE TABLE parent (id int, code text);
CREATE TABLE child (code int) INHERITS (parent);
