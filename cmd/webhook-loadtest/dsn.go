package main

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

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

// scrubber takes the password of a DSN out of any text before it is
// printed: progress lines, the report (whose command line may quote -dsn),
// and errors, since pgx's may quote parts of the connection string.
type scrubber struct {
	secrets []string // longest first
}

// redacted replaces what a scrubber takes out.
const redacted = "<redacted>"

// newScrubber prepares a scrubber for dsn; an empty dsn scrubs nothing.
// The secrets are the DSN itself, the password as pgconn resolves it (from
// the DSN, PGPASSWORD or the password file) and the password as a URL
// would spell it, percent-encoded.
func newScrubber(dsn string) *scrubber {
	s := &scrubber{}
	if dsn == "" {
		return s
	}
	values := []string{dsn, rawURLPassword(dsn)}
	if cfg, err := pgconn.ParseConfig(dsn); err == nil && cfg.Password != "" {
		userinfo := url.UserPassword("u", cfg.Password).String()
		values = append(values, cfg.Password, url.QueryEscape(cfg.Password), url.PathEscape(cfg.Password),
			strings.TrimPrefix(userinfo, "u:"))
	}
	slices.SortFunc(values, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	for _, v := range slices.Compact(values) {
		if v != "" {
			s.secrets = append(s.secrets, v)
		}
	}
	return s
}

// rawURLPassword is the password of a URL DSN as written, between the
// first ':' and the last '@' of its authority; empty for none.
func rawURLPassword(dsn string) string {
	_, rest, ok := strings.Cut(dsn, "://")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return ""
	}
	_, pw, _ := strings.Cut(rest[:at], ":")
	return pw
}

// text returns msg with every secret replaced; a nil scrubber returns it
// as it is. Plain replacement, not
// whole words only: a short password may redact a little too much, but
// never too little.
func (s *scrubber) text(msg string) string {
	if s == nil {
		return msg
	}
	for _, v := range s.secrets {
		msg = strings.ReplaceAll(msg, v, redacted)
	}
	return msg
}

// err returns err with a scrubbed text; nil stays nil. The result unwraps
// to err, so errors.Is still finds context errors.
func (s *scrubber) err(err error) error {
	if err == nil {
		return nil
	}
	msg := s.text(err.Error())
	if msg == err.Error() {
		return err
	}
	return &scrubbedError{msg: msg, err: err}
}

// scrubbedError is an error whose text lost a DSN's secrets.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

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
