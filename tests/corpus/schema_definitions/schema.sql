CREATE SCHEMA app;
CREATE TYPE app.mood AS ENUM ('happy', 'sad', 'happy');
CREATE TABLE app.t (
    id int PRIMARY KEY,
    name text,
    name text
);
CREATE TABLE app.t (id int);
ALTER TABLE app.t ADD COLUMN id bigint;
ALTER TABLE app.t ADD COLUMN IF NOT EXISTS id bigint;
ALTER TYPE app.feeling ADD VALUE 'meh';
COMMENT ON TABLE app.nope IS 'no such table';
CREATE INDEX t_lower ON app.t (lower(title)) WHERE deleted;
CREATE TRIGGER t_touch AFTER INSERT ON app.missing FOR EACH ROW EXECUTE FUNCTION app.touch();
CREATE TABLE app.copy AS SELECT * FROM app.t;
