package queue_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

var (
	mail = queue.Route{Source: "src", Target: "mail"}
	chat = queue.Route{Source: "src", Target: "chat"}
	t0   = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
)

// quotas returns a plan as route target → quota.
func quotas(plan []queue.RouteQuota) map[string]int {
	out := map[string]int{}
	for _, rq := range plan {
		out[rq.Target] = rq.Quota
	}
	return out
}

// flowJob is a job of route r with id id.
func flowJob(r queue.Route, id int64) *queue.Job {
	return &queue.Job{ID: id, Source: r.Source, Target: r.Target}
}

func TestFlowRate(t *testing.T) {
	tests := []struct {
		name  string
		rate  queue.Rate
		burst int // the quota after idling
	}{
		{"per second", queue.Rate{N: 200, Per: time.Second}, 20},
		{"slow per second", queue.Rate{N: 5, Per: time.Second}, 1},
		{"per minute", queue.Rate{N: 120, Per: time.Minute}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := queue.NewFlow(queue.FlowConfig{Routes: []queue.Route{mail, chat},
				Limits: map[queue.Route]queue.FlowLimits{mail: {Rate: tt.rate}}})
			plan, wake := f.Plan(t0)
			if got := quotas(plan); got["mail"] != tt.burst || got["chat"] == 0 || !wake.IsZero() {
				t.Fatalf("first plan %v, wake %v; want mail %d, chat unlimited, no wake", got, wake, tt.burst)
			}
			// Claim everything the plan offers, every millisecond, for
			// 30 s: the rate holds to within the burst.
			var id int64
			claimed := 0
			every := tt.rate.Per / time.Duration(tt.rate.N)
			for now := t0; now.Before(t0.Add(30 * time.Second)); now = now.Add(time.Millisecond) {
				plan, wake := f.Plan(now)
				q := quotas(plan)["mail"]
				if q == 0 && (wake.Before(now) || wake.After(now.Add(every))) {
					t.Fatalf("at %s: no quota and wake at %s, want within %s", now.Sub(t0), wake.Sub(t0), every)
				}
				for range q {
					id++
					claimed++
					f.Claimed(flowJob(mail, id), now)
				}
			}
			want := int(float64(30*time.Second)/float64(tt.rate.Per)*float64(tt.rate.N)) + tt.burst
			if claimed < want-1 || claimed > want {
				t.Errorf("claimed %d in 30s, want %d (rate and burst)", claimed, want)
			}
		})
	}
}

func TestFlowConcurrency(t *testing.T) {
	f := queue.NewFlow(queue.FlowConfig{Routes: []queue.Route{mail},
		Limits: map[queue.Route]queue.FlowLimits{mail: {Concurrency: 2}}})
	steps := []struct {
		name string
		do   func()
		want int
	}{
		{"idle", func() {}, 2},
		{"one running", func() { f.Claimed(flowJob(mail, 1), t0) }, 1},
		{"two running", func() { f.Claimed(flowJob(mail, 2), t0) }, 0},
		{"one released", func() { f.Released(flowJob(mail, 1)) }, 1},
	}
	for _, s := range steps {
		s.do()
		plan, _ := f.Plan(t0)
		if got := quotas(plan)["mail"]; got != s.want {
			t.Errorf("%s: quota %d, want %d", s.name, got, s.want)
		}
	}
}

func TestFlowPaused(t *testing.T) {
	f := queue.NewFlow(queue.FlowConfig{Routes: []queue.Route{mail, chat},
		Paused: func(r queue.Route) bool { return r == chat }})
	plan, _ := f.Plan(t0)
	if got := quotas(plan); len(got) != 1 || got["mail"] == 0 {
		t.Errorf("plan %v, want mail alone", got)
	}
}

// circuitLog records a Flow's circuit changes.
type circuitLog []string

func (l *circuitLog) record(r queue.Route, s queue.CircuitState, cooldown time.Duration) {
	*l = append(*l, fmt.Sprintf("%s %s %s", r.Target, s, cooldown))
}

func TestFlowCircuit(t *testing.T) {
	var log circuitLog
	f := queue.NewFlow(queue.FlowConfig{Routes: []queue.Route{mail},
		Limits: map[queue.Route]queue.FlowLimits{mail: {
			Breaker: &queue.Breaker{Failures: 3, Cooldown: 10 * time.Second, MaxCooldown: 25 * time.Second}}},
		CircuitChanged: log.record})
	transient := errors.New("503")
	now := t0
	var id int64
	// deliver claims one job at now and reports err, as the pool does.
	deliver := func(err error) {
		id++
		j := flowJob(mail, id)
		f.Claimed(j, now)
		f.Delivered(j, err, now)
		f.Released(j)
	}
	open := func() bool { plan, _ := f.Plan(now); return quotas(plan)["mail"] == 0 }
	steps := []struct {
		name     string
		do       func()
		open     bool
		circuits string // the state Circuits reports
		log      []string
	}{
		{"two failures", func() { deliver(transient); deliver(transient) }, false, "", nil},
		{"a success resets the count", func() { deliver(nil); deliver(transient); deliver(transient) }, false, "", nil},
		{"a permanent error is an answer", func() { deliver(queue.Permanent(transient)) }, false, "", nil},
		{"three in a row open", func() { deliver(transient); deliver(transient); deliver(transient) }, true, "open",
			[]string{"mail open 10s"}},
		{"cool-down not over", func() { now = now.Add(9 * time.Second) }, true, "open", nil},
		{"cool-down over: one probe", func() { now = now.Add(time.Second) }, false, "half_open",
			[]string{"mail half_open 0s"}},
		{"the probe out, nothing else", func() { f.Claimed(flowJob(mail, 100), now) }, true, "half_open", nil},
		{"the probe handed back: another may go", func() { f.Released(flowJob(mail, 100)) }, false, "half_open", nil},
		{"the probe fails: twice the cool-down", func() { deliver(transient) }, true, "open",
			[]string{"mail open 20s"}},
		{"again: capped", func() { now = now.Add(20 * time.Second); open(); deliver(transient) }, true, "open",
			[]string{"mail half_open 0s", "mail open 25s"}},
		{"the probe succeeds: closed", func() { now = now.Add(25 * time.Second); open(); deliver(nil) }, false, "",
			[]string{"mail half_open 0s", "mail closed 0s"}},
		{"closed counts afresh", func() { deliver(transient); deliver(transient) }, false, "", nil},
	}
	for _, s := range steps {
		log = nil
		s.do()
		if got := open(); got != s.open {
			t.Errorf("%s: held back %v, want %v", s.name, got, s.open)
		}
		state := ""
		if st, ok := f.Circuits()[mail]; ok {
			state = st.String()
		}
		if state != s.circuits {
			t.Errorf("%s: Circuits %q, want %q", s.name, state, s.circuits)
		}
		if fmt.Sprint(log) != fmt.Sprint(s.log) {
			t.Errorf("%s: changes %q, want %q", s.name, log, s.log)
		}
	}
	if _, wake := f.Plan(now); !wake.IsZero() {
		t.Errorf("closed circuit: wake %s, want none", wake)
	}
}

// TestPoolFlow checks the pool against a real store: it claims no more of
// a route than the flow control allows, and jobs held back by an open
// circuit are not charged attempts.
func TestPoolFlow(t *testing.T) {
	clk := newClock()
	s := setup(t, clk.Now)
	rec := newRecorder(t, 20)
	route := queue.Route{Source: "src", Target: "mail"}
	release := make(chan struct{})
	var fail atomic.Bool
	p := newPool(t, queue.PoolConfig{
		Store: s, Now: clk.Now, Observer: rec, Workers: 4, Retry: fixedRetry(time.Hour),
		Flow: queue.NewFlow(queue.FlowConfig{Routes: []queue.Route{route},
			Limits: map[queue.Route]queue.FlowLimits{route: {
				Concurrency: 2,
				Breaker:     &queue.Breaker{Failures: 1, Cooldown: time.Minute, MaxCooldown: time.Minute}}}}),
		Handler: queue.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
			<-release
			if fail.Load() {
				return errors.New("503")
			}
			return nil
		}),
	})
	var ids []int64
	for i := range 6 {
		ids = append(ids, enqueue(t, s, fmt.Sprint("d", i), "mail"))
	}

	runOnce(t, p, 2) // the concurrency limit, though 4 workers are idle
	runOnce(t, p, 0)
	release <- struct{}{}
	release <- struct{}{}
	for range 2 {
		rec.nextFinished(t)
	}

	fail.Store(true)
	runOnce(t, p, 2)
	close(release)
	for range 2 {
		if f := rec.nextFinished(t); f.c.Status != queue.StatusPending {
			t.Fatalf("failed job %s, want pending", f.c.Status)
		}
	}
	runOnce(t, p, 0) // the circuit is open
	for _, id := range ids[4:] {
		if d := getJob(t, s, id); d.Attempts != 0 || d.Status != queue.StatusPending {
			t.Errorf("held back job %d: %s with %d attempts, want pending with 0", id, d.Status, d.Attempts)
		}
	}
	clk.Advance(time.Minute)
	fail.Store(false)
	runOnce(t, p, 1) // the probe
	if f := rec.nextFinished(t); f.c.Status != queue.StatusDone {
		t.Fatalf("probe %s, want done", f.c.Status)
	}
	runOnce(t, p, 1) // closed again: the last job
	rec.nextFinished(t)
}
