package postgres

import (
	"cmp"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Redacted replaces what a Redactor takes out of a text.
const Redacted = "<redacted>"

// Redactor takes out of a text what a DSN would reveal. A Store applies
// one, built from its DSN when it opens, to every error it returns: those
// reach logs, the admin API and Caddy's config errors, and pgx's errors
// name the user and database ("failed to connect to `user=… database=…`"),
// the server's address, and sometimes parts of the connection string,
// while the server's own messages name the user or database ("password
// authentication failed for user …").
//
// It has two strengths. RedactPassword takes out the secrets: the DSN
// itself and its password in every spelling (as pgconn resolves it, from
// the DSN, PGPASSWORD or the password file; as the URL writes it; and
// percent-encoded), replaced wherever they occur, since a short password
// may redact a little too much but never too little. Redact, which Error
// uses, also drops pgx's connect prefix and address lists, replaces the
// DSN's user, database and hosts as whole words, and IP addresses, which
// may be a host's resolution: who and where the database is is none of
// the business of whoever reads an error.
//
// A nil *Redactor returns its input unchanged.
type Redactor struct {
	secrets []string         // longest first, so a value holding another goes whole
	words   []*regexp.Regexp // whole-word matches of the user, database and hosts
}

var (
	pgConnectPrefix = regexp.MustCompile("failed to connect to `[^`]*`:")
	// pgDialAddress is pgx's "address (host): " before a per-address
	// error.
	pgDialAddress = regexp.MustCompile(`(^|\s)[^\s()]+ \([^\s()]*\): `)
	ipv4Address   = regexp.MustCompile(`\b\d{1,3}(\.\d{1,3}){3}\b`)
	ipv6Address   = regexp.MustCompile(`\[[0-9A-Fa-f:.%A-Za-z]*:[0-9A-Fa-f:.%A-Za-z]*\]`)
)

// NewRedactor prepares a Redactor for dsn; an empty dsn redacts nothing.
// A DSN that does not parse never reaches pgx's connection errors (Open
// refuses it with a message of its own); the DSN itself and the password
// as a URL writes it are still redacted.
func NewRedactor(dsn string) *Redactor {
	r := new(Redactor)
	if dsn == "" {
		return r
	}
	secrets := []string{dsn, rawURLPassword(dsn)}
	var words []string
	if cfg, err := pgconn.ParseConfig(dsn); err == nil {
		if pw := cfg.Password; pw != "" {
			userinfo := url.UserPassword("u", pw).String()
			secrets = append(secrets, pw, url.QueryEscape(pw), url.PathEscape(pw), strings.TrimPrefix(userinfo, "u:"))
		}
		words = append(words, cfg.User, cfg.Database, cfg.Host)
		for _, fb := range cfg.Fallbacks {
			words = append(words, fb.Host)
		}
	}
	r.secrets = longestFirst(secrets)
	for _, w := range longestFirst(words) {
		r.words = append(r.words, regexp.MustCompile(`(^|[^A-Za-z0-9_])`+regexp.QuoteMeta(w)+`([^A-Za-z0-9_]|$)`))
	}
	return r
}

// longestFirst sorts values longest first and drops duplicates and empty
// ones.
func longestFirst(values []string) []string {
	slices.SortFunc(values, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	values = slices.Compact(values)
	return slices.DeleteFunc(values, func(v string) bool { return v == "" })
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

// RedactPassword returns msg without the DSN and its password.
func (r *Redactor) RedactPassword(msg string) string {
	if r == nil {
		return msg
	}
	for _, v := range r.secrets {
		msg = strings.ReplaceAll(msg, v, Redacted)
	}
	return msg
}

// Redact returns msg without anything the DSN would reveal: its password,
// user, database and hosts, and any IP address.
func (r *Redactor) Redact(msg string) string {
	if r == nil {
		return msg
	}
	msg = r.RedactPassword(msg)
	msg = pgConnectPrefix.ReplaceAllString(msg, "connect to database:")
	msg = pgDialAddress.ReplaceAllString(msg, "${1}")
	for _, re := range r.words {
		// A match consumes the character after the value, so adjacent
		// occurrences ("a a") need a second pass.
		for range 2 {
			msg = re.ReplaceAllString(msg, "${1}"+Redacted+"${2}")
		}
	}
	msg = ipv4Address.ReplaceAllString(msg, Redacted)
	return ipv6Address.ReplaceAllString(msg, Redacted)
}

// Error returns err with its text redacted by Redact; nil stays nil, and
// so does an error whose text needs no change. The result still unwraps
// to err, so errors.Is finds the queue's sentinels and context errors;
// only its text changes.
func (r *Redactor) Error(err error) error {
	if err == nil || r == nil {
		return err
	}
	msg := r.Redact(err.Error())
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

// redactedError is an error whose text was redacted.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
