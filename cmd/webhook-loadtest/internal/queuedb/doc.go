// Package queuedb is the load test's own access to a phase's queue,
// beside the Caddy that owns it: the seeds that fill it with jobs before
// Caddy starts (a million rows in seconds, in the store's own schema), and
// the readers of the count checks, whose every query walks an index that
// does not grow with the backlog. Each has an SQLite and a PostgreSQL form
// with the same rows and the same queries.
package queuedb
