-- The role the generated GenerationDataService connects as: exactly the privileges its RPCs
-- need (task.proto's statements), nothing else. Run it as the schema's owner (or a superuser) in
-- the queue's database, after schema.sql and after every change to task.proto's statements:
--
--     psql "$ADMIN_URL" -v ON_ERROR_STOP=1 -f service_role.sql
--
-- then give the role a way to log in (a password, `ALTER ROLE pydb_task_service PASSWORD '...'`,
-- or a client certificate in pg_hba.conf) and point the server's DATABASE_URL at it.
-- docs/security.md explains the choice of each privilege. Safe to run again.
--
-- What the role can NOT do: DELETE or TRUNCATE rows (but purge live task events, and prune terminal
-- tasks: PruneTasks), write the columns the database owns (ids,
-- created_at, tool_id of an existing task), change or create any table, type or function, or
-- reach any other schema. The foreign key check and the wake trigger need nothing more:
-- PostgreSQL runs foreign key checks as the table owner, and the trigger function (EXECUTE is
-- granted to PUBLIC) only calls pg_notify.

DO $$
BEGIN
    CREATE ROLE pydb_task_service LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
EXCEPTION
    -- Already there: roles are per cluster, the grants below per database.
    WHEN duplicate_object OR unique_violation THEN NULL;
END
$$;

-- Start from nothing, so a privilege dropped from this file is dropped from the role too.
REVOKE ALL ON ALL TABLES IN SCHEMA generation FROM pydb_task_service;
REVOKE ALL ON SCHEMA generation FROM pydb_task_service;

GRANT USAGE ON SCHEMA generation TO pydb_task_service;

-- RegisterTool: INSERT ... ON CONFLICT (name) DO UPDATE SET name ... RETURNING *; SetToolLease,
-- SetToolRetryPolicy, SetToolMaxRuntime, PauseTool / ResumeTool: UPDATE their columns; the claims,
-- heartbeats and failures read them.
GRANT SELECT, INSERT (name),
      UPDATE (name, lease_seconds, retry_base_seconds, retry_cap_seconds, max_runtime_seconds, paused,
              max_running, key_max_running, rate_limit, rate_period_seconds, rate_tokens, rate_updated_at)
    ON generation.tools TO pydb_task_service;
-- SetToolConcurrency / SetToolKeyConcurrency and the enqueue's key trigger make slots; the claims
-- lock free ones (FOR UPDATE); the slot trigger (run as the caller) takes, renews and frees them.
GRANT SELECT, INSERT, UPDATE (task_id, expires_at) ON generation.claim_slots TO pydb_task_service;

-- Every read returns whole rows (RETURNING *, SELECT *).
GRANT SELECT ON generation.tasks TO pydb_task_service;
-- QueueTask: the columns a caller may set.
-- (EnqueuePeriodicTask also the slot columns.)
GRANT INSERT (tool_id, status, input, priority, max_retries, reserved_token_amount, billing_idempotency_key,
              w3c_traceparent, lease_seconds, run_at, max_runtime_seconds, periodic_name, periodic_slot_at,
              concurrency_key, fair_seq)
    ON generation.tasks TO pydb_task_service;
-- ClaimNextTask / ClaimTasks / HeartbeatTask / CompleteTask(s) / FailTask(s) / SnoozeTask /
-- CancelTask(s) / PromoteDueTasks / ReapOverdueTasks / RetryTask(s) (the state machine), QueueTask's
-- idempotent ON CONFLICT DO UPDATE (billing_idempotency_key). FOR UPDATE needs an UPDATE privilege
-- too, which these give.
GRANT UPDATE (status, started_at, claim_expires_at, lease_token, retry_count, output, reported_usage, completed_at, error,
              billing_idempotency_key, run_at, attempted_at, errors, claim_slot, key_slot, claim_request_id)
    ON generation.tasks TO pydb_task_service;
-- PruneTasks: retention deletes terminal rows (the statement's WHERE; the role cannot tell
-- rows apart, so this is the one table-wide privilege granted for it).
GRANT DELETE ON generation.tasks TO pydb_task_service;

-- Live task events (docs/worker.md): AppendTaskEvents numbers events after max(seq) and inserts
-- whole rows, ListTaskEvents reads them, PurgeTaskEvents deletes expired ones. Nothing updates them.
GRANT SELECT, INSERT, DELETE ON generation.task_events TO pydb_task_service;

-- Periodic tasks: UpsertPeriodicTask inserts or updates a schedule, ListPeriodicTasks reads them,
-- DeletePeriodicTask deletes one, EnqueuePeriodicTask advances last_slot_at.
GRANT SELECT, INSERT (name, tool_id, cron, timezone, input, priority, max_retries),
      UPDATE (tool_id, cron, timezone, input, priority, max_retries, updated_at, last_slot_at), DELETE
    ON generation.periodic_tasks TO pydb_task_service;
