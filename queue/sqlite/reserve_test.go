//go:build linux

package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
)

// TestReserve fills a small tmpfs through Enqueue and checks the reserve:
// ingest is refused with ErrDiskLow (and nothing else) before the disk is
// full; the claims, finishes and purge that drain the backlog still commit
// into the reserve; and once space is freed, Enqueue succeeds again on the
// same Store, without a reopen.
func TestReserve(t *testing.T) {
	const reserveBytes = MinFreeSpaceFloor
	mnt := testutil.MountTmpfs(t, "40m")
	// Leave room for a few MiB of events above the reserve.
	filler, _ := testutil.FillDisk(t, mnt, "filler", reserveBytes+6<<20)
	s := setup(t, func(c *Config) {
		c.Path = filepath.Join(mnt, "queue.db")
		c.MinFreeSpace = reserveBytes
	})

	payload := []byte(`{"pad":"` + strings.Repeat("x", 64<<10) + `"}`)
	accepted := 0
	var refused error
	for i := range 2000 {
		_, err := s.Enqueue(t.Context(), queue.Event{Source: "shop", DeliveryID: fmt.Sprintf("d%04d", i), Payload: payload, Targets: []string{"mail"}})
		if err != nil {
			refused = err
			break
		}
		accepted++
	}
	if !errors.Is(refused, queue.ErrDiskLow) {
		t.Fatalf("after %d events: Enqueue = %v, want ErrDiskLow", accepted, refused)
	}
	free := testutil.FreeSpace(t, mnt)
	t.Logf("refused after %d events of %d KiB, %d KiB free, reserve %d KiB", accepted, len(payload)>>10, free>>10, reserveBytes>>10)
	if free <= 0 {
		t.Fatalf("the disk is full (%d bytes free): the reserve did not hold", free)
	}

	// Drain while ingest is refused: claim, finish, purge.
	now := time.Now()
	jobs, err := s.Claim(t.Context(), queue.ClaimParams{Owner: "w", Limit: accepted + 10, Lease: time.Minute, Now: now})
	if err != nil {
		t.Fatalf("Claim while the disk is low: %v", err)
	}
	if len(jobs) != accepted {
		t.Fatalf("claimed %d jobs, want %d", len(jobs), accepted)
	}
	cs := make([]queue.Completion, len(jobs))
	for i, j := range jobs {
		cs[i] = queue.Completion{JobID: j.ID, Owner: "w", Fence: j.Fence, Status: queue.StatusDone, Started: now, Now: now}
	}
	recorded, err := s.Finish(t.Context(), cs)
	if err != nil {
		t.Fatalf("Finish while the disk is low: %v", err)
	}
	for i, ok := range recorded {
		if !ok {
			t.Errorf("completion of job %d not recorded", jobs[i].ID)
		}
	}
	if n, err := s.Purge(t.Context(), now.Add(time.Hour), accepted+10); err != nil || n != accepted {
		t.Fatalf("Purge while the disk is low = %d, %v; want %d, nil", n, err, accepted)
	}
	if _, err := s.Enqueue(t.Context(), testEvent("still-low", "mail")); !errors.Is(err, queue.ErrDiskLow) {
		t.Errorf("Enqueue after the drain, space not freed = %v, want ErrDiskLow", err)
	}

	// Freed: the same Store accepts again once it measures.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	var last error
	testutil.Eventually(t, func() bool {
		_, last = s.Enqueue(t.Context(), testEvent(fmt.Sprintf("after-%d", time.Now().UnixNano()), "mail"))
		return last == nil
	}, func() string { return fmt.Sprintf("Enqueue to succeed after freeing space; last: %v", last) })
}

// TestReserveConfig checks the floor of MinFreeSpace.
func TestReserveConfig(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		min  int64
		want string
	}{
		{"default", 0, ""},
		{"floor", MinFreeSpaceFloor, ""},
		{"under the floor", MinFreeSpaceFloor - 1, "Config.MinFreeSpace"},
		{"negative", -1, "Config.MinFreeSpace"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(t.Context(), Config{Path: filepath.Join(dir, fmt.Sprintf("%d.db", i)), MinFreeSpace: tt.min})
			if err == nil {
				s.Close()
			}
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Open: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Open = %v, want an error naming %s", err, tt.want)
			}
		})
	}
}
