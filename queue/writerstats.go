package queue

// WriterStats are a store's write counters since it opened, which
// caddywebhook publishes as the caddy_webhook_store_* metrics (and the
// load test's cost table divides per event). A read waits for no write:
// each store keeps them where its writer publishes them.
type WriterStats struct {
	// Commits is the write transactions committed: the SQLite writer's
	// batches, or the PostgreSQL batcher's enqueue writes.
	Commits int64 `json:"commits"`
	// Requests is the writes those commits carried: on SQLite every kind
	// (enqueues, claims, finishes, …), on PostgreSQL the events enqueued.
	Requests int64 `json:"requests"`
	// WALPages is the pages the SQLite write connection has written to
	// the WAL (SQLITE_DBSTATUS_CACHE_WRITE) since it was opened: one WAL
	// frame each. A connection renewed after a failure starts again from
	// zero. Always 0 on PostgreSQL, whose WAL the server reports.
	WALPages int64 `json:"wal_pages"`
}
