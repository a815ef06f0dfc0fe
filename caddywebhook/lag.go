package caddywebhook

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/queue"
)

// lagWindow is how far back the admin API's recent lag looks.
const lagWindow = 5 * time.Minute

// lagSamples is how many recent deliveries a route keeps for its recent
// lag: a fixed ring, so memory stays bounded however fast it delivers.
const lagSamples = 512

type lagRings struct {
	mu     sync.Mutex
	routes map[queue.Route]*lagRing
}

type lagRing struct {
	at   [lagSamples]time.Time
	lag  [lagSamples]time.Duration
	next int
	n    int
}

func (l *lagRings) add(route queue.Route, at time.Time, lag time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.routes[route]
	if r == nil {
		r = new(lagRing)
		l.routes[route] = r
	}
	r.at[r.next], r.lag[r.next] = at, max(lag, 0)
	r.next = (r.next + 1) % lagSamples
	r.n = min(r.n+1, lagSamples)
}

// snapshot returns the recent lag of every route that delivered since
// now − lagWindow, sorted by route.
func (l *lagRings) snapshot(now time.Time) []adminapi.RecentLag {
	since := now.Add(-lagWindow)
	l.mu.Lock()
	var out []adminapi.RecentLag
	var buf []time.Duration
	for route, r := range l.routes {
		buf = buf[:0]
		for i := range r.n {
			if !r.at[i].Before(since) {
				buf = append(buf, r.lag[i])
			}
		}
		if len(buf) == 0 {
			continue
		}
		slices.Sort(buf)
		out = append(out, adminapi.RecentLag{Source: route.Source, Target: route.Target, Deliveries: len(buf),
			P50: quantile(buf, 0.50), P99: quantile(buf, 0.99)})
	}
	l.mu.Unlock()
	slices.SortFunc(out, func(a, b adminapi.RecentLag) int {
		if a.Source != b.Source {
			return strings.Compare(a.Source, b.Source)
		}
		return strings.Compare(a.Target, b.Target)
	})
	return out
}

// quantile is the nearest-rank q-quantile of sorted, which is not empty.
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
