package queuetest

import (
	"slices"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

// pauseKeys lists ps as "source/target" ("source/" for a whole source).
func pauseKeys(ps []queue.Pause) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Source + "/" + p.Target
	}
	return out
}

func listPauses(t *testing.T, s queue.Store) []queue.Pause {
	t.Helper()
	ps, err := s.ListPauses(t.Context())
	if err != nil {
		t.Fatalf("ListPauses: %v", err)
	}
	return ps
}

// testPauses: pauses of a whole source and of single targets are kept,
// listed in order, idempotent (a second pause keeps the first's time),
// and lifted one by one or a whole source at once.
func testPauses(t *testing.T, s queue.Store) {
	ctx := t.Context()
	before := now()
	steps := []struct {
		name           string
		resume         bool
		source, target string
		want           []string
	}{
		{"pause a target", false, "shop", "mail", []string{"shop/mail"}},
		{"pause a whole source", false, "shop", "", []string{"shop/", "shop/mail"}},
		{"pause another source's target", false, "git", "ci", []string{"git/ci", "shop/", "shop/mail"}},
		{"pause again", false, "shop", "mail", []string{"git/ci", "shop/", "shop/mail"}},
		{"resume what is not paused", true, "shop", "crm", []string{"git/ci", "shop/", "shop/mail"}},
		{"resume one target", true, "shop", "mail", []string{"git/ci", "shop/"}},
		{"pause a target again", false, "shop", "crm", []string{"git/ci", "shop/", "shop/crm"}},
		{"resume a whole source", true, "shop", "", []string{"git/ci"}},
		{"resume the last", true, "git", "ci", []string{}},
	}
	var first time.Time
	for _, st := range steps {
		op := s.Pause
		if st.resume {
			op = s.Resume
		}
		if err := op(ctx, st.source, st.target); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		ps := listPauses(t, s)
		if got := pauseKeys(ps); !slices.Equal(got, st.want) {
			t.Fatalf("%s: pauses %v, want %v", st.name, got, st.want)
		}
		for _, p := range ps {
			if p.Source != "shop" || p.Target != "mail" {
				continue
			}
			if p.Since.Before(before) || p.Since.After(now().Add(time.Second)) {
				t.Errorf("%s: paused since %s, want about %s", st.name, p.Since, before)
			}
			if first.IsZero() {
				first = p.Since
			} else if !p.Since.Equal(first) {
				t.Errorf("%s: paused since %s, want the first pause's %s", st.name, p.Since, first)
			}
		}
	}
	for _, op := range []struct {
		name string
		f    func() error
	}{
		{"pause", func() error { return s.Pause(ctx, "", "mail") }},
		{"resume", func() error { return s.Resume(ctx, "", "") }},
	} {
		if err := op.f(); err == nil {
			t.Errorf("%s without a source: no error", op.name)
		}
	}
}

// testPausedClaims: a claim that leaves out the paused routes (as a pool
// does through queue.Pauses) takes none of their jobs and charges them
// nothing, while receiving goes on and the other routes are claimed; a
// resume signals Ready and the jobs are claimed with their first attempt.
func testPausedClaims(t *testing.T, s queue.Store) {
	ctx := t.Context()
	routes := []queue.Route{{Source: "shop", Target: "mail"}, {Source: "shop", Target: "crm"}}
	claimable := func() []queue.Route {
		set := queue.NewPauses(listPauses(t, s))
		out := []queue.Route{}
		for _, r := range routes {
			if !set.Paused(r) {
				out = append(out, r)
			}
		}
		return out
	}
	claimRoutes := func() []*queue.Job {
		jobs, err := s.Claim(ctx, queue.ClaimParams{Owner: "w", Limit: 10, Lease: lease, Now: now(), Routes: claimable()})
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		return jobs
	}
	if err := s.Pause(ctx, "shop", "mail"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"d1", "d2"} {
		if res := enqueue(t, s, event("shop", id, "mail", "crm")); res.Jobs != 2 {
			t.Fatalf("enqueue %s while paused: %d jobs, want 2", id, res.Jobs)
		}
	}
	for _, j := range claimRoutes() {
		if j.Target != "crm" {
			t.Errorf("claimed a job of %s while it is paused", j.Target)
		}
		finish(t, s, done(j, now()))
	}
	if err := s.Pause(ctx, "shop", ""); err != nil {
		t.Fatal(err)
	}
	enqueue(t, s, event("shop", "d3", "mail", "crm"))
	if jobs := claimRoutes(); len(jobs) != 0 {
		t.Fatalf("claimed %d jobs while the whole source is paused", len(jobs))
	}
	page := list(t, s, queue.ListParams{Filter: queue.Filter{Status: queue.StatusPending}})
	if len(page.Jobs) != 4 {
		t.Fatalf("%d pending jobs while paused, want 4 (d1, d2 to mail; d3 to both)", len(page.Jobs))
	}
	for _, j := range page.Jobs {
		if j.Attempts != 0 {
			t.Errorf("paused job %d charged %d attempts", j.ID, j.Attempts)
		}
	}
	select {
	case <-s.Ready():
	default:
	}
	if err := s.Resume(ctx, "shop", ""); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Ready():
	default:
		t.Error("resume did not signal Ready")
	}
	jobs := claimRoutes()
	if len(jobs) != 4 {
		t.Fatalf("claimed %d jobs after the resume, want 4", len(jobs))
	}
	for _, j := range jobs {
		if j.Attempt != 1 {
			t.Errorf("job %d claimed with attempt %d after the pause, want 1", j.ID, j.Attempt)
		}
	}
}
