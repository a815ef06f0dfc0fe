package monitor

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/caddywebhook/caddywebhook/cmd/webhook-loadtest/internal/queuedb"
)

// walTail follows a WAL file as SQLite writes it and counts the page
// number of every committed frame it sees. It reads the 24-byte frame
// headers only: a frame belongs to the WAL's current generation when it
// carries the header's salts, and is committed once a later (or its own)
// frame of the same generation has a commit size. When a checkpoint has
// let SQLite start the WAL again (new salts), the tail starts again at
// its first frame; the frames of a generation that began and ended
// between two polls are not seen, so the counts are a sample.
type walTail struct {
	r        io.ReaderAt
	salt     [8]byte
	pageSize int64
	next     int64 // the generation's first frame not yet counted
	pages    map[uint32]int64
	frames   int64
}

func newWALTail(r io.ReaderAt) *walTail { return &walTail{r: r, pages: map[uint32]int64{}} }

// poll counts the frames committed since the last poll.
func (t *walTail) poll() error {
	const hdr, fhdr = 32, 24
	var h [hdr]byte
	if n, _ := t.r.ReadAt(h[:], 0); n < hdr {
		return nil // empty: truncated by a checkpoint, nothing written since
	}
	if magic := binary.BigEndian.Uint32(h[:]); magic&^1 != 0x377f0682 {
		return fmt.Errorf("read wal: bad magic %#x", magic)
	}
	ps := int64(binary.BigEndian.Uint32(h[8:]))
	if ps == 1 {
		ps = 65536
	}
	if ps < 512 || ps&(ps-1) != 0 {
		return fmt.Errorf("read wal: bad page size %d", ps)
	}
	if !bytes.Equal(h[16:24], t.salt[:]) || ps != t.pageSize {
		copy(t.salt[:], h[16:24])
		t.pageSize, t.next = ps, 0
	}
	var fh [fhdr]byte
	var pending []uint32
	for i := t.next; ; i++ {
		if n, _ := t.r.ReadAt(fh[:], hdr+i*(fhdr+ps)); n < fhdr || !bytes.Equal(fh[8:16], t.salt[:]) {
			return nil
		}
		pending = append(pending, binary.BigEndian.Uint32(fh[:]))
		if binary.BigEndian.Uint32(fh[4:]) == 0 {
			continue
		}
		for _, pg := range pending {
			t.pages[pg]++
		}
		t.frames += int64(len(pending))
		pending, t.next = pending[:0], i+1
	}
}

// walEvery is how often the tail reads the WAL during a profiled window.
const walEvery = 50 * time.Millisecond

// followWAL polls the phase's WAL file until stop is called, which
// returns the tail.
func followWAL(path string) (stop func() *walTail) {
	f, err := os.Open(path + "-wal")
	if err != nil {
		return func() *walTail { return nil }
	}
	t := newWALTail(f)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(walEvery)
		defer tick.Stop()
		for {
			if t.poll() != nil {
				return
			}
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	return func() *walTail {
		close(quit)
		<-done
		t.poll()
		f.Close()
		return t
	}
}

// walByTree maps the tail's pages to the table or index each belongs to,
// from SQLite's dbstat table read on a read-only connection of our own.
// Pages dbstat does not list (the free list, pages freed since) count as
// "(free or gone)".
func walByTree(ctx context.Context, path string, t *walTail) (map[string]int64, int64, error) {
	if t == nil || t.frames == 0 {
		return nil, 0, nil
	}
	db, err := sql.Open("sqlite", queuedb.URI(path, true))
	if err != nil {
		return nil, 0, fmt.Errorf("open %s: %w", path, err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT pageno, name FROM dbstat`)
	if err != nil {
		return nil, 0, fmt.Errorf("read dbstat: %w", err)
	}
	defer rows.Close()
	owner := map[uint32]string{}
	for rows.Next() {
		var pg int64
		var name string
		if err := rows.Scan(&pg, &name); err != nil {
			return nil, 0, fmt.Errorf("read dbstat: %w", err)
		}
		owner[uint32(pg)] = name
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("read dbstat: %w", err)
	}
	by := map[string]int64{}
	for pg, n := range t.pages {
		name := owner[pg]
		if name == "" {
			name = "(free or gone)"
		}
		by[name] += n
	}
	return by, t.frames, nil
}
