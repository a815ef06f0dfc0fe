package integration

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// testFullDisk: the database on a 40 MiB tmpfs that a filler file fills up
// completely, past the min_free_space reserve (another program took the
// disk). Valid events then get 503, never a 202 for something not stored; the
// events acknowledged before are all kept and delivered; and once the
// filler is removed, acceptance resumes by itself, without a restart.
// Two deliveries run across the whole episode and end while the disk is
// full, so their results cannot be recorded: their jobs must come back
// after the lease and be delivered again (at least once, invariant 3).
//
// SQLite may still commit an event or two into WAL space it already owns
// after the filler is written: such an event is answered 202 and must be
// durable like any other, which the end of the test checks. Once the WAL
// needs room it cannot get, every event must get 503.
func testFullDisk(t *testing.T) {
	t.Parallel()
	// Room for the reserve (16 MiB) and the WAL to grow to SQLite's
	// autocheckpoint (3000 pages, 12 MiB) once the filler is gone: with
	// less, the first commits after freeing fill the disk again, and the
	// checkpoint that would reset the WAL cannot grow the database file,
	// so writes stay stuck until more space is freed (see
	// docs/RELIABILITY.md).
	mnt := testutil.MountTmpfs(t, "40m")
	fig := newFigures(t, "full_disk")
	const workers = 2
	release := make(chan struct{}) // ends the held deliveries
	tr := newTracker()
	up := newUpstream(t, tr.wrap(func(r *http.Request, key string, n int) int {
		if strings.HasPrefix(key, "disk-held-") && n == 1 {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		return http.StatusOK
	}))
	c := newCaddy(t)
	c.DBPath = filepath.Join(mnt, "queue.db")
	// A short lease: a delivery whose result could not be written while
	// the disk was full is claimed again soon.
	c.start(t, githubConfig(up, fmt.Sprintf("workers %d\nlease 2s\npoll_interval 100ms\nbackoff 100ms 500ms\nmin_free_space 16MiB", workers)))

	var acked []string
	send := func(id string, pad int) int {
		body := payload(id, "push")
		if pad > 0 {
			body = []byte(fmt.Sprintf(`{"id":%q,"type":"push","pad":"%s-%s"}`, id, bodyMarker, strings.Repeat("x", pad)))
		}
		status, _ := post(t, c.URL("/hooks/github"), signGitHub(githubSecret, id, "push", body), body)
		if status == http.StatusAccepted {
			acked = append(acked, id)
		}
		return status
	}

	// Before: accepted and delivered.
	const before = 20
	for i := range before {
		if s := send(fmt.Sprintf("disk-before-%02d", i), 0); s != http.StatusAccepted {
			t.Fatalf("before the disk filled: got %d, want 202", s)
		}
	}
	waitDelivered(t, c, up, acked, waitTimeout)
	// Deliveries that will end while the disk is full.
	var held []string
	for i := range workers {
		id := fmt.Sprintf("disk-held-%d", i)
		if s := send(id, 0); s != http.StatusAccepted {
			t.Fatalf("before the disk filled: got %d, want 202", s)
		}
		held = append(held, id)
	}
	testutil.Eventually(t, func() bool { return tr.busy() == workers }, func() string { return "the held deliveries to start" })

	// Full: every event gets 503 once SQLite runs out of room.
	filler, fillerSize := testutil.FillDisk(t, mnt, "filler", 0)
	statuses := map[int]int{}
	ackedWhileFull, first503 := 0, -1
	const maxTries, after503 = 400, 25
	for i := 0; i < maxTries; i++ {
		s := send(fmt.Sprintf("disk-full-%03d", i), 2048)
		statuses[s]++
		switch {
		case s == http.StatusServiceUnavailable:
			if first503 < 0 {
				first503 = i
			}
		case s == http.StatusAccepted:
			ackedWhileFull++
			if first503 >= 0 {
				t.Errorf("disk-full-%03d answered 202 after the disk was full (first 503 at #%d)", i, first503)
			}
		default:
			t.Errorf("disk-full-%03d: got %d, want 503 (or 202 while SQLite still had room)", i, s)
		}
		if first503 >= 0 && i-first503 >= after503 {
			break
		}
	}
	if first503 < 0 {
		t.Fatalf("%d events after filling the disk and none got 503: %v\n%s", maxTries, statuses, c.logTail())
	}
	// The first may be store_failed (SQLite out of room before the
	// reserve's next measurement), the rest disk_low.
	if n := countLog(t, c, `"outcome":"store_failed"`) + countLog(t, c, `"outcome":"disk_low"`); n < after503 {
		t.Errorf("the access log shows %d store_failed or disk_low outcomes, want at least %d", n, after503)
	}

	// The held deliveries end now; the pool cannot record them.
	close(release)
	for _, id := range held {
		up.waitAnswered(t, id, http.StatusOK, 1)
	}
	unrecorded := 0
	for _, j := range c.jobs(t, "github") {
		if strings.HasPrefix(j.DeliveryID, "disk-held-") && j.Status == "running" {
			unrecorded++
		}
	}

	// Freed: acceptance resumes without a restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	retries := 0
	testutil.EventuallyWithin(t, 30*time.Second, func() bool {
		retries++
		return send(fmt.Sprintf("disk-after-%03d", retries), 0) == http.StatusAccepted
	}, func() string { return "acceptance to resume after the filler was removed\n" + c.logTail() })
	resumed := time.Since(freed)
	const after = 20
	for i := range after {
		if s := send(fmt.Sprintf("disk-after-more-%02d", i), 0); s != http.StatusAccepted {
			t.Errorf("after freeing space: got %d, want 202", s)
		}
	}

	// Nothing acknowledged is lost, before, during or after.
	waitDelivered(t, c, up, acked, 30*time.Second)
	stored := map[string]bool{}
	for _, j := range c.jobs(t, "github") {
		stored[j.DeliveryID] = true
		if j.Status != "done" {
			t.Errorf("%s, want done", j)
		}
	}
	for _, id := range acked {
		if !stored[id] {
			t.Errorf("%s was answered 202 but is not in the database", id)
		}
	}
	if c.running() {
		c.stop(t)
	}
	fig.events = before + statuses[http.StatusAccepted] + statuses[http.StatusServiceUnavailable] + retries + after
	fig.requests, fig.accepted = fig.events, len(acked)
	fig.upstream(up.deliveries())
	fig.lost = len(acked) - countIn(acked, answeredOK(up.deliveries()))
	fig.extra = fmt.Sprintf("tmpfs=40MiB min_free_space=16MiB filler=%dKiB while_full={202:%d,503:%d} first_503_after=%d resumed_after=%s (%d tries) deliveries_ended_while_full=%d unrecorded=%d",
		fillerSize>>10, ackedWhileFull, statuses[http.StatusServiceUnavailable], first503, resumed.Round(10*time.Millisecond), retries, len(held), unrecorded)
	fig.log(t)
}

// countIn returns how many of ids have a positive count in m.
func countIn(ids []string, m map[string]int) int {
	n := 0
	for _, id := range ids {
		if m[id] > 0 {
			n++
		}
	}
	return n
}

// testDiskLow: senders fill the database's filesystem down to the
// min_free_space reserve while the upstream holds every delivery, so a
// backlog builds. Past the reserve every event gets 503 disk_low with
// Retry-After, none store_failed and none a 202 for something not stored,
// and the disk never fills. The upstream then lets deliveries through:
// the backlog drains (claims and finishes commit into the reserve) while
// the senders still get disk_low. Space is freed and acceptance resumes,
// without a restart.
//
// The tmpfs stands in for a small disk: a filler takes all of it but the
// reserve and a few MiB, which the senders then fill with events and the
// WAL that commits them.
func testDiskLow(t *testing.T) {
	t.Parallel()
	const (
		tmpfs    = "40m"
		reserve  = 16 << 20
		headroom = 6 << 20
		workers  = 2
		senders  = 4
	)
	mnt := testutil.MountTmpfs(t, tmpfs)
	fig := newFigures(t, "disk_low")
	hold := make(chan struct{}) // closed to let the deliveries through
	up := newUpstream(t, func(r *http.Request, key string, n int) int {
		select {
		case <-hold:
		case <-r.Context().Done():
		}
		return http.StatusOK
	})
	c := newCaddy(t)
	c.DBPath = filepath.Join(mnt, "queue.db")
	c.start(t, githubConfig(up, fmt.Sprintf("workers %d\nlease 30s\npoll_interval 100ms\nbackoff 100ms 1s\nmin_free_space %d", workers, reserve)))
	filler, fillerSize := testutil.FillDisk(t, mnt, "filler", reserve+headroom)

	// Fill: the senders run until well past the first disk_low.
	lg := newLoad(c, "disklow", senders, time.Millisecond, resendNoAnswer)
	lg.start()
	const lowAnswers = 200
	testutil.EventuallyWithin(t, 90*time.Second, func() bool {
		return countLog(t, c, `"outcome":"disk_low"`) >= lowAnswers
	}, func() string {
		return fmt.Sprintf("%d disk_low answers; load: %s; %d KiB free\n%s", countLog(t, c, `"outcome":"disk_low"`), lg.summary(), testutil.FreeSpace(t, mnt)>>10, c.logTail())
	})
	lowFree := testutil.FreeSpace(t, mnt)
	if lowFree < headroom/2 {
		// The reserve is 16 MiB; falling far into it means ingest went on.
		t.Errorf("%d KiB free after %d disk_low answers: ingest ate into the %d KiB reserve", lowFree>>10, lowAnswers, reserve>>10)
	}
	acceptedFull := lg.acceptedCount()

	// One event by hand, for the answer's headers.
	body := payload("disklow-probe", "push")
	req, err := http.NewRequest(http.MethodPost, c.URL("/hooks/github"), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = signGitHub(githubSecret, "disklow-probe", "push", body)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("an event while the disk is low: got %d Retry-After %q, want 503 with a Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	// Drain, the senders still sending: every accepted event is delivered.
	close(hold)
	// How many events the fill accepts before the disk is low depends on
	// how often the WAL restarts from its beginning: a few hundred alone,
	// thousands when the whole suite loads the machine (4,781 in one run,
	// which 2 workers under -race drained at 50 a second). The wait grows
	// with them.
	accepted := lg.acceptedIDs()
	waitDelivered(t, c, up, accepted, 60*time.Second+time.Duration(len(accepted))*30*time.Millisecond)
	lowBeforeDrain := countLog(t, c, `"outcome":"disk_low"`)
	testutil.Eventually(t, func() bool { return countLog(t, c, `"outcome":"disk_low"`) > lowBeforeDrain+50 },
		func() string { return "disk_low answers to go on after the drain" })
	lg.halt()
	drainedLow := lg.acceptedCount() - acceptedFull
	if n := countLog(t, c, `"outcome":"store_failed"`); n > 0 {
		t.Errorf("%d events got store_failed: the disk filled past the reserve", n)
	}
	for st := range lg.statuses {
		if st != http.StatusServiceUnavailable {
			t.Errorf("an event got %d; want only 202 or 503 (load: %s)", st, lg.summary())
		}
	}
	if n := countLog(t, c, "free disk space is below min_free_space"); n != 1 {
		t.Errorf("%d log lines say the disk is low, want 1 for the episode", n)
	}

	// Freed: acceptance resumes without a restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	var after []string
	tries := 0
	testutil.EventuallyWithin(t, 30*time.Second, func() bool {
		tries++
		id := fmt.Sprintf("disklow-after-%03d", tries)
		body := payload(id, "push")
		s, _ := post(t, c.URL("/hooks/github"), signGitHub(githubSecret, id, "push", body), body)
		if s == http.StatusAccepted {
			after = append(after, id)
		}
		return s == http.StatusAccepted
	}, func() string { return "acceptance to resume after the filler was removed\n" + c.logTail() })
	resumed := time.Since(freed)
	for i := range 20 {
		id := fmt.Sprintf("disklow-more-%02d", i)
		body := payload(id, "push")
		if s, _ := post(t, c.URL("/hooks/github"), signGitHub(githubSecret, id, "push", body), body); s != http.StatusAccepted {
			t.Errorf("after freeing space: got %d, want 202", s)
		}
		after = append(after, id)
	}
	if n := countLog(t, c, "free disk space is back above min_free_space"); n != 1 {
		t.Errorf("%d log lines say the space is back, want 1", n)
	}

	// Nothing acknowledged is lost; a 202 always meant stored.
	acked := append(lg.acceptedIDs(), after...)
	waitDelivered(t, c, up, acked, 30*time.Second)
	stored := map[string]bool{}
	for _, j := range c.jobs(t, "github") {
		stored[j.DeliveryID] = true
	}
	for _, id := range acked {
		if !stored[id] {
			t.Errorf("%s was answered 202 but is not in the database", id)
		}
	}
	c.stop(t)
	fig.events, fig.requests, fig.accepted = lg.next+tries+20+1, lg.requests+tries+20+1, len(acked)
	fig.upstream(up.deliveries())
	fig.lost = len(acked) - countIn(acked, answeredOK(up.deliveries()))
	fig.extra = fmt.Sprintf("tmpfs=40MiB min_free_space=16MiB filler=%dKiB senders=%d accepted_before_low=%d disk_low=%d store_failed=%d free_when_low=%dKiB accepted_while_draining=%d resumed_after=%s (%d tries)",
		fillerSize>>10, senders, acceptedFull, countLog(t, c, `"outcome":"disk_low"`), countLog(t, c, `"outcome":"store_failed"`), lowFree>>10, drainedLow, resumed.Round(10*time.Millisecond), tries)
	fig.log(t)
}
