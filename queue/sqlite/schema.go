package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/storekit"
)

// migrations[i] brings the schema from version i to i+1. Versions are kept
// in PRAGMA user_version; a migration is never edited once released, only
// appended to.
//
// Times are unix milliseconds. The partial indexes hold only the rows a
// hot query looks for, so claim and purge cost does not grow with the
// number of done or dead jobs, and pending jobs cost one small index entry.
//
// The status CHECK is written as comparisons, not as status IN (…): SQLite
// builds an IN list of more than two values into a temporary table on
// every row it checks, which cost about a sixth of the CPU of an enqueue
// (and is paid again by every claim and finish). Both forms accept the same
// values; the first build wrote the IN form, and no release carries it.
var migrations = []string{
	`
CREATE TABLE events (
	id          INTEGER PRIMARY KEY,
	source      TEXT    NOT NULL,
	delivery_id TEXT    NOT NULL,
	event_type  TEXT    NOT NULL DEFAULT '',
	headers     BLOB    NOT NULL, -- storekit.AppendHeaders encoding
	payload     BLOB    NOT NULL,
	targets     INTEGER NOT NULL, -- jobs made at enqueue; 0: kept only as dedupe memory
	created_at  INTEGER NOT NULL,
	UNIQUE (source, delivery_id)
);
-- Events stored without a job are purged by age alone.
CREATE INDEX events_no_jobs ON events (created_at) WHERE targets = 0;

CREATE TABLE jobs (
	id          INTEGER PRIMARY KEY,
	event_id    INTEGER NOT NULL REFERENCES events (id),
	source      TEXT    NOT NULL, -- the event's, copied for filters and claims
	target      TEXT    NOT NULL,
	status      TEXT    NOT NULL DEFAULT 'pending'
	            CHECK (status = 'pending' OR status = 'running' OR status = 'done' OR status = 'dead'),
	attempts    INTEGER NOT NULL DEFAULT 0,
	run_at      INTEGER NOT NULL,
	lease_owner TEXT,
	lease_until INTEGER,
	last_error  TEXT    NOT NULL DEFAULT '',
	created_at  INTEGER NOT NULL,
	finished_at INTEGER,
	history     INTEGER NOT NULL DEFAULT 0 -- attempts entries ever written
);
CREATE INDEX jobs_pending ON jobs (run_at, id) WHERE status = 'pending';
CREATE INDEX jobs_leased ON jobs (lease_until) WHERE status = 'running';
CREATE INDEX jobs_done ON jobs (finished_at) WHERE status = 'done';
CREATE INDEX jobs_dead ON jobs (source, target) WHERE status = 'dead';
CREATE INDEX jobs_event ON jobs (event_id);

-- The last queue.MaxHistory attempts of each job, as a ring: entry seq
-- goes to slot seq % MaxHistory (see jobs.history), replacing the oldest,
-- so keeping the bound costs no extra statement.
CREATE TABLE attempts (
	job_id      INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
	slot        INTEGER NOT NULL,
	seq         INTEGER NOT NULL,
	attempt     INTEGER NOT NULL,
	started_at  INTEGER NOT NULL,
	duration_ns INTEGER NOT NULL,
	outcome     TEXT    NOT NULL,
	error       TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (job_id, slot)
) WITHOUT ROWID;
`,
	// Version 2: a fence token per claim, and replays that keep
	// counting attempts. fence counts the claims ever made of the job and
	// is never lowered (a hand-back lowers attempts), so it names one
	// claim. A replay no longer resets attempts: replay_base keeps the
	// attempts made before the last replay, which the budget starts from.
	// Existing rows start at 0, as if never replayed.
	`
ALTER TABLE jobs ADD COLUMN fence INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN replays INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN replay_base INTEGER NOT NULL DEFAULT 0;
`,
	// Version 3: events listed newest first and filtered by when they were
	// stored (GET /webhook/events, the jobs listing's since) walk this
	// index instead of the table. Its key only grows, so an enqueue adds
	// its entry at the right edge of the tree.
	`
CREATE INDEX events_created ON events (created_at);
`,
	// Version 4: routes nobody serves cost the claim nothing. The pending index is keyed by route, so a
	// claim reads only the ranges of the routes it asks for and pending
	// jobs nobody can take (a target renamed or removed with a backlog)
	// cost it nothing; the index it replaces walked every pending job in
	// (run_at, id) order and filtered routes afterwards. The rowid ends
	// every index key, so (run_at) orders ties by id.
	//
	// job_counts and event_count keep Stats exact in constant time. The
	// writer adds what Enqueue inserts once per transaction (see
	// writer.flushCounts: a trigger per inserted row cost the hot path);
	// the triggers count every other change, in the statement that makes
	// it. Rows whose count falls to 0 stay, read as absent.
	`
DROP INDEX jobs_pending;
CREATE INDEX jobs_pending ON jobs (source, target, run_at) WHERE status = 'pending';

CREATE TABLE job_counts (
	source TEXT    NOT NULL,
	target TEXT    NOT NULL,
	status TEXT    NOT NULL,
	jobs   INTEGER NOT NULL,
	PRIMARY KEY (source, target, status)
) WITHOUT ROWID;
INSERT INTO job_counts (source, target, status, jobs)
SELECT source, target, status, count(*) FROM jobs GROUP BY source, target, status;

CREATE TABLE event_count (
	id     INTEGER PRIMARY KEY CHECK (id = 1),
	events INTEGER NOT NULL
);
INSERT INTO event_count (id, events) SELECT 1, count(*) FROM events;

CREATE TRIGGER jobs_count_status AFTER UPDATE OF status ON jobs
WHEN old.status <> new.status BEGIN
	UPDATE job_counts SET jobs = jobs - 1
	WHERE source = old.source AND target = old.target AND status = old.status;
	INSERT INTO job_counts (source, target, status, jobs) VALUES (new.source, new.target, new.status, 1)
	ON CONFLICT (source, target, status) DO UPDATE SET jobs = jobs + 1;
END;
CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs BEGIN
	UPDATE job_counts SET jobs = jobs - 1
	WHERE source = old.source AND target = old.target AND status = old.status;
END;
CREATE TRIGGER events_count_delete AFTER DELETE ON events BEGIN
	UPDATE event_count SET events = events - 1 WHERE id = 1;
END;
`,
	// Version 5: pauses. target '' pauses every target
	// of the source. Pools read the whole table every second or so, so it
	// stays a handful of rows.
	`
CREATE TABLE pauses (
	source    TEXT    NOT NULL,
	target    TEXT    NOT NULL, -- '' for the whole source
	paused_at INTEGER NOT NULL,
	PRIMARY KEY (source, target)
) WITHOUT ROWID;
`,
	// Version 6, FIFO per key. A job with an ordering key is
	// stored blocked while an earlier job of its (source, target, key) is
	// unfinished; ordering_heads names that job, the key's head, one row
	// per key in use. Finishing or discarding the head makes the next
	// blocked job (lowest id, through jobs_blocked) pending and the new
	// head, so blocked jobs are never in the pending index and cost the
	// claim nothing. ordering_hold keeps the key held by a dead head.
	//
	// SQLite cannot alter a CHECK constraint, and rebuilding jobs would
	// copy every row; the status CHECK is widened in place instead, as
	// SQLite documents for loosening a constraint (lang_altertable.html,
	// section 7): every stored row passes the wider check. It runs after
	// the ADD COLUMNs, whose own rewrite of the definition relies on the
	// text this connection parsed; migrate bumps schema_version so every
	// connection rereads it.
	`
ALTER TABLE jobs ADD COLUMN ordering_key TEXT;
ALTER TABLE jobs ADD COLUMN ordering_hold INTEGER NOT NULL DEFAULT 0;
CREATE INDEX jobs_blocked ON jobs (source, target, ordering_key) WHERE status = 'blocked';
CREATE TABLE ordering_heads (
	source       TEXT    NOT NULL,
	target       TEXT    NOT NULL,
	ordering_key TEXT    NOT NULL,
	job_id       INTEGER NOT NULL,
	PRIMARY KEY (source, target, ordering_key)
) WITHOUT ROWID;
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(sql, 'OR status = ''dead'')', 'OR status = ''dead'' OR status = ''blocked'')')
WHERE type = 'table' AND name = 'jobs';
PRAGMA writable_schema = OFF;
`,
	// Version 7: the count triggers upsert. The writer adds an enqueue's
	// jobs to job_counts only at the commit (writer.flushCounts), so a
	// status change in the same batch (a claim of the job, a blocked job
	// promoted) can run before the route has a row for the status it
	// leaves: an UPDATE then changed nothing and the count stayed one
	// too high. The upsert leaves -1 there, which the commit's flush
	// brings back to 0; readers never see it. The counts are taken again
	// from the rows, mending what the old triggers lost.
	`
DROP TRIGGER jobs_count_status;
DROP TRIGGER jobs_count_delete;
CREATE TRIGGER jobs_count_status AFTER UPDATE OF status ON jobs
WHEN old.status <> new.status BEGIN
	INSERT INTO job_counts (source, target, status, jobs) VALUES (old.source, old.target, old.status, -1)
	ON CONFLICT (source, target, status) DO UPDATE SET jobs = jobs - 1;
	INSERT INTO job_counts (source, target, status, jobs) VALUES (new.source, new.target, new.status, 1)
	ON CONFLICT (source, target, status) DO UPDATE SET jobs = jobs + 1;
END;
CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs BEGIN
	INSERT INTO job_counts (source, target, status, jobs) VALUES (old.source, old.target, old.status, -1)
	ON CONFLICT (source, target, status) DO UPDATE SET jobs = jobs - 1;
END;
DELETE FROM job_counts;
INSERT INTO job_counts (source, target, status, jobs)
SELECT source, target, status, count(*) FROM jobs GROUP BY source, target, status;
`,
	// Version 8: each attempt keeps what its target reported, the HTTP
	// status or the exit code (queue.Code), NULL for none. Adding a
	// nullable column rewrites no row; older entries read as none.
	`
ALTER TABLE attempts ADD COLUMN status INTEGER;
`,
	// Version 9: the W3C trace context an event arrived in (queue.Event.Trace),
	// NULL when it had none, so an event without one stores no byte more.
	`
ALTER TABLE events ADD COLUMN trace TEXT;
`,
	// Version 10: dedupe without a unique index (see dedupe.go). The
	// UNIQUE (source, delivery_id) of events put each enqueue on a random
	// leaf of its own; event_keys keeps each event's key hash instead, in
	// id order, and the writer checks keys against the set it reads from
	// it. SQLite cannot drop a table constraint, so events is built again
	// without it (the procedure of lang_altertable.html, section 7, with
	// foreign keys off: migrate turns them off around every migration and
	// checks them before the commit). The rows and their ids are copied
	// as they are; the jobs' references stay valid.
	`
CREATE TABLE event_keys (
	id       INTEGER PRIMARY KEY, -- the event's id
	key_hash INTEGER NOT NULL     -- caddywebhook_key_hash(source, delivery_id)
);
CREATE TABLE events_v10 (
	id          INTEGER PRIMARY KEY,
	source      TEXT    NOT NULL,
	delivery_id TEXT    NOT NULL,
	event_type  TEXT    NOT NULL DEFAULT '',
	headers     BLOB    NOT NULL, -- storekit.AppendHeaders encoding
	payload     BLOB    NOT NULL,
	targets     INTEGER NOT NULL, -- jobs made at enqueue; 0: kept only as dedupe memory
	created_at  INTEGER NOT NULL,
	trace       TEXT
);
INSERT INTO events_v10 (id, source, delivery_id, event_type, headers, payload, targets, created_at, trace)
SELECT id, source, delivery_id, event_type, headers, payload, targets, created_at, trace FROM events ORDER BY id;
DROP TABLE events;
ALTER TABLE events_v10 RENAME TO events;
CREATE INDEX events_no_jobs ON events (created_at) WHERE targets = 0;
CREATE INDEX events_created ON events (created_at);
CREATE TRIGGER events_count_delete AFTER DELETE ON events BEGIN
	UPDATE event_count SET events = events - 1 WHERE id = 1;
	DELETE FROM event_keys WHERE id = old.id;
END;
-- Every insert keeps its key, the writer's and any tool's alike (a tool
-- without the function fails to insert rather than hide an event's key).
CREATE TRIGGER events_key AFTER INSERT ON events BEGIN
	INSERT INTO event_keys (id, key_hash) VALUES (new.id, caddywebhook_key_hash(new.source, new.delivery_id));
END;
INSERT INTO event_keys (id, key_hash) SELECT id, caddywebhook_key_hash(source, delivery_id) FROM events ORDER BY id;
UPDATE event_count SET events = (SELECT count(*) FROM events) WHERE id = 1;
`,
	// Version 11: an attempt cut short by a crash leaves a row. claimed_at
	// is when a job's current (or last) claim was made; a claim that takes
	// a running job whose lease ran out finds that claim unfinished, and
	// the trigger records it as lease_lost (queue.OutcomeLeaseLost) with
	// its start and, as its duration, the time until its lease's last end.
	// The claim counted the entry (jobs.history) in the same update; the
	// slot is the ring's, as sqlInsertAttempt writes it. Jobs claimed
	// before this version have no claimed_at: their entry starts at the
	// lease's end, with no duration.
	`
ALTER TABLE jobs ADD COLUMN claimed_at INTEGER;
CREATE TRIGGER jobs_lease_lost AFTER UPDATE OF fence ON jobs
WHEN old.status = 'running' AND new.status = 'running' AND new.fence > old.fence BEGIN
	INSERT OR REPLACE INTO attempts (job_id, slot, seq, attempt, started_at, duration_ns, outcome, error, status)
	VALUES (new.id, (new.history - 1) % ` + strconv.Itoa(queue.MaxHistory) + `, new.history - 1, old.attempts,
		coalesce(old.claimed_at, old.lease_until), max(old.lease_until - coalesce(old.claimed_at, old.lease_until), 0) * 1000000,
		'` + string(queue.OutcomeLeaseLost) + `', '` + queue.LeaseLostError + `', NULL);
END;
`,
	// Version 12: encryption at rest (queue.Keys, storekit's Sealer). An
	// event's headers and payload are one sealed value in sealed, NULL
	// for a plain row; error texts are sealed in place. seal_counts keeps
	// the sealed values per key id, exact, so Stats says in constant time
	// when an old key may go: the writer adds the events it inserts once
	// per transaction (as flushCounts does), and these triggers count
	// every other change. The attempts ring is written by an upsert from
	// now on, so an overwritten entry fires the update trigger (a REPLACE
	// fires no delete trigger). store_secrets keeps the ordering-key
	// secret, and seal_state the rekey's position and flags; migrate
	// fills both (initSecrets), and hashes the stored ordering keys.
	sealMigration,
}

// sealKey is the SQL of the key id a sealed value names (either form,
// blob or text), read from its header: queue/seal's package doc.
const sealKey = `CAST(substr(V, 3, unicode(substr(V, 2, 1))) AS TEXT)`

// sealedText is the SQL test of a stored text being sealed: its first byte.
const sealedText = `substr(V, 1, 1) = char(2)`

// sealMigration is migration 12, its triggers written from sealKey and
// sealedText.
var sealMigration = strings.NewReplacer(
	"KEY(old.sealed)", strings.ReplaceAll(sealKey, "V", "old.sealed"),
	"KEY(new.sealed)", strings.ReplaceAll(sealKey, "V", "new.sealed"),
	"KEY(old.last_error)", strings.ReplaceAll(sealKey, "V", "old.last_error"),
	"KEY(new.last_error)", strings.ReplaceAll(sealKey, "V", "new.last_error"),
	"KEY(old.error)", strings.ReplaceAll(sealKey, "V", "old.error"),
	"KEY(new.error)", strings.ReplaceAll(sealKey, "V", "new.error"),
	"SEALED(old.last_error)", strings.ReplaceAll(sealedText, "V", "old.last_error"),
	"SEALED(new.last_error)", strings.ReplaceAll(sealedText, "V", "new.last_error"),
	"SEALED(old.error)", strings.ReplaceAll(sealedText, "V", "old.error"),
	"SEALED(new.error)", strings.ReplaceAll(sealedText, "V", "new.error"),
	"MAXHISTORY", strconv.Itoa(queue.MaxHistory),
	"'LEASELOST'", "'"+string(queue.OutcomeLeaseLost)+"'",
	"'LEASELOSTERROR'", "'"+queue.LeaseLostError+"'",
).Replace(`
ALTER TABLE events ADD COLUMN sealed BLOB;

CREATE TABLE seal_counts (
	key_id TEXT    NOT NULL,
	kind   TEXT    NOT NULL, -- 'event' or 'text'
	n      INTEGER NOT NULL,
	PRIMARY KEY (key_id, kind)
) WITHOUT ROWID;

CREATE TABLE store_secrets (
	name  TEXT PRIMARY KEY,
	value BLOB NOT NULL -- 32 plain bytes, or sealed under a key
) WITHOUT ROWID;

CREATE TABLE seal_state (
	id           INTEGER PRIMARY KEY CHECK (id = 1),
	plain_rows   INTEGER NOT NULL, -- rows may hold values written plain
	plain_gen    INTEGER NOT NULL DEFAULT 0,
	residue      INTEGER NOT NULL, -- free pages may hold plain text
	rekey_target TEXT,             -- the walk's key id ('' plain); NULL: no walk
	rekey_table  INTEGER NOT NULL DEFAULT 0,
	rekey_after  INTEGER NOT NULL DEFAULT 0,
	rekey_after2 INTEGER NOT NULL DEFAULT 0
);

CREATE TRIGGER events_seal_delete AFTER DELETE ON events WHEN old.sealed IS NOT NULL BEGIN
	INSERT INTO seal_counts (key_id, kind, n) VALUES (KEY(old.sealed), 'event', -1)
	ON CONFLICT (key_id, kind) DO UPDATE SET n = n - 1;
END;
CREATE TRIGGER events_seal_update AFTER UPDATE OF sealed ON events BEGIN
	INSERT INTO seal_counts (key_id, kind, n) SELECT KEY(old.sealed), 'event', -1 WHERE old.sealed IS NOT NULL
	ON CONFLICT (key_id, kind) DO UPDATE SET n = n - 1;
	INSERT INTO seal_counts (key_id, kind, n) SELECT KEY(new.sealed), 'event', 1 WHERE new.sealed IS NOT NULL
	ON CONFLICT (key_id, kind) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER jobs_seal_error AFTER UPDATE OF last_error ON jobs
WHEN SEALED(old.last_error) OR SEALED(new.last_error) BEGIN
	INSERT INTO seal_counts (key_id, kind, n) SELECT KEY(old.last_error), 'text', -1 WHERE SEALED(old.last_error)
	ON CONFLICT (key_id, kind) DO UPDATE SET n = n - 1;
	INSERT INTO seal_counts (key_id, kind, n) SELECT KEY(new.last_error), 'text', 1 WHERE SEALED(new.last_error)
	ON CONFLICT (key_id, kind) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER jobs_seal_delete AFTER DELETE ON jobs WHEN SEALED(old.last_error) BEGIN
	INSERT INTO seal_counts (key_id, kind, n) VALUES (KEY(old.last_error), 'text', -1)
	ON CONFLICT (key_id, kind) DO UPDATE SET n = n - 1;
END;
CREATE TRIGGER attempts_seal_insert AFTER INSERT ON attempts WHEN SEALED(new.error) BEGIN
	INSERT INTO seal_counts (key_id, kind, n) VALUES (KEY(new.error), 'text', 1)
	ON CONFLICT (key_id, kind) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER attempts_seal_error AFTER UPDATE OF error ON attempts
WHEN SEALED(old.error) OR SEALED(new.error) BEGIN
	INSERT INTO seal_counts (key_id, kind, n) SELECT KEY(old.error), 'text', -1 WHERE SEALED(old.error)
	ON CONFLICT (key_id, kind) DO UPDATE SET n = n - 1;
	INSERT INTO seal_counts (key_id, kind, n) SELECT KEY(new.error), 'text', 1 WHERE SEALED(new.error)
	ON CONFLICT (key_id, kind) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER attempts_seal_delete AFTER DELETE ON attempts WHEN SEALED(old.error) BEGIN
	INSERT INTO seal_counts (key_id, kind, n) VALUES (KEY(old.error), 'text', -1)
	ON CONFLICT (key_id, kind) DO UPDATE SET n = n - 1;
END;

-- The lease_lost entry of version 11 overwrites its ring slot by an
-- upsert too, so the count of a sealed error it replaces goes down.
DROP TRIGGER jobs_lease_lost;
CREATE TRIGGER jobs_lease_lost AFTER UPDATE OF fence ON jobs
WHEN old.status = 'running' AND new.status = 'running' AND new.fence > old.fence BEGIN
	INSERT INTO attempts (job_id, slot, seq, attempt, started_at, duration_ns, outcome, error, status)
	VALUES (new.id, (new.history - 1) % MAXHISTORY, new.history - 1, old.attempts,
		coalesce(old.claimed_at, old.lease_until), max(old.lease_until - coalesce(old.claimed_at, old.lease_until), 0) * 1000000,
		'LEASELOST', 'LEASELOSTERROR', NULL)
	ON CONFLICT (job_id, slot) DO UPDATE SET seq = excluded.seq, attempt = excluded.attempt, started_at = excluded.started_at,
		duration_ns = excluded.duration_ns, outcome = excluded.outcome, error = excluded.error, status = excluded.status;
END;
`)

// sealVersion is the schema version that brought encryption at rest:
// migrating to it also runs initSecrets.
const sealVersion = 12

// initSecrets is migration 12's step in Go: it makes the store's
// ordering-key secret (sealed under keys when they seal), hashes every
// stored ordering key with it, and starts seal_state. A database that
// held rows before is marked as holding plain values and plain residue,
// so the first rekey seals and vacuums it. fresh says the database was
// empty before migrating.
func initSecrets(ctx context.Context, tx *sql.Tx, keys queue.Keys, fresh bool) error {
	secret, stored := storekit.NewSecret(keys)
	if _, err := tx.ExecContext(ctx, `INSERT INTO store_secrets (name, value) VALUES ('ordering', ?1)`, stored); err != nil {
		return fmt.Errorf("store the ordering-key secret: %w", err)
	}
	sl, err := storekit.NewSealer(keys, stored)
	if err != nil {
		return err
	}
	clear(secret)
	// Every distinct key once, by source: a few statements per key in
	// use, and the migration runs once.
	for _, table := range []string{"jobs", "ordering_heads"} {
		rows, err := tx.QueryContext(ctx, `SELECT DISTINCT source, ordering_key FROM `+table+` WHERE ordering_key IS NOT NULL`)
		if err != nil {
			return fmt.Errorf("hash ordering keys: %w", err)
		}
		type sk struct{ source, key string }
		var keysOf []sk
		for rows.Next() {
			var k sk
			if err := rows.Scan(&k.source, &k.key); err != nil {
				rows.Close()
				return fmt.Errorf("hash ordering keys: %w", err)
			}
			keysOf = append(keysOf, k)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("hash ordering keys: %w", err)
		}
		for _, k := range keysOf {
			if _, err := tx.ExecContext(ctx, `UPDATE `+table+` SET ordering_key = ?1 WHERE source = ?2 AND ordering_key = ?3`,
				sl.OrderingKey(k.source, k.key), k.source, k.key); err != nil {
				return fmt.Errorf("hash ordering keys: %w", err)
			}
		}
	}
	old := 1
	if fresh {
		old = 0
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO seal_state (id, plain_rows, residue) VALUES (1, ?1, ?1)`, old); err != nil {
		return fmt.Errorf("start seal state: %w", err)
	}
	return nil
}

// schemaVersion is the version this build writes.
var schemaVersion = len(migrations)

// migrate brings the database to schemaVersion in one transaction. An
// up-to-date database is left untouched, so opening twice, or opening
// beside a running Store, is harmless. BEGIN IMMEDIATE (the write DSN's
// _txlock) takes the write lock before reading the version, so two
// processes cannot both migrate.
func migrate(ctx context.Context, db *sql.DB, keys queue.Keys) error {
	// One connection (the write pool's only one), so the pragmas below
	// apply to the transaction's. Foreign keys are off while a migration
	// builds a table again (version 10), as SQLite's procedure asks; the
	// pragma has no effect inside a transaction.
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("open db: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA foreign_keys = OFF"); err != nil {
		return fmt.Errorf("open db: %w", err)
	}
	// A migration that rewrites values (the ordering keys of version 11)
	// leaves nothing of them in free pages when the store has keys.
	if err := setSecureDelete(ctx, conn, keys); err != nil {
		return err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA foreign_keys = ON")
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("open db: %w", err)
	}
	defer tx.Rollback()
	var version int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if version > schemaVersion {
		return fmt.Errorf("read schema version: database is at version %d, newer than this build's %d", version, schemaVersion)
	}
	if version == schemaVersion {
		return nil
	}
	for v := version; v < schemaVersion; v++ {
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			return fmt.Errorf("migrate schema to version %d: %w", v+1, err)
		}
		if v+1 == sealVersion {
			if err := initSecrets(ctx, tx, keys, version == 0); err != nil {
				return fmt.Errorf("migrate schema to version %d: %w", v+1, err)
			}
		}
	}
	// What foreign keys would have refused, had they been on.
	var violations int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM pragma_foreign_key_check").Scan(&violations); err != nil {
		return fmt.Errorf("check foreign keys: %w", err)
	}
	if violations > 0 {
		return fmt.Errorf("migrate schema to version %d: %d rows break a foreign key", schemaVersion, violations)
	}
	// PRAGMA takes no bound parameters; the versions are our own integers.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
		return fmt.Errorf("write schema version: %w", err)
	}
	// A migration may edit a definition in sqlite_schema (version 6):
	// bumping the schema cookie makes every connection, this one
	// included, parse the schema again.
	var cookie int64
	if err := tx.QueryRowContext(ctx, "PRAGMA schema_version").Scan(&cookie); err != nil {
		return fmt.Errorf("read schema cookie: %w", err)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA schema_version = %d", cookie+1)); err != nil {
		return fmt.Errorf("write schema cookie: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate schema: %w", err)
	}
	return nil
}
