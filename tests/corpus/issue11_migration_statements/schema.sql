BEGIN;
CREATE TYPE mood AS ENUM ('ok', 'sad');
ALTER TYPE mood RENAME TO feeling;
CREATE TYPE floatrange AS RANGE (subtype = float8);
CREATE TABLE members (
    id serial PRIMARY KEY,
    email text NOT NULL,
    feeling feeling,
    mask bit varying(16),
    handle text,
    updated_at timestamptz,
    CONSTRAINT members_handle UNIQUE NULLS DISTINCT (handle)
);
CREATE UNIQUE INDEX members_email ON members (email) WHERE handle IS NOT NULL;
ALTER TABLE members ADD CONSTRAINT email_nonempty CHECK (email <> '') NOT VALID;
ALTER TABLE members VALIDATE CONSTRAINT email_nonempty;
INSERT INTO members (email, handle) VALUES ('a@example.com', 'a')
    ON CONFLICT (email) WHERE handle IS NOT NULL DO NOTHING;
UPDATE members SET feeling = 'ok' WHERE feeling IS NULL;
DELETE FROM members WHERE email = 'gone@example.com';
SELECT setval('members_id_seq', 1000);
CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.updated_at := now();
    RETURN NEW;
END
$$;
CREATE TRIGGER members_touch BEFORE UPDATE ON members FOR EACH ROW EXECUTE FUNCTION touch();
GRANT SELECT ON members TO PUBLIC;
REVOKE SELECT ON members FROM PUBLIC;
DROP INDEX IF EXISTS members_old_index;
DROP TABLE IF EXISTS members_old;
DROP VIEW IF EXISTS members_view;
DROP TRIGGER IF EXISTS members_old_trigger ON members;
DROP TYPE IF EXISTS old_mood;
ALTER TABLE members DROP CONSTRAINT IF EXISTS members_old_check;
COMMIT;
