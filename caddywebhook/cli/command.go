package cli

import (
	"cmp"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/human"
	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/subcommand"
	"github.com/caddywebhook/caddywebhook/queue"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "webhook",
		Usage: "<stats|list|show|events|replay|resend|discard|purge|send|sign|tail|pause|resume|rules test|rekey|listen> [--address <interface>] [--config <path> [--adapter <name>]] [--json]",
		Short: "Inspects the webhook queue of a running Caddy: stats, jobs, replay, discard, purge",
		Long: `
Talks to the webhook admin API (/webhook/ on Caddy's admin endpoint) of a
running Caddy to look at the queue and repair it: see how many jobs are
pending, blocked, running, done or dead for each source and target, list jobs, show
one job with its last error, attempt history and payload, replay dead jobs,
discard a job, purge old done jobs, and pause and resume delivery.

The admin address is found as 'caddy reload' finds it: the --address flag
if given; else the admin listener of the --config file (with --adapter if it
needs one), or of a Caddyfile in the current directory; else the default
(localhost:2019, or the CADDY_ADMIN environment variable).

Every subcommand prints a readable table; --json prints the API's JSON
response instead, for scripts and jq. On an error (no such job, a job that
is not dead, no webhook app running, Caddy not reachable) the message goes
to stderr and the exit code is 1.
`,
		CobraFunc: func(cmd *cobra.Command) {
			Build(cmd, time.Now)
		},
	})
}

const webhookExamples = `  # What is in the queue? Counts per source, target and status.
  caddy webhook stats

  # Which deliveries died, and why?
  caddy webhook list --status dead
  caddy webhook show 42

  # The upstream is fixed: try again.
  caddy webhook replay 42
  caddy webhook replay --all-dead --source github

  # Every order.paid of one customer since Tuesday, to the target that was
  # broken: what would be sent, then send it.
  caddy webhook events --where 'body.customer == "cus_1"' --event order.paid --since 2026-06-02T00:00:00Z
  caddy webhook replay --where 'body.customer == "cus_1"' --event order.paid --since 2026-06-02T00:00:00Z --target billing --status any --dry-run --show-request

  # Caddy's admin endpoint is elsewhere.
  caddy webhook stats --address localhost:2020
  caddy webhook stats --config /etc/caddy/Caddyfile`

// webhookDocsFooter ends the help of `caddy webhook` and its subcommands.
const webhookDocsFooter = `Full documentation is available at:
https://github.com/caddywebhook/caddywebhook/tree/main/docs`

// Build adds the flags and subcommands of `caddy webhook` to
// cmd; now is the clock for the ages the tables print.
func Build(cmd *cobra.Command, now func() time.Time) {
	cmd.Example = webhookExamples
	// Caddy's root command ends its help with Caddy's docs; this command
	// and its subcommands, which inherit the template, end with the
	// plugin's.
	cmd.SetHelpTemplate((&cobra.Command{}).HelpTemplate() + "\n" + webhookDocsFooter + "\n")
	// Without a RunE, cobra answers a misspelt subcommand (`caddy webhook
	// replya --id 4`) with the help text and exit status 0; and without the
	// whitelist, with a complaint about the subcommand's flag instead.
	cmd.FParseErrWhitelist.UnknownFlags = true
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("unknown subcommand %q; see '%s --help'", args[0], cmd.CommandPath())
		}
		return cmd.Help()
	}
	pf := cmd.PersistentFlags()
	pf.StringP("config", "c", "", "Configuration file to read the admin address from, if --address is not used (default: ./Caddyfile if present)")
	pf.StringP("adapter", "a", "", "Name of config adapter to apply (when --config is used)")
	pf.String("address", "", "The address to use to reach the admin API endpoint, if not the default")
	pf.Bool("json", false, "Print the admin API's JSON response instead of a table")

	// newClient runs inside each subcommand, after cobra has parsed the
	// persistent flags into the subcommand's flag set.
	run := func(f func(c *client, cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			c, err := newClient(cmd, now)
			if err != nil {
				return err
			}
			return f(c, cmd, args)
		}
	}

	stats := &cobra.Command{
		Use:   "stats",
		Short: "Shows job counts per source, target and status, and the oldest pending job's age",
		Long: `
Shows how many jobs each source and target has in each status (pending,
blocked, running, done, dead), how many events are stored, and how long the oldest
due pending job has been waiting: a growing age means deliveries are not
keeping up or a target has no worker (its source or target is not in the
running config).
`,
		Example: `  caddy webhook stats
  caddy webhook stats --json | jq '.counts[] | select(.status == "dead")'`,
		Args: noArgs,
		RunE: run((*client).stats),
	}

	list := &cobra.Command{
		Use:   "list [--status <status>] [--source <name>] [--target <name>] [--event <type>] [--delivery <id>] [--since <when>] [--until <when>] [--where <expression>] [--limit <n>] [--cursor <id>]",
		Short: "Lists jobs, newest first, or those whose event's content matches --where",
		Long: `
Lists jobs newest first, one line each: id, source, target, status, attempts,
event type, sender's delivery id, age and the start of the last error. Filter
by --status (pending, blocked, running, done, dead), --source, --target,
--event, --delivery (with --source), and a time range with --since and
--until. A page holds --limit jobs (default 50, at most 1000); when there
are more, the last line gives the --cursor for the next page. A --source
that neither the running config nor any job has is an error.

--where searches by content: a CEL expression, as a target's filter is
written (docs/RULES.md), over the stored event (body, headers, event_type,
source, delivery_id; a stored event keeps no query string) and its job
(job.target, job.status, job.attempts, job.replays, job.last_error). The
jobs are listed oldest first, and the search reads the store from the
oldest event on, in short requests, until the page is full.
`,
		Example: `  caddy webhook list --status dead
  caddy webhook list --source stripe --target http --limit 200
  caddy webhook list --status dead --cursor 1234
  caddy webhook list --source stripe --delivery evt_1N2b3c
  caddy webhook list --event push --since 1h
  caddy webhook list --status dead --where 'body.data.object.customer == "cus_Q1w2"'`,
		Args: noArgs,
		RunE: run((*client).list),
	}
	lf := list.Flags()
	lf.String("status", "", "Only jobs in this status: pending, blocked, running, done or dead")
	lf.String("source", "", "Only jobs of this source (the receiver's source name)")
	lf.String("target", "", "Only jobs for this target name")
	lf.String("event", "", "Only jobs of events of this type")
	lf.String("delivery", "", "Only the jobs of the event with this sender's delivery id (needs --source)")
	lf.String("since", "", "Only jobs of events received since: an RFC 3339 time or a duration back from now (1h, 2d)")
	lf.String("until", "", "Only jobs of events received before: an RFC 3339 time or a duration back from now")
	lf.String("where", "", "Only jobs whose event (and job) this CEL expression is true for, e.g. 'body.customer == \"cus_1\" && job.status == \"dead\"'")
	lf.Int("limit", 0, "Jobs per page, 1 to 1000 (default 50)")
	lf.Int64("cursor", 0, "Start after this point: the cursor printed at the end of the previous page")

	show := &cobra.Command{
		Use:   "show <job id> | --source <name> --delivery <id> | --event <event id>",
		Short: "Shows one job: status, last error, attempt history, headers and payload",
		Long: `
Shows everything stored for one job: its source, target, status, event type
and delivery id, its last error, the history of its attempts (start,
duration, outcome, error), the headers forwarded to the target and the
payload — as text when it is UTF-8, otherwise base64.

With --event, or --source and --delivery, shows a stored event instead:
its headers, payload and jobs.
`,
		Example: `  caddy webhook show 42
  caddy webhook show 42 --json | jq -r .payload_text
  caddy webhook show --source stripe --delivery evt_1N2b3c
  caddy webhook show --event 17`,
		Args: showArgs,
		RunE: run(func(c *client, cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				return c.show(cmd, args)
			}
			return c.showEvent(cmd, args)
		}),
	}
	sf := show.Flags()
	sf.String("source", "", "With --delivery: the source the event came to")
	sf.String("delivery", "", "Show the event with this sender's delivery id, and its jobs (needs --source)")
	sf.Int64("event", 0, "Show the event with this id, and its jobs")

	replay := &cobra.Command{
		Use:   "replay <id>... | --all-dead [--source <name>] [--target <name>] | --where <expression> [--status dead|done|any] [--source <name>] [--target <name>] [--event <type>] [--since <when>] [--until <when>] [--rate <n>/s] [--dry-run [--show-request]]",
		Short: "Gives dead jobs a fresh set of attempts, due now; or replays and resends by content",
		Long: `
Replays dead jobs: each gets a fresh attempt budget and is due at once, so a
worker picks it up within moments. Name the jobs by id (one or more; --id
is the same for one), or use --all-dead for every dead job, optionally only
those of one --source and/or --target. Only dead jobs can be replayed; a
job that is pending, running or done is refused with an error.

--where replays by content: the events a CEL expression is true for, as a
target's filter is written (docs/RULES.md), over the stored event (body,
headers, event_type, source, delivery_id), narrowed by --source, --event,
--since and --until. For each matching event and each of its targets (or
the --target named), the event's newest job for it decides: with --status
dead (the default) a dead job is replayed; with done a done job is resent;
with any both, and a --target the event has no job for gets a new one, as
'resend --event' makes. A job pending, running or blocked is on its way
and left alone; each event and target is queued once. --rate spreads the
jobs' due times (e.g. 10/s), which the queue keeps, so a large replay does
not reach the upstream at once and the spread survives a restart.

--dry-run changes nothing: it prints how many jobs would be queued and the
first of them (--limit, default 20); --show-request adds, for one event of
each target, the request that target would receive after its transform.
The search reads the store from the oldest event in short requests, each
its own bulk replay, logged and emitted as a Caddy event.
`,
		Example: `  caddy webhook replay 42
  caddy webhook replay 42 43 57
  caddy webhook replay --all-dead --source github
  caddy webhook replay --all-dead --source stripe --target exec
  caddy webhook replay --where 'body.data.object.customer == "cus_Q1w2"' --event invoice.paid --since 2d --target billing --status any --dry-run --show-request
  caddy webhook replay --where 'body.data.object.customer == "cus_Q1w2"' --event invoice.paid --since 2d --target billing --status any --rate 5/s`,
		Args: replayArgs,
		RunE: run((*client).replay),
	}
	rf := replay.Flags()
	rf.Int64("id", 0, "The dead job to replay (the same as giving its id as an argument)")
	rf.Bool("all-dead", false, "Replay every dead job (narrow with --source and --target)")
	rf.String("source", "", "With --all-dead or --where: only jobs of this source")
	rf.String("target", "", "With --all-dead or --where: only jobs for this target")
	rf.String("where", "", "Replay the jobs of the events this CEL expression is true for")
	rf.String("status", "", "With --where: dead (default), done or any")
	rf.String("event", "", "With --where: only events of this type")
	rf.String("since", "", "With --where: only events received since: an RFC 3339 time or a duration back from now (1h, 2d)")
	rf.String("until", "", "With --where: only events received before: an RFC 3339 time or a duration back from now")
	rf.String("rate", "", "With --where: spread the jobs' due times at this rate, e.g. 10/s, 600/m")
	rf.Bool("dry-run", false, "With --where: change nothing; print what would be queued")
	rf.Bool("show-request", false, "With --dry-run: print for one event of each target the request it would receive")
	rf.Int("limit", 0, "With --where: list this many of the jobs queued (default 20)")

	discard := &cobra.Command{
		Use:   "discard <id> | --source <name> [--target <name>] [--status pending|dead] [--unroutable] | --unroutable",
		Short: "Deletes jobs that will never be wanted (not while they run)",
		Long: `
Deletes one job for good, and its event when no other job refers to it. Use
it for a dead job that should never be delivered, or a job whose source or
target was removed from the config and will not come back. A running job is
refused; wait for its attempt to finish.

With --source, or --unroutable, it deletes every pending and dead job that
matches instead (--status narrows it to one of the two), in short chunks
that never hold up incoming webhooks. --unroutable keeps only the jobs whose
source and target the running config no longer has: 'caddy webhook stats'
marks them.
`,
		Example: `  caddy webhook discard 42
  caddy webhook discard --unroutable
  caddy webhook discard --source github --target old-ci --status dead`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("source") || cmd.Flags().Changed("unroutable") {
				return noArgs(cmd, args)
			}
			return jobIDArg("discard")(cmd, args)
		},
		RunE: run((*client).discard),
	}
	discard.Flags().String("source", "", "Discard every pending and dead job of this source")
	discard.Flags().String("target", "", "With --source or --unroutable: only jobs for this target")
	discard.Flags().String("status", "", "With --source or --unroutable: only pending or only dead jobs")
	discard.Flags().Bool("unroutable", false, "Only jobs whose source and target the running config does not have")

	purge := &cobra.Command{
		Use:   "purge [--older-than <duration>]",
		Short: "Deletes done jobs older than the retention now, instead of waiting for housekeeping",
		Long: `
Deletes done jobs that finished longer ago than the webhook app's retention
(or --older-than), with their events once no job refers to them. The app
does this on its own from time to time; this command does it now.

Done jobs are also the memory that recognises a sender's retry of an event
that was already delivered: after a purge, a redelivery of a purged event
is accepted and delivered again.
`,
		Example: `  caddy webhook purge
  caddy webhook purge --older-than 7d`,
		Args: noArgs,
		RunE: run((*client).purge),
	}
	purge.Flags().String("older-than", "", "Purge done jobs finished longer ago than this (e.g. 72h, 7d); default: the app's retention")

	cmd.AddCommand(stats, list, show, replay, discard, purge, rekeyCommand(run))
	addEventCommands(cmd, run)
	addRulesCommands(cmd, run)
	for _, build := range subcommand.All() {
		cmd.AddCommand(build())
	}
}

func (c *client) stats(_ *cobra.Command, _ []string) error {
	var st adminapi.StatsResponse
	if ok, err := c.call(http.MethodGet, "/webhook/stats", &st); !ok {
		return err
	}
	if err := c.statsTable(st.Counts); err != nil {
		return err
	}
	fmt.Fprintln(c.out)
	fmt.Fprintf(c.out, "events stored:  %d\n", st.Events)
	oldest := "none"
	if st.OldestPending > 0 {
		oldest = human.Duration(st.OldestPending)
	}
	fmt.Fprintf(c.out, "oldest pending: %s\n", oldest)
	c.keysSummary(st)
	c.statsHints(st)
	return nil
}

// statsTable prints the counts, one line per source and target.
func (c *client) statsTable(counts []adminapi.StatsCount) error {
	type key struct{ source, target string }
	rows := map[key]map[queue.Status]int64{}
	marks := map[key]string{}
	for _, n := range counts {
		k := key{n.Source, n.Target}
		if rows[k] == nil {
			rows[k] = map[queue.Status]int64{}
		}
		rows[k][n.Status] += n.Jobs
		marks[k] = routeMarks(n)
	}
	keys := slices.Collect(maps.Keys(rows))
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(strings.Compare(a.source, b.source), strings.Compare(a.target, b.target))
	})
	if len(keys) == 0 {
		fmt.Fprintln(c.out, "no jobs")
		return nil
	}
	tw := newTable(c.out)
	fmt.Fprintln(tw, "SOURCE\tTARGET\tPENDING\tBLOCKED\tRUNNING\tDONE\tDEAD")
	for _, k := range keys {
		r := rows[k]
		fmt.Fprintf(tw, "%s\t%s%s\t%d\t%d\t%d\t%d\t%d\n", cell(k.source, 0), cell(k.target, 0), marks[k],
			r[queue.StatusPending], r[queue.StatusBlocked], r[queue.StatusRunning], r[queue.StatusDone], r[queue.StatusDead])
	}
	return tw.Flush()
}

// routeMarks says what holds a route's jobs back: " (unroutable)",
// " (paused)", " (circuit open)".
func routeMarks(n adminapi.StatsCount) string {
	var s string
	if n.Unroutable {
		s += " (unroutable)"
	}
	if n.Paused {
		s += " (paused)"
	}
	if n.Circuit != "" {
		s += " (circuit " + strings.ReplaceAll(n.Circuit, "_", "-") + ")"
	}
	return s
}

// statsHints prints what to do about pauses, dead and unroutable jobs, as
// commands the user can paste: the sources named, and the flags that
// found the admin endpoint kept.
func (c *client) statsHints(st adminapi.StatsResponse) {
	if len(st.Pauses) > 0 {
		fmt.Fprintln(c.out, pauseLine(st.Pauses))
		for _, p := range st.Pauses {
			args := []string{"resume", "--source", p.Source}
			if p.Target != "" {
				args = append(args, "--target", p.Target)
			}
			fmt.Fprintf(c.out, "  resume with `%s`\n", c.hint(args...))
		}
	}
	var dead int64
	sources := map[string]bool{}
	for _, n := range st.Counts {
		if n.Status == queue.StatusDead && n.Jobs > 0 {
			dead += n.Jobs
			sources[n.Source] = true
		}
	}
	if dead > 0 {
		list, replay := []string{"list", "--status", "dead"}, []string{"replay", "--all-dead"}
		if len(sources) == 1 {
			for source := range sources {
				list, replay = append(list, "--source", source), append(replay, "--source", source)
			}
		}
		fmt.Fprintf(c.out, "\n%d dead: see them with `%s`, retry with `%s`\n", dead, c.hint(list...), c.hint(replay...))
	}
	if st.Unroutable > 0 {
		fmt.Fprintf(c.out, "\n%d pending unroutable: the running config has no such source and target; no worker takes them.\n"+
			"Name the target again in the config, or delete them with `%s`\n", st.Unroutable, c.hint("discard", "--unroutable"))
	}
}

// hint is the command `caddy webhook <args>` as the user can paste it: each
// argument quoted for a shell where it needs it, followed by the flags
// with which the user found the admin endpoint.
func (c *client) hint(args ...string) string {
	parts := []string{"caddy", "webhook"}
	for _, a := range append(args, c.endpointFlags...) {
		parts = append(parts, shellWord(a))
	}
	return strings.Join(parts, " ")
}

// shellWord is s as one word of a POSIX shell: as it is when it is safe,
// else quoted.
func shellWord(s string) string {
	safe := s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@%+,", r))
	}) < 0
	if safe {
		return s
	}
	return shellQuote(s)
}

func (c *client) list(cmd *cobra.Command, _ []string) error {
	q := url.Values{}
	flagQuery(cmd, q, "status", "source", "target", "event", "delivery", "since", "until", "where")
	if q.Has("where") {
		return c.listWhere(cmd, q)
	}
	var page queue.JobPage
	if ok, err := c.call(http.MethodGet, pageURI(cmd, "/webhook/jobs", q), &page); !ok {
		return err
	}
	if len(page.Jobs) == 0 {
		fmt.Fprintln(c.out, "no jobs")
		return nil
	}
	return c.endPage(c.jobsTable(page.Jobs), page.NextCursor)
}

// jobsTable writes a listing of jobs to a table, for the caller to flush.
func (c *client) jobsTable(jobs []queue.JobSummary) *tabwriter.Writer {
	now := c.now()
	tw := newTable(c.out)
	fmt.Fprintln(tw, "ID\tSOURCE\tTARGET\tSTATUS\tATTEMPTS\tEVENT\tDELIVERY\tAGE\tLAST ERROR")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", j.ID, cell(j.Source, 0), cell(j.Target, 0), j.Status,
			j.Attempts, cell(j.EventType, 0), cell(j.DeliveryID, 0), human.Duration(now.Sub(j.CreatedAt)),
			cell(j.LastError, 60))
	}
	return tw
}

// pageURI returns path with the query q and the --limit and --cursor
// flags that are set: the request of a listing's page.
func pageURI(cmd *cobra.Command, path string, q url.Values) string {
	fl := cmd.Flags()
	if fl.Changed("limit") {
		n, _ := fl.GetInt("limit")
		q.Set("limit", strconv.Itoa(n))
	}
	if fl.Changed("cursor") {
		n, _ := fl.GetInt64("cursor")
		q.Set("cursor", strconv.FormatInt(n, 10))
	}
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return path
}

// endPage writes a listing's table and, when another page follows, how to
// ask for it.
func (c *client) endPage(tw *tabwriter.Writer, next int64) error {
	if err := tw.Flush(); err != nil {
		return err
	}
	if next != 0 {
		fmt.Fprintf(c.out, "\nmore: add --cursor %d for the next page\n", next)
	}
	return nil
}

func (c *client) show(_ *cobra.Command, args []string) error {
	var job adminapi.JobResponse
	if ok, err := c.call(http.MethodGet, "/webhook/jobs/"+args[0], &job); !ok {
		return err
	}
	now := c.now()
	fmt.Fprintf(c.out, "job %d: %s\n\n", job.ID, job.Status)
	tw := newTable(c.out)
	fmt.Fprintf(tw, "source:\t%s\n", cell(job.Source, 0))
	fmt.Fprintf(tw, "target:\t%s\n", cell(job.Target, 0))
	fmt.Fprintf(tw, "event type:\t%s\n", cell(job.EventType, 0))
	fmt.Fprintf(tw, "delivery id:\t%s\n", cell(job.DeliveryID, 0))
	fmt.Fprintf(tw, "event id:\t%d\n", job.EventID)
	fmt.Fprintf(tw, "attempts:\t%d\n", job.Attempts)
	if job.Replays > 0 {
		fmt.Fprintf(tw, "replays:\t%d\n", job.Replays)
	}
	fmt.Fprintf(tw, "created:\t%s\n", when(job.CreatedAt, now))
	switch job.Status {
	case queue.StatusPending:
		fmt.Fprintf(tw, "next attempt:\t%s\n", when(job.RunAt, now))
	case queue.StatusRunning:
		fmt.Fprintf(tw, "leased by:\t%s until %s\n", cell(job.LeaseOwner, 0), when(job.LeaseUntil, now))
	}
	if !job.FinishedAt.IsZero() {
		fmt.Fprintf(tw, "finished:\t%s\n", when(job.FinishedAt, now))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if job.LastError != "" {
		fmt.Fprintf(c.out, "\nlast error:\n%s\n", indent(queue.SafeText(job.LastError, 0)))
	}
	if job.ReadError != "" {
		fmt.Fprintf(c.out, "\nthe event cannot be read:\n%s\n", indent(queue.SafeText(job.ReadError, 0)))
		return nil
	}

	fmt.Fprintln(c.out, "\nhistory:")
	if len(job.History) == 0 {
		fmt.Fprintln(c.out, "  no attempts yet")
	} else {
		tw = newTable(c.out)
		fmt.Fprintln(tw, "  ATTEMPT\tSTARTED\tDURATION\tOUTCOME\tSTATUS\tERROR")
		for _, a := range job.History {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\n", a.Attempt.Attempt, a.Started.UTC().Format(time.RFC3339),
				human.Latency(a.Duration), a.Outcome, cell(a.Code.String(), 0), cell(a.Error, 80))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	if len(job.Headers) > 0 {
		fmt.Fprintln(c.out, "\nheaders:")
		for _, h := range job.Headers {
			fmt.Fprintf(c.out, "  %s: %s\n", cell(h.Name, 0), cell(h.Value, 0))
		}
	}

	if utf8.Valid(job.Payload) {
		fmt.Fprintf(c.out, "\npayload (%d bytes, text):\n%s\n", len(job.Payload), queue.SafeText(string(job.Payload), 0))
	} else {
		fmt.Fprintf(c.out, "\npayload (%d bytes, base64, not UTF-8):\n%s\n", len(job.Payload), base64.StdEncoding.EncodeToString(job.Payload))
	}
	return nil
}

// replayArgs accepts job ids, unless --id, --all-dead or --where says
// which jobs to replay.
func replayArgs(cmd *cobra.Command, args []string) error {
	fl := cmd.Flags()
	if err := checkReplayWhere(cmd, args); err != nil {
		return err
	}
	if len(args) == 0 {
		return nil
	}
	if fl.Changed("id") || fl.Changed("all-dead") || fl.Changed("source") || fl.Changed("target") {
		return errors.New("give job ids, or --all-dead [--source <name>] [--target <name>]; not both")
	}
	for _, arg := range args {
		if err := jobIDArg("replay")(cmd, []string{arg}); err != nil {
			return err
		}
	}
	return nil
}

func (c *client) replay(cmd *cobra.Command, args []string) error {
	fl := cmd.Flags()
	id, _ := fl.GetInt64("id")
	allDead, _ := fl.GetBool("all-dead")
	source, _ := fl.GetString("source")
	target, _ := fl.GetString("target")
	switch {
	case fl.Changed("where"):
		return c.replayWhere(cmd)
	case len(args) > 0:
		return c.replayJobs(args)
	case fl.Changed("id") && allDead:
		return errors.New("use either --id or --all-dead, not both")
	case fl.Changed("id"):
		if id < 1 {
			return fmt.Errorf("--id must be a positive job id, not %d", id)
		}
		if source != "" || target != "" {
			return errors.New("--source and --target narrow --all-dead; with --id the job is already chosen")
		}
		return c.replayJobs([]string{strconv.FormatInt(id, 10)})
	case allDead:
		return c.replayDead(source, target)
	}
	return errors.New("say which jobs to replay: their ids ('caddy webhook replay 42'), --all-dead [--source <name>] [--target <name>], or --where <expression>")
}

// replayJobs replays the jobs of ids, checked numbers, one request each,
// and stops at the first that fails: the ones before it stay replayed.
func (c *client) replayJobs(ids []string) error {
	for _, id := range ids {
		var r adminapi.ReplayResponse
		if ok, err := c.call(http.MethodPost, "/webhook/jobs/"+id+"/replay", &r); err != nil {
			return err
		} else if ok {
			fmt.Fprintf(c.out, "replayed job %d: pending, due now\n", r.ID)
		}
	}
	return nil
}

// replayDead replays every dead job of source and target (empty: any).
func (c *client) replayDead(source, target string) error {
	q := url.Values{"status": {string(queue.StatusDead)}}
	if source != "" {
		q.Set("source", source)
	}
	if target != "" {
		q.Set("target", target)
	}
	var r adminapi.ReplayResponse
	if ok, err := c.call(http.MethodPost, "/webhook/replay?"+q.Encode(), &r); !ok {
		return err
	}
	scope := describeFilter(source, target)
	if r.Replayed == 0 && r.Unroutable == 0 {
		fmt.Fprintf(c.out, "no dead jobs%s to replay\n", scope)
		return nil
	}
	fmt.Fprintf(c.out, "replayed %d dead %s%s: pending, due now\n", r.Replayed, plural(r.Replayed, "job", "jobs"), scope)
	if r.Unroutable > 0 {
		fmt.Fprintf(c.out, "left %d dead: their source and target are not in the running config\n", r.Unroutable)
	}
	return nil
}

func (c *client) discard(cmd *cobra.Command, args []string) error {
	fl := cmd.Flags()
	source, _ := fl.GetString("source")
	target, _ := fl.GetString("target")
	status, _ := fl.GetString("status")
	unroutable, _ := fl.GetBool("unroutable")
	if len(args) == 0 {
		q := url.Values{}
		for name, v := range map[string]string{"source": source, "target": target, "status": status} {
			if v != "" {
				q.Set(name, v)
			}
		}
		if unroutable {
			q.Set("unroutable", "true")
		}
		var r adminapi.DiscardJobsResponse
		if ok, err := c.call(http.MethodPost, "/webhook/discard?"+q.Encode(), &r); !ok {
			return err
		}
		what := "pending and dead"
		if status != "" {
			what = status
		}
		if unroutable {
			what += " unroutable"
		}
		fmt.Fprintf(c.out, "discarded %d %s %s%s\n", r.Discarded, what, plural(r.Discarded, "job", "jobs"), describeFilter(source, target))
		return nil
	}
	if target != "" || status != "" {
		return errors.New("--target and --status narrow --source or --unroutable; with a job id the job is already chosen")
	}
	var r adminapi.DiscardResponse
	if ok, err := c.call(http.MethodDelete, "/webhook/jobs/"+args[0], &r); !ok {
		return err
	}
	fmt.Fprintf(c.out, "discarded job %d\n", r.ID)
	return nil
}

func (c *client) purge(cmd *cobra.Command, _ []string) error {
	uri := "/webhook/purge"
	if s, _ := cmd.Flags().GetString("older-than"); s != "" {
		d, err := caddy.ParseDuration(s)
		if err != nil || d <= 0 {
			return fmt.Errorf("--older-than must be a positive duration such as 72h or 7d, not %q", s)
		}
		uri += "?" + url.Values{"older_than": {d.String()}}.Encode()
	}
	var r adminapi.PurgeResponse
	if ok, err := c.call(http.MethodPost, uri, &r); !ok {
		return err
	}
	fmt.Fprintf(c.out, "purged %d done %s that finished before %s (older than %s)\n",
		r.Purged, plural(r.Purged, "job", "jobs"), r.Cutoff.UTC().Format(time.RFC3339), r.OlderThan)
	return nil
}

// noArgs refuses stray arguments with a hint.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%s takes no arguments, got %q; see '%s --help'", cmd.CommandPath(), args, cmd.CommandPath())
	}
	return nil
}

// jobIDArg checks the one job id argument of show and discard before any
// request is made, so nothing but a number ends up in the request path.
func jobIDArg(verb string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return fmt.Errorf("%s needs one job id, e.g. 'caddy webhook %s 42' (ids are in 'caddy webhook list')", verb, verb)
		}
		if id, err := strconv.ParseInt(args[0], 10, 64); err != nil || id < 1 {
			return fmt.Errorf("job id must be a positive number, not %q", args[0])
		}
		return nil
	}
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// when prints an instant in UTC with how far it is from now.
func when(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	rel := human.Duration(now.Sub(t)) + " ago"
	if t.After(now) {
		rel = "in " + human.Duration(t.Sub(now))
	}
	return fmt.Sprintf("%s (%s)", t.UTC().Format(time.RFC3339), rel)
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func describeFilter(source, target string) string {
	var parts []string
	if source != "" {
		parts = append(parts, "source "+source)
	}
	if target != "" {
		parts = append(parts, "target "+target)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// cell makes s safe for one table cell: queue.SafeLine cut to n bytes (0:
// no limit), or "-" when nothing is left. Event types, delivery ids and
// errors come from senders and upstreams; an escape sequence in them must
// not reach the terminal, nor a newline or a tab break the table.
func cell(s string, n int) string {
	return dash(queue.SafeLine(s, n))
}
