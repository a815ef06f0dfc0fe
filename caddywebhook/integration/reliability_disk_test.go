package integration

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
)

// mountTmpfs mounts a tmpfs of size bytes on a fresh directory and
// unmounts it at cleanup, after everything registered later (the Caddy
// using it) has stopped. It needs root; without root it skips, unless
// CI=true, where the scenario must run.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("full_disk needs root to mount a tmpfs, and CI=true requires it to run")
		}
		t.Skip("full_disk needs root to mount a size-limited tmpfs; run as root (CI does)")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs on %s: %v\n%s", dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", dir, err, out)
		}
	})
	return dir
}

// fillDisk writes a file in dir until the filesystem is full and returns
// its path and size.
func fillDisk(t *testing.T, dir string) (string, int64) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("create filler: %v", err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	var size int64
	for {
		n, err := f.Write(chunk)
		size += int64(n)
		if errors.Is(err, syscall.ENOSPC) {
			return path, size
		}
		if err != nil {
			t.Fatalf("write filler: %v", err)
		}
	}
}

// testFullDisk: the database on a 16 MiB tmpfs that a filler file fills up.
// Valid events then get 503, never a 202 for something not stored; the
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
	// Room for the WAL to grow to SQLite's autocheckpoint (1000 pages,
	// 4 MiB) once the filler is gone: with less, the first commits after
	// freeing fill the disk again, and the checkpoint that would reset the
	// WAL cannot grow the database file, so writes stay stuck until more
	// space is freed (see docs/RELIABILITY.md).
	mnt := mountTmpfs(t, "16m")
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
	c.start(t, githubConfig(up, fmt.Sprintf("workers %d\nlease 2s\npoll_interval 100ms\nbackoff 100ms 500ms", workers)))

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
	filler, fillerSize := fillDisk(t, mnt)
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
	if n := countLog(t, c, `"outcome":"store_failed"`); n < after503 {
		t.Errorf("the access log shows %d store_failed outcomes, want at least %d", n, after503)
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
	fig.extra = fmt.Sprintf("tmpfs=16MiB filler=%dKiB while_full={202:%d,503:%d} first_503_after=%d resumed_after=%s (%d tries) deliveries_ended_while_full=%d unrecorded=%d",
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
