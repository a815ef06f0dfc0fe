package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/queue"
)

// TestPartition puts a proxy between the store and the server and stops
// it forwarding, connections open and nothing answering, as in a network
// partition: every call fails within Config.Timeout (the receiver's 503)
// instead of waiting for the link, the connections that timed out are not
// reused, and once the proxy forwards again the very next call succeeds.
func TestPartition(t *testing.T) {
	const timeout = time.Second
	dsn := testutil.PostgresDSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testutil.NewProxy(t, u.Host)
	s := openStore(t, Config{DSN: proxy.ProxyDSN(t, dsn), Schema: testSchema(t, dsn), MaxConns: 4, Timeout: timeout})
	ctx := t.Context()
	if _, err := s.Enqueue(ctx, ev("before", "mail")); err != nil {
		t.Fatalf("enqueue before the partition: %v", err)
	}

	proxy.Partition()
	calls := []struct {
		name string
		call func() error
	}{
		{"enqueue", func() error { _, err := s.Enqueue(ctx, ev("during-1", "mail")); return err }},
		{"enqueue again", func() error { _, err := s.Enqueue(ctx, ev("during-2", "mail")); return err }},
		{"claim", func() error {
			_, err := s.Claim(ctx, queue.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute})
			return err
		}},
		{"stats", func() error { _, err := s.Stats(ctx, time.Now()); return err }},
		{"enqueue a third time", func() error { _, err := s.Enqueue(ctx, ev("during-3", "mail")); return err }},
	}
	for _, c := range calls {
		started := time.Now()
		err := c.call()
		took := time.Since(started)
		t.Logf("partitioned %s: %s after %s", c.name, err, took.Round(time.Millisecond))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("partitioned %s: %v, want a deadline exceeded", c.name, err)
		}
		// The slack is for a loaded machine: the bound is the timeout.
		if took > timeout+time.Second {
			t.Errorf("partitioned %s took %s, want about %s", c.name, took, timeout)
		}
	}

	proxy.Heal()
	started := time.Now()
	res, err := s.Enqueue(ctx, ev("after", "mail"))
	if err != nil || res.Jobs != 1 {
		t.Fatalf("first enqueue after the heal: %+v, %v; want it stored", res, err)
	}
	t.Logf("first enqueue after the heal stored in %s", time.Since(started).Round(time.Millisecond))
	for i := range 10 {
		if _, err := s.Enqueue(ctx, ev(fmt.Sprint("after-", i), "mail")); err != nil {
			t.Fatalf("enqueue %d after the heal: %v", i, err)
		}
	}
}
