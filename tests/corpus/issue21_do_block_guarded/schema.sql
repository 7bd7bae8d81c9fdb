CREATE TABLE accounts (id bigint PRIMARY KEY, email text NOT NULL);
-- The guards of idempotent migrations: applied, as PostgreSQL runs them on a fresh database.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM information_schema.columns
                   WHERE table_name = 'accounts' AND column_name = 'plan') THEN
        ALTER TABLE accounts ADD COLUMN plan text NOT NULL DEFAULT 'free';
    END IF;
END
$$;
DO $$
BEGIN
    CREATE TYPE account_state AS ENUM ('active', 'closed');
EXCEPTION
    WHEN duplicate_object THEN NULL;
END
$$;
-- Run twice: the guard skips what is there already.
DO $$
BEGIN
    CREATE TYPE account_state AS ENUM ('active', 'closed');
EXCEPTION
    WHEN duplicate_object THEN NULL;
END
$$;
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint WHERE conname = 'accounts_email_key') THEN
        ALTER TABLE accounts ADD CONSTRAINT accounts_email_key UNIQUE (email);
    END IF;
    ALTER TABLE accounts ADD COLUMN IF NOT EXISTS state account_state NOT NULL DEFAULT 'active';
END
$$;
