package storekit_test

import (
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
