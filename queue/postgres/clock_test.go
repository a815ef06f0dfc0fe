package postgres

import (
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
)

// TestLeaseUsesServerClock: two instances whose clocks disagree by an hour
// share a queue. Without an explicit Now, lease deadlines come from the
// database server's clock: the instance an hour ahead neither writes
// leases an hour too long nor sees the other's lease as long expired
// (so one job is never run by two instances at once).
func TestLeaseUsesServerClock(t *testing.T) {
	dsn := testutil.PostgresDSN(t)
	schema := testSchema(t, dsn)
	const skew = time.Hour
	const lease = time.Minute
	ahead := openStore(t, Config{DSN: dsn, Schema: schema, Now: func() time.Time { return time.Now().Add(skew) }})
	behind := openStore(t, Config{DSN: dsn, Schema: schema, Now: func() time.Time { return time.Now().Add(-skew) }})
	if _, err := behind.Enqueue(t.Context(), queue.Event{Source: "shop", DeliveryID: "d1", Payload: []byte(`{}`), Targets: []string{"mail"}}); err != nil {
		t.Fatal(err)
	}
	// The job was stamped an hour behind; the instance ahead finds it due.
	before := time.Now()
	jobs, err := ahead.Claim(t.Context(), queue.ClaimParams{Owner: "ahead", Limit: 1, Lease: lease})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Claim = %d jobs, %v", len(jobs), err)
	}
	after := time.Now()
	j := jobs[0]
	// The server runs on this machine: its clock is ours, within a second.
	if j.LeaseUntil.Before(before.Add(lease-time.Second)) || j.LeaseUntil.After(after.Add(lease+time.Second)) {
		t.Errorf("lease until %s, want the server's clock + %s (between %s and %s)", j.LeaseUntil, lease, before.Add(lease), after.Add(lease))
	}
	// The instance behind sees the lease hold, as the server does.
	if got, err := behind.Claim(t.Context(), queue.ClaimParams{Owner: "behind", Limit: 1, Lease: lease}); err != nil || len(got) != 0 {
		t.Errorf("claim by the other instance = %d jobs, %v; want none while the lease holds", len(got), err)
	}
	lost, err := ahead.ExtendLeases(t.Context(), queue.ExtendParams{Owner: "ahead", Claims: []queue.Claimed{j.Claimed()}, Lease: 2 * lease})
	if err != nil || len(lost) != 0 {
		t.Fatalf("ExtendLeases = %v, %v", lost, err)
	}
	d, err := behind.GetJob(t.Context(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.LeaseUntil.Before(before.Add(2*lease-time.Second)) || d.LeaseUntil.After(time.Now().Add(2*lease+time.Second)) {
		t.Errorf("extended lease until %s, want the server's clock + %s", d.LeaseUntil, 2*lease)
	}
}
