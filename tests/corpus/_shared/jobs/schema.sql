-- The schema every corpus case runs against (unless it names its own under schemas/).
CREATE SCHEMA app;

CREATE TYPE app.job_state AS ENUM ('queued', 'running', 'done', 'failed');

CREATE TABLE app.users (
    id bigserial PRIMARY KEY,
    email varchar(320) NOT NULL UNIQUE,
    name text NOT NULL,
    nickname text,
    tags text[] NOT NULL DEFAULT '{}',
    profile jsonb,
    created_at timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE app.users IS 'People who own jobs.';
COMMENT ON COLUMN app.users.nickname IS 'Shown instead of name when set.';

CREATE TABLE app.jobs (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id bigint NOT NULL REFERENCES app.users (id) ON DELETE CASCADE,
    state app.job_state NOT NULL DEFAULT 'queued',
    kind varchar(40) NOT NULL,
    payload jsonb NOT NULL DEFAULT '{}',
    attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    score double precision,
    price numeric(12, 2),
    ratio real,
    small smallint,
    run_at timestamptz,
    timeout interval NOT NULL DEFAULT interval '5 minutes',
    due date,
    blob bytea,
    urgent boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT jobs_kind_nonempty CHECK (kind <> '')
);

ALTER TABLE app.jobs ADD COLUMN note text;
ALTER TABLE app.jobs ADD COLUMN legacy text;
ALTER TABLE app.jobs DROP COLUMN legacy;
ALTER TABLE app.jobs ALTER COLUMN note SET DEFAULT '';

CREATE UNIQUE INDEX jobs_owner_kind ON app.jobs (owner_id, kind);
CREATE INDEX jobs_due ON app.jobs (run_at) WHERE state = 'queued';
CREATE INDEX jobs_payload ON app.jobs USING gin (payload);

CREATE TABLE app.events (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id uuid NOT NULL REFERENCES app.jobs (id),
    at timestamp NOT NULL DEFAULT now(),
    body json,
    seq integer NOT NULL,
    UNIQUE (job_id, seq)
);
