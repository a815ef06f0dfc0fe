package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddywebhook/caddywebhook/internal/testutil"
	"github.com/caddywebhook/caddywebhook/signature"
)

// Keys for the refusal table: a secret every secret scheme accepts (the
// Standard Webhooks senders decode it as base64), and public keys made
// with openssl for the signature package's vectors.
const (
	refusalSecret  = "ZTJlLXJlZnVzYWwtc2VjcmV0LTAxMjM0NTY3ODk="
	refusalEdHex   = "92c81eb58dba9b996d0e9f0f59e32cf77b20b97f9d5becf52d4ec00b25ce604f"
	refusalEdB64   = "ksgetY26m5ltDp8PWeMs93sguX+dW+z1LU7ACyXOYE8="
	refusalP256B64 = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEygqjzJfr5jNuHxhT9FY/PJkbGaoxyOqRTfde1Hv4jznnBrR9//Zj4TE82032HwYfRM/+czGE05CJiIDx7hcVLQ=="

	// refusalDeclared is the body each refused request declares (the
	// default max_body), of which it sends one byte.
	refusalDeclared = 1 << 20
	// refusalWithin is how soon the status line must arrive: the cost of
	// the request's head, not of read_body_idle (1 minute).
	refusalWithin = time.Second
)

// mustCheckHeaders are the schemes that had no header check, so a request
// without a signature had its declared body read, or waited for, to the
// end.
var mustCheckHeaders = []string{"github", "stripe", "standard", "svix", "shopify", "polar", "resend",
	"clerk", "brex", "contentful", "netlify", "twilio", "gitlabsigned"}

// refusalKeys returns the receiver lines with the keys of scheme.
func refusalKeys(scheme string) (lines string, cfg signature.Config) {
	cfg = signature.Config{Scheme: scheme}
	d, _ := signature.Lookup(scheme)
	switch {
	case d.Keys != signature.KeyPublic:
		cfg.Secrets = []string{refusalSecret}
		return "secret " + refusalSecret, cfg
	case scheme == "discord":
		cfg.PublicKeys = []string{refusalEdHex}
	case scheme == "sendgrid" || scheme == "plaid":
		cfg.PublicKeys = []string{refusalP256B64}
	default:
		cfg.PublicKeys = []string{refusalEdB64}
	}
	return "public_key " + cfg.PublicKeys[0], cfg
}

// testEarlyRefusal: for every scheme whose headers can tell that a POST
// cannot verify, a request without them that declares a 1 MiB body and
// sends one byte gets its status line within a second, over a raw
// connection through a real Caddy, and the connection is closed rather
// than kept for a drain of the rest (invariant 13). Go's server reads up
// to 256 KiB of an unread body before it writes an answer unless the
// answer says Connection: close
// (https://pkg.go.dev/net/http#Request, "the Server will close the
// connection ... if the Handler did not read the body").
func testEarlyRefusal(t *testing.T) {
	t.Parallel()
	fig := newFigures(t, "early_refusal")
	var site strings.Builder
	var schemes []string
	checked := map[string]bool{}
	for _, scheme := range signature.Schemes() {
		if scheme == signature.SchemeHMAC {
			continue // the generic engine: its presets are in the table
		}
		keys, cfg := refusalKeys(scheme)
		v, err := signature.New(cfg)
		if err != nil {
			t.Fatalf("%s: %v", scheme, err)
		}
		if signature.CheckHeaders(v, signature.Request{Method: http.MethodPost, Header: http.Header{}}) == nil {
			continue // cannot tell without the body (mailgun, notion's verification, …)
		}
		checked[scheme] = true
		schemes = append(schemes, scheme)
		site.WriteString(receiver("/hooks/"+scheme, "refusal-"+scheme, scheme, strings.TrimPrefix(keys, "secret ")))
	}
	for _, scheme := range mustCheckHeaders {
		if !checked[scheme] {
			t.Errorf("%s: CheckHeaders lets a request without its headers through", scheme)
		}
	}
	c := newCaddy(t)
	c.start(t, caddyConfig{Site: strings.ReplaceAll(site.String(), "secret public_key ", "public_key ")})

	var slowest time.Duration
	for _, scheme := range schemes {
		t.Run(scheme, func(t *testing.T) {
			took, status, closed := refuseUnread(t, c, "/hooks/"+scheme)
			slowest = max(slowest, took)
			if status != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", status)
			}
			if took > refusalWithin {
				t.Errorf("status line after %v, want within %v", took, refusalWithin)
			}
			if !closed {
				t.Errorf("the answer does not say Connection: close")
			}
		})
	}
	fig.requests = len(schemes)
	fig.extra = fmt.Sprintf("schemes=%d slowest_status_line_ms=%d", len(schemes), slowest.Milliseconds())
	fig.log(t)
}

// refuseUnread sends a head without signature headers that declares
// refusalDeclared bytes, and one body byte, and returns how long the
// status line took, the status, and whether the answer closes the
// connection.
func refuseUnread(t *testing.T, c *caddyInstance, path string) (time.Duration, int, bool) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", c.HTTPAddr, waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", path, c.HTTPAddr, refusalDeclared)
	conn.SetDeadline(time.Now().Add(waitTimeout))
	start := time.Now()
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("no answer after %v: %v", took, err)
	}
	resp.Body.Close()
	return took, resp.StatusCode, resp.Close
}

// Sender-share scenario: one client address holding the in-flight budget.
const (
	shareAttackers = 64
	shareDeclared  = 1 << 20   // the default max_body
	shareSent      = 512 << 10 // of it, before the attacker stops
	shareGenuine   = 15
	shareEventSize = 50 << 10
)

// testSenderShare: 64 connections from 127.0.0.2, each with a well-formed
// signature header that will not match, send 512 KiB of a declared 1 MiB
// and then stop, which once held the whole max_body_inflight (64 MiB:
// each buffer doubles to 1 MiB) so that every genuine event over 4 KiB got
// 503 busy. Meanwhile genuine 50 KiB GitHub events from 127.0.0.1 must all
// be accepted: one client address holds at most its share
// (max_body_inflight_per_client). Then the attackers' bodies, which stopped
// arriving past 256 KiB, are cut by min_body_rate (408) long before Caddy's
// read_body_idle would (1 minute).
func testSenderShare(t *testing.T) {
	t.Parallel()
	fig := newFigures(t, "sender_share")
	up := newUpstream(t, always(http.StatusOK))
	c := newCaddy(t)
	// A lower rate than the default, so that the attackers hold their
	// bodies (2 s + 256 KiB / 16 KiB/s = 18 s after their first 256 KiB)
	// while the genuine events are sent.
	c.start(t, caddyConfig{Site: receiver("/hooks/github", "github", "github", "{env.E2E_GITHUB_SECRET}",
		"min_body_rate 16KiB", toHTTP(up.URL("/github")))})

	type answer struct {
		status int
		after  time.Duration
	}
	answers := make(chan answer, shareAttackers)
	dialer := net.Dialer{Timeout: waitTimeout, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	var conns []net.Conn
	defer func() {
		for _, conn := range conns {
			conn.Close()
		}
	}()
	var wg sync.WaitGroup
	for i := range shareAttackers {
		conn, err := dialer.Dial("tcp", c.HTTPAddr)
		if err != nil {
			t.Fatalf("attacker %d: %v", i, err)
		}
		conns = append(conns, conn)
		var b bytes.Buffer
		fmt.Fprintf(&b, "POST /hooks/github HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n", c.HTTPAddr)
		fmt.Fprintf(&b, "X-GitHub-Delivery: share-attack-%02d\r\nX-GitHub-Event: push\r\n", i)
		fmt.Fprintf(&b, "X-Hub-Signature-256: sha256=%s\r\nContent-Length: %d\r\n\r\n", strings.Repeat("0", 64), shareDeclared)
		b.Write(bytes.Repeat([]byte("a"), shareSent))
		wg.Go(func() {
			start := time.Now()
			conn.SetDeadline(start.Add(2 * waitTimeout))
			// Write while reading: a refused sender is answered before it
			// has sent everything.
			go conn.Write(b.Bytes())
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				answers <- answer{0, time.Since(start)}
				return
			}
			resp.Body.Close()
			answers <- answer{resp.StatusCode, time.Since(start)}
		})
	}
	// The attackers hold what they may: some bodies are being read, and
	// every other attacker has been answered.
	var reading, early int
	testutil.Eventually(t, func() bool {
		reading = countReading(t, c)
		for {
			select {
			case a := <-answers:
				// 503 busy, or a reset: the server closes the connection
				// of a body it leaves unread; on a loaded machine the
				// first stalled bodies may already be cut (408) before
				// the last attackers are read.
				early++
				if a.status != http.StatusServiceUnavailable && a.status != http.StatusRequestTimeout && a.status != 0 {
					t.Errorf("an attacker refused while the others read got %d, want 503", a.status)
				}
				continue
			default:
			}
			break
		}
		return reading > 0 && reading+early == shareAttackers
	}, func() string { return fmt.Sprintf("%d attackers being read, %d answered", reading, early) })
	t.Logf("attackers: %d bodies being read, %d refused busy", reading, early)

	// Genuine events from 127.0.0.1 while the attackers hold their share.
	accepted := 0
	for i := range shareGenuine {
		id := fmt.Sprintf("share-genuine-%02d", i)
		body := []byte(fmt.Sprintf(`{"id":%q,"type":"push","pad":"%s-%s"}`, id, bodyMarker, strings.Repeat("p", shareEventSize)))
		status, _ := post(t, c.URL("/hooks/github"), signGitHub(githubSecret, id, "push", body), body)
		if status == http.StatusAccepted {
			accepted++
		} else {
			t.Errorf("%s: status %d, want 202", id, status)
		}
	}
	held := countReading(t, c)
	if held == 0 {
		t.Errorf("the attackers' bodies were cut before the genuine events were sent; the test proves nothing")
	}

	// The stalled bodies are cut by min_body_rate, not by read_body_idle.
	var slowest time.Duration
	for range reading {
		select {
		case a := <-answers:
			slowest = max(slowest, a.after)
			if a.status != http.StatusRequestTimeout {
				t.Errorf("a stalled attacker got %d, want 408", a.status)
			}
		case <-time.After(2 * waitTimeout):
			t.Fatalf("a stalled attacker was not cut")
		}
	}
	if slowest > 45*time.Second {
		t.Errorf("the stalled bodies were cut after %v, want well within read_body_idle (1m)", slowest)
	}
	wg.Wait()
	fig.requests, fig.accepted = shareAttackers+shareGenuine, accepted
	fig.extra = fmt.Sprintf("attackers_read=%d attackers_busy=%d genuine_accepted=%d/%d stalled_cut_after_s=%.1f",
		reading, early, accepted, shareGenuine, slowest.Seconds())
	fig.log(t)
}

// countReading returns how many requests' bodies the receiver is reading.
func countReading(t *testing.T, c *caddyInstance) int {
	t.Helper()
	n := -1
	waitReading(t, c, func(got int) bool { n = got; return true }, "count")
	return n
}
