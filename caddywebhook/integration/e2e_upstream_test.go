package integration

// The recording upstream: an httptest.Server that records every delivery the
// http target makes and answers as a test scripts it.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// delivery is one request the upstream received.
type delivery struct {
	Key     string // the payload's "id": which event this is
	Path    string
	Attempt string // X-Webhook-Attempt
	Header  http.Header
	Body    []byte
	Start   time.Time
	End     time.Time // zero while the request is being answered
	Status  int       // what the upstream answered; 0 if the client gave up first
}

// script decides the answer to a request: the status, after any blocking it
// wants to do. n counts this key's requests at the upstream, 1 for the first.
// It must return when r's context is done.
type script func(r *http.Request, key string, n int) int

// always answers every request with status.
func always(status int) script {
	return func(*http.Request, string, int) int { return status }
}

// sequence answers a key's n-th request with statuses[n-1], and the last
// status after that.
func sequence(statuses ...int) script {
	return func(_ *http.Request, _ string, n int) int {
		return statuses[min(n, len(statuses))-1]
	}
}

type upstream struct {
	srv *httptest.Server

	mu      sync.Mutex
	script  script
	got     []*delivery
	perKey  map[string]int
	changed chan struct{} // closed and replaced on every change to got
}

// newUpstream starts a recording upstream that answers with s.
func newUpstream(t *testing.T, s script) *upstream {
	t.Helper()
	u := &upstream{script: s, perKey: map[string]int{}, changed: make(chan struct{})}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

// URL returns the upstream's URL for path.
func (u *upstream) URL(path string) string { return u.srv.URL + path }

// setScript changes how the upstream answers from now on.
func (u *upstream) setScript(s script) {
	u.mu.Lock()
	u.script = s
	u.mu.Unlock()
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	var p struct {
		ID string `json:"id"`
	}
	json.Unmarshal(body, &p)
	// A body without an id (a genuine Discord webhook event) is known by
	// its delivery id, which is then the receiver's body hash.
	d := &delivery{
		Key:     cmp.Or(p.ID, r.Header.Get("X-Webhook-Delivery-Id")),
		Path:    r.URL.Path,
		Attempt: r.Header.Get("X-Webhook-Attempt"),
		Header:  r.Header.Clone(),
		Body:    body,
		Start:   time.Now(),
	}
	u.mu.Lock()
	u.perKey[d.Key]++
	n := u.perKey[d.Key]
	s := u.script
	u.got = append(u.got, d)
	u.notifyLocked()
	u.mu.Unlock()

	status := s(r, d.Key, n)
	if r.Context().Err() == nil {
		w.WriteHeader(status)
		fmt.Fprintf(w, "upstream says %d\n", status)
	} else {
		status = 0
	}

	u.mu.Lock()
	d.End, d.Status = time.Now(), status
	u.notifyLocked()
	u.mu.Unlock()
}

func (u *upstream) notifyLocked() {
	close(u.changed)
	u.changed = make(chan struct{})
}

// deliveries returns a copy of everything received so far.
func (u *upstream) deliveries() []delivery {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]delivery, len(u.got))
	for i, d := range u.got {
		out[i] = *d
	}
	return out
}

// forKey returns the requests for one event, in arrival order.
func (u *upstream) forKey(key string) []delivery {
	var out []delivery
	for _, d := range u.deliveries() {
		if d.Key == key {
			out = append(out, d)
		}
	}
	return out
}

// waitFor blocks until cond holds for the recorded deliveries; the upstream
// signals every change, so there is no polling.
func (u *upstream) waitFor(t *testing.T, what string, cond func([]delivery) bool) []delivery {
	t.Helper()
	timeout := time.After(waitTimeout)
	for {
		u.mu.Lock()
		ch := u.changed
		u.mu.Unlock()
		got := u.deliveries()
		if cond(got) {
			return got
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("upstream: timed out after %s waiting for %s; got %s", waitTimeout, what, summarize(got))
		}
	}
}

// waitAnswered waits until key has n answered requests with status.
func (u *upstream) waitAnswered(t *testing.T, key string, status, n int) []delivery {
	t.Helper()
	return u.waitFor(t, fmt.Sprintf("%d answers %d for %s", n, status, key), func(ds []delivery) bool {
		c := 0
		for _, d := range ds {
			if d.Key == key && d.Status == status {
				c++
			}
		}
		return c >= n
	})
}

func summarize(ds []delivery) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d deliveries", len(ds))
	for i, d := range ds {
		if i == 20 {
			b.WriteString(" …")
			break
		}
		fmt.Fprintf(&b, "; %s attempt=%s status=%d", d.Key, d.Attempt, d.Status)
	}
	return b.String()
}
