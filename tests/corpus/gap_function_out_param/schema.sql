CREATE TABLE notes (id bigserial PRIMARY KEY, body text NOT NULL);
CREATE FUNCTION add_note(body text, OUT note_id bigint) LANGUAGE sql
    AS $$ INSERT INTO notes (body) VALUES (body) RETURNING id $$;
