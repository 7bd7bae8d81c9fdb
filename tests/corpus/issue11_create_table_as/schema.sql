CREATE TABLE people (id int PRIMARY KEY, name text NOT NULL, age int);
CREATE TABLE adults AS SELECT id, name FROM people WHERE age >= 18;
