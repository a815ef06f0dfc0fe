package sqlite

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/queue"
)

// crashEnv names the database a re-executed test binary enqueues into
// until it is killed.
const crashEnv = "QUEUE_SQLITE_CRASH_DB"

// TestCrashDurability kills a process with SIGKILL while many goroutines
// enqueue through group commits with synchronous=FULL, then checks that
// every enqueue the process saw succeed is in the file, and that the file
// is intact.
func TestCrashDurability(t *testing.T) {
	if path := os.Getenv(crashEnv); path != "" {
		crashChild(path)
		return
	}
	if testing.Short() {
		t.Skip("runs a child process")
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashDurability$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Each acknowledged id arrives as one line, written by the child right
	// after Enqueue returned nil. Kill the child once enough have come
	// that it is surely in the middle of a stream of group commits.
	const killAfter = 3000
	acked := map[string]bool{}
	r := bufio.NewReader(out)
	deadline := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
	defer deadline.Stop()
	killed := false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if err != io.EOF {
				t.Fatal(err)
			}
			break // a partial last line was never acknowledged in full
		}
		acked[strings.TrimSuffix(line, "\n")] = true
		if !killed && len(acked) >= killAfter {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	werr := cmd.Wait()
	if !killed {
		t.Fatalf("child exited before it was killed, after %d acks: %v", len(acked), werr)
	}

	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var check string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check = %q, %v", check, err)
	}
	stored := map[string]bool{}
	rows, err := db.Query("SELECT delivery_id FROM events")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		stored[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	missing := 0
	for id := range acked {
		if !stored[id] {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged enqueues are not in the file", missing, len(acked))
	}
	t.Logf("killed after %d acknowledged enqueues; %d stored (the rest were in flight)", len(acked), len(stored))
}

// crashChild enqueues from 32 goroutines until killed, writing each
// acknowledged id to stdout at once (one write per line, so a line is
// never torn).
func crashChild(path string) {
	s, err := Open(context.Background(), Config{Path: path})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	stop := time.Now().Add(time.Minute) // never reached unless the parent fails to kill
	for p := range 32 {
		wg.Go(func() {
			for i := 0; time.Now().Before(stop); i++ {
				id := fmt.Sprintf("p%d-%d", p, i)
				ev := queue.Event{Source: "crash", DeliveryID: id, Payload: make([]byte, 256), Targets: []string{"mail"}}
				if _, err := s.Enqueue(context.Background(), ev); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				mu.Lock()
				os.Stdout.WriteString(id + "\n")
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	os.Exit(3)
}
