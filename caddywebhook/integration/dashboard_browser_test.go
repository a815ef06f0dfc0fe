package integration

// The dashboard in a real browser: a Caddy with the plugin serves
// webhook_dashboard behind basic_auth, and headless Chromium, driven over
// the DevTools protocol with chromedp, uses it as an operator would. Run it
// alone with
//
//	go test ./caddywebhook/integration/ -run TestDashboard -v
//
// It needs Chromium (Debian: apt-get install chromium; or
// CADDYWEBHOOK_CHROMIUM=/path/to/chrome). Without one it is skipped, except
// with CI=true, where it fails. The screenshots go to the suite directory,
// kept when a test fails; CADDYWEBHOOK_DASHBOARD_SHOTS=1 writes them to
// docs/img instead, for the README.

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// The dashboard's basic_auth account.
const (
	dashUser     = "ops"
	dashPassword = "dashboard-E2E-password"
)

func init() {
	forbidInLogs(kindSecret, dashPassword, base64.StdEncoding.EncodeToString([]byte(dashUser+":"+dashPassword)))
}

// longID is a delivery id as long as the sha256: body hash a receiver
// makes for a sender without ids: 71 characters, which must not widen the
// jobs table.
const longID = "sha256:3f9a1c0e7b2d4a6f8e1c3b5d7f9a0c2e4b6d8f0a1c3e5b7d9f1a3c5e7b9d0f2a"

// xssBody is a payload whose text is markup that would run if the page put
// it into the document as HTML.
var xssBody = []byte(`{"id":"dash-xss","type":"issues","note":"<script>window.__xss=1</script><img src=x onerror=\"window.__xss=2\">` + bodyMarker + `"}`)

func TestDashboard(t *testing.T) {
	if testing.Short() {
		t.Skip("the browser test builds and runs Caddy and Chromium; skipped with -short")
	}
	chrome := chromiumPath(t)

	// dash-dead-* fail with a permanent 400 the first time and succeed
	// after; everything else succeeds at once.
	up := newUpstream(t, func(_ *http.Request, key string, n int) int {
		if strings.HasPrefix(key, "dash-dead-") && n == 1 {
			return http.StatusBadRequest
		}
		return http.StatusOK
	})
	c := newCaddy(t)
	// Build Caddy first: caddyCmd's timeout is for the command alone. The
	// lowest cost: the default (14) takes seconds per hash on a busy CI.
	caddyBinary(t)
	hash, err := c.caddyCmd(t, "hash-password", "--plaintext", dashPassword, "--bcrypt-cost", "4")
	if err != nil {
		t.Fatalf("caddy hash-password: %v\n%s", err, hash)
	}
	// stripe's target refuses connections: its jobs stay pending, retrying.
	c.start(t, caddyConfig{Site: githubSite(up.URL("/github")) +
		receiver("/hooks/stripe", "stripe", "stripe", "{env.E2E_STRIPE_SECRET}",
			toHTTP(fmt.Sprintf("http://127.0.0.1:%d/billing", freePort(t)), "name billing", "filter "+dashFilter)) +
		"\thandle_path /webhooks/* {\n\t\tbasic_auth {\n\t\t\t" + dashUser + " " + strings.TrimSpace(hash) +
		"\n\t\t}\n\t\twebhook_dashboard\n\t}\n"})

	for _, id := range []string{"dash-ok-1", "dash-ok-2", "dash-dead-1", "dash-dead-2", longID} {
		sendGitHub(t, c, id, "push")
	}
	if status, resp := post(t, c.URL("/hooks/github"), signGitHub(githubSecret, "dash-xss", "issues", xssBody), xssBody); status != http.StatusAccepted {
		t.Fatalf("POST dash-xss: %d %s", status, resp)
	}
	for _, id := range []string{"st-1", "st-2"} {
		body := payload(id, "invoice.paid")
		if status, resp := post(t, c.URL("/hooks/stripe"), signStripe(stripeSecret, time.Now(), body), body); status != http.StatusAccepted {
			t.Fatalf("POST %s: %d %s", id, status, resp)
		}
	}
	for _, id := range []string{"dash-ok-1", "dash-ok-2", "dash-xss", longID} {
		c.waitJobs(t, "github", id, "done")
	}
	c.waitJobs(t, "github", "dash-dead-1", "dead")
	c.waitJobs(t, "github", "dash-dead-2", "dead")
	dead1 := jobID(t, c, "github", "dash-dead-1")
	dead2 := jobID(t, c, "github", "dash-dead-2")
	xss := jobID(t, c, "github", "dash-xss")

	b := newBrowser(t, chrome)
	dash := c.URL("/webhooks/")

	// Each step builds on the one before, in one tab, as an operator would.
	t.Run("overview_counts", func(t *testing.T) {
		b.do(t, chromedp.Navigate(dash))
		b.waitJS(t, "github → http shows 4 done, 2 dead, 0 pending, 0 running", `(() => {
			const r = document.querySelector('#overview-table tr[data-source="github"][data-target="http"]');
			const n = (s) => r && r.querySelector('.c-' + s).textContent;
			return !!r && n('done') === '4' && n('dead') === '2' && n('pending') === '0' && n('running') === '0';
		})()`)
		b.waitJS(t, "stripe → billing is listed", `!!document.querySelector('#overview-table tr[data-source="stripe"][data-target="billing"]')`)
		b.waitJS(t, "the live indicator is on", `document.getElementById('live').className === 'live ok'`)
	})

	t.Run("filter_by_status", func(t *testing.T) {
		b.do(t, chromedp.Click(chromedp.CSS(`nav a[data-nav="jobs"]`)))
		b.waitJS(t, "the unfiltered list has the 8 jobs", `document.querySelectorAll('#jobs-list tbody tr').length === 8`)
		b.do(t,
			chromedp.SetValue(chromedp.CSS(`#jobs-filters select[name="status"]`), "dead"),
			chromedp.Click(chromedp.CSS(`#jobs-filters button[type="submit"]`)))
		b.waitJS(t, "only the 2 dead jobs are listed", `(() => {
			const rows = [...document.querySelectorAll('#jobs-list tbody tr')];
			return location.hash === '#/jobs?status=dead' && rows.length === 2 &&
				rows.every((r) => r.dataset.status === 'dead') &&
				rows.map((r) => r.dataset.delivery).sort().join(',') === 'dash-dead-1,dash-dead-2';
		})()`)
	})

	t.Run("filter_by_delivery_id", func(t *testing.T) {
		b.do(t, chromedp.Click(chromedp.CSS(`#jobs-filters button.secondary`)))
		b.waitJS(t, "the filters are cleared", `location.hash === '#/jobs' && document.querySelectorAll('#jobs-list tbody tr').length === 8`)
		b.do(t,
			// A delivery id is unique per source, so the filter takes both.
			chromedp.SetValue(chromedp.CSS(`#jobs-filters input[name="source"]`), "github"),
			chromedp.SetValue(chromedp.CSS(`#jobs-filters input[name="delivery_id"]`), "dash-ok-2"),
			chromedp.Click(chromedp.CSS(`#jobs-filters button[type="submit"]`)))
		b.waitJS(t, "only dash-ok-2 is listed", `(() => {
			const rows = [...document.querySelectorAll('#jobs-list tbody tr')];
			return rows.length === 1 && rows[0].dataset.delivery === 'dash-ok-2';
		})()`)
	})

	t.Run("events_list", func(t *testing.T) {
		b.do(t, chromedp.Navigate(dash+"#/events"))
		b.waitJS(t, "the 8 events are listed, each with its job", `(() => {
			const rows = [...document.querySelectorAll('#events-list tbody tr')];
			return rows.length === 8 && rows.every((r) => r.querySelector('.jobchip'));
		})()`)
	})

	t.Run("open_job", func(t *testing.T) {
		b.do(t, chromedp.Navigate(dash+"#/jobs?status=dead"))
		b.waitJS(t, "the dead jobs are listed", `document.querySelectorAll('#jobs-list tbody tr').length === 2`)
		b.do(t, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#jobs-list tr[data-id="%d"] td.c-status`, dead1))))
		b.waitJS(t, "the job's detail, its 400 attempt and its payload", fmt.Sprintf(`(() => {
			const h = document.querySelectorAll('#history tbody tr');
			const p = document.getElementById('payload');
			return location.hash === '#/jobs/%d' && document.getElementById('job-status').textContent === 'dead' &&
				h.length === 1 && h[0].children[4].textContent === '400' &&
				!!p && p.textContent.includes('\n  "id": "dash-dead-1"');
		})()`, dead1))
		b.do(t, chromedp.Click(chromedp.CSS(`button.tab[data-mode="raw"]`)))
		raw := b.eval(t, `document.getElementById('payload').textContent`)
		if want := string(payload("dash-dead-1", "push")); raw != want {
			t.Errorf("raw payload = %q, want %q", raw, want)
		}
		b.do(t, chromedp.Click(chromedp.CSS(`button.tab[data-mode="pretty"]`)))
		headers := b.eval(t, `document.getElementById('headers').textContent`)
		if !strings.Contains(headers, "application/json") {
			t.Errorf("stored headers %q lack the content type", headers)
		}
	})

	t.Run("replay_dead_job", func(t *testing.T) {
		// A reload would lose this mark.
		b.do(t, chromedp.Evaluate[chromedp.Void](`window.__noReload = 'still here'`))
		b.do(t, chromedp.Click(chromedp.CSS(`#job button[data-action="replay"]`)))
		b.waitJS(t, "the job turns done without a reload", `document.getElementById('job-status').textContent === 'done' &&
			window.__noReload === 'still here' && document.querySelectorAll('#history tbody tr').length === 2`)
		up.waitAnswered(t, "dash-dead-1", http.StatusOK, 1)
		// The STATUS column has the upstream's answer of every attempt, the
		// delivered one's 200 as well as the 400, and each duration is
		// shown to a fraction of a millisecond, not rounded to 0ms.
		got := b.eval(t, `[...document.querySelectorAll('#history tbody tr')].map((r) =>
			r.children[3].textContent + ' ' + r.children[4].textContent + ' ' + /^(< )?\d+(\.\d+)? m?s$/.test(r.children[2].textContent)).join(', ')`)
		if want := "dead 400 true, delivered 200 true"; got != want {
			t.Errorf("attempts (outcome, status, duration shown) = %q, want %q", got, want)
		}
		b.shot(t, "job")
	})

	t.Run("resend_done_job", func(t *testing.T) {
		before := len(up.forKey("dash-dead-1"))
		b.do(t, chromedp.Click(chromedp.CSS(`#job button[data-action="resend"]`)))
		b.waitJS(t, "the resent job is delivered again and done", `document.getElementById('job-status').textContent === 'done' &&
			document.querySelectorAll('#history tbody tr').length === 3`)
		up.waitFor(t, "a third delivery of dash-dead-1", func(ds []delivery) bool {
			n := 0
			for _, d := range ds {
				if d.Key == "dash-dead-1" {
					n++
				}
			}
			return n > before
		})
	})

	t.Run("cross_origin_post_refused", func(t *testing.T) {
		target := c.URL(fmt.Sprintf("/webhooks/api/jobs/%d/replay", dead2))
		attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<form id="f" method="POST" action="%s"></form><script>document.getElementById("f").submit()</script>`, target)
		}))
		defer attacker.Close()
		// localhost is another site than 127.0.0.1; the browser sends the
		// basic_auth credentials along, as it would for a logged-in operator.
		b.do(t, chromedp.Navigate(strings.Replace(attacker.URL, "127.0.0.1", "localhost", 1)))
		b.waitJS(t, "Caddy answers the forged POST with the refusal", `document.body && document.body.textContent.includes('cross-origin request refused')`)
		uri := strings.TrimPrefix(target, "http://"+c.HTTPAddr)
		if es := c.waitAccessLog(t, uri, 1); es[len(es)-1].Status != http.StatusForbidden {
			t.Errorf("the forged POST got %d, want 403", es[len(es)-1].Status)
		}
		if js := c.jobsFor(t, "github", "dash-dead-2"); len(js) != 1 || js[0].Status != "dead" {
			t.Errorf("after the forged replay the job is %s, want still dead", rowsString(js))
		}
	})

	t.Run("script_payload_as_text", func(t *testing.T) {
		b.do(t, chromedp.Navigate(dash+"#/jobs/"+strconv.FormatInt(xss, 10)))
		b.waitJS(t, "the payload is shown", `(() => {
			const p = document.getElementById('payload');
			return !!p && p.textContent.includes('<script>window.__xss=1</script>');
		})()`)
		b.do(t, chromedp.Click(chromedp.CSS(`button.tab[data-mode="raw"]`)))
		if got := b.eval(t, `document.getElementById('payload').textContent`); got != string(xssBody) {
			t.Errorf("raw payload = %q, want the stored body as text", got)
		}
		if got := b.eval(t, `String(window.__xss) + ' ' + document.querySelectorAll('#job script, #job img').length`); got != "undefined 0" {
			t.Errorf("window.__xss and markup in the job = %q, want %q: the payload ran as HTML", got, "undefined 0")
		}
		b.shot(t, "payload-as-text")
		b.do(t, chromedp.Click(chromedp.CSS(`button.tab[data-mode="pretty"]`)))
	})

	// Back on the overview, the page has seen the replay's delivery since
	// its first visit: the counts moved and the rate is measured.
	t.Run("overview_updates", func(t *testing.T) {
		b.do(t, chromedp.Navigate(dash+"#/"))
		b.waitJS(t, "github → http shows 5 done (with the replayed job) and 1 dead", `(() => {
			const r = document.querySelector('#overview-table tr[data-source="github"][data-target="http"]');
			const n = (s) => r && r.querySelector('.c-' + s).textContent;
			return !!r && n('done') === '5' && n('dead') === '1' && r.querySelector('.c-rate').textContent !== '—';
		})()`)
		// "Replay 1 dead" and "Pause" stand apart.
		if gap := b.eval(t, `(() => {
			const r = document.querySelector('#overview-table tr[data-source="github"][data-target="http"]');
			const a = r.querySelector('button[data-action="replay-dead"]').getBoundingClientRect();
			const p = r.querySelector('button[data-action="pause"]').getBoundingClientRect();
			return String(Math.round(p.left - a.right));
		})()`); gap == "0" || strings.HasPrefix(gap, "-") {
			t.Errorf("the Replay and Pause buttons are %s px apart, want a gap", gap)
		}
		// Every column, the lag's and the buttons included, fits a 1200 px
		// window without a scrollbar.
		b.do(t, chromedp.EmulateViewport(1200, 760))
		if fit := b.eval(t, `(() => {
			const box = document.getElementById('overview-table');
			const w = document.documentElement.clientWidth;
			const over = [box, ...box.querySelectorAll('table')].filter((e) => e.scrollWidth > e.clientWidth || e.getBoundingClientRect().right > w);
			return over.length === 0 ? 'fits' : over.map((e) => e.tagName + ' right ' + e.getBoundingClientRect().right + ' scroll ' + e.scrollWidth + '/' + e.clientWidth).join(', ') + ', window ' + w;
		})()`); fit != "fits" {
			t.Errorf("the overview does not fit 1200 px: %s", fit)
		}
		b.shot(t, "overview")
	})

	// A page opened with the credentials in its URL, which the browser
	// refuses to fetch from, still reaches the API; and when a fetch fails,
	// the nav bar says what failed, inside the bar.
	t.Run("offline_message", func(t *testing.T) {
		withCreds := strings.Replace(dash, "http://", "http://"+dashUser+":"+dashPassword+"@", 1)
		b.do(t, chromedp.Navigate(withCreds+"#/"))
		b.waitJS(t, "the page opened with credentials in its URL is live", `document.getElementById('live').className === 'live ok'`)
		b.do(t, chromedp.Evaluate[chromedp.Void](`window.__fetch = window.fetch; window.fetch = () => Promise.reject(new TypeError(
			"Failed to execute 'fetch' on 'Window': Request cannot be constructed from a URL that includes credentials: api/stats"))`))
		b.waitJS(t, "the nav bar says the browser refused the request, within the bar", `(() => {
			const l = document.getElementById('live'), bar = document.querySelector('header.top').getBoundingClientRect();
			const r = l.getBoundingClientRect();
			return l.className === 'live down' && l.textContent.startsWith('offline · GET stats: the browser refused the request') &&
				l.title.includes('includes credentials') && r.right <= bar.right && r.left >= bar.left && r.bottom <= bar.bottom;
		})()`)
		b.look(t, "offline")
		b.do(t, chromedp.Evaluate[chromedp.Void](`window.fetch = window.__fetch`))
		b.waitJS(t, "the page is live again", `document.getElementById('live').className === 'live ok'`)
	})

	// Pause a target from its overview row: an event received meanwhile
	// waits, pending and uncharged; Resume delivers it.
	t.Run("pause_resume", func(t *testing.T) {
		row := `#overview-table tr[data-source="github"][data-target="http"]`
		b.do(t, chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`))
		b.do(t, chromedp.Click(chromedp.CSS(row+` button[data-action="pause"]`)))
		b.waitJS(t, "the row shows paused and offers Resume", `(() => {
			const r = document.querySelector('`+row+`');
			return !!r && !!r.querySelector('.badge.s-paused') && !!r.querySelector('button[data-action="resume"]');
		})()`)
		sendGitHub(t, c, "dash-paused-1", "push")
		b.waitJS(t, "the event waits as pending", `(() => {
			const r = document.querySelector('`+row+`');
			return !!r && r.querySelector('.c-pending').textContent === '1';
		})()`)
		if js := c.jobsFor(t, "github", "dash-paused-1"); len(js) != 1 || js[0].Status != "pending" || js[0].Attempts != 0 {
			t.Errorf("while paused the job is %s, want pending with no attempt", rowsString(js))
		}
		if ds := up.forKey("dash-paused-1"); len(ds) != 0 {
			t.Errorf("dash-paused-1 reached the upstream while paused: %s", summarize(ds))
		}
		// The lag stays on one line beside the Flow column.
		if lines := b.eval(t, `(() => {
			const r = document.createRange();
			r.selectNodeContents(document.querySelector('`+row+` .c-lag'));
			return String(new Set([...r.getClientRects()].map((x) => Math.round(x.top))).size);
		})()`); lines != "1" {
			t.Errorf("the lag cell takes %s lines, want 1", lines)
		}
		b.shot(t, "paused")
		b.do(t, chromedp.Click(chromedp.CSS(row+` button[data-action="resume"]`)))
		up.waitAnswered(t, "dash-paused-1", http.StatusOK, 1)
		b.waitJS(t, "the row is no longer paused and counts 5 done", `(() => {
			const r = document.querySelector('`+row+`');
			return !!r && !r.querySelector('.badge.s-paused') && !!r.querySelector('button[data-action="pause"]') &&
				r.querySelector('.c-done').textContent === '6';
		})()`)
	})

	// The job and event pages say which target's filter took the event,
	// as text: the filter's own markup does not run.
	t.Run("filter_took_the_event", func(t *testing.T) {
		st := jobID(t, c, "stripe", "st-1")
		b.do(t, chromedp.Navigate(dash+"#/jobs/"+strconv.FormatInt(st, 10)))
		b.waitJS(t, "the job page shows billing's filter", `(() => {
			const f = document.getElementById('job-filter');
			return !!f && f.textContent === `+strconv.Quote(dashFilter)+` && f.children.length === 0;
		})()`)
		b.do(t, chromedp.Click(chromedp.CSS(`#job a[href^="#/events/"]`)))
		b.waitJS(t, "the event page names billing and its filter", `(() => {
			const li = document.querySelector('#event-filters li');
			return !!li && li.textContent === 'billing: ' + `+strconv.Quote(dashFilter)+` && !document.querySelector('#event-filters img');
		})()`)
		// The event's jobs carry no next attempt or last error: the table
		// leaves those columns out rather than show them empty.
		if heads := b.eval(t, `[...document.querySelectorAll('#jobs-list thead th')].map((th) => th.textContent).join(',')`); strings.Contains(heads, "Last error") || !strings.Contains(heads, "Attempts") {
			t.Errorf("the event page's jobs table has the columns %s", heads)
		}
		b.shot(t, "event-filter")
	})

	// Search by content on the events page: the matching events, oldest
	// first; the count of what a replay would queue; "Replay these N"
	// asks with N, does nothing when declined, and queues them when
	// confirmed.
	t.Run("search_and_replay", func(t *testing.T) {
		b.do(t, chromedp.Navigate(dash+"#/events"))
		b.waitJS(t, "the events page has the search box", `!!document.querySelector('#events-filters textarea[name="where"]')`)
		b.do(t,
			chromedp.SetValue(chromedp.CSS(`#events-filters textarea[name="where"]`), `body.id.startsWith("dash-dead") && event_type == "push"`),
			chromedp.Click(chromedp.CSS(`#events-filters button[type="submit"]`)))
		b.waitJS(t, "the two dash-dead events, oldest first, and what was searched", `(() => {
			const rows = [...document.querySelectorAll('#events-list tbody tr')];
			return location.hash.startsWith('#/events?where=') && rows.map((r) => r.dataset.delivery).join(',') === 'dash-dead-1,dash-dead-2' &&
				document.getElementById('search-summary').textContent.startsWith('Searched ');
		})()`)
		b.waitJS(t, "one dead job to replay, counted by a dry run", `(() => {
			const c = document.getElementById('replay-count'), btn = document.querySelector('button[data-action="replay-query"]');
			return c.textContent.startsWith('1 job to queue for 2 matching events: 1 dead to replay, 0 done to resend.') &&
				btn.textContent === 'Replay these 1' && !btn.disabled;
		})()`)
		b.shot(t, "search")
		b.do(t, chromedp.Evaluate[chromedp.Void](`window.__asked = []; window.confirm = (m) => { window.__asked.push(m); return false; }`))
		b.do(t, chromedp.Click(chromedp.CSS(`button[data-action="replay-query"]`)))
		if asked := b.eval(t, `window.__asked.join('|')`); !strings.HasPrefix(asked, "Replay these 1 job?") {
			t.Errorf("the confirmation asked %q, want it to name the 1 job", asked)
		}
		if js := c.jobsFor(t, "github", "dash-dead-2"); len(js) != 1 || js[0].Status != "dead" {
			t.Errorf("after declining, dash-dead-2's job is %s, want still dead", rowsString(js))
		}
		before := len(up.forKey("dash-dead-2"))
		b.do(t, chromedp.Evaluate[chromedp.Void](`window.confirm = (m) => { window.__asked.push(m); return true; }`))
		b.do(t, chromedp.Click(chromedp.CSS(`button[data-action="replay-query"]`)))
		b.waitJS(t, "the page says it queued 1 job", `document.getElementById('flash').textContent.startsWith('Queued 1 job: 1 replayed')`)
		up.waitAnswered(t, "dash-dead-2", http.StatusOK, 1)
		c.waitJobs(t, "github", "dash-dead-2", "done")
		if n := len(up.forKey("dash-dead-2")); n != before+1 {
			t.Errorf("dash-dead-2 reached the upstream %d more times, want once", n-before)
		}
		b.waitJS(t, "nothing left to replay", `(() => {
			const btn = document.querySelector('button[data-action="replay-query"]');
			return document.getElementById('replay-count').textContent.startsWith('0 jobs to queue') && btn.disabled;
		})()`)

		// A bad expression: the API's error, with its position, as text.
		const bad = `body.id == "<img src=x onerror=window.__xss=3>" &&`
		b.do(t,
			chromedp.SetValue(chromedp.CSS(`#events-filters textarea[name="where"]`), bad),
			chromedp.Click(chromedp.CSS(`#events-filters button[type="submit"]`)))
		b.waitJS(t, "the error names where and its position", `(() => {
			const e = document.getElementById('events-error');
			return !!e && e.textContent.includes('invalid parameter where: line 1, column 51: Syntax error');
		})()`)
		if got := b.eval(t, `document.querySelector('#events-filters textarea[name="where"]').value + ' ' + String(window.__xss) + ' ' + document.querySelectorAll('main img').length`); got != bad+" undefined 0" {
			t.Errorf("the search box, window.__xss and images = %q: the expression ran as markup", got)
		}
	})
	b.jobsAtWidths(t, dash)
}

// TestDashboard's last step, the jobs table at the widths of a laptop and
// a desktop, and on a laptop a day later, when every time in the table
// carries its date (CI once crossed midnight here: the dates widened two
// columns and pushed the table past a 1200 px window).
func (b *browser) jobsAtWidths(t *testing.T, dash string) {
	t.Helper()
	for _, tc := range []struct {
		name     string
		width    int64
		dayLater bool
	}{
		{name: "jobs_at_1200_px", width: 1200},
		{name: "jobs_at_1600_px", width: 1600},
		{name: "jobs_at_1200_px_a_day_later", width: 1200, dayLater: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.dayLater {
				// A new document runs the script: the dashboard's own URL
				// again would only change the page's hash.
				b.clockAhead(t, 24*time.Hour)
				b.do(t, chromedp.Navigate("about:blank"))
			}
			b.do(t, chromedp.EmulateViewport(tc.width, 760), chromedp.Navigate(dash+"#/jobs"))
			b.waitJS(t, "the long delivery id is listed", `!!document.querySelector('#jobs-list tr[data-delivery="`+longID+`"]')`)
			if tc.dayLater {
				b.waitJS(t, "every time in the table shows its date", `(() => {
					const times = [...document.querySelectorAll('#jobs-list time')];
					return times.length > 0 && times.every((el) => el.classList.contains('dated') && /^\d{4}-\d\d-\d\d \d\d:\d\d$/.test(el.textContent));
				})()`)
			}
			// The table fits its box: no column ends behind a scrollbar.
			got := b.eval(t, `(() => {
				const tb = document.getElementById('jobs-list');
				const id = document.querySelector('#jobs-list tr[data-delivery="`+longID+`"] .clipped');
				return [tb.scrollWidth <= tb.clientWidth, tb.getBoundingClientRect().right <= document.documentElement.clientWidth,
					id.title === '`+longID+`', !!id.parentElement.querySelector('button.copy')].join(' ');
			})()`)
			if got != "true true true true" {
				// The widths say which column pushed the table out.
				widths := b.eval(t, `(() => {
					const tb = document.getElementById('jobs-list');
					const cols = [...tb.querySelectorAll('thead th')].map((th) => th.textContent + '=' + Math.round(th.getBoundingClientRect().width));
					return 'table right ' + tb.getBoundingClientRect().right + ', window ' + document.documentElement.clientWidth + ', columns ' + cols.join(' ');
				})()`)
				t.Errorf("at %d px (table fits its box, fits the window, full id on hover, copy button) = %s; %s", tc.width, got, widths)
			}
			switch {
			case tc.dayLater:
				b.look(t, "jobs-a-day-later")
			case tc.width == 1200:
				b.shot(t, "jobs")
			default:
				b.look(t, fmt.Sprintf("jobs-%d", tc.width))
			}
		})
	}
}

// dashFilter is the stripe billing target's filter in the browser test: it
// takes every invoice, and holds markup that must show as text.
const dashFilter = `body.type != "<img src=x onerror=window.__xss=1>"`

// chromiumPath finds the browser: CADDYWEBHOOK_CHROMIUM, or Debian's
// chromium, or one on PATH. Without one the test is skipped, except with
// CI=true, where .ci/run has installed it and the test must run.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CADDYWEBHOOK_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const how = "no Chromium: apt-get install chromium, or set CADDYWEBHOOK_CHROMIUM"
	if os.Getenv("CI") == "true" {
		t.Fatal(how + " (CI=true: the browser test must run, not skip)")
	}
	t.Skip(how)
	return ""
}

// browser is one headless Chromium tab that sends the dashboard's
// basic_auth credentials with every request.
type browser struct {
	ctx      context.Context
	shotsDir string
}

func newBrowser(t *testing.T, path string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // the CI runs as root
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 760),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-component-update", true),
		// DevTools over a pipe (chromedp's default): no debugging port. And
		// every name but loopback's fails to resolve: the test visits
		// nothing else, and the browser fetches nothing for itself.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1"),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	b := &browser{ctx: ctx, shotsDir: filepath.Join(suiteDir, "screenshots")}
	if os.Getenv("CADDYWEBHOOK_DASHBOARD_SHOTS") == "1" {
		b.shotsDir = filepath.Join("..", "..", "docs", "img")
	}
	auth := base64.StdEncoding.EncodeToString([]byte(dashUser + ":" + dashPassword))
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("start chromium %s: %v", path, err)
	}
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
		Headers: network.Headers{"Authorization": "Basic " + auth},
	}); err != nil {
		t.Fatalf("set the credentials: %v", err)
	}
	return b
}

// clockAhead moves the page's clock (Date and Date.now) ahead by d for
// every page loaded from now until the test ends; the server's clock and
// the stored times stay as they are.
func (b *browser) clockAhead(t *testing.T, d time.Duration) {
	t.Helper()
	src := fmt.Sprintf(`(() => {
		const shift = %d, Real = Date;
		class Shifted extends Real {
			constructor(...args) { if (args.length === 0) super(Real.now() + shift); else super(...args); }
			static now() { return Real.now() + shift; }
		}
		globalThis.Date = Shifted;
	})();`, d.Milliseconds())
	added, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: src})
	if err != nil {
		t.Fatalf("move the page's clock: %v", err)
	}
	t.Cleanup(func() {
		if _, err := chromedp.Call(b.ctx, page.RemoveScriptToEvaluateOnNewDocument, page.RemoveScriptToEvaluateOnNewDocumentParams{Identifier: added.Identifier}); err != nil {
			t.Errorf("put the page's clock back: %v", err)
		}
	})
}

// do runs actions, bounded by the suite's wait timeout.
func (b *browser) do(t *testing.T, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %v\npage: %s", err, b.page())
	}
}

// eval returns the value of a JavaScript expression in the page as text.
func (b *browser) eval(t *testing.T, expr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitJS polls a JavaScript condition in the page until it is true.
func (b *browser) waitJS(t *testing.T, what, cond string) {
	t.Helper()
	testutil.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(b.ctx, time.Second)
		defer cancel()
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](cond))
		return err == nil && ok
	}, func() string { return what + "\npage: " + b.page() })
}

// page returns the page's URL and text, for failure messages.
func (b *browser) page() string {
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + '\n' + (document.body ? document.body.innerText : '')`))
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return s
}

// shot saves a PNG of the whole page as dashboard-<name>.png.
func (b *browser) shot(t *testing.T, name string) {
	t.Helper()
	b.save(t, b.shotsDir, name)
}

// look saves a PNG for a person to look at, never for the docs: in the
// suite directory, which CADDYWEBHOOK_E2E_KEEP=1 keeps.
func (b *browser) look(t *testing.T, name string) {
	t.Helper()
	b.save(t, filepath.Join(suiteDir, "screenshots"), name)
}

func (b *browser) save(t *testing.T, dir, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "dashboard-"+name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s (%d bytes)", path, len(png))
}
