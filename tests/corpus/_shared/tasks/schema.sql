-- The schema every corpus case is checked against (cases under schemas/ bring their own).
CREATE SCHEMA app;

CREATE TYPE app.task_status AS ENUM ('queued', 'processing', 'completed', 'failed');

CREATE TABLE app.tools (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name varchar(200) NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE app.tasks (
    id bigserial PRIMARY KEY,
    tool_id uuid NOT NULL REFERENCES app.tools (id) ON DELETE CASCADE,
    status app.task_status NOT NULL DEFAULT 'queued',
    priority integer NOT NULL DEFAULT 0 CHECK (priority >= 0),
    urgent boolean NOT NULL DEFAULT false,
    tags text[] NOT NULL DEFAULT '{}',
    input jsonb NOT NULL DEFAULT '{}',
    output jsonb,
    error text,
    cost numeric(12, 2),
    ttl interval,
    due date,
    created_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    CONSTRAINT tasks_finished_check CHECK (finished_at IS NULL OR finished_at >= created_at)
);

COMMENT ON TABLE app.tasks IS 'The work queue.';
COMMENT ON COLUMN app.tasks.ttl IS 'How long a claim lasts.';

ALTER TABLE app.tasks ADD COLUMN attempts int NOT NULL DEFAULT 0;
ALTER TABLE app.tasks ADD COLUMN scratch text;
ALTER TABLE app.tasks DROP COLUMN scratch;
ALTER TABLE app.tasks ALTER COLUMN error TYPE varchar(2000);

CREATE TABLE app.events (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id bigint NOT NULL REFERENCES app.tasks (id),
    kind text NOT NULL,
    at timestamptz NOT NULL DEFAULT now(),
    payload jsonb,
    UNIQUE (task_id, kind)
);

CREATE INDEX tasks_live ON app.tasks (tool_id, status DESC, priority DESC, created_at)
    WHERE status IN ('queued', 'processing');
CREATE UNIQUE INDEX tools_lower_name ON app.tools (lower(name));

-- Triggers and functions are accepted and do not change the tables.
CREATE OR REPLACE FUNCTION app.touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('tasks', NEW.id::text);  -- a ';' in a body does not end the statement
    RETURN NEW;
END;
$$;
CREATE TRIGGER tasks_touch AFTER INSERT ON app.tasks FOR EACH ROW EXECUTE FUNCTION app.touch();
