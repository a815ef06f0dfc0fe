package phases

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// ceilingPrefix starts the delivery ids of clientCeiling's requests.
const ceilingPrefix = "ceiling-"

// clientCeiling measures what a plain Go HTTP client gets out of the slow
// upstream on this machine: conns goroutines, each POSTing a body of
// bodySize bytes and waiting for the answer before sending the next,
// through an http.Client over a clone of the default transport that keeps
// an idle connection per sender (the HTTP target clones the same transport
// and calls it directly, which costs less, not more). It returns the answers per second inside the window that follows the
// warmup.
//
// It is the slow phases' measured reference, as static is the receiver's:
// N × 1/delay is what N senders would reach if a round trip cost exactly
// the upstream's delay, but on a shared 2-core VM the timer that ends the
// upstream's wait and the wake-ups of both ends add to every round trip,
// more so the more requests are in flight. What the workers reach against
// what this loop reaches, on the same upstream in the same run, is what
// the pool and the target cost. The delivery ids start with ceilingPrefix,
// so the upstream answers them without recording them.
func clientCeiling(ctx context.Context, url string, conns, bodySize int, warmup, window time.Duration) (float64, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = conns
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport}
	body := bytes.Repeat([]byte("x"), bodySize)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		counting atomic.Bool
		answered atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; ctx.Err() == nil; seq++ {
				err := ceilingPost(ctx, client, url, ceilingPrefix+strconv.Itoa(c)+"-"+strconv.Itoa(seq), body)
				if err != nil {
					if ctx.Err() == nil {
						errOnce.Do(func() { firstErr = err; cancel() })
					}
					return
				}
				if counting.Load() {
					answered.Add(1)
				}
			}
		}()
	}
	ok := sleepCtx(ctx, warmup)
	t0 := time.Now()
	counting.Store(true)
	ok = ok && sleepCtx(ctx, window)
	counting.Store(false)
	took := time.Since(t0)
	n := answered.Load()
	cancel()
	wg.Wait()
	if firstErr != nil {
		return 0, fmt.Errorf("client ceiling: %w", firstErr)
	}
	if !ok {
		return 0, context.Cause(ctx)
	}
	return float64(n) / took.Seconds(), nil
}

// ceilingPost sends one delivery as the HTTP target would and reads the
// whole answer, which must be 200.
func ceilingPost(ctx context.Context, client *http.Client, url, id string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Webhook-Delivery-Id", id)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("upstream answered %d", resp.StatusCode)
	}
	return nil
}
