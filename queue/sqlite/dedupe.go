package sqlite

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"

	"modernc.org/sqlite"
)

// Dedupe without a random page per event. A unique index on (source,
// delivery_id) put every enqueue on a leaf of its own: delivery ids are
// random, so a batch of n events dirtied n leaves of a large B-tree, 60 %
// of the WAL frames an enqueue wrote, and each of those pages was written
// again by the checkpoint. Instead, the store keeps the dedupe key's hash
// of every stored event in memory (keySet), and the database keeps, beside
// each event, its hash in event_keys: a table keyed by the event's id,
// which only grows at its right edge like the events themselves, and from
// which the set is rebuilt when the writer connects.
//
// The set only says which events may have a key; the events table says
// which one has it. A hash the set holds is checked against each event it
// names (one read by id, for the rare redelivery), so two keys sharing a
// hash are told apart and a stale entry (an event deleted by another
// connection) only costs that read.
//
// The writer is the only connection of this process that writes, and
// every write of the key set happens in it: it adds an event's hash as it
// inserts the event, takes it out again if the transaction is rolled back,
// and takes out the hashes of deleted events, which a temporary trigger on
// its connection collects (gone_keys). A database written by another
// connection (a second Store on the same file; SQLite's queue is meant for
// one Caddy) is noticed through PRAGMA data_version at the start of each
// transaction, under the write lock, and the set is read again.

// keyHashFunc is the SQL name of keyHash, which the migration that fills
// event_keys and the events_key trigger call: every insert into events,
// the writer's or a tool's, stores its key's hash.
const keyHashFunc = "caddywebhook_key_hash"

func init() {
	// VolatileArgs hands the text over by its length: the default copy
	// reads it as a C string, which ends at a NUL, and a delivery id
	// holding one would be stored under the hash of its first part.
	// keyHash keeps nothing of its arguments, as VolatileArgs asks.
	sqlite.MustRegisterFunction(keyHashFunc, &sqlite.FunctionImpl{
		NArgs:         2,
		Deterministic: true,
		VolatileArgs:  true,
		Scalar: func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			source, ok1 := args[0].(string)
			id, ok2 := args[1].(string)
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("%s: source and delivery id must be text", keyHashFunc)
			}
			return int64(keyHash(source, id)), nil
		},
	})
}

// keyHash is the 64-bit FNV-1a hash of an event's dedupe key: the source,
// a 0xff byte (never part of UTF-8 text, so no two keys run together), and
// the delivery id. It is stored, so it never changes.
var keyHash = func(source, deliveryID string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(source); i++ {
		h = (h ^ uint64(source[i])) * prime
	}
	h = (h ^ 0xff) * prime
	for i := 0; i < len(deliveryID); i++ {
		h = (h ^ uint64(deliveryID[i])) * prime
	}
	return h
}

// keySet maps dedupe-key hashes to the ids of the events stored with them:
// an open-addressing table with linear probing, 8 bytes a slot and at most
// 4/5 full, sized to be 2/3 full when read and grown by half, so about 12
// bytes per stored event (a Go map took 42, slots of the whole hash and id
// 24). A slot holds two 32-bit halves:
//
//   - the tag, the high half of the key's mixed hash (see mixed). It is
//     the key's home slot, scaled to the table (see home), which needs no
//     power-of-two size, so a table grows and deletes without the whole
//     hash. As a check it tells keys apart but for one pair in 2^32: a
//     key whose tag a stored key shares gets that key's event as a
//     candidate too, which the events table then tells apart, as it does
//     for two keys sharing a whole hash. With a million events stored, a
//     new key meets one in 4,300 lookups (BenchmarkKeySet), and it costs
//     a read of one event by id.
//   - the event's id less base, which is one below the id of the first
//     event the set took (loadKeys reads them in id order): ids grow from
//     there, and SQLite gives an id from 1 again only to a table left
//     empty, so the offsets fit 32 bits, signed, for 2 billion events
//     either side of it. 0 is an empty slot.
//
// The writer changes it under mu; readers (a lookup by delivery id in the
// read pool) hold mu for reading.
type keySet struct {
	mu   sync.RWMutex
	seed uint64 // random per set: see tag
	slots
	n    int   // slots in use
	base int64 // a slot holds id - base; -1 until the first add sets it
	// more holds the events a slot cannot: those whose id is not
	// positive (which SQLite only gives a row someone inserted with that
	// id by hand) or lies too far from base, by whole hash.
	more map[uint64][]int64
}

// minSlots is the smallest table a key set has.
const minSlots = 1024

func newKeySet(n int) *keySet {
	return &keySet{seed: rand.Uint64(), slots: newSlots(max(minSlots, n/2*3)), base: -1, more: make(map[uint64][]int64)}
}

// slots is a key set's table, 8 bytes a slot: the key's tag, and the id of
// the event stored with it, less the set's base. newSlots places it
// outside the Go heap where the platform allows (dedupe_slots_mapped.go).
type slots struct {
	tags   []uint32
	offs   []int32 // 0: an empty slot
	mapped []byte  // the mapping both live in; nil for a table on the heap
}

// slotBytes is the size of one slot of the table.
const slotBytes = 8

func heapSlots(n int) slots { return slots{tags: make([]uint32, n), offs: make([]int32, n)} }

// release gives the table's memory back, when the store closes. The set
// is empty afterwards, and still safe to read.
func (k *keySet) release() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.slots.free()
	k.slots, k.n, k.base, k.more = heapSlots(minSlots), 0, -1, make(map[uint64][]int64)
}

// tag is h's tag: the high half of its mixed value. The hash is mixed
// first: FNV-1a moves its high bits little when keys differ only in their
// last bytes, as sequential delivery ids do (evt_…41, evt_…42), so the
// high bits themselves put such keys in one long run of slots; a table of
// 100,000 sequential ids took 146 probes per lookup. The mixer
// (MurmurHash3's finalizer) is a bijection, and the random seed keeps a
// sender from choosing ids whose slots crowd one run.
func (k *keySet) tag(h uint64) uint32 { return uint32(k.mixed(h) >> 32) }

func (k *keySet) mixed(h uint64) uint64 {
	h ^= k.seed
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	return h ^ h>>33
}

// home is the first slot of a key with this tag.
func (k *keySet) home(tag uint32) int {
	return int(uint64(tag) * uint64(len(k.offs)) >> 32)
}

// offset is id's offset from the base, or 0 if a slot cannot hold it.
func (k *keySet) offset(id int64) int32 {
	if id <= 0 || k.base < 0 {
		return 0
	}
	d := id - k.base
	if d < math.MinInt32 || d > math.MaxInt32 {
		return 0
	}
	return int32(d)
}

// next is the slot after i, the table's last slot followed by its first.
func (k *keySet) next(i int) int {
	if i++; i == len(k.offs) {
		return 0
	}
	return i
}

// candidates appends to buf the ids of the events that may have the key
// whose hash is h: the events of every slot in the run from its home to
// the first empty slot that bear its tag.
func (k *keySet) candidates(buf []int64, h uint64) []int64 {
	tag := k.tag(h)
	for i := k.home(tag); k.offs[i] != 0; i = k.next(i) {
		if k.tags[i] == tag {
			buf = append(buf, k.base+int64(k.offs[i]))
		}
	}
	if len(k.more) > 0 {
		buf = append(buf, k.more[h]...)
	}
	return buf
}

// lookup is candidates for a reader outside the writer.
func (k *keySet) lookup(buf []int64, source, deliveryID string) []int64 {
	h := keyHash(source, deliveryID)
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.candidates(buf, h)
}

func (k *keySet) add(h uint64, id int64) {
	if k.base < 0 && id > 0 {
		k.base = id - 1
	}
	off := k.offset(id)
	if off == 0 {
		k.more[h] = append(k.more[h], id)
		return
	}
	k.put(k.tag(h), off)
	if k.n++; k.n > len(k.offs)/5*4 {
		k.grow()
	}
}

// put places an entry in the first empty slot of its tag's run.
func (k *keySet) put(tag uint32, off int32) {
	i := k.home(tag)
	for k.offs[i] != 0 {
		i = k.next(i)
	}
	k.tags[i], k.offs[i] = tag, off
}

// grow moves the set into a table half as large again. The writer holds
// mu for writing, so no reader holds the old table when it is freed.
func (k *keySet) grow() {
	old := k.slots
	k.slots = newSlots(len(old.offs) / 2 * 3)
	for i, off := range old.offs {
		if off != 0 {
			k.put(old.tags[i], off)
		}
	}
	old.free()
}

func (k *keySet) remove(h uint64, id int64) {
	off := k.offset(id)
	if off == 0 {
		more := k.more[h]
		for j, m := range more {
			if m == id {
				if more = append(more[:j:j], more[j+1:]...); len(more) == 0 {
					delete(k.more, h)
				} else {
					k.more[h] = more
				}
				return
			}
		}
		return
	}
	tag := k.tag(h)
	i := k.home(tag)
	for k.offs[i] != off || k.tags[i] != tag {
		if k.offs[i] == 0 {
			return // not in the set
		}
		i = k.next(i)
	}
	// The slot empties, and the entries after it in its run move back
	// (linear probing's deletion), so that no lookup stops short at the
	// hole.
	k.n--
	for {
		k.tags[i], k.offs[i] = 0, 0
		j := i
		for {
			if j = k.next(j); k.offs[j] == 0 {
				return
			}
			// The entry at j may move to i if its home slot is not in
			// the cyclic range (i, j].
			hm := k.home(k.tags[j])
			if (j > i && (hm <= i || hm > j)) || (j < i && hm <= i && hm > j) {
				break
			}
		}
		k.tags[i], k.offs[i] = k.tags[j], k.offs[j]
		i = j
	}
}

func (k *keySet) len() int {
	k.mu.RLock()
	defer k.mu.RUnlock()
	n := k.n
	for _, m := range k.more {
		n += len(m)
	}
	return n
}

// eventKey is one event's key hash, as the writer added it in the
// transaction running.
type eventKey struct {
	hash uint64
	id   int64
}

// The statements of the key set. gone_keys and its trigger are temporary:
// they belong to the write connection, collect only its own deletes, and
// write nothing to the database file.
const (
	sqlGoneKeysTable = `CREATE TEMP TABLE IF NOT EXISTS gone_keys (key_hash INTEGER NOT NULL, id INTEGER NOT NULL)`
	sqlGoneKeysHook  = `CREATE TEMP TRIGGER IF NOT EXISTS event_keys_gone AFTER DELETE ON main.event_keys BEGIN
	INSERT INTO gone_keys (key_hash, id) VALUES (old.key_hash, old.id);
END`
	sqlKeyOwner = `SELECT source, delivery_id FROM events WHERE id = ?1`
	// In id order, the table's own: the first id is the set's base.
	sqlAllKeys = `SELECT key_hash, id FROM event_keys ORDER BY id`
	// sqlCountKeys sizes the set before it is read: the events the
	// schema keeps counted (one key each), not a scan of event_keys.
	sqlCountKeys   = sqlEventCount
	sqlNewKeys     = `SELECT key_hash, id FROM event_keys WHERE id > ?1`
	sqlGoneKeys    = `SELECT key_hash, id FROM gone_keys`
	sqlClearGone   = `DELETE FROM gone_keys`
	sqlDataVersion = `PRAGMA data_version`
)

// loadKeys reads the key set from event_keys and notes the database's
// data version it was read at. It runs on the write connection, inside
// Raw, in a transaction or not.
func (w *writer) loadKeys() error {
	row := w.row[:2]
	if err := queryRow(w.st.dataVersion, row[:1]); err != nil {
		return fmt.Errorf("read data version: %w", err)
	}
	w.dataVersion = asInt(row[0])
	if err := queryRow(w.st.countKeys, row[:1]); err != nil {
		return fmt.Errorf("read event keys: %w", err)
	}
	set := newKeySet(int(asInt(row[0])))
	// Frees the table set holds at the end: the new one if the read
	// fails, the one it replaced if it succeeds.
	defer set.slots.free()
	rows, err := w.st.allKeys.Query()
	if err != nil {
		return fmt.Errorf("read event keys: %w", err)
	}
	w.maxKeyID = 0
	if err := each(rows, row, func(row []driver.Value) error {
		id := asInt(row[1])
		set.add(uint64(asInt(row[0])), id)
		w.maxKeyID = max(w.maxKeyID, id)
		return nil
	}); err != nil {
		return fmt.Errorf("read event keys: %w", err)
	}
	if _, err := w.st.clearGone.Exec(); err != nil {
		return fmt.Errorf("read event keys: %w", err)
	}
	w.s.keys.mu.Lock()
	w.s.keys.seed, w.s.keys.n, w.s.keys.base, w.s.keys.more = set.seed, set.n, set.base, set.more
	w.s.keys.slots, set.slots = set.slots, w.s.keys.slots
	w.s.keys.mu.Unlock()
	w.txKeys = w.txKeys[:0]
	return nil
}

// syncKeys runs at the start of every transaction, under the write lock:
// it reads the set again if another connection wrote the database since
// the writer last looked.
func (w *writer) syncKeys() error {
	row := w.row[:1]
	if err := queryRow(w.st.dataVersion, row); err != nil {
		return fmt.Errorf("read data version: %w", err)
	}
	if asInt(row[0]) == w.dataVersion {
		return nil
	}
	// Read it all: another connection may have deleted events and reused
	// their ids, which no read of the ids past the last one known would
	// see. Costly with many events, and only for a file two processes
	// write, which the store does not support beyond a moment.
	return w.loadKeys()
}

// dropTxKeys takes out of the set the keys this transaction added from
// the from'th on: their inserts were rolled back.
func (w *writer) dropTxKeys(from int) {
	if len(w.txKeys) <= from {
		return
	}
	w.s.keys.mu.Lock()
	for _, k := range w.txKeys[from:] {
		w.s.keys.remove(k.hash, k.id)
	}
	w.s.keys.mu.Unlock()
	w.txKeys = w.txKeys[:from]
}

// collectGone reads, just before the commit, the keys of the events the
// transaction deleted, which gone_keys collected, and empties it; the
// rollback of a failed commit puts them back for the next one.
func (w *writer) collectGone() error {
	w.gone = w.gone[:0]
	rows, err := w.st.goneKeys.Query()
	if err != nil {
		return fmt.Errorf("read deleted event keys: %w", err)
	}
	row := w.row[:2]
	if err := each(rows, row, func(row []driver.Value) error {
		w.gone = append(w.gone, eventKey{hash: uint64(asInt(row[0])), id: asInt(row[1])})
		return nil
	}); err != nil {
		return fmt.Errorf("read deleted event keys: %w", err)
	}
	if len(w.gone) == 0 {
		return nil
	}
	if _, err := w.st.clearGone.Exec(); err != nil {
		return fmt.Errorf("read deleted event keys: %w", err)
	}
	return nil
}

// committed runs after a commit: the transaction's keys stay in the set,
// and the keys of the events it deleted leave it.
func (w *writer) committed() {
	w.txKeys = w.txKeys[:0]
	if len(w.gone) == 0 {
		return
	}
	w.s.keys.mu.Lock()
	for _, k := range w.gone {
		w.s.keys.remove(k.hash, k.id)
	}
	w.s.keys.mu.Unlock()
	w.gone = w.gone[:0]
}

// storedEvent returns the id of the stored event with this key, if any.
func (w *writer) storedEvent(h uint64, source, deliveryID string) (int64, bool, error) {
	w.idBuf = w.s.keys.candidates(w.idBuf[:0], h)
	row := w.row[:2]
	for _, id := range w.idBuf {
		err := queryRow(w.st.keyOwner, row, id)
		if errors.Is(err, errNoRows) {
			continue // deleted by another connection
		}
		if err != nil {
			return 0, false, fmt.Errorf("find duplicate: %w", err)
		}
		if asString(row[0]) == source && asString(row[1]) == deliveryID {
			return id, true, nil
		}
	}
	return 0, false, nil
}

// addKey records the key of event id, inserted in this transaction (the
// events_key trigger stored it in event_keys).
func (w *writer) addKey(h uint64, id int64) {
	w.s.keys.mu.Lock()
	w.s.keys.add(h, id)
	w.s.keys.mu.Unlock()
	w.txKeys = append(w.txKeys, eventKey{hash: h, id: id})
	w.maxKeyID = max(w.maxKeyID, id)
}

// afterControl brings the set up to date after a function run on the
// write connection outside the group commit (onWriter), which may have
// inserted or deleted events on this connection, where data_version does
// not see them: the keys past the last id known are added, and the keys
// its deletes collected leave.
func (w *writer) afterControl() error {
	rows, err := w.st.newKeys.Query(w.maxKeyID)
	if err != nil {
		return fmt.Errorf("read event keys: %w", err)
	}
	row := w.row[:2]
	w.s.keys.mu.Lock()
	err = each(rows, row, func(row []driver.Value) error {
		id := asInt(row[1])
		w.s.keys.add(uint64(asInt(row[0])), id)
		w.maxKeyID = max(w.maxKeyID, id)
		return nil
	})
	w.s.keys.mu.Unlock()
	if err != nil {
		return fmt.Errorf("read event keys: %w", err)
	}
	if err := w.collectGone(); err != nil {
		return err
	}
	w.committed()
	return nil
}

// keyIDs is the JSON array of the ids of the events that may have this
// key, for the reads by delivery id: the key set stands in for an index
// on the key.
func (s *Store) keyIDs(source, deliveryID string) string {
	var buf [4]int64
	ids := s.keys.lookup(buf[:0], source, deliveryID)
	b := make([]byte, 0, 2+21*len(ids))
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(append(b, ']'))
}
