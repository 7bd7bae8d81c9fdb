CREATE TYPE address AS (street text, city text);
CREATE TABLE shops (id int PRIMARY KEY, location address);
