package caddywebhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile" // the caddyfile adapter, for --adapter caddyfile
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/caddywebhook/cli"
	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
)

// cliFixture is the admin fixture served over real HTTP, as a running
// Caddy's admin endpoint would serve it, plus a count of the requests.
type cliFixture struct {
	*adminFixture
	addr     string // host:port of the admin server
	srv      *httptest.Server
	requests atomic.Int64
}

// setupCLI starts an httptest server with the admin API on a real store
// seeded with the standard data, and returns it with the job ids.
func setupCLI(t *testing.T) (*cliFixture, adminData) {
	t.Helper()
	f := &cliFixture{adminFixture: setupAdmin(t)}
	d := f.seed(t)
	srv := httptest.NewServer(f.countRequests(f.handler))
	t.Cleanup(srv.Close)
	f.addr, f.srv = srv.Listener.Addr().String(), srv
	return f, d
}

func (f *cliFixture) countRequests(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		h.ServeHTTP(w, r)
	})
}

// cliResult is what one `caddy webhook …` run printed, and its exit code as
// caddycmd.Main would set it (1 for any error returned by Execute).
type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs `caddy webhook <args>` through a cobra tree built like
// Caddy's root command (SilenceUsage), with the clock at now.
func runCLI(t *testing.T, now time.Time, args ...string) cliResult {
	t.Helper()
	root := &cobra.Command{Use: "caddy", SilenceUsage: true}
	wh := &cobra.Command{Use: "webhook"}
	cli.Build(wh, func() time.Time { return now })
	root.AddCommand(wh)
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"webhook"}, args...))
	res := cliResult{}
	if err := root.Execute(); err != nil {
		res.code = 1
	}
	res.stdout, res.stderr = out.String(), errOut.String()
	return res
}

// cli runs a subcommand against the fixture's admin address.
func (f *cliFixture) cli(t *testing.T, args ...string) cliResult {
	t.Helper()
	return runCLI(t, adminT0.Add(90*time.Second), append(args, "--address", f.addr)...)
}

// cliOK runs a subcommand with the server's clock at the CLI's (for ages
// such as the oldest pending job's), fails t unless it exits 0 with
// nothing on stderr, and returns its stdout.
func (f *cliFixture) cliOK(t *testing.T, args ...string) string {
	t.Helper()
	f.now.Store(adminT0.Add(90 * time.Second).UnixNano())
	res := f.cli(t, args...)
	if res.code != 0 || res.stderr != "" {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	return res.stdout
}

// columnGap matches the padding tabwriter puts after a cell, but not an
// indent at the start of a line.
var columnGap = regexp.MustCompile(`(\S) {2,}`)

// squeeze replaces column padding with " | " so table assertions do not
// depend on column widths.
func squeeze(s string) string { return columnGap.ReplaceAllString(s, "$1 | ") }

func TestCLIOutput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args func(d adminData) []string
		want func(d adminData, addr string) string // whole stdout, with column gaps squeezed to " | "
	}{
		{
			name: "stats",
			args: static("stats"),
			want: func(_ adminData, addr string) string {
				return `SOURCE | TARGET | PENDING | BLOCKED | RUNNING | DONE | DEAD
github | exec | 0 | 0 | 0 | 1 | 0
github | http | 1 | 0 | 0 | 0 | 1
slack | http | 1 | 0 | 0 | 0 | 0
stripe | http | 0 | 0 | 1 | 0 | 1

events stored: | 6
oldest pending: 1m30s

2 dead: see them with ` + "`caddy webhook list --status dead --address " + addr + "`, retry with `caddy webhook replay --all-dead --address " + addr + "`" + `
`
			},
		},
		{
			name: "list dead",
			args: static("list", "--status", "dead"),
			want: func(d adminData, _ string) string {
				return fmt.Sprintf(`ID | SOURCE | TARGET | STATUS | ATTEMPTS | EVENT | DELIVERY | AGE | LAST ERROR
%d | stripe | http | dead | 1 | invoice.paid | d-3 | 1m30s | dial tcp 127.0.0.1:9: connection refused
%d | github | http | dead | 1 | push | d-1 | 1m30s | upstream answered 400 Bad Request
`, d.stripeHTTPDead, d.githubHTTPDead)
			},
		},
		{
			name: "list with nothing matching",
			args: static("list", "--source", "slack", "--status", "dead"),
			want: func(adminData, string) string { return "no jobs\n" },
		},
		{
			name: "list first page points at the next",
			args: static("list", "--limit", "2"),
			want: func(d adminData, _ string) string {
				return fmt.Sprintf(`ID | SOURCE | TARGET | STATUS | ATTEMPTS | EVENT | DELIVERY | AGE | LAST ERROR
%d | slack | http | pending | 0 | - | d-6 | 1m30s | -
%d | github | http | pending | 0 | release | d-5 | 1m30s | -

more: add --cursor %d for the next page
`, d.binary, d.githubHTTPPending, d.githubHTTPPending)
			},
		},
		{
			name: "list next page from the cursor",
			args: func(d adminData) []string {
				return []string{"list", "--limit", "2", "--cursor", fmt.Sprint(d.githubHTTPPending)}
			},
			want: func(d adminData, _ string) string {
				return fmt.Sprintf(`ID | SOURCE | TARGET | STATUS | ATTEMPTS | EVENT | DELIVERY | AGE | LAST ERROR
%d | stripe | http | running | 1 | invoice.paid | d-4 | 1m30s | -
%d | stripe | http | dead | 1 | invoice.paid | d-3 | 1m30s | dial tcp 127.0.0.1:9: connection refused

more: add --cursor %d for the next page
`, d.stripeHTTPRunning, d.stripeHTTPDead, d.stripeHTTPDead)
			},
		},
		{
			name: "show a dead job with a text payload",
			args: func(d adminData) []string { return []string{"show", fmt.Sprint(d.githubHTTPDead)} },
			want: func(d adminData, _ string) string {
				return fmt.Sprintf(`job %d: dead

source: | github
target: | http
event type: | push
delivery id: | d-1
event id: | 1
attempts: | 1
created: | 2026-11-30T12:00:00Z (1m30s ago)
finished: | 2026-11-30T11:00:00Z (1h2m ago)

last error:
  upstream answered 400 Bad Request

history:
  ATTEMPT | STARTED | DURATION | OUTCOME | STATUS | ERROR
  1 | 2026-11-30T10:59:59Z | 0.4 ms | dead | 400 | upstream answered 400 Bad Request

headers:
  Content-Type: application/json

payload (25 bytes, text):
{"ref":"refs/heads/main"}
`, d.githubHTTPDead)
			},
		},
		{
			name: "show a pending job with a binary payload",
			args: func(d adminData) []string { return []string{"show", fmt.Sprint(d.binary)} },
			want: func(d adminData, _ string) string {
				return fmt.Sprintf(`job %d: pending

source: | slack
target: | http
event type: | -
delivery id: | d-6
event id: | 6
attempts: | 0
created: | 2026-11-30T12:00:00Z (1m30s ago)
next attempt: | 2026-11-30T12:00:00Z (1m30s ago)

history:
  no attempts yet

headers:
  Content-Type: application/json

payload (4 bytes, base64, not UTF-8):
//4AAQ==
`, d.binary)
			},
		},
		{
			name: "replay one",
			args: func(d adminData) []string { return []string{"replay", "--id", fmt.Sprint(d.githubHTTPDead)} },
			want: func(d adminData, _ string) string {
				return fmt.Sprintf("replayed job %d: pending, due now\n", d.githubHTTPDead)
			},
		},
		{
			name: "replay all dead of one source",
			args: static("replay", "--all-dead", "--source", "github"),
			want: func(adminData, string) string { return "replayed 1 dead job (source github): pending, due now\n" },
		},
		{
			name: "replay all dead",
			args: static("replay", "--all-dead"),
			want: func(adminData, string) string { return "replayed 2 dead jobs: pending, due now\n" },
		},
		{
			name: "replay all dead with none matching",
			args: static("replay", "--all-dead", "--source", "github", "--target", "exec"),
			want: func(adminData, string) string { return "no dead jobs (source github, target exec) to replay\n" },
		},
		{
			name: "discard",
			args: func(d adminData) []string { return []string{"discard", fmt.Sprint(d.githubExecDone)} },
			want: func(d adminData, _ string) string { return fmt.Sprintf("discarded job %d\n", d.githubExecDone) },
		},
		{
			name: "purge with the app's retention",
			args: static("purge"),
			want: func(adminData, string) string {
				return "purged 1 done job that finished before 2026-11-29T12:01:30Z (older than 24h0m0s)\n"
			},
		},
		{
			name: "purge older than",
			args: static("purge", "--older-than", "3d"),
			want: func(adminData, string) string {
				return "purged 0 done jobs that finished before 2026-11-27T12:01:30Z (older than 72h0m0s)\n"
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, d := setupCLI(t)
			if got, want := squeeze(f.cliOK(t, tt.args(d)...)), tt.want(d, f.addr); got != want {
				t.Errorf("stdout:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func static(args ...string) func(adminData) []string { return func(adminData) []string { return args } }

// TestCLIEffects checks that the mutating subcommands changed the store,
// not only printed the right words.
func TestCLIEffects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		args  func(d adminData) []string
		check func(t *testing.T, f *cliFixture, d adminData)
	}{
		{
			name: "replay --id makes the job pending",
			args: func(d adminData) []string { return []string{"replay", "--id", fmt.Sprint(d.stripeHTTPDead)} },
			check: func(t *testing.T, f *cliFixture, d adminData) {
				wantStatus(t, f, d.stripeHTTPDead, queue.StatusPending)
				wantStatus(t, f, d.githubHTTPDead, queue.StatusDead)
			},
		},
		{
			name: "replay --all-dead --source leaves other sources dead",
			args: static("replay", "--all-dead", "--source", "stripe"),
			check: func(t *testing.T, f *cliFixture, d adminData) {
				wantStatus(t, f, d.stripeHTTPDead, queue.StatusPending)
				wantStatus(t, f, d.githubHTTPDead, queue.StatusDead)
			},
		},
		{
			name: "discard deletes the job",
			args: func(d adminData) []string { return []string{"discard", fmt.Sprint(d.githubHTTPDead)} },
			check: func(t *testing.T, f *cliFixture, d adminData) {
				if _, err := f.store.GetJob(t.Context(), d.githubHTTPDead); err == nil {
					t.Errorf("job %d still there", d.githubHTTPDead)
				}
			},
		},
		{
			name: "discard --source --status deletes the matching jobs",
			args: static("discard", "--source", "stripe", "--status", "dead"),
			check: func(t *testing.T, f *cliFixture, d adminData) {
				if _, err := f.store.GetJob(t.Context(), d.stripeHTTPDead); err == nil {
					t.Errorf("job %d still there", d.stripeHTTPDead)
				}
				wantStatus(t, f, d.githubHTTPDead, queue.StatusDead)
			},
		},
		{
			name: "purge deletes the old done job only",
			args: static("purge"),
			check: func(t *testing.T, f *cliFixture, d adminData) {
				if _, err := f.store.GetJob(t.Context(), d.githubExecDone); err == nil {
					t.Errorf("done job %d still there", d.githubExecDone)
				}
				wantStatus(t, f, d.githubHTTPDead, queue.StatusDead)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, d := setupCLI(t)
			if res := f.cli(t, tt.args(d)...); res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			tt.check(t, f, d)
		})
	}
}

func wantStatus(t *testing.T, f *cliFixture, id int64, want queue.Status) {
	t.Helper()
	if got := f.getJob(t, id).Status; got != want {
		t.Errorf("job %d is %s, want %s", id, got, want)
	}
}

func TestCLIJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		args  func(d adminData) []string
		check func(t *testing.T, d adminData, stdout []byte)
	}{
		{
			name: "stats",
			args: static("stats", "--json"),
			check: func(t *testing.T, d adminData, out []byte) {
				var st adminapi.StatsResponse
				mustJSON(t, out, &st)
				if len(st.Counts) != 6 || st.Events != 6 || st.OldestPending != 90*time.Second {
					t.Errorf("stats = %+v", st)
				}
			},
		},
		{
			name: "list",
			args: static("list", "--status", "dead", "--json"),
			check: func(t *testing.T, d adminData, out []byte) {
				var page queue.JobPage
				mustJSON(t, out, &page)
				if got := jobIDs(page.Jobs); !slices.Equal(got, []int64{d.stripeHTTPDead, d.githubHTTPDead}) {
					t.Errorf("ids = %v", got)
				}
			},
		},
		{
			name: "show",
			args: func(d adminData) []string { return []string{"show", fmt.Sprint(d.githubHTTPDead), "--json"} },
			check: func(t *testing.T, d adminData, out []byte) {
				var j adminapi.JobResponse
				mustJSON(t, out, &j)
				if j.PayloadText != `{"ref":"refs/heads/main"}` || len(j.History) != 1 {
					t.Errorf("job = %+v", j)
				}
				if !bytes.Contains(out, []byte(`"status":400`)) || j.History[0].Code != queue.CodeOf(400) {
					t.Errorf("history %s: want the upstream's 400 as its status", out)
				}
			},
		},
		{
			name: "replay all dead",
			args: static("replay", "--all-dead", "--json"),
			check: func(t *testing.T, d adminData, out []byte) {
				if string(out) != "{\"replayed\":2}\n" {
					t.Errorf("stdout = %q", out)
				}
			},
		},
		{
			name: "discard",
			args: func(d adminData) []string { return []string{"discard", fmt.Sprint(d.githubExecDone), "--json"} },
			check: func(t *testing.T, d adminData, out []byte) {
				if want := fmt.Sprintf("{\"id\":%d,\"discarded\":true}\n", d.githubExecDone); string(out) != want {
					t.Errorf("stdout = %q, want %q", out, want)
				}
			},
		},
		{
			name: "purge",
			args: static("purge", "--json"),
			check: func(t *testing.T, d adminData, out []byte) {
				var r adminapi.PurgeResponse
				mustJSON(t, out, &r)
				if r.Purged != 1 {
					t.Errorf("purge = %+v", r)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, d := setupCLI(t)
			tt.check(t, d, []byte(f.cliOK(t, tt.args(d)...)))
		})
	}
}

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("stdout is not the API's JSON: %v\n%s", err, b)
	}
}

func TestCLIErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		args        func(d adminData) []string
		noApp       bool
		wantStderr  string
		wantRequest bool // whether the CLI should have reached the API
	}{
		{name: "show unknown job", args: static("show", "999999"), wantStderr: "Error: job 999999 not found (HTTP 404)\n", wantRequest: true},
		{name: "discard unknown job", args: static("discard", "999999"), wantStderr: "Error: job 999999 not found (HTTP 404)\n", wantRequest: true},
		{
			name: "replay a pending job", args: func(d adminData) []string { return []string{"replay", "--id", fmt.Sprint(d.githubHTTPPending)} },
			wantStderr: "is not dead; only dead jobs can be replayed (HTTP 409)", wantRequest: true,
		},
		{
			name: "discard a running job", args: func(d adminData) []string { return []string{"discard", fmt.Sprint(d.stripeHTTPRunning)} },
			wantStderr: "is running; wait for the attempt to finish (HTTP 409)", wantRequest: true,
		},
		{name: "no webhook app", args: static("stats"), noApp: true, wantStderr: "Error: no webhook app is running", wantRequest: true},
		{name: "limit out of range", args: static("list", "--limit", "5000"), wantStderr: "invalid --limit: must be a whole number from 1 to 1000, not \"5000\" (HTTP 400)", wantRequest: true},
		{name: "bad status", args: static("list", "--status", "failed"), wantStderr: "invalid --status: must be pending, blocked, running, done or dead", wantRequest: true},
		{name: "show without id", args: static("show"), wantStderr: "show needs a job id"},
		{name: "show a non-number", args: static("show", "../../config"), wantStderr: `job id must be a positive number, not "../../config"`},
		{name: "discard a negative id", args: static("discard", "-3"), wantStderr: "unknown shorthand flag"},
		{name: "replay with neither flag", args: static("replay"), wantStderr: "say which jobs to replay"},
		{name: "replay with both flags", args: static("replay", "--id", "1", "--all-dead"), wantStderr: "use either --id or --all-dead, not both"},
		{name: "replay --id with a filter", args: static("replay", "--id", "1", "--source", "github"), wantStderr: "--source and --target narrow --all-dead"},
		{name: "replay ids with a filter", args: static("replay", "42", "--source", "github"), wantStderr: "give job ids, or --all-dead"},
		{name: "purge with a bad duration", args: static("purge", "--older-than", "soon"), wantStderr: `--older-than must be a positive duration such as 72h or 7d, not "soon"`},
		{name: "unknown subcommand", args: static("retry", "--id", "4"), wantStderr: `unknown subcommand "retry"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, d := setupCLI(t)
			if tt.noApp {
				f.cfg.Store(nil)
			}
			res := f.cli(t, tt.args(d)...)
			if res.code != 1 {
				t.Errorf("exit code = %d, want 1", res.code)
			}
			if res.stdout != "" {
				t.Errorf("stdout = %q, want nothing", res.stdout)
			}
			if !strings.Contains(res.stderr, tt.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", res.stderr, tt.wantStderr)
			}
			if got := f.requests.Load() > 0; got != tt.wantRequest {
				t.Errorf("reached the API: %v, want %v", got, tt.wantRequest)
			}
		})
	}
}

// TestCLIAdminAddress checks that the CLI finds the admin endpoint the way
// `caddy reload` does: --address, else the admin listener of --config (JSON,
// or adapted with --adapter) or of ./Caddyfile; also over a unix socket.
func TestCLIAdminAddress(t *testing.T) {
	tests := []struct {
		name string
		args func(t *testing.T, f *cliFixture) []string
	}{
		{
			name: "--address",
			args: func(t *testing.T, f *cliFixture) []string { return []string{"--address", f.addr} },
		},
		{
			name: "--config JSON",
			args: func(t *testing.T, f *cliFixture) []string {
				path := filepath.Join(t.TempDir(), "caddy.json")
				writeFile(t, path, fmt.Sprintf(`{"admin": {"listen": %q}}`, f.addr))
				return []string{"--config", path}
			},
		},
		{
			name: "--config Caddyfile --adapter caddyfile",
			args: func(t *testing.T, f *cliFixture) []string {
				path := filepath.Join(t.TempDir(), "site.conf")
				writeFile(t, path, fmt.Sprintf("{\n\tadmin %s\n}\n", f.addr))
				return []string{"-c", path, "-a", "caddyfile"}
			},
		},
		{
			name: "Caddyfile in the working directory",
			args: func(t *testing.T, f *cliFixture) []string {
				dir := t.TempDir()
				writeFile(t, filepath.Join(dir, "Caddyfile"), fmt.Sprintf("{\n\tadmin %s\n}\n", f.addr))
				t.Chdir(dir)
				return nil
			},
		},
		{
			name: "--address wins over --config",
			args: func(t *testing.T, f *cliFixture) []string {
				path := filepath.Join(t.TempDir(), "caddy.json")
				writeFile(t, path, `{"admin": {"listen": "127.0.0.1:1"}}`)
				return []string{"--config", path, "--address", f.addr}
			},
		},
		{
			name: "unix socket",
			args: func(t *testing.T, f *cliFixture) []string {
				// Short path: unix socket names are limited to ~100 bytes.
				dir, err := os.MkdirTemp("", "wh")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.RemoveAll(dir) })
				sock := filepath.Join(dir, "admin.sock")
				ln, err := net.Listen("unix", sock)
				if err != nil {
					t.Fatal(err)
				}
				srv := httptest.NewUnstartedServer(f.countRequests(f.handler))
				srv.Listener.Close()
				srv.Listener = ln
				srv.Start()
				t.Cleanup(srv.Close)
				return []string{"--address", "unix/" + sock}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := setupCLI(t)
			// runCLI directly: the fixture's cli helper would add --address.
			res := runCLI(t, adminT0, append([]string{"replay", "--all-dead"}, tt.args(t, f)...)...)
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			if res.stdout != "replayed 2 dead jobs: pending, due now\n" {
				t.Errorf("stdout = %q", res.stdout)
			}
			if f.requests.Load() != 1 {
				t.Errorf("requests = %d, want 1", f.requests.Load())
			}
		})
	}
}

func TestCLIInvalidAddress(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, address string
	}{
		{name: "a port range", address: "localhost:2019-2020"},
		{name: "a host no URL can hold", address: "nonsense::"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runCLI(t, adminT0, "stats", "--address", tt.address)
			want := "invalid admin address " + tt.address + ": the address must be one host and port, or a socket"
			if res.code != 1 || !strings.Contains(res.stderr, want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", res.code, res.stderr, want)
			}
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCLIUnreachable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		handler http.Handler // nil: nothing listens
		want    string
	}{
		{name: "nothing listening", want: "(is Caddy running? see --address and --config)"},
		{name: "a Caddy without the plugin", handler: adminWithoutPlugin(), want: "has no webhook endpoints: is this Caddy built with the webhook plugin? (HTTP 404: 404 page not found)"},
		{
			// A Caddy site answers a path no route takes with an empty 200.
			name:    "a site's port, empty answers",
			handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
			want:    `is not Caddy's admin API (it answered HTTP 200 with "", and GET /config/ HTTP 200): --address takes the admin endpoint (the ` + "`admin`" + ` global option, default localhost:2019), not a site's address`,
		},
		{
			name:    "a site's port, 404 pages",
			handler: http.NotFoundHandler(),
			want:    `is not Caddy's admin API (it answered HTTP 404, and GET /config/ HTTP 404)`,
		},
		{
			name: "a non-JSON error",
			handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "bad gateway", http.StatusBadGateway)
			}),
			want: "HTTP 502: bad gateway",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var addr string
			if tt.handler == nil {
				addr = testutil.FreeAddr(t) // nothing listens there
			} else {
				srv := httptest.NewServer(tt.handler)
				t.Cleanup(srv.Close)
				addr = srv.Listener.Addr().String()
			}
			res := runCLI(t, adminT0, "stats", "--address", addr)
			if res.code != 1 || !strings.Contains(res.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", res.code, res.stderr, tt.want)
			}
		})
	}
}

// adminWithoutPlugin answers as Caddy's admin API in a build without the
// plugin: its config as JSON, and 404 for /webhook/.
func adminWithoutPlugin() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /config/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"apps":{}}`))
	})
	return mux
}

// TestCLIRegistered checks the command Caddy's CLI will offer: `caddy
// webhook` with its six subcommands and the admin address flags.
func TestCLIRegistered(t *testing.T) {
	cmd, ok := caddycmd.Commands()["webhook"]
	if !ok {
		t.Fatal("caddy webhook is not registered")
	}
	c := &cobra.Command{Use: "webhook"}
	cmd.CobraFunc(c)
	var names []string
	for _, sub := range c.Commands() {
		names = append(names, sub.Name())
		if sub.Long == "" || sub.Example == "" {
			t.Errorf("%s: no long help or example", sub.Name())
		}
	}
	if want := []string{"discard", "events", "list", "pause", "purge", "rekey", "replay", "resend", "resume", "rules", "send", "show", "sign", "stats", "tail"}; !slices.Equal(names, want) {
		t.Errorf("subcommands = %v, want %v", names, want)
	}
	for _, flag := range []string{"address", "config", "adapter", "json"} {
		if c.PersistentFlags().Lookup(flag) == nil {
			t.Errorf("no --%s flag", flag)
		}
	}
}

// TestCLIOneTool: the subcommands answer alike — ids as arguments, the
// statuses and outcome words they take, unknown names refused, hints that
// can be pasted, and help that points to this project's docs.
func TestCLIOneTool(t *testing.T) {
	tests := []struct {
		name     string
		args     func(d adminData) []string
		wantCode int
		want     func(d adminData, addr string) []string // substrings of stdout+stderr
		check    func(t *testing.T, f *cliFixture, d adminData)
	}{
		{
			name: "replay/two ids",
			args: func(d adminData) []string {
				return []string{"replay", fmt.Sprint(d.githubHTTPDead), fmt.Sprint(d.stripeHTTPDead)}
			},
			want: func(d adminData, _ string) []string {
				return []string{fmt.Sprintf("replayed job %d: pending, due now\nreplayed job %d: pending, due now\n", d.githubHTTPDead, d.stripeHTTPDead)}
			},
			check: func(t *testing.T, f *cliFixture, d adminData) {
				wantStatus(t, f, d.githubHTTPDead, queue.StatusPending)
				wantStatus(t, f, d.stripeHTTPDead, queue.StatusPending)
			},
		},
		{
			name:     "replay/ids and --all-dead",
			args:     static("replay", "1", "--all-dead"),
			wantCode: 1,
			want: func(adminData, string) []string {
				return []string{"give job ids, or --all-dead [--source <name>] [--target <name>]; not both"}
			},
		},
		{
			name:     "replay/a non-number",
			args:     static("replay", "1", "x"),
			wantCode: 1,
			want:     func(adminData, string) []string { return []string{`job id must be a positive number, not "x"`} },
		},
		{
			name: "replay/stops at a job that is not dead",
			args: func(d adminData) []string {
				return []string{"replay", fmt.Sprint(d.githubHTTPPending), fmt.Sprint(d.githubHTTPDead)}
			},
			wantCode: 1,
			want: func(adminData, string) []string {
				return []string{"is not dead; only dead jobs can be replayed (HTTP 409)"}
			},
			check: func(t *testing.T, f *cliFixture, d adminData) {
				wantStatus(t, f, d.githubHTTPDead, queue.StatusDead)
			},
		},
		{
			name: "help/stats lists blocked",
			args: static("stats", "--help"),
			want: func(adminData, string) []string { return []string{"(pending,\nblocked, running, done, dead)"} },
		},
		{
			name:     "tail/an unknown outcome",
			args:     static("tail", "--outcome", "nonsense"),
			wantCode: 1,
			want: func(adminData, string) []string {
				return []string{`invalid --outcome: must be an outcome word (accepted, duplicate, no_target, bad_signature`, `delivered, retry, dead, lease_lost, handed_back), not "nonsense" (HTTP 400)`}
			},
		},
		{
			name:     "list/an unknown source",
			args:     static("list", "--source", "nosuch"),
			wantCode: 1,
			want: func(adminData, string) []string {
				return []string{`invalid --source: "nosuch" is not a source of the running config, and no job has it (HTTP 400)`}
			},
		},
		{
			name: "list/a source with jobs but no route",
			args: static("list", "--source", "github", "--target", "gone"),
			want: func(adminData, string) []string { return []string{"no jobs\n"} },
		},
		{
			name: "stats/hints name the one source with dead jobs, and the address",
			args: func(d adminData) []string { return []string{"stats"} },
			check: func(t *testing.T, f *cliFixture, d adminData) {
				t.Helper()
				// Both dead jobs of stripe and github; after one is replayed, the
				// hint names the source left.
				if res := f.cli(t, "replay", fmt.Sprint(d.stripeHTTPDead)); res.code != 0 {
					t.Fatalf("replay: %s", res.stderr)
				}
				want := "1 dead: see them with `caddy webhook list --status dead --source github --address " + f.addr +
					"`, retry with `caddy webhook replay --all-dead --source github --address " + f.addr + "`"
				if out := f.cliOK(t, "stats"); !strings.Contains(out, want) {
					t.Errorf("stats lacks %q:\n%s", want, out)
				}
			},
		},
		{
			name: "help/the webhook command ends with this project's docs",
			args: static("--help"),
			want: func(adminData, string) []string {
				return []string{"Full documentation is available at:\nhttps://github.com/caddywebhook/caddywebhook/tree/main/docs\n"}
			},
		},
		{
			name: "help/a subcommand ends with this project's docs",
			args: static("replay", "--help"),
			want: func(adminData, string) []string {
				return []string{"caddy webhook replay 42 43 57", "https://github.com/caddywebhook/caddywebhook/tree/main/docs\n"}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, d := setupCLI(t)
			res := f.cli(t, tt.args(d)...)
			if res.code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr %q", res.code, tt.wantCode, res.stderr)
			}
			if tt.want != nil {
				for _, w := range tt.want(d, f.addr) {
					if !strings.Contains(res.stdout+res.stderr, w) {
						t.Errorf("output lacks %q:\n%s%s", w, res.stdout, res.stderr)
					}
				}
			}
			if strings.Contains(res.stdout, "caddyserver.com/docs/command-line") {
				t.Errorf("help points to Caddy's docs:\n%s", res.stdout)
			}
			if tt.check != nil {
				tt.check(t, f, d)
			}
		})
	}
}
