CREATE TYPE status AS ENUM ('open', 'closed');
CREATE TABLE tickets (id int PRIMARY KEY, state status NOT NULL);
