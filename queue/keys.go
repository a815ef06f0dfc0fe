package queue

import (
	"errors"

	"github.com/caddywebhook/caddywebhook/queue/seal"
)

// Keys are the keys a Store encrypts its stored values with (package
// seal): the payload and headers of every event, and every error text of
// a job and its attempts. Ids, sources, targets, event types, delivery
// ids, statuses, times and counts stay clear: the queue works on them.
// An ordering key is stored as a keyed hash whether or not there are
// keys (seal.Hasher), under a secret the store keeps sealed like any
// value.
//
// A Store takes its Keys when it opens and again at every config load
// (Store.SetKeys). The zero value writes everything plain, and a stored
// value sealed under a key no longer listed does not open: a job of such
// an event goes dead with an error naming the key (Job.ReadErr), and a
// replay delivers it once the key is listed again.
type Keys struct {
	// Ring holds the keys: the first seals every value written from now
	// on, and every one opens the values sealed under it. Nil: values are
	// written plain, and sealed ones do not open.
	Ring *seal.Ring
	// DecryptOnly keeps Ring for opening what is stored but writes new
	// values plain: the way out of encryption, before a rekey to plain
	// text (RekeyParams.ToPlainText). Ignored without a Ring.
	DecryptOnly bool
}

// Sealing reports whether values written under k are sealed.
func (k Keys) Sealing() bool { return k.Ring != nil && !k.DecryptOnly }

// KeyCount is the number of stored values sealed under one key (Stats):
// an old key may be removed once its count is 0.
type KeyCount struct {
	KeyID string `json:"key_id"`
	// Values counts the sealed values: events (their payload and headers
	// are one value), the error texts of jobs and of their attempts, and
	// the store's ordering-key secret.
	Values int64 `json:"values"`
	// Listed is whether the store's keys (Keys.Ring) hold this id; a
	// value under a key that is not listed does not open.
	Listed bool `json:"listed"`
}

// RekeyParams asks for a rekey (Store.Rekey).
type RekeyParams struct {
	// ToPlainText opens every sealed value and writes it plain, the
	// store's ordering-key secret included: the way out of encryption. It
	// needs Keys.DecryptOnly, so that no new value is sealed meanwhile.
	// Default: false, every value goes under the first key.
	ToPlainText bool
	// NoVacuum skips the SQLite store's VACUUM at the end of the first
	// rekey that met plain text: the file then keeps the plain text of
	// deleted and rewritten values in its free pages until a later rekey
	// vacuums it. Default: false.
	NoVacuum bool
	// Progress, when not nil, is called with the progress after every
	// chunk, on the goroutine of Rekey.
	Progress func(RekeyProgress)
}

// RekeyProgress says how far a rekey has come. Resealed counts this
// call's rewrites; Remaining is what the store's counts say is left, so
// Resealed of Resealed + Remaining is the share done.
type RekeyProgress struct {
	// Target is the key id values are being sealed under; empty for a
	// rekey to plain text.
	Target string `json:"target,omitempty"`
	// Phase is where the rekey is: "walk" (re-sealing values, table by
	// table), "vacuum" (SQLite rewriting its file), or "done".
	Phase string `json:"phase"`
	// Table is the table the walk is in: events, jobs or attempts.
	Table string `json:"table,omitempty"`
	// Walked is the rows read, Resealed the values rewritten.
	Walked   int64 `json:"walked"`
	Resealed int64 `json:"resealed"`
	// Remaining is the values still under another key than Target (all
	// sealed values for a rekey to plain text), with the events stored
	// plain for a rekey that seals, from the store's counts.
	Remaining int64 `json:"remaining"`
	// Skipped counts the values the walk could not open: sealed under a
	// key the ring does not hold (their ids in MissingKeys), or not
	// authentic. They are left as they are.
	Skipped     int64    `json:"skipped,omitempty"`
	MissingKeys []string `json:"missing_keys,omitempty"`
	// Vacuum, for the SQLite store, is what the rekey's last step did
	// with the file: "" none needed, "done", "skipped" (NoVacuum: plain
	// text may remain in free pages), or why it could not run.
	Vacuum string `json:"vacuum,omitempty"`
	// VacuumSeconds estimates how long the VACUUM holds the write lock,
	// from the file's size; set before it starts.
	VacuumSeconds float64 `json:"vacuum_seconds,omitempty"`
	// Nothing is true when nothing was left to re-seal: the walk did not
	// run.
	Nothing bool `json:"nothing,omitempty"`
}

// Sentinel errors of SetKeys and Rekey, wrapped or bare.
var (
	// ErrRekeyRunning: a rekey of the same store runs already, in this
	// process or, for a shared store, in another instance.
	ErrRekeyRunning = errors.New("a rekey is running already")
	// ErrRekeyNeedsDecryptOnly refuses a rekey to plain text while the
	// store seals what it writes: new values would keep arriving sealed.
	ErrRekeyNeedsDecryptOnly = errors.New("a rekey to plain text needs the keys in decrypt-only mode")
	// ErrRekeyNoKeys refuses a rekey that would seal with no key.
	ErrRekeyNoKeys = errors.New("a rekey needs a key to seal with; to write values plain, rekey to plain text")
	// ErrKeysChanged stops a rekey whose first key changed while it ran
	// (a config load with other keys); run it again.
	ErrKeysChanged = errors.New("the first key changed during the rekey; run it again")
)
