package queuetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
	"github.com/caddywebhook/caddywebhook/queue/seal"
)

// Database is one database for RunSealed: the stores a test opens on it
// share what they store, so a test can open it with some keys, close it,
// and open it again with others, as a restart with another config does.
type Database interface {
	// Open opens a store on the database with keys, closed when t ends
	// (a second Close must be harmless).
	Open(t *testing.T, keys queue.Keys) (queue.Store, error)
	// Dump returns every byte of the database that someone without the
	// keys can read: for SQLite the file, its WAL and a backup copy; for
	// PostgreSQL the tables as SELECT returns them.
	Dump(t *testing.T) []byte
	// Exec runs query, with its tables unqualified, on the database
	// behind s (a store Open returned), as someone who can write the
	// database might.
	Exec(t *testing.T, s queue.Store, query string)
}

// RunSealed runs the conformance suite of encryption at rest (queue.Keys)
// on databases newDB makes, one per subtest.
func RunSealed(t *testing.T, newDB func(t *testing.T) Database) {
	tests := []struct {
		name string
		fn   func(t *testing.T, db Database)
	}{
		{"round trip, nothing plain", testSealRoundTrip},
		{"dedupe and lookups", testSealDedupe},
		{"counts per key", testSealCounts},
		{"secret under a missing key refuses", testSealSecretMissing},
		{"event under a missing key fails by name, replays when back", testSealMissingKey},
		{"rekey seals a plain store", testRekeyPlain},
		{"rekey rotates under load", testRekeyRotation},
		{"rekey resumes where it stopped", testRekeyResume},
		{"rekey to plain text", testRekeyToPlain},
		{"ordering keys across a rotation", testSealOrdering},
		{"a sealed value moved to another row does not open", testSealedValueMoved},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, newDB(t))
		})
	}
}

// Ring returns the ring of test keys with these ids, in order: each key's
// secret is derived from its id, so a key is the same in every call.
func Ring(t testing.TB, ids ...string) *seal.Ring {
	t.Helper()
	keys := make([]seal.Key, len(ids))
	for i, id := range ids {
		secret := sha256.Sum256([]byte("queuetest key " + id))
		k, err := seal.NewKey(id, secret[:])
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = k
	}
	r, err := seal.NewRing(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// keysOf is the Keys of the test keys ids; none is no keys.
func keysOf(t testing.TB, ids ...string) queue.Keys {
	if len(ids) == 0 {
		return queue.Keys{}
	}
	return queue.Keys{Ring: Ring(t, ids...)}
}

func openDB(t *testing.T, db Database, keys queue.Keys) queue.Store {
	t.Helper()
	s, err := db.Open(t, keys)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func setKeys(t *testing.T, s queue.Store, keys queue.Keys) {
	t.Helper()
	if err := s.SetKeys(t.Context(), keys); err != nil {
		t.Fatalf("SetKeys: %v", err)
	}
}

// marker is text no test writes anywhere but into a sender's body, a
// header and an upstream's answer: finding it in the database's bytes
// means something was stored plain.
func marker(t *testing.T) string {
	return "ZQXJ-" + strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()) + "-PLAIN"
}

// markedEvent is an event whose payload and headers carry the marker.
func markedEvent(t *testing.T, id string, targets ...string) queue.Event {
	m := marker(t)
	ev := event("shop", id, targets...)
	ev.Headers = append(ev.Headers, queue.Header{Name: "X-Customer", Value: m + "-header"})
	ev.Payload = []byte(`{"email":"` + m + `@example.com","pad":"` + strings.Repeat("x", 300) + `"}`)
	return ev
}

// wantNoMarker fails if the database's bytes hold the test's marker.
func wantNoMarker(t *testing.T, db Database) {
	t.Helper()
	if n := bytes.Count(db.Dump(t), []byte(marker(t))); n > 0 {
		t.Errorf("the database holds the plain marker %d times", n)
	}
}

// keyCounts returns Stats.Keys as "id=n" (with "?" for a key not listed).
func keyCounts(t *testing.T, s queue.Store) []string {
	t.Helper()
	var out []string
	for _, k := range stats(t, s, now()).Keys {
		line := fmt.Sprintf("%s=%d", k.KeyID, k.Values)
		if !k.Listed {
			line += "?"
		}
		out = append(out, line)
	}
	return out
}

func wantKeyCounts(t *testing.T, s queue.Store, want ...string) {
	t.Helper()
	if got := keyCounts(t, s); !slices.Equal(got, want) {
		t.Errorf("Stats.Keys = %v, want %v", got, want)
	}
}

// wantPayload checks a job's or event's headers and payload against ev's.
func wantPayload(t *testing.T, what string, hs []queue.Header, payload []byte, ev queue.Event) {
	t.Helper()
	if !bytes.Equal(payload, ev.Payload) {
		t.Errorf("%s: payload = %q, want %q", what, payload, ev.Payload)
	}
	if !slices.Equal(hs, ev.Headers) {
		t.Errorf("%s: headers = %v, want %v", what, hs, ev.Headers)
	}
}

// testSealRoundTrip stores events and error texts under a key and reads
// them back through every read (a search's scan too), while the database's bytes hold none of
// them in plain text.
func testSealRoundTrip(t *testing.T, db Database) {
	s := openDB(t, db, keysOf(t, "k1"))
	m := marker(t)
	ev := markedEvent(t, "d1", "mail", "crm")
	res := enqueue(t, s, ev)
	bare := markedEvent(t, "bare")
	enqueue(t, s, bare)

	jobs := claim(t, s, "w", 10)
	if len(jobs) != 2 {
		t.Fatalf("Claim = %d jobs, want 2", len(jobs))
	}
	for _, j := range jobs {
		if j.ReadErr != nil {
			t.Fatalf("job %d: ReadErr = %v", j.ID, j.ReadErr)
		}
		wantPayload(t, "claimed job "+j.Target, j.Headers, j.Payload, ev)
	}
	// An upstream's answer that quotes the body is sealed too.
	echo := "HTTP 500: " + m + " rejected"
	finish(t, s, retry(jobs[0], now().Add(-time.Second), echo), dead(jobs[1], echo))
	again := claimOne(t, s, "w")
	finish(t, s, retry(again, now().Add(time.Hour), echo+" again"))

	d := get(t, s, jobs[1].ID)
	wantPayload(t, "GetJob", d.Headers, d.Payload, ev)
	if d.ReadError != "" || d.LastError != echo || len(d.History) != 1 || d.History[0].Error != echo {
		t.Errorf("GetJob: read error %q, last error %q, history %+v; want the error %q opened", d.ReadError, d.LastError, d.History, echo)
	}
	page := list(t, s, queue.ListParams{})
	for _, j := range page.Jobs {
		if !strings.HasPrefix(j.LastError, "HTTP 500: "+m) {
			t.Errorf("ListJobs: job %d last error %q, want it opened", j.ID, j.LastError)
		}
	}
	e, err := s.GetEvent(t.Context(), res.EventID)
	if err != nil {
		t.Fatal(err)
	}
	wantPayload(t, "GetEvent", e.Headers, e.Payload, ev)
	f, err := s.FindEvent(t.Context(), "shop", "bare")
	if err != nil {
		t.Fatal(err)
	}
	wantPayload(t, "FindEvent", f.Headers, f.Payload, bare)
	scanned, err := s.ScanEvents(t.Context(), queue.ScanParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(scanned.Events) != 2 {
		t.Fatalf("ScanEvents = %d events, want 2", len(scanned.Events))
	}
	wantPayload(t, "ScanEvents", scanned.Events[0].Headers, scanned.Events[0].Payload, ev)
	wantPayload(t, "ScanEvents", scanned.Events[1].Headers, scanned.Events[1].Payload, bare)
	wantNoMarker(t, db)
}

// testSealDedupe checks that dedupe and the lookups by delivery id work
// on sealed events: the dedupe key stays clear.
func testSealDedupe(t *testing.T, db Database) {
	s := openDB(t, db, keysOf(t, "k1"))
	first := enqueue(t, s, markedEvent(t, "d1", "mail"))
	if dup := enqueue(t, s, markedEvent(t, "d1", "mail")); !dup.Duplicate || dup.EventID != first.EventID {
		t.Errorf("second Enqueue = %+v, want a duplicate of event %d", dup, first.EventID)
	}
	page, err := s.ListEvents(t.Context(), queue.EventListParams{EventFilter: queue.EventFilter{Source: "shop", DeliveryID: "d1"}})
	if err != nil || len(page.Events) != 1 {
		t.Fatalf("ListEvents(d1) = %+v, %v", page, err)
	}
}

// testSealCounts checks the values counted under each key as they come
// and go: events, the error texts of jobs and attempts, the secret.
func testSealCounts(t *testing.T, db Database) {
	s := openDB(t, db, keysOf(t, "k1"))
	wantKeyCounts(t, s, "k1=1") // the ordering-key secret
	for _, id := range []string{"a", "b", "c"} {
		enqueue(t, s, markedEvent(t, id, "mail"))
	}
	wantKeyCounts(t, s, "k1=4")
	if st := stats(t, s, now()); st.PlainEvents != 0 {
		t.Errorf("PlainEvents = %d, want 0", st.PlainEvents)
	}
	j := claimOne(t, s, "w")
	// A failed attempt seals two texts: the job's last error, the
	// attempt's.
	finish(t, s, retry(j, now().Add(-time.Second), "boom"))
	wantKeyCounts(t, s, "k1=6")
	j = claimOne(t, s, "w")
	finish(t, s, done(j, now())) // the last error goes, the history stays
	wantKeyCounts(t, s, "k1=5")
	j = claimOne(t, s, "w")
	finish(t, s, dead(j, "gone"))
	wantKeyCounts(t, s, "k1=7")
	if err := s.Discard(t.Context(), j.ID); err != nil { // the job, its attempt and its event
		t.Fatal(err)
	}
	wantKeyCounts(t, s, "k1=4")
	// Under a new first key, new values count there.
	setKeys(t, s, keysOf(t, "k2", "k1"))
	enqueue(t, s, markedEvent(t, "d", "mail"))
	wantKeyCounts(t, s, "k2=1", "k1=4")
	// Plain ones are counted as plain events.
	setKeys(t, s, queue.Keys{Ring: Ring(t, "k2", "k1"), DecryptOnly: true})
	enqueue(t, s, markedEvent(t, "e", "mail"))
	st := stats(t, s, now())
	if st.PlainEvents != 1 || st.Events != 4 {
		t.Errorf("Stats = %d events, %d plain; want 4, 1", st.Events, st.PlainEvents)
	}
	// A key whose values remain is shown unlisted once it is removed...
	// which the secret allows only once it is under another key: seen
	// in testSealMissingKey.
}

// testSealSecretMissing checks that a store whose ordering-key secret is
// sealed under a key the config lacks refuses to open, naming the key,
// and that SetKeys refuses such keys and keeps the ones it had.
func testSealSecretMissing(t *testing.T, db Database) {
	s := openDB(t, db, keysOf(t, "k1"))
	enqueue(t, s, markedEvent(t, "d1", "mail"))
	err := s.SetKeys(t.Context(), keysOf(t, "k2"))
	var mk *seal.MissingKeyError
	if !errors.As(err, &mk) || mk.KeyID != "k1" {
		t.Fatalf("SetKeys(k2) = %v, want the missing key k1 named", err)
	}
	j := claimOne(t, s, "w") // the old keys still serve
	if j.ReadErr != nil {
		t.Fatalf("after the refused SetKeys: ReadErr = %v", j.ReadErr)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, keys := range []queue.Keys{keysOf(t, "k2"), {}} {
		if s, err := db.Open(t, keys); err == nil || !errors.As(err, &mk) || mk.KeyID != "k1" || !strings.Contains(err.Error(), "k1") {
			if s != nil {
				s.Close()
			}
			t.Errorf("Open with keys %v = %v, want an error naming the missing key k1", keys.Ring, err)
		}
	}
	openDB(t, db, keysOf(t, "k2", "k1"))
}

// testSealMissingKey checks that a job of an event under a key no longer
// listed is never delivered as garbage: its claim carries an error naming
// the key, reads show it, and once the key is back a replay delivers it.
func testSealMissingKey(t *testing.T, db Database) {
	s := openDB(t, db, keysOf(t, "k1"))
	enqueue(t, s, markedEvent(t, "d0", "mail"))
	// Rotate everything, the secret included, to k2.
	setKeys(t, s, keysOf(t, "k2", "k1"))
	rekey(t, s, queue.RekeyParams{})
	wantKeyCounts(t, s, "k2=2")
	// k1 first again for a while: d1 is sealed under it.
	setKeys(t, s, keysOf(t, "k1", "k2"))
	ev := markedEvent(t, "d1", "mail")
	enqueue(t, s, ev)
	// k1 removed: the store opens (its secret is under k2), d1 does not.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openDB(t, db, keysOf(t, "k2"))
	wantKeyCounts(t, s, "k2=2", "k1=1?")
	jobs := claim(t, s, "w", 10)
	var j *queue.Job
	for _, c := range jobs {
		if c.DeliveryID == "d1" {
			j = c
		} else {
			finish(t, s, done(c, now()))
		}
	}
	if j == nil {
		t.Fatalf("claimed %v, want d1 among them", claimedDeliveries(jobs))
	}
	var mk *seal.MissingKeyError
	if !errors.As(j.ReadErr, &mk) || mk.KeyID != "k1" || len(j.Payload) != 0 {
		t.Fatalf("claimed d1: ReadErr %v, payload %q; want the missing key k1 named and no payload", j.ReadErr, j.Payload)
	}
	finish(t, s, dead(j, j.ReadErr.Error()))
	d := get(t, s, j.ID)
	if !strings.Contains(d.ReadError, "k1") || !strings.Contains(d.LastError, "k1") || len(d.Payload) != 0 {
		t.Errorf("GetJob: read error %q, last error %q; want both to name k1", d.ReadError, d.LastError)
	}
	// The key is back: a replay delivers the event as it was sent.
	setKeys(t, s, keysOf(t, "k2", "k1"))
	if err := s.Replay(t.Context(), j.ID); err != nil {
		t.Fatal(err)
	}
	j = claimOne(t, s, "w")
	if j.ReadErr != nil {
		t.Fatalf("after the replay: ReadErr = %v", j.ReadErr)
	}
	wantPayload(t, "replayed job", j.Headers, j.Payload, ev)
}

// rekey runs a rekey to its end.
func rekey(t *testing.T, s queue.Store, p queue.RekeyParams) queue.RekeyProgress {
	t.Helper()
	prog, err := s.Rekey(t.Context(), p)
	if err != nil {
		t.Fatalf("Rekey: %v (progress %+v)", err, prog)
	}
	if prog.Phase != "done" || prog.Remaining != 0 {
		t.Fatalf("Rekey = %+v, want done with nothing remaining", prog)
	}
	return prog
}

// testRekeyPlain checks that a store whose events were stored plain ends
// fully sealed after a rekey, with nothing of them left in the database,
// and that a second rekey has nothing to do.
func testRekeyPlain(t *testing.T, db Database) {
	s := openDB(t, db, queue.Keys{})
	var evs []queue.Event
	for i := range 40 {
		ev := markedEvent(t, fmt.Sprintf("d%02d", i), "mail")
		if i%4 == 0 {
			ev.OrderingKey = "customer-" + marker(t)
		}
		evs = append(evs, ev)
		enqueue(t, s, ev)
	}
	for range 5 {
		j := claimOne(t, s, "w")
		finish(t, s, dead(j, "HTTP 422: "+marker(t)))
	}
	if st := stats(t, s, now()); st.PlainEvents != 40 || len(st.Keys) != 0 {
		t.Fatalf("before: %d plain events, keys %v; want 40, none", st.PlainEvents, st.Keys)
	}
	if _, err := s.Rekey(t.Context(), queue.RekeyParams{}); !errors.Is(err, queue.ErrRekeyNoKeys) {
		t.Errorf("Rekey without keys = %v, want ErrRekeyNoKeys", err)
	}
	setKeys(t, s, keysOf(t, "k1"))
	var reports atomic.Int64
	prog := rekey(t, s, queue.RekeyParams{Progress: func(queue.RekeyProgress) { reports.Add(1) }})
	// 40 events, 10 error texts, the secret.
	if prog.Resealed != 51 || prog.Nothing || reports.Load() == 0 {
		t.Errorf("Rekey = %+v after %d reports, want 51 values resealed", prog, reports.Load())
	}
	wantKeyCounts(t, s, "k1=51")
	if st := stats(t, s, now()); st.PlainEvents != 0 {
		t.Errorf("after: %d plain events, want 0", st.PlainEvents)
	}
	if again := rekey(t, s, queue.RekeyParams{}); !again.Nothing || again.Resealed != 0 || again.Walked != 0 {
		t.Errorf("second Rekey = %+v, want nothing to do", again)
	}
	wantNoMarker(t, db)
	// Everything still reads as it was sent.
	for _, j := range claim(t, s, "w", 100) {
		i := slices.IndexFunc(evs, func(e queue.Event) bool { return e.DeliveryID == j.DeliveryID })
		wantPayload(t, "claimed "+j.DeliveryID, j.Headers, j.Payload, evs[i])
	}
}

// testRekeyRotation rotates from k1 to k2 while events keep arriving and
// jobs keep finishing: at the end nothing is under k1, and every event
// reads as it was sent.
func testRekeyRotation(t *testing.T, db Database) {
	s := openDB(t, db, keysOf(t, "k1"))
	sent := make(map[string]queue.Event)
	var mu sync.Mutex
	add := func(id string) {
		ev := markedEvent(t, id, "mail")
		enqueue(t, s, ev)
		mu.Lock()
		sent[id] = ev
		mu.Unlock()
	}
	for i := range 300 {
		add(fmt.Sprintf("old%03d", i))
	}
	setKeys(t, s, keysOf(t, "k2", "k1"))
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			add(fmt.Sprintf("new%04d", i))
			jobs, err := s.Claim(ctx, queue.ClaimParams{Owner: "w", Limit: 3, Lease: lease})
			if err != nil {
				return
			}
			for k, j := range jobs {
				c := done(j, now())
				if k == 0 {
					c = retry(j, now().Add(time.Hour), "HTTP 503 "+marker(t))
				}
				if _, err := s.Finish(context.WithoutCancel(ctx), []queue.Completion{c}); err != nil {
					t.Errorf("Finish: %v", err)
				}
			}
		}
	})
	prog, err := s.Rekey(t.Context(), queue.RekeyParams{})
	cancel()
	wg.Wait()
	if err != nil {
		t.Fatalf("Rekey: %v", err)
	}
	if prog.Resealed < 301 {
		t.Errorf("Rekey = %+v, want at least the 300 events and the secret resealed", prog)
	}
	for _, k := range stats(t, s, now()).Keys {
		if k.KeyID != "k2" {
			t.Errorf("after the rekey %d values are under %s", k.Values, k.KeyID)
		}
	}
	// k1 can go.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openDB(t, db, keysOf(t, "k2"))
	page, err := s.ListEvents(t.Context(), queue.EventListParams{Limit: queue.MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != len(sent) {
		t.Errorf("ListEvents = %d events, want %d", len(page.Events), len(sent))
	}
	for _, e := range page.Events {
		d, err := s.GetEvent(t.Context(), e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.ReadError != "" {
			t.Errorf("event %s: %s", e.DeliveryID, d.ReadError)
			continue
		}
		wantPayload(t, "event "+e.DeliveryID, d.Headers, d.Payload, sent[e.DeliveryID])
	}
	for _, j := range list(t, s, queue.ListParams{Limit: queue.MaxListLimit}).Jobs {
		if j.LastError != "" && !strings.HasPrefix(j.LastError, "HTTP 503") {
			t.Errorf("job %d: last error %q", j.ID, j.LastError)
		}
	}
}

// testRekeyResume stops a rekey part way and runs it again: the second
// run picks up where the first stopped, and the two reseal every value
// once.
func testRekeyResume(t *testing.T, db Database) {
	s := openDB(t, db, keysOf(t, "k1"))
	for i := range 700 { // three chunks of events
		enqueue(t, s, event("shop", fmt.Sprintf("d%03d", i), "mail"))
	}
	setKeys(t, s, keysOf(t, "k2", "k1"))
	ctx, cancel := context.WithCancel(t.Context())
	first, err := s.Rekey(ctx, queue.RekeyParams{Progress: func(p queue.RekeyProgress) {
		if p.Table == "events" && p.Walked > 1 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("first Rekey = %+v, %v; want it stopped", first, err)
	}
	if first.Resealed == 0 || first.Remaining == 0 {
		t.Fatalf("first Rekey = %+v, want some resealed and some left", first)
	}
	second := rekey(t, s, queue.RekeyParams{})
	if got := first.Resealed + second.Resealed; got != 701 || second.Walked >= 701 {
		t.Errorf("resealed %d + %d = %d, walked %d in the second; want 701 in all, the second starting where the first stopped",
			first.Resealed, second.Resealed, got, second.Walked)
	}
	wantKeyCounts(t, s, "k2=701")
}

// testRekeyToPlain checks the way out of encryption: keys kept listed
// but writing plain, then a rekey to plain text, after which the store
// opens without keys.
func testRekeyToPlain(t *testing.T, db Database) {
	s := openDB(t, db, keysOf(t, "k1"))
	ev := markedEvent(t, "d1", "mail")
	enqueue(t, s, ev)
	j := claimOne(t, s, "w")
	finish(t, s, retry(j, now().Add(-time.Second), "boom"))
	if _, err := s.Rekey(t.Context(), queue.RekeyParams{ToPlainText: true}); !errors.Is(err, queue.ErrRekeyNeedsDecryptOnly) {
		t.Errorf("Rekey to plain text while sealing = %v, want ErrRekeyNeedsDecryptOnly", err)
	}
	setKeys(t, s, queue.Keys{Ring: Ring(t, "k1"), DecryptOnly: true})
	enqueue(t, s, markedEvent(t, "d2", "mail")) // written plain
	prog := rekey(t, s, queue.RekeyParams{ToPlainText: true})
	if prog.Resealed != 4 { // the event, two texts, the secret
		t.Errorf("Rekey = %+v, want 4 values written plain", prog)
	}
	wantKeyCounts(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openDB(t, db, queue.Keys{})
	j = claimOne(t, s, "w")
	if j.DeliveryID != "d1" || j.ReadErr != nil {
		t.Fatalf("claimed %s, %v", j.DeliveryID, j.ReadErr)
	}
	wantPayload(t, "plain again", j.Headers, j.Payload, ev)
	if d := get(t, s, j.ID); len(d.History) != 1 || d.History[0].Error != "boom" {
		t.Errorf("history = %+v, want boom, plain", d.History)
	}
}

// testSealOrdering checks that the jobs of one ordering key stay in one
// chain across encryption turned on, a rotation and the old key's
// removal: the key's hash never changes.
func testSealOrdering(t *testing.T, db Database) {
	s := openDB(t, db, queue.Keys{})
	enqueue(t, s, keyed("k1", "customer-42", false, "mail"))
	setKeys(t, s, keysOf(t, "a"))
	enqueue(t, s, keyed("k2", "customer-42", false, "mail"))
	setKeys(t, s, keysOf(t, "b", "a"))
	enqueue(t, s, keyed("k3", "customer-42", false, "mail"))
	rekey(t, s, queue.RekeyParams{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openDB(t, db, keysOf(t, "b"))
	enqueue(t, s, keyed("k4", "customer-42", false, "mail"))
	for _, want := range []string{"k1", "k2", "k3", "k4"} {
		jobs := claim(t, s, "w", 10)
		if len(jobs) != 1 || jobs[0].DeliveryID != want {
			t.Fatalf("Claim = %v, want %s alone: the key's chain is split", claimedDeliveries(jobs), want)
		}
		finish(t, s, done(jobs[0], now()))
	}
}

// testSealedValueMoved copies one event's sealed value onto another row:
// it does not open there, and the job of that row fails rather than
// deliver the other event.
func testSealedValueMoved(t *testing.T, db Database) {
	s := openDB(t, db, keysOf(t, "k1"))
	for _, id := range []string{"d1", "d2"} {
		enqueue(t, s, event("shop", id, "mail"))
	}
	db.Exec(t, s, `UPDATE events SET sealed = (SELECT sealed FROM events WHERE delivery_id = 'd1') WHERE delivery_id = 'd2'`)
	d, err := s.FindEvent(t.Context(), "shop", "d2")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.ReadError, "authentication failed") || len(d.Payload) != 0 {
		t.Errorf("FindEvent(d2) = read error %q, payload %q; want it refused", d.ReadError, d.Payload)
	}
	jobs, err := s.Claim(t.Context(), queue.ClaimParams{Owner: "w", Limit: 2, Lease: time.Minute})
	if err != nil || len(jobs) != 2 {
		t.Fatalf("Claim = %d jobs, %v", len(jobs), err)
	}
	for _, j := range jobs {
		if moved := j.DeliveryID == "d2"; moved != errors.Is(j.ReadErr, seal.ErrNotAuthentic) {
			t.Errorf("job of %s: ReadErr %v, payload %q", j.DeliveryID, j.ReadErr, j.Payload)
		}
	}
}
