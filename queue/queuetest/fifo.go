package queuetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

// keyed is event with an ordering key.
func keyed(id, key string, hold bool, targets ...string) queue.Event {
	ev := event("shop", id, targets...)
	ev.OrderingKey, ev.OrderingHold = key, hold
	return ev
}

// claimedDeliveries names the claimed jobs as delivery/target, sorted.
func claimedDeliveries(jobs []*queue.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.DeliveryID + "/" + j.Target
	}
	slices.Sort(out)
	return out
}

func wantClaim(t *testing.T, s queue.Store, owner string, want ...string) []*queue.Job {
	t.Helper()
	jobs := claim(t, s, owner, 100)
	if got := claimedDeliveries(jobs); !slices.Equal(got, want) {
		t.Fatalf("Claim(%s) = %v, want %v", owner, got, want)
	}
	return jobs
}

func byDelivery(t *testing.T, jobs []*queue.Job, name string) *queue.Job {
	t.Helper()
	for _, j := range jobs {
		if j.DeliveryID+"/"+j.Target == name {
			return j
		}
	}
	t.Fatalf("no claimed job %s", name)
	return nil
}

// testFIFOChain checks that a job of an ordering key waits, blocked, while
// an earlier job of its (source, target, key) is pending, running or
// waiting to retry, per target; that other keys and unkeyed events are
// not held up; and that Stats counts blocked jobs.
func testFIFOChain(t *testing.T, s queue.Store) {
	enqueue(t, s, keyed("k1", "K", false, "mail", "chat"))
	enqueue(t, s, keyed("k2", "K", false, "mail", "chat"))
	enqueue(t, s, keyed("k3", "K", false, "mail"))
	enqueue(t, s, keyed("l1", "L", false, "mail"))
	enqueue(t, s, event("shop", "u1", "mail"))
	// The same key of another source is another chain.
	other := keyed("o1", "K", false, "mail")
	other.Source = "forge"
	enqueue(t, s, other)

	st := stats(t, s, now())
	if got := count(st, queue.StatusBlocked); got != 3 {
		t.Fatalf("Stats blocked = %d, want 3 (k2 ×2, k3): %+v", got, st.Counts)
	}
	if page := list(t, s, queue.ListParams{Filter: queue.Filter{Status: queue.StatusBlocked}}); len(page.Jobs) != 3 {
		t.Fatalf("ListJobs(blocked) = %d jobs, want 3", len(page.Jobs))
	}
	jobs := wantClaim(t, s, "a", "k1/chat", "k1/mail", "l1/mail", "o1/mail", "u1/mail")
	wantClaim(t, s, "a") // k2 waits for k1, running

	// k1/mail done: k2/mail goes ahead; k1/chat retries: k2/chat waits.
	finish(t, s, done(byDelivery(t, jobs, "k1/mail"), now()), retry(byDelivery(t, jobs, "k1/chat"), now(), "503"))
	jobs = wantClaim(t, s, "a", "k1/chat", "k2/mail")
	finish(t, s, done(byDelivery(t, jobs, "k1/chat"), now()))
	jobs2 := wantClaim(t, s, "a", "k2/chat")
	finish(t, s, done(byDelivery(t, jobs, "k2/mail"), now()), done(jobs2[0], now()))
	jobs = wantClaim(t, s, "a", "k3/mail")
	finish(t, s, done(jobs[0], now()))

	// The key is free again: a new job of it is pending at once.
	enqueue(t, s, keyed("k4", "K", false, "mail"))
	wantClaim(t, s, "a", "k4/mail")
	if got := count(stats(t, s, now()), queue.StatusBlocked); got != 0 {
		t.Errorf("Stats blocked = %d after the chain drained, want 0", got)
	}
}

// testFIFODead checks what a dead job does to its key: with OrderingHold
// the key stays held until the job is replayed and done (or discarded);
// without, the next job goes ahead, and a replay of the dead job waits
// behind the key's new head.
func testFIFODead(t *testing.T, s queue.Store) {
	t.Run("hold", func(t *testing.T) {
		enqueue(t, s, keyed("h1", "H", true, "mail"))
		enqueue(t, s, keyed("h2", "H", true, "mail"))
		j := wantClaim(t, s, "a", "h1/mail")[0]
		finish(t, s, dead(j, "400"))
		wantClaim(t, s, "a") // h2 still blocked behind the dead h1
		if err := s.Replay(t.Context(), j.ID); err != nil {
			t.Fatalf("Replay: %v", err)
		}
		j = wantClaim(t, s, "a", "h1/mail")[0]
		finish(t, s, done(j, now()))
		wantClaim(t, s, "a", "h2/mail")
	})
	t.Run("release", func(t *testing.T) {
		enqueue(t, s, keyed("r1", "R", false, "mail"))
		enqueue(t, s, keyed("r2", "R", false, "mail"))
		enqueue(t, s, keyed("r3", "R", false, "mail"))
		j1 := wantClaim(t, s, "a", "r1/mail")[0]
		finish(t, s, dead(j1, "400"))
		j2 := wantClaim(t, s, "a", "r2/mail")[0]
		// r1, replayed while r2 holds the key, waits behind it and goes
		// before r3, which arrived after it.
		if err := s.Replay(t.Context(), j1.ID); err != nil {
			t.Fatalf("Replay: %v", err)
		}
		if d := get(t, s, j1.ID); d.Status != queue.StatusBlocked {
			t.Fatalf("replayed r1 is %s, want blocked behind r2", d.Status)
		}
		finish(t, s, done(j2, now()))
		j1 = wantClaim(t, s, "a", "r1/mail")[0]
		finish(t, s, done(j1, now()))
		wantClaim(t, s, "a", "r3/mail")
	})
	t.Run("bulk replay", func(t *testing.T) {
		enqueue(t, s, keyed("b1", "B", true, "chat"))
		enqueue(t, s, keyed("b2", "B", false, "chat"))
		j := wantClaim(t, s, "a", "b1/chat")[0]
		finish(t, s, dead(j, "400"))
		if n, err := s.ReplayDead(t.Context(), queue.Filter{Target: "chat"}); err != nil || n != 1 {
			t.Fatalf("ReplayDead = %d, %v; want 1", n, err)
		}
		j = wantClaim(t, s, "a", "b1/chat")[0]
		finish(t, s, done(j, now()))
		wantClaim(t, s, "a", "b2/chat")
	})
}

// testFIFODiscard checks that discarding a key's head hands the key on,
// and that discarding a blocked job leaves the chain whole.
func testFIFODiscard(t *testing.T, s queue.Store) {
	var ids []int64
	for i := range 4 {
		res := enqueue(t, s, keyed(fmt.Sprint("d", i), "D", true, "mail"))
		ids = append(ids, jobOf(t, s, res.EventID))
	}
	// d0 is the pending head: discarding it makes d1 pending.
	if err := s.Discard(t.Context(), ids[0]); err != nil {
		t.Fatalf("Discard(head): %v", err)
	}
	// d2 is blocked: discarding it changes nothing else.
	if err := s.Discard(t.Context(), ids[2]); err != nil {
		t.Fatalf("Discard(blocked): %v", err)
	}
	j := wantClaim(t, s, "a", "d1/mail")[0]
	finish(t, s, dead(j, "400")) // held
	wantClaim(t, s, "a")
	if n, err := s.DiscardJobs(t.Context(), queue.Filter{Status: queue.StatusDead}); err != nil || n != 1 {
		t.Fatalf("DiscardJobs(dead) = %d, %v; want 1", n, err)
	}
	j = wantClaim(t, s, "a", "d3/mail")[0]
	finish(t, s, done(j, now()))
	st := stats(t, s, now())
	if count(st, queue.StatusBlocked) != 0 || count(st, queue.StatusPending) != 0 || count(st, queue.StatusDone) != 1 {
		t.Errorf("Stats = %+v, want one done job", st.Counts)
	}
}

// testFIFOBulkDiscard checks that a bulk discard of pending jobs hands
// each discarded head's key on and leaves the job it made pending, however
// many chunks the discard takes: a later chunk must not delete the jobs an
// earlier one promoted, which were blocked when the discard began.
func testFIFOBulkDiscard(t *testing.T, s queue.Store) {
	for _, keys := range []int{3, 300} { // 300: more than one chunk of every store
		t.Run(strconv.Itoa(keys), func(t *testing.T) {
			for i := range keys {
				for j := range 2 {
					enqueue(t, s, keyed(fmt.Sprintf("b%d-%d-%d", keys, i, j), fmt.Sprintf("B%d-%d", keys, i), false, "mail"))
				}
			}
			n, err := s.DiscardJobs(t.Context(), queue.Filter{Status: queue.StatusPending, Source: "shop", Target: "mail"})
			if err != nil || n != keys {
				t.Fatalf("DiscardJobs(pending) = %d, %v; want the %d heads", n, err, keys)
			}
			st := stats(t, s, now())
			if got := count(st, queue.StatusPending); got != int64(keys) || count(st, queue.StatusBlocked) != 0 {
				t.Fatalf("Stats = %+v, want the %d jobs behind the heads pending", st.Counts, keys)
			}
			if n, err := s.DiscardJobs(t.Context(), queue.Filter{Status: queue.StatusPending, Source: "shop", Target: "mail"}); err != nil || n != keys {
				t.Fatalf("DiscardJobs(pending) again = %d, %v; want %d", n, err, keys)
			}
		})
	}
}

// jobOf returns the one job of event id.
func jobOf(t *testing.T, s queue.Store, eventID int64) int64 {
	t.Helper()
	page := list(t, s, queue.ListParams{Limit: queue.MaxListLimit})
	for _, j := range page.Jobs {
		if j.EventID == eventID {
			return j.ID
		}
	}
	t.Fatalf("no job of event %d", eventID)
	return 0
}

// testFIFOWorkers runs many workers over many keys while a producer
// enqueues, with random retries and dead jobs (that release their key)
// replayed at once. It checks that each (target, key) sees its deliveries
// done in arrival order, that no two jobs of one (target, key) are held
// at once, and that a key whose head waits an hour to retry holds up no
// other key.
func testFIFOWorkers(t *testing.T, s queue.Store) {
	const (
		keys    = 20
		perKey  = 30
		total   = keys * perKey * 2 // two targets
		workers = 8
	)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	// The stuck key's head retries an hour from now; its later jobs must
	// stay blocked, and everything else must finish.
	enqueue(t, s, keyed("stuck-0", "stuck", false, "mail"))
	enqueue(t, s, keyed("stuck-1", "stuck", false, "mail"))
	j := wantClaim(t, s, "setup", "stuck-0/mail")[0]
	finish(t, s, retry(j, now().Add(time.Hour), "503"))

	var (
		mu       sync.Mutex
		active   = map[string]int64{} // target/key -> the job held
		lastDone = map[string]int{}   // target/key -> sequence last done
		doneJobs = map[string]bool{}  // delivery/target done or discarded (a deleted job's id may be reused)
		finished atomic.Int64
		errs     = make(chan error, workers+1)
	)
	go func() {
		for i := range perKey {
			for k := range keys {
				ev := keyed(fmt.Sprintf("k%d-%d", k, i), fmt.Sprint("key", k), false, "mail", "chat")
				if _, err := s.Enqueue(ctx, ev); err != nil {
					errs <- fmt.Errorf("enqueue: %w", err)
					return
				}
			}
		}
		errs <- nil
	}()
	fail := func(err error) { errs <- err }
	var wg sync.WaitGroup
	for w := range workers {
		owner := fmt.Sprint("worker-", w)
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 14))
			for finished.Load() < total {
				jobs, err := s.Claim(ctx, queue.ClaimParams{Owner: owner, Limit: 1 + rnd.IntN(8), Lease: time.Hour, Now: time.Now()})
				if err != nil {
					fail(fmt.Errorf("%s: claim: %w", owner, err))
					return
				}
				if len(jobs) == 0 {
					select {
					case <-s.Ready():
					case <-time.After(5 * time.Millisecond):
					case <-ctx.Done():
						fail(fmt.Errorf("%s: %w with %d of %d done", owner, ctx.Err(), finished.Load(), total))
						return
					}
					continue
				}
				cs := make([]queue.Completion, len(jobs))
				mu.Lock()
				for i, j := range jobs {
					chain, _ := chainOf(j)
					if chain == "mail/stuck" {
						mu.Unlock()
						fail(fmt.Errorf("job %s of the stuck key was claimed", j.DeliveryID))
						return
					}
					if h, ok := active[chain]; ok {
						mu.Unlock()
						fail(fmt.Errorf("job %d (%s) claimed while job %d of its key is held", j.ID, j.DeliveryID, h))
						return
					}
					active[chain] = j.ID
					status := queue.StatusDone
					switch n := rnd.IntN(8); {
					case n == 0 && j.Attempt < 3:
						status = queue.StatusPending
					case n == 1 && j.Replays == 0:
						status = queue.StatusDead
					}
					at := time.Now()
					cs[i] = queue.Completion{JobID: j.ID, Owner: owner, Fence: j.Fence, Status: status, RunAt: at, Error: "boom", Started: at, Now: at}
				}
				// A job's outcome is decided: forget it as held, and check
				// its order, before Finish lets the next job of its key go.
				for i, c := range cs {
					chain, seq := chainOf(jobs[i])
					delete(active, chain)
					if c.Status != queue.StatusDone {
						continue
					}
					if last, ok := lastDone[chain]; ok && seq <= last {
						mu.Unlock()
						fail(fmt.Errorf("%s delivered after sequence %d of its key", jobs[i].DeliveryID, last))
						return
					}
					lastDone[chain] = seq
				}
				mu.Unlock()
				rec, err := s.Finish(ctx, cs)
				if err != nil {
					fail(fmt.Errorf("%s: finish: %w", owner, err))
					return
				}
				for i, c := range cs {
					if !rec[i] {
						fail(fmt.Errorf("job %d: finish not recorded", c.JobID))
						return
					}
					switch c.Status {
					case queue.StatusDone:
					case queue.StatusDead:
						// A dead job released its key, and the next went
						// ahead: discarding it is what an operator would
						// do, and must leave the chain whole.
						if err := s.Discard(ctx, c.JobID); err != nil {
							fail(fmt.Errorf("discard dead job %d: %w", c.JobID, err))
							return
						}
					default:
						continue
					}
					mu.Lock()
					doneJobs[jobs[i].DeliveryID+"/"+jobs[i].Target] = true
					mu.Unlock()
					finished.Add(1)
				}
			}
			errs <- nil
		})
	}
	wg.Wait()
	for range workers + 1 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if len(doneJobs) != total {
		t.Errorf("%d jobs finished, want %d", len(doneJobs), total)
	}
	st := stats(t, s, time.Now())
	if got := count(st, queue.StatusBlocked); got != 1 {
		t.Errorf("Stats blocked = %d, want 1 (stuck-1): %+v", got, st.Counts)
	}
}

// chainOf returns a claimed job's target/key and its sequence in the key.
func chainOf(j *queue.Job) (string, int) {
	var k, i int
	if _, err := fmt.Sscanf(j.DeliveryID, "k%d-%d", &k, &i); err != nil {
		return j.Target + "/stuck", 0
	}
	return j.Target + "/key" + strconv.Itoa(k), i
}
