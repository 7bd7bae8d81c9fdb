CREATE SCHEMA app;
CREATE TABLE app.hosts (
    id int PRIMARY KEY,
    address inet NOT NULL,
    mood app.mood
);
