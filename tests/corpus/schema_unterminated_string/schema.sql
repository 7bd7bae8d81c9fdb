CREATE SCHEMA app;
CREATE TABLE app.t (
    id int PRIMARY KEY,
    label text NOT NULL DEFAULT 'none
);
