package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

// enqueueWant enqueues ev and checks whether the store called it a
// duplicate; it returns the event's id.
func enqueueWant(t *testing.T, s *Store, ev queue.Event, dup bool) int64 {
	t.Helper()
	res, err := s.Enqueue(t.Context(), ev)
	if err != nil {
		t.Fatalf("Enqueue %s: %v", ev.DeliveryID, err)
	}
	if res.Duplicate != dup {
		t.Fatalf("Enqueue %s: duplicate = %v, want %v", ev.DeliveryID, res.Duplicate, dup)
	}
	return res.EventID
}

// TestDedupeKeys: the dedupe keys live in memory and in event_keys, not
// in an index; each way the set could go stale is covered.
func TestDedupeKeys(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, s *Store)
	}{
		{"duplicate in another batch", func(t *testing.T, s *Store) {
			first := enqueueWant(t, s, testEvent("a", "mail"), false)
			if again := enqueueWant(t, s, testEvent("a", "mail"), true); again != first {
				t.Errorf("duplicate names event %d, want %d", again, first)
			}
			other := testEvent("a", "mail")
			other.Source = "billing"
			enqueueWant(t, s, other, false) // the key is the source and the id
		}},
		{"a read by delivery id after Close", func(t *testing.T, s *Store) {
			// Close gives the key set's table back; a read that comes
			// after it finds nothing, and must not touch the freed table.
			enqueueWant(t, s, testEvent("a", "mail"), false)
			if got := s.keyIDs("shop", "a"); got == "[]" {
				t.Fatalf("keyIDs before Close = %s, want the event", got)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if got := s.keyIDs("shop", "a"); got != "[]" {
				t.Errorf("keyIDs after Close = %s, want []", got)
			}
		}},
		{"after a restart", func(t *testing.T, s *Store) {
			first := enqueueWant(t, s, testEvent("a", "mail"), false)
			path := s.path
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s2 := setup(t, func(c *Config) { c.Path = path })
			if again := enqueueWant(t, s2, testEvent("a", "mail"), true); again != first {
				t.Errorf("duplicate names event %d, want %d", again, first)
			}
		}},
		{"a NUL in the delivery id, after a restart", func(t *testing.T, s *Store) {
			// The stored hash must be of the whole id: SQL text handed
			// to a Go function as a C string would end at the NUL.
			first := enqueueWant(t, s, testEvent("abc\x00x", "mail"), false)
			enqueueWant(t, s, testEvent("abc", "mail"), false)
			path := s.path
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s2 := setup(t, func(c *Config) { c.Path = path })
			if again := enqueueWant(t, s2, testEvent("abc\x00x", "mail"), true); again != first {
				t.Errorf("duplicate names event %d, want %d", again, first)
			}
		}},
		{"written by a second store on the file", func(t *testing.T, s *Store) {
			s2 := setup(t, func(c *Config) { c.Path = s.path })
			enqueueWant(t, s, testEvent("a", "mail"), false) // s2 read the keys before
			enqueueWant(t, s2, testEvent("a", "mail"), true)
			enqueueWant(t, s2, testEvent("b", "mail"), false)
			enqueueWant(t, s, testEvent("b", "mail"), true)
		}},
		{"inserted outside the group commit", func(t *testing.T, s *Store) {
			if err := s.onWriterNow(t, `INSERT INTO events (source, delivery_id, headers, payload, targets, created_at)
VALUES ('shop', 'by-hand', x'', x'', 0, 0)`); err != nil {
				t.Fatal(err)
			}
			enqueueWant(t, s, testEvent("by-hand", "mail"), true)
		}},
		{"rolled back with a failed neighbour", func(t *testing.T, s *Store) {
			// The refused job fails its enqueue after the event row was
			// inserted: its key must leave the set with the rollback.
			rolledBackEnqueue(t, s, "r")
			enqueueWant(t, s, testEvent("other", "mail"), false)
			if n := s.keys.len(); n != 1 {
				t.Errorf("key set holds %d keys, want 1 (the rolled-back event's left)", n)
			}
			enqueueWant(t, s, testEvent("r", "mail"), false)
		}},
		{"rolled back, then a call on the write connection", func(t *testing.T, s *Store) {
			// Between the failed batch and the next one, a call outside
			// the group commit (a control call, as a checkpoint's) must
			// not keep the rolled-back key.
			rolledBackEnqueue(t, s, "r")
			if err := s.onWriter(t.Context(), func(*writer) error { return nil }); err != nil {
				t.Fatal(err)
			}
			enqueueWant(t, s, testEvent("other", "mail"), false)
			if n := s.keys.len(); n != 1 {
				t.Errorf("key set holds %d keys, want 1 (the rolled-back event's left)", n)
			}
		}},
		{"purged", func(t *testing.T, s *Store) {
			// A bare event (no target) is kept only as dedupe memory and
			// purged by age: then the id is new again.
			enqueueWant(t, s, testEvent("bare"), false)
			if _, err := s.Purge(t.Context(), time.Now().Add(time.Hour), 100); err != nil {
				t.Fatal(err)
			}
			if n := s.keys.len(); n != 0 {
				t.Errorf("key set holds %d keys after the purge, want 0", n)
			}
			enqueueWant(t, s, testEvent("bare"), false)
		}},
		{"hashes two keys share", func(t *testing.T, s *Store) {
			// Every key hashes alike: the rows tell them apart.
			old := keyHash
			keyHash = func(string, string) uint64 { return 42 }
			t.Cleanup(func() { keyHash = old })
			ids := map[string]int64{}
			for _, id := range []string{"x", "y", "z"} {
				ids[id] = enqueueWant(t, s, testEvent(id, "mail"), false)
			}
			for _, id := range []string{"y", "x", "z"} {
				if got := enqueueWant(t, s, testEvent(id, "mail"), true); got != ids[id] {
					t.Errorf("duplicate of %s names event %d, want %d", id, got, ids[id])
				}
				d, err := s.FindEvent(t.Context(), "shop", id)
				if err != nil || d.ID != ids[id] {
					t.Errorf("FindEvent %s = %d, %v; want %d", id, d.ID, err, ids[id])
				}
			}
			if err := s.Discard(t.Context(), jobOf(t, s, ids["x"])); err != nil {
				t.Fatal(err)
			}
			enqueueWant(t, s, testEvent("x", "mail"), false)
			enqueueWant(t, s, testEvent("z", "mail"), true)
		}},
		{"found by delivery id", func(t *testing.T, s *Store) {
			id := enqueueWant(t, s, testEvent("look-me-up", "mail"), false)
			d, err := s.FindEvent(t.Context(), "shop", "look-me-up")
			if err != nil || d.ID != id {
				t.Fatalf("FindEvent = %d, %v; want %d", d.ID, err, id)
			}
			if _, err := s.FindEvent(t.Context(), "shop", "never-sent"); !errors.Is(err, queue.ErrEventNotFound) {
				t.Errorf("FindEvent of an unknown id = %v, want ErrEventNotFound", err)
			}
			page, err := s.ListJobs(t.Context(), queue.ListParams{Filter: queue.Filter{Source: "shop"}, DeliveryID: "look-me-up"})
			if err != nil || len(page.Jobs) != 1 || page.Jobs[0].EventID != id {
				t.Errorf("ListJobs by delivery id = %+v, %v; want the event's one job", page.Jobs, err)
			}
			events, err := s.ListEvents(t.Context(), queue.EventListParams{EventFilter: queue.EventFilter{Source: "shop", DeliveryID: "look-me-up"}})
			if err != nil || len(events.Events) != 1 || events.Events[0].ID != id {
				t.Errorf("ListEvents by delivery id = %+v, %v; want the event", events.Events, err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t, setup(t))
		})
	}
}

// jobOf returns the id of event's only job.
func jobOf(t *testing.T, s *Store, event int64) int64 {
	t.Helper()
	d, err := s.GetEvent(t.Context(), event)
	if err != nil || len(d.Jobs) != 1 {
		t.Fatalf("GetEvent %d = %+v, %v; want one job", event, d.Jobs, err)
	}
	return d.Jobs[0].ID
}

// TestMigrateDedupeFromVersion9 opens a database of schema version 9,
// whose events carry the unique index: the events are kept with their ids
// and jobs, their keys still dedupe, and the index is gone.
func TestMigrateDedupeFromVersion9(t *testing.T) {
	path := filepath.Join(t.TempDir(), "queue.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range migrations[:9] {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("migration %d: %v", i+1, err)
		}
	}
	for _, q := range []string{
		"PRAGMA user_version = 9",
		`INSERT INTO events (id, source, delivery_id, headers, payload, targets, created_at, trace) VALUES
			(7, 'shop', 'd7', x'', x'7b7d', 1, 0, NULL),
			(9, 'shop', 'd9', x'', x'7b7d', 1, 0, '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01')`,
		`INSERT INTO jobs (id, event_id, source, target, status, run_at, created_at) VALUES
			(1, 7, 'shop', 'mail', 'pending', 0, 0), (2, 9, 'shop', 'mail', 'pending', 0, 0)`,
		`UPDATE event_count SET events = 2`,
	} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%.40s: %v", q, err)
		}
	}
	db.Close()

	s := setup(t, func(c *Config) { c.Path = path })
	if got := enqueueWant(t, s, testEvent("d9", "mail"), true); got != 9 {
		t.Errorf("duplicate of d9 names event %d, want 9", got)
	}
	if got := enqueueWant(t, s, testEvent("d8", "mail"), false); got != 10 {
		t.Errorf("new event got id %d, want 10 (after the copied ids)", got)
	}
	d, err := s.FindEvent(t.Context(), "shop", "d7")
	if err != nil || d.ID != 7 || len(d.Jobs) != 1 || d.Jobs[0].ID != 1 {
		t.Errorf("FindEvent d7 = %+v, %v; want event 7 with job 1", d, err)
	}
	st, err := s.Stats(t.Context(), time.Now())
	if err != nil || st.Events != 3 {
		t.Errorf("Stats = %+v, %v; want 3 events", st, err)
	}
	var indexes, broken int
	if err := s.rdb.QueryRowContext(t.Context(), `SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'events' AND name LIKE 'sqlite_autoindex%'`).Scan(&indexes); err != nil {
		t.Fatal(err)
	}
	if err := s.rdb.QueryRowContext(t.Context(), `SELECT count(*) FROM pragma_foreign_key_check`).Scan(&broken); err != nil {
		t.Fatal(err)
	}
	if indexes != 0 || broken != 0 {
		t.Errorf("events has %d unique indexes and %d broken references, want none", indexes, broken)
	}
}

// TestKeySetAgainstMap drives the open-addressing key set and a map with
// the same random adds and removes, and wants, for every hash, the ids the
// map holds for it, and besides them only ids of keys that share its tag:
// hashes from a small space make long probe runs, runs that wrap around
// the table's end, shared hashes, shared tags and growth, and ids far from
// the first one, or not positive, which no slot holds.
func TestKeySetAgainstMap(t *testing.T) {
	const region = 1 << 54 // 1/1024 of the mixed values
	tests := []struct {
		name string
		// hashes: how many distinct hashes the operations draw from; with
		// near, each is one whose mixed value near accepts, so their home
		// slots crowd one part of the table; with sharedTags, they come
		// in pairs that share a tag.
		hashes     int
		near       func(mixed uint64) bool
		sharedTags bool
		// id gives the n'th event added its id; nil: n.
		id  func(n int64) int64
		ops int
	}{
		{name: "distinct hashes", hashes: 1 << 30, ops: 20000},
		{name: "crowded home slots", hashes: 64, near: func(m uint64) bool { return m < region }, ops: 5000},
		{name: "runs across the table's end", hashes: 16, near: func(m uint64) bool { return m > ^uint64(0)-region }, ops: 5000},
		{name: "hashes sharing a tag", hashes: 16, sharedTags: true, ops: 5000},
		{name: "growth", hashes: 1 << 20, ops: 50000},
		{name: "ids below the first", hashes: 1 << 30, id: func(n int64) int64 {
			if n == 1 {
				return 1_000_000 // the base: the ids after it lie below it
			}
			return n
		}, ops: 5000},
		{name: "ids no slot holds", hashes: 1 << 20, id: func(n int64) int64 {
			switch {
			case n%7 == 0:
				return n + 1<<33 // too far from the base
			case n%11 == 0:
				return -n
			}
			return n
		}, ops: 20000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(tt.ops)))
			k := newKeySet(0)
			draw := func() uint64 { return rng.Uint64N(uint64(tt.hashes)) << 20 }
			if tt.near != nil {
				pool := make([]uint64, 0, tt.hashes)
				for len(pool) < tt.hashes {
					if h := rng.Uint64(); tt.near(k.mixed(h)) {
						pool = append(pool, h)
					}
				}
				draw = func() uint64 { return pool[rng.IntN(len(pool))] }
			}
			if tt.sharedTags {
				pool := make([]uint64, 0, tt.hashes)
				byTag := map[uint32]uint64{}
				for len(pool) < tt.hashes {
					h := rng.Uint64()
					if other, ok := byTag[k.tag(h)]; ok && other != h {
						pool = append(pool, other, h)
						delete(byTag, k.tag(h))
						continue
					}
					byTag[k.tag(h)] = h
				}
				draw = func() uint64 { return pool[rng.IntN(len(pool))] }
			}
			id := tt.id
			if id == nil {
				id = func(n int64) int64 { return n }
			}
			model := map[uint64][]int64{}
			var live []eventKey
			next := int64(0)
			for range tt.ops {
				if len(live) > 0 && rng.IntN(3) == 0 {
					i := rng.IntN(len(live))
					e := live[i]
					live[i] = live[len(live)-1]
					live = live[:len(live)-1]
					k.remove(e.hash, e.id)
					ids := model[e.hash]
					for j, id := range ids {
						if id == e.id {
							model[e.hash] = append(ids[:j:j], ids[j+1:]...)
							break
						}
					}
					continue
				}
				next++
				e := eventKey{hash: draw(), id: id(next)}
				k.add(e.hash, e.id)
				model[e.hash] = append(model[e.hash], e.id)
				live = append(live, e)
			}
			if k.len() != len(live) {
				t.Errorf("len = %d, want %d", k.len(), len(live))
			}
			hashOf := map[int64]uint64{}
			for _, e := range live {
				hashOf[e.id] = e.hash
			}
			for h, want := range model {
				var got []int64
				for _, id := range k.candidates(nil, h) {
					other, ok := hashOf[id]
					switch {
					case !ok:
						t.Fatalf("candidates(%d) has %d, an id not in the set", h, id)
					case other == h:
						got = append(got, id)
					case k.tag(other) != k.tag(h):
						t.Fatalf("candidates(%d) has %d, of a hash with another tag", h, id)
					}
				}
				slices.Sort(got)
				want = slices.Sorted(slices.Values(want))
				if !slices.Equal(got, want) {
					t.Fatalf("candidates(%d) = %v, want %v", h, got, want)
				}
			}
		})
	}
}

// TestKeySetSequentialIDs checks that keys differing only in their last
// bytes, as sequential delivery ids do, spread over the table. Placed by
// FNV's own high bits they ran together: 146 probes per lookup at
// 100,000 ids, and lookups grew with the table.
func TestKeySetSequentialIDs(t *testing.T) {
	tests := []struct {
		name   string
		source string
		format string
		n      int
	}{
		{name: "load test ids", source: "github", format: "lt-1-%d", n: 100_000},
		{name: "stripe-like ids", source: "stripe", format: "evt_1QxYz%08d", n: 100_000},
		{name: "numbers", source: "s", format: "%d", n: 200_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newKeySet(0)
			for i := 1; i <= tt.n; i++ {
				k.add(keyHash(tt.source, fmt.Sprintf(tt.format, i)), int64(i))
			}
			probes, worst := 0, 0
			for i := 1; i <= tt.n; i++ {
				h := keyHash(tt.source, fmt.Sprintf(tt.format, i))
				tag, off := k.tag(h), k.offset(int64(i))
				p := 0
				for j := k.home(tag); k.tags[j] != tag || k.offs[j] != off; p++ {
					j = k.next(j)
				}
				probes += p
				worst = max(worst, p)
			}
			// Linear probing at most 4/5 full expects about 3 probes
			// per found key.
			if mean := float64(probes) / float64(tt.n); mean > 4 {
				t.Errorf("mean probes per lookup = %.1f (worst %d), want at most 4", mean, worst)
			}
		})
	}
}

// rolledBackEnqueue enqueues an event whose job insert fails after its
// event row was inserted, so its transaction is rolled back, and checks
// that the rollback took the event's key out of the set at once.
func rolledBackEnqueue(t *testing.T, s *Store, deliveryID string) {
	t.Helper()
	if err := s.onWriterNow(t, `CREATE TEMP TRIGGER IF NOT EXISTS refuse BEFORE INSERT ON jobs WHEN NEW.target = 'refused'
BEGIN SELECT RAISE(ABORT, 'refused'); END`); err != nil {
		t.Fatal(err)
	}
	before := s.keys.len()
	if _, err := s.Enqueue(t.Context(), testEvent(deliveryID, "refused")); err == nil {
		t.Fatal("Enqueue with the refused target succeeded")
	}
	if n := s.keys.len(); n != before {
		t.Errorf("key set holds %d keys after the rollback, want %d: the rolled-back event's key stayed", n, before)
	}
}
