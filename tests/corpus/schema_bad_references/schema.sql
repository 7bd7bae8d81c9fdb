CREATE SCHEMA app;
CREATE TABLE app.users (id bigint PRIMARY KEY, email text NOT NULL);
CREATE TABLE app.posts (
    id bigint PRIMARY KEY,
    author bigint REFERENCES app.user (id),
    editor bigint REFERENCES app.users (uid),
    PRIMARY KEY (post_id)
);
CREATE INDEX users_mail ON app.users (mail);
ALTER TABLE app.usrs ADD COLUMN name text;
ALTER TABLE app.users ALTER COLUMN name SET NOT NULL;
COMMENT ON COLUMN app.users.nick IS 'no such column';
CREATE TABLE nope.t (id int);
