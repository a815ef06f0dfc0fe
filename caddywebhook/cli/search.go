package cli

import (
	"cmp"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/queue"
)

// Search and replay by content: --where on events, list and replay, the
// client of the admin API's where parameter. One request of a search
// walks the store for a bounded time; when it stops before the newest
// event without a full page, the CLI asks again from its cursor, so a
// command runs until it has its answer (interrupt it to stop), while
// every request stays short. With --json a listing makes one request and
// prints its answer, cursor included, as the API gives it.

// maxSearchRequests bounds the requests one listing makes, against a
// server that never reaches the end.
const maxSearchRequests = 100_000

// searchPage gathers the pages of a search until it has limit matches
// (0: the API's default) or the walk ends: get makes one request from a
// cursor for at most want matches and returns how many it found and the
// search's report and cursor.
func searchPage(limit int, get func(cursor int64, want int) (int, adminapi.Search, int64, error)) (adminapi.Search, int64, error) {
	var total adminapi.Search
	var cursor int64
	found := 0
	for range maxSearchRequests {
		want := 0
		if limit > 0 {
			want = limit - found
		}
		n, s, next, err := get(cursor, want)
		if err != nil {
			return total, 0, err
		}
		found += n
		addSearch(&total, s)
		if next == 0 || s.Stopped == adminapi.SearchStoppedLimit {
			return total, next, nil
		}
		cursor = next
	}
	return total, cursor, nil
}

// addSearch adds the report of one request of a search to total: the
// counts summed, the first error message of each kind kept, the latest
// request's expression and reason to stop.
func addSearch(total *adminapi.Search, s adminapi.Search) {
	total.Where, total.Stopped = s.Where, s.Stopped
	total.Scanned += s.Scanned
	total.EvalErrors += s.EvalErrors
	total.EvalError = cmp.Or(total.EvalError, s.EvalError)
	total.Unread += s.Unread
	total.UnreadError = cmp.Or(total.UnreadError, s.UnreadError)
}

// searchURI is the request of one page of a search from cursor, for at
// most want matches (0: the API's default): q with the cursor, or for the
// first page the --cursor flag.
func searchURI(cmd *cobra.Command, path string, q url.Values, cursor int64, want int) string {
	q = copyValues(q)
	if fl := cmd.Flags(); fl.Changed("cursor") && cursor == 0 {
		n, _ := fl.GetInt64("cursor")
		q.Set("cursor", strconv.FormatInt(n, 10))
	} else if cursor != 0 {
		q.Set("cursor", strconv.FormatInt(cursor, 10))
	}
	if want > 0 {
		q.Set("limit", strconv.Itoa(want))
	}
	return path + "?" + q.Encode()
}

// copyValues copies q.
func copyValues(q url.Values) url.Values {
	out := make(url.Values, len(q))
	for k, v := range q {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// searchLimit is the --limit flag, or def.
func searchLimit(cmd *cobra.Command, def int) int {
	if n, _ := cmd.Flags().GetInt("limit"); n > 0 {
		return n
	}
	return def
}

// endSearch writes what a search adds below its table: how much it read,
// the events (or jobs) the expression failed on, and the cursor of the
// next page. unit is what the expression ran on: "event", or "job" for a
// listing of jobs, where it runs once for each job of an event.
func (c *client) endSearch(s adminapi.Search, next int64, unit string) {
	fmt.Fprintf(c.out, "\nsearched %d %s\n", s.Scanned, plural(s.Scanned, "event", "events"))
	c.searchErrors(s, unit)
	if next != 0 {
		fmt.Fprintf(c.out, "more: add --cursor %d for the next page\n", next)
	}
}

// searchErrors writes how many events (or jobs: unit) the expression
// failed on and how many events the search could not open, if any.
func (c *client) searchErrors(s adminapi.Search, unit string) {
	if s.EvalErrors > 0 {
		fmt.Fprintf(c.out, "the expression failed on %d %s, which %s not match: %s\n", s.EvalErrors,
			plural(s.EvalErrors, unit, unit+"s"), plural(s.EvalErrors, "does", "do"), cell(s.EvalError, 200))
	}
	if s.Unread > 0 {
		fmt.Fprintf(c.out, "could not read %d %s, which %s not searched: %s\n", s.Unread,
			plural(s.Unread, "event", "events"), plural(s.Unread, "was", "were"), cell(s.UnreadError, 200))
	}
}

// eventsWhere is `caddy webhook events --where`.
func (c *client) eventsWhere(cmd *cobra.Command, q url.Values) error {
	if c.json {
		_, err := c.call(http.MethodGet, searchURI(cmd, "/webhook/events", q, 0, searchLimit(cmd, 0)), nil)
		return err
	}
	var events []queue.EventSummary
	s, next, err := searchPage(searchLimit(cmd, queue.DefaultListLimit), func(cursor int64, want int) (int, adminapi.Search, int64, error) {
		var r adminapi.EventSearchResponse
		_, err := c.call(http.MethodGet, searchURI(cmd, "/webhook/events", q, cursor, want), &r)
		events = append(events, r.Events...)
		return len(r.Events), r.Search, r.NextCursor, err
	})
	if err != nil {
		return err
	}
	if len(events) == 0 {
		fmt.Fprintln(c.out, "no events")
	} else if err := c.eventsTable(events).Flush(); err != nil {
		return err
	}
	c.endSearch(s, next, "event")
	return nil
}

// listWhere is `caddy webhook list --where`.
func (c *client) listWhere(cmd *cobra.Command, q url.Values) error {
	if c.json {
		_, err := c.call(http.MethodGet, searchURI(cmd, "/webhook/jobs", q, 0, searchLimit(cmd, 0)), nil)
		return err
	}
	var jobs []queue.JobSummary
	s, next, err := searchPage(searchLimit(cmd, queue.DefaultListLimit), func(cursor int64, want int) (int, adminapi.Search, int64, error) {
		var r adminapi.JobSearchResponse
		_, err := c.call(http.MethodGet, searchURI(cmd, "/webhook/jobs", q, cursor, want), &r)
		jobs = append(jobs, r.Jobs...)
		return len(r.Jobs), r.Search, r.NextCursor, err
	})
	if err != nil {
		return err
	}
	if len(jobs) == 0 {
		fmt.Fprintln(c.out, "no jobs")
	} else if err := c.jobsTable(jobs).Flush(); err != nil {
		return err
	}
	c.endSearch(s, next, "job")
	return nil
}

// replayWhereFlags are the flags of `replay` that go with --where only.
var replayWhereFlags = []string{"status", "event", "since", "until", "dry-run", "show-request", "rate", "limit"}

// replayWhere is `caddy webhook replay --where`: the requests of a replay
// by query from the first event to the newest, their counts added up.
func (c *client) replayWhere(cmd *cobra.Command) error {
	fl := cmd.Flags()
	q := url.Values{}
	flagQuery(cmd, q, "where", "source", "target", "status", "event", "since", "until", "rate")
	if q.Get("status") == "" {
		q.Set("status", string(queue.StatusDead))
	}
	dryRun, _ := fl.GetBool("dry-run")
	show, _ := fl.GetBool("show-request")
	if dryRun {
		q.Set("dry_run", "true")
	}
	if show {
		q.Set("show_request", "true")
	}
	limit := searchLimit(cmd, 20)
	q.Set("limit", strconv.Itoa(limit))
	if c.json {
		// One request, its answer as the API gives it: a script follows
		// next_cursor (and next_due) itself.
		_, err := c.call(http.MethodPost, "/webhook/replay?"+q.Encode(), nil)
		return err
	}
	var total adminapi.ReplayQueryResponse
	shown := map[queue.Route]bool{}
	for range maxSearchRequests {
		var r adminapi.ReplayQueryResponse
		if _, err := c.call(http.MethodPost, "/webhook/replay?"+q.Encode(), &r); err != nil {
			if total.Replayed+total.Resent+total.Added > 0 && !dryRun {
				return fmt.Errorf("%w\n(this replay queued %d jobs before the error; they stay queued)", err, total.Replayed+total.Resent+total.Added)
			}
			return err
		}
		total.Events += r.Events
		total.Replayed, total.Resent, total.Added = total.Replayed+r.Replayed, total.Resent+r.Resent, total.Added+r.Added
		total.InFlight, total.Unroutable = total.InFlight+r.InFlight, total.Unroutable+r.Unroutable
		addSearch(&total.Search, r.Search)
		for _, m := range r.Matches {
			if len(total.Matches) < limit {
				total.Matches = append(total.Matches, m)
			}
		}
		for _, req := range r.Requests {
			if route := (queue.Route{Source: req.Source, Target: req.Target}); !shown[route] {
				shown[route] = true
				total.Requests = append(total.Requests, req)
			}
		}
		total.NextDue = r.NextDue
		if r.NextCursor == 0 {
			break
		}
		q.Set("cursor", strconv.FormatInt(r.NextCursor, 10))
		if !r.NextDue.IsZero() {
			q.Set("due", r.NextDue.Format(time.RFC3339Nano))
		}
	}
	return c.printReplay(total, dryRun, q.Get("status"), q.Get("rate"))
}

// printReplay reports a replay by query, or its dry run, of the jobs of
// status (dead, done or any).
func (c *client) printReplay(r adminapi.ReplayQueryResponse, dryRun bool, status, rate string) error {
	n := r.Replayed + r.Resent + r.Added
	searched := fmt.Sprintf("%d matching %s (searched %d %s)", r.Events, plural(r.Events, "event", "events"),
		r.Scanned, plural(r.Scanned, "event", "events"))
	var parts []string
	verb := map[bool][3]string{true: {"replay", "resend", "add"}, false: {"replayed", "resent", "added"}}[dryRun]
	if r.Replayed > 0 {
		parts = append(parts, fmt.Sprintf("%s %d dead", verb[0], r.Replayed))
	}
	if r.Resent > 0 {
		parts = append(parts, fmt.Sprintf("%s %d done", verb[1], r.Resent))
	}
	if r.Added > 0 {
		parts = append(parts, fmt.Sprintf("%s %d new %s", verb[2], r.Added, plural(r.Added, "job", "jobs")))
	}
	what := strings.Join(parts, ", ")
	switch {
	case n == 0 && dryRun:
		fmt.Fprintf(c.out, "dry run, nothing changed: no job to queue for %s\n", searched)
	case n == 0:
		fmt.Fprintf(c.out, "no job to queue for %s\n", searched)
	case dryRun:
		fmt.Fprintf(c.out, "dry run, nothing changed: would queue %d %s for %s: %s\n", n, plural(n, "job", "jobs"), searched, what)
	default:
		due := "pending, due now"
		if rate != "" {
			due = fmt.Sprintf("pending, spread at %s until %s", rate, when(r.NextDue, c.now()))
		}
		fmt.Fprintf(c.out, "queued %d %s for %s: %s; %s\n", n, plural(n, "job", "jobs"), searched, what, due)
	}
	if n == 0 && r.Events > r.InFlight && status == string(queue.StatusDead) {
		// The default status is the likeliest reason events matched and
		// nothing was queued: their jobs were delivered.
		fmt.Fprintln(c.out, "--status dead (the default) replays dead jobs only; --status done or any resends delivered ones")
	}
	if r.InFlight > 0 {
		fmt.Fprintf(c.out, "left alone: %d pending, running or blocked (on %s way already)\n", r.InFlight, plural(r.InFlight, "its", "their"))
	}
	if r.Unroutable > 0 {
		fmt.Fprintf(c.out, "left %d as %s: %s source and target are not in the running config\n", r.Unroutable,
			plural(r.Unroutable, "it is", "they are"), plural(r.Unroutable, "its", "their"))
	}
	c.searchErrors(r.Search, "event")
	if len(r.Matches) > 0 {
		fmt.Fprintln(c.out)
		tw := newTable(c.out)
		fmt.Fprintln(tw, "JOB\tEVENT\tDELIVERY\tSOURCE\tTARGET\tSTATUS\tACTION")
		for _, m := range r.Matches {
			job := "-"
			if m.Job != 0 {
				job = strconv.FormatInt(m.Job, 10)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", job, m.Event, cell(m.DeliveryID, 0), cell(m.Source, 0), cell(m.Target, 0),
				dash(string(m.Status)), replayAction(m.Action))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if len(r.Matches) < n {
			fmt.Fprintf(c.out, "(the first %d of %d; --limit lists more)\n", len(r.Matches), n)
		}
	}
	for _, req := range r.Requests {
		fmt.Fprintf(c.out, "\n%s of source %s would receive, for event %d:\n", cell(req.Target, 0), cell(req.Source, 0), req.Event)
		if req.TransformError != "" {
			fmt.Fprintf(c.out, "transform error (the job would go dead): %s\n", cell(req.TransformError, 0))
			continue
		}
		printRequest(c.out, req.Request)
	}
	return nil
}

// replayAction is an action of a replay as the table prints it.
func replayAction(a string) string {
	if a == adminapi.ReplayActionAdd {
		return "new job"
	}
	return a
}

// printRequest prints a request as a target would receive it: the
// method, the headers, a blank line and the body (base64 when it is not
// text).
func printRequest(w io.Writer, r *adminapi.RulesTestOutput) {
	if r == nil {
		return
	}
	fmt.Fprintln(w, r.Method)
	for _, h := range r.Headers {
		fmt.Fprintf(w, "%s: %s\n", queue.SafeLine(h.Name, 0), queue.SafeLine(h.Value, 0))
	}
	fmt.Fprintln(w)
	if r.BodyBase64 != "" {
		// DecodedLen is the most a text of that length holds, up to two
		// bytes more than a padded one does: the size is the decoded one.
		body, _ := base64.StdEncoding.DecodeString(r.BodyBase64)
		fmt.Fprintf(w, "(%d %s, not UTF-8, as base64)\n%s\n", len(body), plural(len(body), "byte", "bytes"), r.BodyBase64)
		return
	}
	// The body is the sender's, reshaped: no escape sequence of it
	// reaches the terminal.
	fmt.Fprintln(w, queue.SafeText(r.Body, 0))
}

// checkReplayWhere refuses the flags of a replay by query without
// --where, and --where with the flags of the other replays.
func checkReplayWhere(cmd *cobra.Command, args []string) error {
	fl := cmd.Flags()
	if !fl.Changed("where") {
		for _, name := range replayWhereFlags {
			if fl.Changed(name) {
				return fmt.Errorf("--%s goes with --where, a replay by query (--where true takes every event)", name)
			}
		}
		return nil
	}
	if len(args) > 0 || fl.Changed("id") || fl.Changed("all-dead") {
		return errors.New("give --where, or job ids, or --all-dead; not more than one")
	}
	return nil
}
