package storekit_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/storekit"
)

func TestCheckEvent(t *testing.T) {
	tests := []struct {
		name string
		ev   queue.Event
		ok   bool
	}{
		{"source and delivery id", queue.Event{Source: "shop", DeliveryID: "d1"}, true},
		{"no source", queue.Event{DeliveryID: "d1"}, false},
		{"no delivery id", queue.Event{Source: "shop"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := storekit.CheckEvent(tt.ev); (err == nil) != tt.ok {
				t.Errorf("CheckEvent = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

func TestCheckClaim(t *testing.T) {
	valid := queue.ClaimParams{Owner: "w", Limit: 1, Lease: time.Second}
	tests := []struct {
		name   string
		edit   func(p *queue.ClaimParams)
		none   bool
		errHas string
	}{
		{"valid", func(*queue.ClaimParams) {}, false, ""},
		{"nil routes claim anything", func(p *queue.ClaimParams) { p.Routes = nil }, false, ""},
		{"no owner", func(p *queue.ClaimParams) { p.Owner = "" }, false, "Owner"},
		{"zero lease", func(p *queue.ClaimParams) { p.Lease = 0 }, false, "Lease"},
		{"zero limit", func(p *queue.ClaimParams) { p.Limit = 0 }, true, ""},
		{"empty routes", func(p *queue.ClaimParams) { p.Routes = []queue.Route{} }, true, ""},
		{"quotas per route", func(p *queue.ClaimParams) {
			p.Routes, p.Quotas = []queue.Route{{Source: "s", Target: "t"}}, []int{2}
		}, false, ""},
		{"quotas without routes", func(p *queue.ClaimParams) { p.Quotas = []int{2} }, false, "Quotas"},
		{"zero quota", func(p *queue.ClaimParams) {
			p.Routes, p.Quotas = []queue.Route{{Source: "s", Target: "t"}}, []int{0}
		}, false, "Quotas[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := valid
			tt.edit(&p)
			none, err := storekit.CheckClaim(p)
			if tt.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("CheckClaim = %v, %v; want an error naming %s", none, err, tt.errHas)
				}
				return
			}
			if err != nil || none != tt.none {
				t.Errorf("CheckClaim = %v, %v; want %v, nil", none, err, tt.none)
			}
		})
	}
}

func TestCompletionTimes(t *testing.T) {
	now := time.Unix(100, 0)
	stamp := time.Unix(50, 0)
	retry := time.Unix(200, 0)
	tests := []struct {
		name      string
		c         queue.Completion
		at, runAt time.Time
	}{
		{"both zero: now", queue.Completion{}, now, now},
		{"stamped: retry due then", queue.Completion{Now: stamp}, stamp, stamp},
		{"both set", queue.Completion{Now: stamp, RunAt: retry}, stamp, retry},
		{"run at only", queue.Completion{RunAt: retry}, now, retry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at, runAt := storekit.Times(&tt.c, now)
			if !at.Equal(tt.at) || !runAt.Equal(tt.runAt) {
				t.Errorf("Times = %v, %v; want %v, %v", at, runAt, tt.at, tt.runAt)
			}
		})
	}
}

func TestEventJobs(t *testing.T) {
	tests := []struct {
		name string
		ids  []int64
		add  [][2]int64 // event id, job id
		want map[int64][]int64
	}{
		{"no events", nil, nil, map[int64][]int64{}},
		{"event without jobs", []int64{7}, nil, map[int64][]int64{7: {}}},
		{"jobs in order, other event's dropped", []int64{9, 7},
			[][2]int64{{7, 1}, {9, 2}, {7, 3}, {8, 4}},
			map[int64][]int64{9: {2}, 7: {1, 3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events := make([]queue.EventSummary, len(tt.ids))
			for i, id := range tt.ids {
				events[i].ID = id
			}
			ids, add := storekit.EventJobs(events)
			if !slices.Equal(ids, tt.ids) {
				t.Errorf("ids = %v, want %v", ids, tt.ids)
			}
			for _, a := range tt.add {
				add(a[0], queue.EventJob{ID: a[1]})
			}
			for _, e := range events {
				if e.Jobs == nil {
					t.Errorf("event %d: Jobs is nil, want empty", e.ID)
				}
				var got []int64
				for _, j := range e.Jobs {
					got = append(got, j.ID)
				}
				if want := tt.want[e.ID]; !slices.Equal(got, want) {
					t.Errorf("event %d jobs = %v, want %v", e.ID, got, want)
				}
			}
		})
	}
}

func TestScanWindow(t *testing.T) {
	id := func(v int64) *int64 { return &v }
	tests := []struct {
		name       string
		after      int64
		end, last  *int64
		upTo, next int64
		ok         bool
	}{
		{"no events", 0, nil, nil, 0, 0, false},
		{"nothing after the cursor", 9, nil, id(9), 0, 0, false},
		{"fewer than a page left", 3, nil, id(9), 9, 0, true},
		{"a page ending at the newest", 3, id(9), id(9), 9, 0, true},
		{"a page with more after it", 3, id(6), id(9), 6, 6, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			upTo, next, ok := storekit.ScanWindow(tt.after, tt.end, tt.last)
			if upTo != tt.upTo || next != tt.next || ok != tt.ok {
				t.Errorf("ScanWindow = %d, %d, %v; want %d, %d, %v", upTo, next, ok, tt.upTo, tt.next, tt.ok)
			}
		})
	}
}

// TestBulkInChunks drives the one loop of the bulk operations over a count
// of rows: which sizes it asks for, when it stops, what it returns.
func TestBulkInChunks(t *testing.T) {
	errDisk := errors.New("disk full")
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name         string
		ctx          context.Context
		rows         int
		limit, batch int
		failAt       int // the call (from 1) that fails after deleting one row; 0: none
		wantCalls    []int
		want         int
		wantErr      error
	}{
		{"short batch ends it", t.Context(), 5, math.MaxInt, 2, 0, []int{2, 2, 2}, 5, nil},
		{"full batches need an empty call", t.Context(), 4, math.MaxInt, 2, 0, []int{2, 2, 2}, 4, nil},
		{"limit caps the last call", t.Context(), 10, 5, 2, 0, []int{2, 2, 1}, 5, nil},
		{"limit 0 deletes nothing", t.Context(), 10, 0, 2, 0, nil, 0, nil},
		{"batch 0 deletes nothing", t.Context(), 10, math.MaxInt, 0, 0, nil, 0, nil},
		{"a failure keeps its count", t.Context(), 10, math.MaxInt, 2, 2, []int{2, 2}, 3, errDisk},
		{"an ended context calls nothing", ended, 10, math.MaxInt, 2, 0, nil, 0, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows := tt.rows
			var calls []int
			got, err := storekit.BulkInChunks(tt.ctx, tt.limit, tt.batch, func(n int) (int, error) {
				calls = append(calls, n)
				if len(calls) == tt.failAt {
					rows--
					return 1, errDisk
				}
				n = min(n, rows)
				rows -= n
				return n, nil
			})
			if got != tt.want || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Errorf("BulkInChunks = %d, %v; want %d, %v", got, err, tt.want, tt.wantErr)
			}
			if fmt.Sprint(calls) != fmt.Sprint(tt.wantCalls) {
				t.Errorf("calls asked for %v rows, want %v", calls, tt.wantCalls)
			}
		})
	}
}
