package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/storekit"
)

// migrations[i] brings the schema from version i to i+1. The version is
// kept in schema_version; a migration is never edited once released, only
// appended to. Names are unqualified: every connection's search_path is
// the store's schema.
//
// Times are timestamptz written from the callers' clocks, to the
// millisecond, except lease deadlines, which the server's clock sets
// unless a caller passes its own (see sqlClaim). The partial indexes hold only the rows a hot query looks
// for, so claim and purge cost does not grow with the number of done or
// dead jobs; see the package doc for the autovacuum settings.
var migrations = []string{
	`
CREATE TABLE events (
	id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	source      text        NOT NULL,
	delivery_id text        NOT NULL,
	event_type  text        NOT NULL DEFAULT '',
	headers     bytea       NOT NULL, -- storekit.AppendHeaders encoding
	payload     bytea       NOT NULL,
	targets     integer     NOT NULL, -- jobs made at enqueue; 0: kept only as dedupe memory
	created_at  timestamptz NOT NULL,
	UNIQUE (source, delivery_id)
);
-- Events stored without a job are purged by age alone.
CREATE INDEX events_no_jobs ON events (created_at) WHERE targets = 0;

CREATE TABLE jobs (
	id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	event_id    bigint      NOT NULL REFERENCES events (id),
	source      text        NOT NULL, -- the event's, copied for filters and claims
	target      text        NOT NULL,
	status      text        NOT NULL DEFAULT 'pending'
	            CHECK (status IN ('pending', 'running', 'done', 'dead')),
	attempts    integer     NOT NULL DEFAULT 0,
	run_at      timestamptz NOT NULL,
	lease_owner text,
	lease_until timestamptz,
	last_error  text        NOT NULL DEFAULT '',
	created_at  timestamptz NOT NULL,
	finished_at timestamptz
);
CREATE INDEX jobs_pending ON jobs (run_at, id) WHERE status = 'pending';
CREATE INDEX jobs_leased ON jobs (lease_until, id) WHERE status = 'running';
CREATE INDEX jobs_done ON jobs (finished_at) WHERE status = 'done';
CREATE INDEX jobs_dead ON jobs (source, target) WHERE status = 'dead';
CREATE INDEX jobs_event ON jobs (event_id);

-- The last queue.MaxHistory attempts of each job.
CREATE TABLE attempts (
	id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	job_id      bigint      NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
	attempt     integer     NOT NULL,
	started_at  timestamptz NOT NULL,
	duration_ns bigint      NOT NULL,
	outcome     text        NOT NULL,
	error       text        NOT NULL DEFAULT ''
);
CREATE INDEX attempts_job ON attempts (job_id, id);

-- Vacuum the churning tables early; the package doc says why.
ALTER TABLE jobs SET (
	autovacuum_vacuum_scale_factor = 0.01,
	autovacuum_vacuum_threshold = 1000,
	autovacuum_analyze_scale_factor = 0.02,
	autovacuum_vacuum_cost_delay = 1
);
ALTER TABLE attempts SET (autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_threshold = 1000);
ALTER TABLE events SET (autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_threshold = 1000);
`,
	// Version 2: a fence token per claim, and replays that keep
	// counting attempts. fence counts the claims ever made of the job and
	// is never lowered (a hand-back lowers attempts), so it names one
	// claim. A replay no longer resets attempts: replay_base keeps the
	// attempts made before the last replay, which the budget starts from.
	// Existing rows start at 0, as if never replayed. Adding a column with
	// a constant default rewrites no row.
	`
ALTER TABLE jobs
	ADD COLUMN fence bigint NOT NULL DEFAULT 0,
	ADD COLUMN replays integer NOT NULL DEFAULT 0,
	ADD COLUMN replay_base integer NOT NULL DEFAULT 0;
`,
	// Version 3: events listed newest first and filtered by when they were
	// stored (GET /webhook/events, the jobs listing's since) walk this
	// index instead of the table. Its key only grows, so an enqueue adds
	// its entry at the right edge of the tree.
	`
CREATE INDEX events_created ON events (created_at, id);
`,
	// Version 4: routes nobody serves cost the claim nothing. The pending index is keyed by route, so a
	// claim reads only the ranges of the routes it asks for and pending
	// jobs nobody can take (a target renamed or removed with a backlog)
	// cost it nothing; the index it replaces walked every pending job in
	// (run_at, id) order and filtered routes afterwards. The dead jobs'
	// index gains id, so a chunk of a bulk replay or discard reads its
	// route's range in order (see pickByRoute).
	//
	// job_counts and event_counts keep Stats exact without counting the
	// tables. Statement-level triggers append one delta row per (source,
	// target, status) a statement changed, so a batch of enqueues adds
	// one row per route and concurrent instances never wait for each
	// other on a shared counter row; a reader sums the rows, and
	// foldCounts (every few seconds) replaces them by their sums. The
	// functions keep the schema's search_path, so a session with another
	// one (a psql shell deleting rows) still counts into this schema.
	`
DROP INDEX jobs_pending;
CREATE INDEX jobs_pending ON jobs (source, target, run_at, id) WHERE status = 'pending';
DROP INDEX jobs_dead;
CREATE INDEX jobs_dead ON jobs (source, target, id) WHERE status = 'dead';

CREATE TABLE job_counts (
	source text   NOT NULL,
	target text   NOT NULL,
	status text   NOT NULL,
	jobs   bigint NOT NULL
);
INSERT INTO job_counts (source, target, status, jobs)
SELECT source, target, status, count(*) FROM jobs GROUP BY source, target, status;

CREATE TABLE event_counts (events bigint NOT NULL);
INSERT INTO event_counts (events) SELECT count(*) FROM events;

ALTER TABLE job_counts SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);
ALTER TABLE event_counts SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);

CREATE FUNCTION count_jobs_inserted() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
	INSERT INTO job_counts (source, target, status, jobs)
	SELECT source, target, status, count(*) FROM new_rows GROUP BY source, target, status;
	RETURN NULL;
END $$;

CREATE FUNCTION count_jobs_updated() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
	INSERT INTO job_counts (source, target, status, jobs)
	SELECT source, target, status, sum(n) FROM (
		SELECT source, target, status, -1 AS n FROM old_rows
		UNION ALL
		SELECT source, target, status, 1 AS n FROM new_rows
	) AS d
	GROUP BY source, target, status HAVING sum(n) <> 0;
	RETURN NULL;
END $$;

CREATE FUNCTION count_jobs_deleted() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
	INSERT INTO job_counts (source, target, status, jobs)
	SELECT source, target, status, -count(*) FROM old_rows GROUP BY source, target, status;
	RETURN NULL;
END $$;

CREATE FUNCTION count_events_inserted() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
	INSERT INTO event_counts (events) SELECT count(*) FROM new_rows HAVING count(*) > 0;
	RETURN NULL;
END $$;

CREATE FUNCTION count_events_deleted() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
	INSERT INTO event_counts (events) SELECT -count(*) FROM old_rows HAVING count(*) > 0;
	RETURN NULL;
END $$;

CREATE TRIGGER jobs_count_insert AFTER INSERT ON jobs
REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION count_jobs_inserted();
CREATE TRIGGER jobs_count_update AFTER UPDATE ON jobs
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION count_jobs_updated();
CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs
REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION count_jobs_deleted();
CREATE TRIGGER events_count_insert AFTER INSERT ON events
REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION count_events_inserted();
CREATE TRIGGER events_count_delete AFTER DELETE ON events
REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION count_events_deleted();
`,
	// Version 5: pauses. target '' pauses every target
	// of the source. Pools read the whole table every second or so, so it
	// stays a handful of rows.
	`
CREATE TABLE pauses (
	source    text        NOT NULL,
	target    text        NOT NULL, -- '' for the whole source
	paused_at timestamptz NOT NULL,
	PRIMARY KEY (source, target)
);
`,
	// Version 6, FIFO per key: see ordering.go. A job with an
	// ordering key is stored blocked while an earlier job of its (source,
	// target, key) is unfinished; ordering_heads names that job, the
	// key's head. The wider status check is added NOT VALID: every
	// stored row passed the narrower one, and validating would read the
	// whole table. Adding a nullable column, or one with a constant
	// default, rewrites no row.
	`
ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_check
	CHECK (status IN ('pending', 'running', 'done', 'dead', 'blocked')) NOT VALID;
ALTER TABLE jobs
	ADD COLUMN ordering_key text,
	ADD COLUMN ordering_hold boolean NOT NULL DEFAULT false;
CREATE INDEX jobs_blocked ON jobs (source, target, ordering_key, id) WHERE status = 'blocked';
CREATE TABLE ordering_heads (
	source       text   NOT NULL,
	target       text   NOT NULL,
	ordering_key text   NOT NULL,
	job_id       bigint NOT NULL,
	PRIMARY KEY (source, target, ordering_key)
);
CREATE INDEX ordering_heads_job ON ordering_heads (job_id);
`,
	// Version 7: each attempt keeps what its target reported, the HTTP
	// status or the exit code (queue.Code), NULL for none. A nullable
	// column rewrites no row; older entries read as none.
	`
ALTER TABLE attempts ADD COLUMN status integer;
`,
	// Version 8: the W3C trace context an event arrived in
	// (queue.Event.Trace), NULL when it had none. A nullable column
	// without a default rewrites no row.
	`
ALTER TABLE events ADD COLUMN trace text;
`,
	// Version 9: no foreign key from attempts to jobs. Its check ran once
	// per history entry a Finish wrote, a nested statement and a row lock
	// for every finished job; the statements that delete jobs now delete
	// their history themselves, in the same statement. The name is the one
	// version 1's REFERENCES gave the constraint.
	`
ALTER TABLE attempts DROP CONSTRAINT IF EXISTS attempts_job_id_fkey;
`,
	// Version 10: claimed_at, when a job's current (or last) claim was
	// made, so a claim that takes a running job whose lease ran out can
	// record that unfinished claim as a lease_lost attempt with its start
	// (see sqlClaim). A nullable column rewrites no row.
	`
ALTER TABLE jobs ADD COLUMN claimed_at timestamptz;
`,
	// Version 11: encryption at rest (queue.Keys, storekit's Sealer). An
	// event's headers and payload are one sealed value in sealed, NULL
	// for a plain row; error texts are sealed in place, in the text form
	// (text refuses NUL). seal_counts keeps the sealed values per key id
	// as delta rows, as job_counts does, folded with them (counts.go):
	// the events' statement-level triggers count theirs, and row-level
	// triggers, whose WHEN tests the first byte, count the texts and a
	// rekey's rewrites, so a finish without a sealed text queues nothing.
	// store_secrets keeps the ordering-key secret and seal_state the
	// rekey's position and flags; migrate fills both (initSecrets) and
	// hashes the stored ordering keys. A nullable column rewrites no row.
	`
ALTER TABLE events ADD COLUMN sealed bytea;

CREATE TABLE seal_counts (
	key_id text   NOT NULL,
	kind   text   NOT NULL, -- 'event' or 'text'
	n      bigint NOT NULL
);
ALTER TABLE seal_counts SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);

CREATE TABLE store_secrets (
	name  text  PRIMARY KEY,
	value bytea NOT NULL -- 32 plain bytes, or sealed under a key
);

CREATE TABLE seal_state (
	id           integer PRIMARY KEY CHECK (id = 1),
	plain_rows   boolean NOT NULL, -- rows may hold values written plain
	plain_gen    bigint  NOT NULL DEFAULT 0,
	rekey_target text,             -- the walk's key id ('' plain); NULL: no walk
	rekey_table  integer NOT NULL DEFAULT 0,
	rekey_after  bigint  NOT NULL DEFAULT 0
);

-- The key id a sealed value names, from its header (queue/seal).
CREATE FUNCTION seal_key(v bytea) RETURNS text LANGUAGE sql IMMUTABLE STRICT AS
$$ SELECT convert_from(substring(v from 3 for get_byte(v, 1)), 'SQL_ASCII') $$;
CREATE FUNCTION seal_key(v text) RETURNS text LANGUAGE sql IMMUTABLE STRICT AS
$$ SELECT substr(v, 3, ascii(substr(v, 2, 1))) $$;

CREATE OR REPLACE FUNCTION count_events_inserted() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
	INSERT INTO event_counts (events) SELECT count(*) FROM new_rows HAVING count(*) > 0;
	INSERT INTO seal_counts (key_id, kind, n)
	SELECT seal_key(sealed), 'event', count(*) FROM new_rows WHERE sealed IS NOT NULL GROUP BY 1;
	RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION count_events_deleted() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
	INSERT INTO event_counts (events) SELECT -count(*) FROM old_rows HAVING count(*) > 0;
	INSERT INTO seal_counts (key_id, kind, n)
	SELECT seal_key(sealed), 'event', -count(*) FROM old_rows WHERE sealed IS NOT NULL GROUP BY 1;
	RETURN NULL;
END $$;

CREATE FUNCTION count_sealed_event() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
	IF old.sealed IS NOT NULL THEN
		INSERT INTO seal_counts (key_id, kind, n) VALUES (seal_key(old.sealed), 'event', -1);
	END IF;
	IF new.sealed IS NOT NULL THEN
		INSERT INTO seal_counts (key_id, kind, n) VALUES (seal_key(new.sealed), 'event', 1);
	END IF;
	RETURN NULL;
END $$;

CREATE FUNCTION count_sealed_last_error() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
	IF TG_OP <> 'INSERT' THEN
		IF substr(old.last_error, 1, 1) = chr(2) THEN
			INSERT INTO seal_counts (key_id, kind, n) VALUES (seal_key(old.last_error), 'text', -1);
		END IF;
	END IF;
	IF TG_OP <> 'DELETE' THEN
		IF substr(new.last_error, 1, 1) = chr(2) THEN
			INSERT INTO seal_counts (key_id, kind, n) VALUES (seal_key(new.last_error), 'text', 1);
		END IF;
	END IF;
	RETURN NULL;
END $$;

CREATE FUNCTION count_sealed_error() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
	IF TG_OP <> 'INSERT' THEN
		IF substr(old.error, 1, 1) = chr(2) THEN
			INSERT INTO seal_counts (key_id, kind, n) VALUES (seal_key(old.error), 'text', -1);
		END IF;
	END IF;
	IF TG_OP <> 'DELETE' THEN
		IF substr(new.error, 1, 1) = chr(2) THEN
			INSERT INTO seal_counts (key_id, kind, n) VALUES (seal_key(new.error), 'text', 1);
		END IF;
	END IF;
	RETURN NULL;
END $$;

CREATE TRIGGER events_seal_update AFTER UPDATE OF sealed ON events FOR EACH ROW
WHEN (old.sealed IS DISTINCT FROM new.sealed) EXECUTE FUNCTION count_sealed_event();
CREATE TRIGGER jobs_seal_update AFTER UPDATE OF last_error ON jobs FOR EACH ROW
WHEN (substr(old.last_error, 1, 1) = chr(2) OR substr(new.last_error, 1, 1) = chr(2)) EXECUTE FUNCTION count_sealed_last_error();
CREATE TRIGGER jobs_seal_delete AFTER DELETE ON jobs FOR EACH ROW
WHEN (substr(old.last_error, 1, 1) = chr(2)) EXECUTE FUNCTION count_sealed_last_error();
CREATE TRIGGER attempts_seal_insert AFTER INSERT ON attempts FOR EACH ROW
WHEN (substr(new.error, 1, 1) = chr(2)) EXECUTE FUNCTION count_sealed_error();
CREATE TRIGGER attempts_seal_update AFTER UPDATE OF error ON attempts FOR EACH ROW
WHEN (substr(old.error, 1, 1) = chr(2) OR substr(new.error, 1, 1) = chr(2)) EXECUTE FUNCTION count_sealed_error();
CREATE TRIGGER attempts_seal_delete AFTER DELETE ON attempts FOR EACH ROW
WHEN (substr(old.error, 1, 1) = chr(2)) EXECUTE FUNCTION count_sealed_error();
`,
}

// sealVersion is the schema version that brought encryption at rest:
// migrating to it also runs initSecrets.
const sealVersion = 11

// initSecrets is migration 11's step in Go: it makes the store's
// ordering-key secret (sealed under keys when they seal), hashes every
// stored ordering key with it, and starts seal_state. A schema that held
// rows before is marked as holding plain values, so the first rekey
// seals them. fresh says the schema was new.
func initSecrets(ctx context.Context, tx pgx.Tx, keys queue.Keys, fresh bool) error {
	_, stored := storekit.NewSecret(keys)
	if _, err := tx.Exec(ctx, `INSERT INTO store_secrets (name, value) VALUES ('ordering', $1)`, stored); err != nil {
		return fmt.Errorf("store the ordering-key secret: %w", err)
	}
	sl, err := storekit.NewSealer(keys, stored)
	if err != nil {
		return err
	}
	for _, table := range []string{"jobs", "ordering_heads"} {
		rows, err := tx.Query(ctx, `SELECT DISTINCT source, ordering_key FROM `+table+` WHERE ordering_key IS NOT NULL`)
		if err != nil {
			return fmt.Errorf("hash ordering keys: %w", err)
		}
		var sources, plain, hashed []string
		var source, key string
		_, err = pgx.ForEachRow(rows, []any{&source, &key}, func() error {
			sources, plain, hashed = append(sources, source), append(plain, key), append(hashed, sl.OrderingKey(source, key))
			return nil
		})
		if err != nil {
			return fmt.Errorf("hash ordering keys: %w", err)
		}
		if len(sources) == 0 {
			continue
		}
		if _, err := tx.Exec(ctx, `UPDATE `+table+` AS t SET ordering_key = m.hashed
FROM unnest($1::text[], $2::text[], $3::text[]) AS m (source, plain, hashed)
WHERE t.source = m.source AND t.ordering_key = m.plain`, sources, plain, hashed); err != nil {
			return fmt.Errorf("hash ordering keys: %w", err)
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO seal_state (id, plain_rows) VALUES (1, $1)`, !fresh); err != nil {
		return fmt.Errorf("start seal state: %w", err)
	}
	return nil
}

// schemaVersion is the version this build writes.
var schemaVersion = len(migrations)

// migrate brings the schema to schemaVersion in one transaction. The
// transaction first takes an advisory lock keyed by the schema's name, so
// when several instances start together one migrates and the others then
// find the schema up to date. An up-to-date schema is left untouched.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string, keys queue.Keys) error {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('caddywebhook migrate ' || $1, 0))`, schema); err != nil {
			return fmt.Errorf("lock schema: %w", err)
		}
		// CREATE SCHEMA IF NOT EXISTS checks the CREATE privilege on the
		// database even when the schema exists; look first, so a user who
		// was given the schema but not the database can open it.
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
			return fmt.Errorf("find schema: %w", err)
		}
		// The schema name was checked against schemaName: it needs no
		// quoting, and Sanitize quotes it anyway.
		ident := pgx.Identifier{schema}.Sanitize()
		if !exists {
			if _, err := tx.Exec(ctx, "CREATE SCHEMA "+ident); err != nil {
				return fmt.Errorf("create schema: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+ident+".schema_version (version integer NOT NULL)"); err != nil {
			return fmt.Errorf("create schema_version: %w", err)
		}
		var version int
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+ident+".schema_version").Scan(&version); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if version > schemaVersion {
			return fmt.Errorf("read schema version: schema %s is at version %d, newer than this build's %d", schema, version, schemaVersion)
		}
		if version == schemaVersion {
			return nil
		}
		// The connection's search_path names the schema, which may only
		// now exist; make it explicit for the migrations' unqualified
		// names, for this transaction only.
		if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+ident); err != nil {
			return fmt.Errorf("set search_path: %w", err)
		}
		for v := version; v < schemaVersion; v++ {
			if _, err := tx.Exec(ctx, migrations[v]); err != nil {
				return fmt.Errorf("migrate schema to version %d: %w", v+1, err)
			}
			if v+1 == sealVersion {
				if err := initSecrets(ctx, tx, keys, version == 0); err != nil {
					return fmt.Errorf("migrate schema to version %d: %w", v+1, err)
				}
			}
		}
		if _, err := tx.Exec(ctx, "DELETE FROM "+ident+".schema_version"); err != nil {
			return fmt.Errorf("write schema version: %w", err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+ident+".schema_version (version) VALUES ($1)", schemaVersion); err != nil {
			return fmt.Errorf("write schema version: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
