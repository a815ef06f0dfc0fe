package queuetest

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

// testCountsExact runs a seeded random mix of every operation that moves
// or deletes jobs and, after each round, checks that Stats (which a Store
// keeps in constant time, not by counting rows) equals a full count of
// the jobs as ListJobs reads them, and its event count the events those
// jobs and the job-less events make.
func testCountsExact(t *testing.T, s queue.Store) {
	rng := rand.New(rand.NewPCG(12, 5))
	routes := []queue.Route{{Source: "shop", Target: "mail"}, {Source: "shop", Target: "chat"}, {Source: "forge", Target: "mail"}}
	start := now()
	// Done jobs finish an hour before start; purges cut off half an hour
	// before it, so they purge done jobs and never the job-less events,
	// which are stamped after start.
	finished, cutoff := start.Add(-time.Hour), start.Add(-30*time.Minute)
	running := map[int64]string{} // job id -> lease owner
	fences := map[int64]int64{}   // job id -> the fence of its claim
	bare := 0                     // events enqueued without a job
	seq := 0

	take := func(jobs []*queue.Job) {
		for _, j := range jobs {
			running[j.ID] = j.LeaseOwner
			fences[j.ID] = j.Fence
		}
	}
	someRunning := func(n int) []int64 {
		ids := slices.Sorted(maps.Keys(running))
		rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		return ids[:min(n, len(ids))]
	}
	anyJob := func(status queue.Status) (int64, bool) {
		page := list(t, s, queue.ListParams{Filter: queue.Filter{Status: status}, Limit: queue.MaxListLimit})
		if len(page.Jobs) == 0 {
			return 0, false
		}
		return page.Jobs[rng.IntN(len(page.Jobs))].ID, true
	}
	ops := []struct {
		name string
		fn   func()
	}{
		{"enqueue", func() {
			seq++
			var targets []string
			src := routes[rng.IntN(len(routes))].Source
			for _, r := range routes {
				if r.Source == src && rng.IntN(2) == 0 {
					targets = append(targets, r.Target)
				}
			}
			if len(targets) == 0 {
				bare++
			}
			enqueue(t, s, event(src, fmt.Sprint("d", seq), targets...))
		}},
		{"enqueue duplicate", func() {
			if seq > 0 {
				enqueue(t, s, event("shop", fmt.Sprint("d", rng.IntN(seq)+1), "mail"))
			}
		}},
		{"claim", func() { take(claim(t, s, fmt.Sprint("w", rng.IntN(3)), 1+rng.IntN(4))) }},
		{"claim routes", func() {
			jobs, err := s.Claim(t.Context(), queue.ClaimParams{Owner: "r", Limit: 3, Lease: lease, Now: now(), Routes: routes[:1+rng.IntN(len(routes))]})
			if err != nil {
				t.Fatal(err)
			}
			take(jobs)
		}},
		{"expired-lease reclaim", func() { take(claimAt(t, s, "late", 2, now().Add(2*lease))) }},
		{"finish", func() {
			var cs []queue.Completion
			for _, id := range someRunning(3) {
				c := queue.Completion{JobID: id, Owner: running[id], Fence: fences[id], Started: finished, Now: finished}
				switch rng.IntN(3) {
				case 0:
					c.Status = queue.StatusDone
				case 1:
					c.Status, c.RunAt, c.Error = queue.StatusPending, now(), "retry"
				default:
					c.Status, c.Error = queue.StatusDead, "boom"
				}
				cs = append(cs, c)
				delete(running, id)
			}
			if len(cs) > 0 {
				finish(t, s, cs...)
			}
		}},
		{"hand back", func() {
			for _, id := range someRunning(2) {
				if err := s.HandBack(t.Context(), running[id], []queue.Claimed{{ID: id, Fence: fences[id]}}); err != nil {
					t.Fatal(err)
				}
				delete(running, id)
			}
		}},
		{"replay one", func() {
			if id, ok := anyJob(queue.StatusDead); ok {
				if err := s.Replay(t.Context(), id); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"replay dead by filter", func() {
			r := routes[rng.IntN(len(routes))]
			if _, err := s.ReplayDead(t.Context(), queue.Filter{Source: r.Source}); err != nil {
				t.Fatal(err)
			}
		}},
		{"discard one", func() {
			status := []queue.Status{queue.StatusPending, queue.StatusDone, queue.StatusDead}[rng.IntN(3)]
			if id, ok := anyJob(status); ok {
				if err := s.Discard(t.Context(), id); err != nil && !errors.Is(err, queue.ErrRunning) {
					t.Fatal(err)
				}
			}
		}},
		{"discard by filter", func() {
			r := routes[rng.IntN(len(routes))]
			status := []queue.Status{queue.StatusPending, queue.StatusDead}[rng.IntN(2)]
			if _, err := s.DiscardJobs(t.Context(), queue.Filter{Status: status, Source: r.Source, Target: r.Target}); err != nil {
				t.Fatal(err)
			}
		}},
		{"purge", func() {
			if _, err := s.Purge(t.Context(), cutoff, 1+rng.IntN(5)); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for round := range 150 {
		op := ops[rng.IntN(len(ops))]
		if round < 20 {
			op = ops[0] // a backlog first
		}
		op.fn()
		if round%10 == 9 || round == 149 {
			checkCounts(t, s, bare, fmt.Sprintf("round %d, after %s", round, op.name))
		}
	}
}

// checkCounts compares Stats with a full listing of the jobs.
func checkCounts(t *testing.T, s queue.Store, bare int, when string) {
	t.Helper()
	want := map[string]int64{}
	events := map[int64]bool{}
	p := queue.ListParams{Limit: queue.MaxListLimit}
	for {
		page := list(t, s, p)
		for _, j := range page.Jobs {
			want[j.Source+"/"+j.Target+"/"+string(j.Status)]++
			events[j.EventID] = true
		}
		if page.NextCursor == 0 {
			break
		}
		p.Cursor = page.NextCursor
	}
	st := stats(t, s, now())
	got := map[string]int64{}
	for _, c := range st.Counts {
		if c.Jobs == 0 {
			t.Errorf("%s: Stats lists an empty group %+v", when, c)
		}
		got[c.Source+"/"+c.Target+"/"+string(c.Status)] += c.Jobs
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: Stats counts\n%v\nwant (a full count)\n%v", when, got, want)
	}
	if wantEvents := int64(len(events) + bare); st.Events != wantEvents {
		t.Fatalf("%s: Stats events = %d, want %d", when, st.Events, wantEvents)
	}
}

// StatsLines returns the non-zero job counts of s's Stats now, each as
// "source/target/status=n", sorted, and its count of events. A store's
// own tests compare them with the rows they wrote to its database.
func StatsLines(t *testing.T, s queue.Store) ([]string, int64) {
	t.Helper()
	st := stats(t, s, time.Now())
	var lines []string
	for _, c := range st.Counts {
		if c.Jobs != 0 {
			lines = append(lines, c.Source+"/"+c.Target+"/"+string(c.Status)+"="+strconv.FormatInt(c.Jobs, 10))
		}
	}
	slices.Sort(lines)
	return lines, st.Events
}
