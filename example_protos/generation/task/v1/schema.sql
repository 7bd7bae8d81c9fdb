-- The generation task queue. The table generation.tasks *is* the queue: workers claim
-- rows with FOR UPDATE SKIP LOCKED, hold a time-based lease (claim_expires_at) and
-- finish them with Complete or Fail. See task.proto for the statements.

CREATE SCHEMA generation;

-- Lifecycle: (scheduled ->) queued -> processing -> completed | failed | cancelled.
-- The label order matters: `ORDER BY status DESC` puts reclaimable `processing`
-- zombies ahead of `queued` work. `dispatched` is never set by an RPC; it exists so
-- the reaper also sweeps legacy rows parked in it. `scheduled` (a task whose run_at is in the
-- future: delayed, backed off or snoozed) sorts below `queued` and `cancelled` (terminal) last;
-- neither is in the claim index, so neither lengthens the claim's scan.
CREATE TYPE generation.task_status AS ENUM
    ('scheduled', 'queued', 'dispatched', 'processing', 'completed', 'failed', 'cancelled');

-- A worker pool: every task names the tool that processes it.
-- The CHECK constraints below state what the data may hold, so a caller's bad value is refused
-- by PostgreSQL (check_violation, answered INVALID_ARGUMENT) whatever client wrote it.
CREATE TABLE generation.tools (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    -- A name is an identifier, not a payload: non-empty and at most 200 characters.
    name text NOT NULL UNIQUE CHECK (name <> '' AND char_length(name) <= 200),
    created_at timestamptz NOT NULL DEFAULT now(),
    -- The lease a claim takes and a heartbeat renews (SetToolLease): the one place its default
    -- lives. A tool whose tasks take seconds recovers a crashed worker's task in seconds.
    lease_seconds integer NOT NULL DEFAULT 120 CHECK (lease_seconds BETWEEN 1 AND 86400),
    -- The retry policy (SetToolRetryPolicy): a failed attempt with retries left waits
    -- min(cap, base * 2^retry_count) seconds, plus up to 25% jitter (never past the cap), before
    -- it is claimable again.
    retry_base_seconds double precision NOT NULL DEFAULT 2 CHECK (retry_base_seconds > 0 AND retry_base_seconds <= 86400),
    retry_cap_seconds double precision NOT NULL DEFAULT 600
        CHECK (retry_cap_seconds <= 604800 AND retry_cap_seconds >= retry_base_seconds),
    -- The run-time limit of one attempt (SetToolMaxRuntime); NULL: none. A task's own
    -- max_runtime_seconds wins.
    max_runtime_seconds integer CHECK (max_runtime_seconds BETWEEN 1 AND 604800),
    -- PauseTool / ResumeTool: while true no claim returns the tool's tasks.
    paused boolean NOT NULL DEFAULT false,
    -- Bounded claims (docs/guarantees.md, "Fair and bounded claims"). SetToolConcurrency: at most
    -- this many of the tool's tasks processing at once, across every worker and server; NULL:
    -- unlimited. Enforced by the claim itself through the tool's rows of generation.claim_slots.
    max_running integer CHECK (max_running BETWEEN 1 AND 10000),
    -- SetToolKeyConcurrency: at most this many running tasks per concurrency_key; NULL: unlimited.
    key_max_running integer CHECK (key_max_running BETWEEN 1 AND 1000),
    -- SetToolRateLimit: a token bucket of rate_limit claims per rate_period_seconds, shared by
    -- every server (the claim spends it under the tool row's lock); NULL: unlimited.
    rate_limit integer CHECK (rate_limit BETWEEN 1 AND 1000000),
    rate_period_seconds double precision NOT NULL DEFAULT 1 CHECK (rate_period_seconds > 0 AND rate_period_seconds <= 86400),
    rate_tokens double precision NOT NULL DEFAULT 0,
    rate_updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE generation.tasks (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tool_id uuid NOT NULL REFERENCES generation.tools (id),
    status generation.task_status NOT NULL DEFAULT 'queued',
    -- Subscription-tier priority: higher is claimed sooner. Bounded so no caller can outrank
    -- every tier by picking 2^31-1.
    priority integer NOT NULL DEFAULT 0 CHECK (priority BETWEEN -1000 AND 1000),
    -- Bounded retry: a row is claimable only while retry_count < max_retries; at most 100
    -- attempts, so a poisoned task cannot be retried (nearly) forever.
    retry_count integer NOT NULL DEFAULT 0 CHECK (retry_count >= 0),
    max_retries integer NOT NULL DEFAULT 3 CHECK (max_retries BETWEEN 0 AND 100),
    input jsonb NOT NULL DEFAULT '{}',
    output jsonb,
    error text,
    reported_usage jsonb,
    -- Durable billing context, read back to settle against the terminal task.
    reserved_token_amount bigint CHECK (reserved_token_amount >= 0),
    billing_idempotency_key text UNIQUE,
    -- Parent span captured at enqueue, so the worker continues the same trace.
    w3c_traceparent text,
    -- The lease: who holds the claim (a fresh token per claim) and until when.
    lease_token uuid,
    claim_expires_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz,
    completed_at timestamptz,
    -- The task's own lease, set at enqueue for work unlike its tool's; NULL: the tool's
    -- lease_seconds. Claims and heartbeats take COALESCE(task, tool).
    lease_seconds integer CHECK (lease_seconds BETWEEN 1 AND 86400),
    -- Not claimable before this (QueueTask's run_at, a backoff, a snooze). A row whose run_at is
    -- in the future is `scheduled`, outside the claim index.
    run_at timestamptz NOT NULL DEFAULT now(),
    -- When the current attempt was claimed: the run-time limit counts from here.
    attempted_at timestamptz,
    -- This task's run-time limit per attempt; NULL: its tool's.
    max_runtime_seconds integer CHECK (max_runtime_seconds BETWEEN 1 AND 604800),
    -- Failure history kept across redrives (RetryTask, RetryTasks): one JSON object per
    -- terminal attempt budget, oldest first.
    errors jsonb NOT NULL DEFAULT '[]',
    -- A periodic task's slot (EnqueuePeriodicTask): one task per (name, slot), however many
    -- reconcilers race to enqueue it.
    periodic_name text,
    periodic_slot_at timestamptz,
    -- Fairness (QueueTask's concurrency_key: a user or workspace id): tasks of one key are
    -- interleaved with other keys' by fair_seq, the key's place in a round-robin set at enqueue
    -- (one past the key's last queued task, never behind the tool's current head). A task without a
    -- key takes the head's fair_seq: plain FIFO among keyless tasks.
    concurrency_key text CHECK (char_length(concurrency_key) BETWEEN 1 AND 200),
    fair_seq bigint NOT NULL DEFAULT 0,
    -- The claim slots the current attempt holds (generation.claim_slots): the tool's (scope '')
    -- under max_running, its key's under key_max_running; NULL: none needed.
    claim_slot integer,
    key_slot integer,
    -- The client's request id of the claim that holds the task: a retried claim with the same id
    -- returns the tasks the lost answer held instead of claiming more.
    claim_request_id text CHECK (char_length(claim_request_id) BETWEEN 1 AND 200)
);

-- Makes the claim's `ORDER BY priority DESC, fair_seq, created_at ASC LIMIT n` over queued rows
-- an index-ordered top-n, even under a deep mixed-priority backlog for one tool over many keys.
-- Queued rows only: a claimed row leaves it (its entry dies, none is added), and the claim never
-- walks the rows held under live leases to reach the queued ones.
CREATE INDEX idx_gen_tasks_queue ON generation.tasks (tool_id, priority DESC, fair_seq, created_at ASC)
    WHERE status = 'queued';

-- The rows held (processing), by when their lease lapses: the claim's zombies (lease lapsed) are the
-- range below now(), earliest lapsed first, then in claim order (a batch claimed together lapses at
-- one instant); the reaper's run-time sweep (ReapOverdueTasks) and GetQueueStats read it whole (one
-- entry per task a worker holds). A heartbeat moves the entry (it changes claim_expires_at).
CREATE INDEX idx_gen_tasks_lapsing ON generation.tasks (tool_id, claim_expires_at, priority DESC, fair_seq, created_at)
    WHERE status = 'processing';

-- A key's last queued task of a priority (the enqueue's round-robin place for the next one) and the keys a
-- per-key limit applies to (SetToolKeyConcurrency). Keyless rows are not in it.
CREATE INDEX idx_gen_tasks_key ON generation.tasks (tool_id, concurrency_key, priority, fair_seq)
    WHERE concurrency_key IS NOT NULL AND status IN ('scheduled', 'queued');

-- A retried claim's tasks (claim_request_id): only held rows that carry an id.
CREATE INDEX idx_gen_tasks_claim_request ON generation.tasks (tool_id, claim_request_id)
    WHERE claim_request_id IS NOT NULL AND status = 'processing';

-- Delayed, backed-off and snoozed tasks, by when they are due: the claim takes a tool's due
-- ones directly (so none waits for a promotion), PromoteDueTasks flips due ones of every tool to
-- `queued` (which NOTIFYs the wake). Future rows cost the claim one empty range probe.
CREATE INDEX idx_gen_tasks_scheduled_tool ON generation.tasks (tool_id, run_at) WHERE status = 'scheduled';
CREATE INDEX idx_gen_tasks_scheduled ON generation.tasks (run_at) WHERE status = 'scheduled';

-- The reaper's scan for stale rows of every tool (ListStaleTasks): never-claimed rows older than its
-- cutoff (not processing ones: a claim adds no entry here)...
CREATE INDEX idx_gen_tasks_stale ON generation.tasks (created_at)
    WHERE status IN ('queued', 'dispatched');

-- ... and live rows no claim will take (retry_count >= max_retries), whatever their age: few
-- (the reaper fails them), so the reaper finds them without reading the backlog.
CREATE INDEX idx_gen_tasks_unclaimable ON generation.tasks (created_at)
    WHERE status IN ('scheduled', 'queued', 'dispatched', 'processing') AND retry_count >= max_retries;

-- Retention (PruneTasks): terminal rows oldest first, without scanning live work.
CREATE INDEX idx_gen_tasks_terminal ON generation.tasks (completed_at)
    WHERE status IN ('completed', 'failed', 'cancelled');

-- Redrive (RetryTasks): a tool's failed and cancelled rows by when they ended.
CREATE INDEX idx_gen_tasks_redrive ON generation.tasks (tool_id, completed_at)
    WHERE status IN ('failed', 'cancelled');

-- One task per periodic slot (EnqueuePeriodicTask's ON CONFLICT).
CREATE UNIQUE INDEX idx_gen_tasks_periodic_slot ON generation.tasks (periodic_name, periodic_slot_at)
    WHERE periodic_name IS NOT NULL;

-- The task list (ListTasks), newest first, one index per shape of its filters: by tool and
-- status, by tool, by status, or every task. Keyset pagination walks them in order and stops at
-- the page (the other filters are checked on the rows the scan reads).
CREATE INDEX idx_gen_tasks_tool_status_created ON generation.tasks (tool_id, status, created_at, id);
CREATE INDEX idx_gen_tasks_tool_created ON generation.tasks (tool_id, created_at, id);
CREATE INDEX idx_gen_tasks_status_created ON generation.tasks (status, created_at, id);
CREATE INDEX idx_gen_tasks_created ON generation.tasks (created_at, id);

-- The wake signal without Redis: a row that becomes claimable (a new task, or one FailTask
-- re-queued) NOTIFYs channel task_wake with its tool_id. NOTIFY is transactional, so the wake
-- is delivered only when the enqueue commits; WatchTaskWakes relays it to the workers.
CREATE FUNCTION generation.notify_task_wake() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('task_wake', NEW.tool_id::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER tasks_notify_wake
    AFTER INSERT OR UPDATE OF status ON generation.tasks
    FOR EACH ROW WHEN (NEW.status = 'queued')
    EXECUTE FUNCTION generation.notify_task_wake();

-- A running task cancelled (CancelTask) NOTIFYs task_cancel with its id, so the worker
-- holding it hears at once (WatchTaskCancels) rather than at its next heartbeat.
CREATE FUNCTION generation.notify_task_cancel() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('task_cancel', NEW.id::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER tasks_notify_cancel
    AFTER UPDATE OF status ON generation.tasks
    FOR EACH ROW WHEN (OLD.status = 'processing' AND NEW.status = 'cancelled')
    EXECUTE FUNCTION generation.notify_task_cancel();

-- Claim slots: the tool's global limit (scope '', slots 1..max_running, made by
-- SetToolConcurrency) and each key's (scope = the key, slots 1..key_max_running, made at
-- enqueue by tasks_key_slots and by SetToolKeyConcurrency). A slot is free when no live lease
-- holds it: expires_at (the holder's claim_expires_at, mirrored by tasks_claim_slots) is NULL or
-- past. The claim locks free slots FOR UPDATE SKIP LOCKED and PostgreSQL re-checks a slot
-- another claim took meanwhile on its newest version, so concurrent claimers never share one:
-- the limit holds without a counter that every Complete would have to update.
CREATE TABLE generation.claim_slots (
    tool_id uuid NOT NULL REFERENCES generation.tools (id),
    scope text NOT NULL,
    slot integer NOT NULL,
    task_id uuid,
    expires_at timestamptz,
    PRIMARY KEY (tool_id, scope, slot)
);

-- A task's slots follow its lease: a claim takes the slots it names, a heartbeat renews them,
-- leaving `processing` (complete, fail, snooze, cancel) frees them; a lapsed lease frees them by
-- its expires_at. A slot since taken by another task is never touched. Fires only for rows that
-- hold or held a slot, so unlimited tools pay nothing.
CREATE FUNCTION generation.mirror_claim_slots() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.claim_slot IS NOT NULL OR OLD.key_slot IS NOT NULL THEN
        UPDATE generation.claim_slots
        SET expires_at = CASE WHEN NEW.status = 'processing' AND NEW.lease_token IS NOT DISTINCT FROM OLD.lease_token
                              THEN NEW.claim_expires_at END
        WHERE tool_id = OLD.tool_id AND task_id = OLD.id
          AND ((scope = '' AND slot = OLD.claim_slot) OR (scope = OLD.concurrency_key AND slot = OLD.key_slot));
    END IF;
    IF NEW.status = 'processing' AND NEW.lease_token IS DISTINCT FROM OLD.lease_token THEN
        UPDATE generation.claim_slots SET task_id = NEW.id, expires_at = NEW.claim_expires_at
        WHERE tool_id = NEW.tool_id
          AND ((scope = '' AND slot = NEW.claim_slot) OR (scope = NEW.concurrency_key AND slot = NEW.key_slot));
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER tasks_claim_slots
    AFTER UPDATE ON generation.tasks
    FOR EACH ROW WHEN (OLD.claim_slot IS NOT NULL OR OLD.key_slot IS NOT NULL
                       OR NEW.claim_slot IS NOT NULL OR NEW.key_slot IS NOT NULL)
    EXECUTE FUNCTION generation.mirror_claim_slots();

-- A new key of a tool with a per-key limit gets its slots when its first task is enqueued.
CREATE FUNCTION generation.add_key_slots() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO generation.claim_slots (tool_id, scope, slot)
    SELECT k.tool_id, k.concurrency_key, s.slot
    FROM (SELECT DISTINCT n.tool_id, n.concurrency_key FROM new_tasks AS n WHERE n.concurrency_key IS NOT NULL) AS k
    JOIN generation.tools AS tl ON tl.id = k.tool_id AND tl.key_max_running IS NOT NULL
    CROSS JOIN LATERAL generate_series(1, tl.key_max_running) AS s (slot)
    ORDER BY 1, 2, 3
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

CREATE TRIGGER tasks_key_slots
    AFTER INSERT ON generation.tasks
    REFERENCING NEW TABLE AS new_tasks
    FOR EACH STATEMENT
    EXECUTE FUNCTION generation.add_key_slots();

-- Periodic tasks (UpsertPeriodicTask): the reconciler computes each schedule's slots (cron
-- expression in its time zone) and enqueues each due slot with EnqueuePeriodicTask, which
-- advances last_slot_at, so a restarted reconciler resumes after the last slot enqueued.
CREATE TABLE generation.periodic_tasks (
    name text PRIMARY KEY CHECK (name <> '' AND char_length(name) <= 200),
    tool_id uuid NOT NULL REFERENCES generation.tools (id),
    -- Five (or six, with seconds) cron fields, or a macro such as @hourly; the reconciler parses
    -- it (cronsim) and logs a schedule it cannot read.
    cron text NOT NULL CHECK (char_length(cron) <= 200 AND cron ~ '^\s*(@[a-z]+|\S+(\s+\S+){4,5})\s*$'),
    timezone text NOT NULL DEFAULT 'UTC' CHECK (timezone <> '' AND char_length(timezone) <= 100),
    input jsonb NOT NULL DEFAULT '{}',
    priority integer NOT NULL DEFAULT 0 CHECK (priority BETWEEN -1000 AND 1000),
    max_retries integer NOT NULL DEFAULT 3 CHECK (max_retries BETWEEN 0 AND 100),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    last_slot_at timestamptz
);

-- Live task events without Redis (docs/worker.md, "Live task events"). Not the queue: a
-- best-effort side channel, numbered 1, 2, 3... per task by AppendTaskEvents and purged by
-- PurgeTaskEvents. A commit NOTIFYs task_events with the task id (NOTIFYs repeated within one
-- transaction are folded into one), which WatchTaskEvents relays to readers.
-- No foreign key to generation.tasks, on purpose: its check would KEY SHARE-lock the task row
-- on every append (which the claim's FOR UPDATE SKIP LOCKED would then skip) and forbid
-- TRUNCATE of the queue; events of a deleted task simply age out with PurgeTaskEvents.
CREATE TABLE generation.task_events (
    task_id uuid NOT NULL,
    seq bigint NOT NULL,
    kind text NOT NULL,
    data jsonb NOT NULL,
    -- Finite: an event at +infinity would never be older than a purge cutoff (kept forever).
    emitted_at timestamptz NOT NULL CHECK (isfinite(emitted_at)),
    PRIMARY KEY (task_id, seq)
);

-- PurgeTaskEvents finds its candidates here rather than grouping the whole table: a finished
-- task past retention has a terminal event older than the retention cutoff (one entry per
-- finished task)...
CREATE INDEX idx_gen_task_events_terminal ON generation.task_events (emitted_at)
    WHERE kind = 'terminal';

-- ... and an abandoned task past the idle cutoff has its first event (seq 1: AppendTaskEvents
-- numbers every task's events from 1, and the purge deletes a task's events together) older
-- than that cutoff (one entry per task).
CREATE INDEX idx_gen_task_events_first ON generation.task_events (emitted_at)
    WHERE seq = 1;

CREATE FUNCTION generation.notify_task_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('task_events', NEW.task_id::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER task_events_notify
    AFTER INSERT ON generation.task_events
    FOR EACH ROW
    EXECUTE FUNCTION generation.notify_task_events();
