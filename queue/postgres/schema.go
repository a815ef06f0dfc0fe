package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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
	// Version 2 (issue 12): a fence token per claim, and replays that keep
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
	// Version 3 (issue 15): events listed newest first and filtered by when they were
	// stored (GET /webhook/events, the jobs listing's since) walk this
	// index instead of the table. Its key only grows, so an enqueue adds
	// its entry at the right edge of the tree.
	`
CREATE INDEX events_created ON events (created_at, id);
`,
}

// schemaVersion is the version this build writes.
var schemaVersion = len(migrations)

// migrate brings the schema to schemaVersion in one transaction. The
// transaction first takes an advisory lock keyed by the schema's name, so
// when several instances start together one migrates and the others then
// find the schema up to date. An up-to-date schema is left untouched.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
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
