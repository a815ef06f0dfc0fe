package main

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// dsnEnv is the variable the Postgres tests and .ci/start-postgres use
// for the test server; -dsn defaults to it.
const dsnEnv = "CADDYWEBHOOK_TEST_POSTGRES_DSN"

// caddyDSNEnv carries the DSN into the Caddy processes, whose configs name
// it by the placeholder {env.WEBHOOK_LOADTEST_PG_DSN}: the password is then
// in no config file in the work directory and in no answer of the admin
// API.
const caddyDSNEnv = "WEBHOOK_LOADTEST_PG_DSN"

// noDSNHelp is what a -storage postgres run without a server says.
const noDSNHelp = "-storage postgres needs a server: start one with " +
	`eval "$(.ci/start-postgres)"` + " (it exports " + dsnEnv + "), or pass -dsn"

// checkDSN makes sure dsn parses as a PostgreSQL connection string and
// returns a description of it without the password, for the report:
// user@host:port/database. pgconn's parse errors quote the string, so the
// error here says only that it did not parse.
func checkDSN(dsn string) (string, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "", errors.New("-dsn does not parse as a PostgreSQL connection string (a URL postgres://user:password@host:port/db or key=value pairs)")
	}
	return fmt.Sprintf("%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database), nil
}
