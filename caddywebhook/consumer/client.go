package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/queue"
)

// client speaks the consumer API for `caddy webhook listen`.
type client struct {
	base  *url.URL // the endpoint's URL, without the trailing /claim…
	token string
	http  *http.Client
}

// urlHint ends the errors of an answer that came from somewhere other
// than a webhook_consumer: what --url should have been.
const urlHint = "--url must be the address where webhook_consumer is mounted, " +
	"without /claim (for `handle /consume/* { webhook_consumer … }`, https://<host>/consume)"

// apiStatusError is an answer of the API other than 200.
type apiStatusError struct {
	status int
	msg    string
	param  string
	// url is where the request went (without credentials or query), set
	// for an answer that did not come from a webhook_consumer.
	url string
}

func (e *apiStatusError) Error() string {
	switch {
	case e.msg != "":
		return fmt.Sprintf("server answered %d: %s", e.status, e.msg)
	case e.url != "":
		// A consumer's own refusals carry a message; a bare 404 or 405
		// is a path where no webhook_consumer is mounted.
		return fmt.Sprintf("server answered %d at %s: %s", e.status, e.url, urlHint)
	}
	return fmt.Sprintf("server answered %d", e.status)
}

// fatal reports whether no retry can help: the token is refused, the
// target is not one it may consume, the request is malformed. A 5xx, a
// 429 and network errors are worth another try.
func (e *apiStatusError) fatal() bool {
	return e.status >= 400 && e.status < 500 && e.status != http.StatusTooManyRequests && e.status != http.StatusRequestTimeout
}

// isFatal reports whether err is an API answer that no retry can help.
func isFatal(err error) bool {
	var se *apiStatusError
	return errors.As(err, &se) && se.fatal()
}

// maxAnswer bounds an answer of the API: a claim of 100 jobs of 1 MiB
// each, base64, fits.
const maxAnswer = 256 << 20

func (c *client) post(ctx context.Context, endpoint string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode %s request: %w", endpoint, err)
	}
	// JoinPath keeps the base's query, if it has one.
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base.JoinPath(endpoint).String(), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build %s request: %w", endpoint, err)
	}
	r.Header.Set("Authorization", "Bearer "+c.token)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("User-Agent", "caddy-webhook-listen")
	res, err := c.http.Do(r)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("read %s answer: %w", endpoint, err)
	}
	if res.StatusCode != http.StatusOK {
		var e adminapi.Error
		_ = json.Unmarshal(b, &e)
		se := &apiStatusError{status: res.StatusCode, msg: e.Error, param: e.Param}
		if e.Error == "" && (res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusMethodNotAllowed) {
			se.url = loggedURL(r.URL.String())
		}
		return se
	}
	if err := json.Unmarshal(b, resp); err != nil {
		// A 200 that is not JSON comes from a route that is not the
		// consumer's, such as a site's catch-all (Caddy answers a path
		// no route takes with an empty 200).
		return &notConsumerError{url: loggedURL(r.URL.String()), err: fmt.Errorf("decode %s answer: %w", endpoint, err)}
	}
	return nil
}

// notConsumerError is an answer of 200 that is not the consumer API's:
// --url names a path of the server where no webhook_consumer is mounted,
// or something between (a captive portal, a proxy) answers instead.
type notConsumerError struct {
	url string
	err error
}

func (e *notConsumerError) Error() string {
	return fmt.Sprintf("%v: the answer at %s is not a webhook_consumer's: %s", e.err, e.url, urlHint)
}

func (e *notConsumerError) Unwrap() error { return e.err }

func (c *client) claim(ctx context.Context, target string, limit int, wait time.Duration) (ClaimResponse, error) {
	var resp ClaimResponse
	err := c.post(ctx, "claim", ClaimRequest{Target: target, Max: limit, Wait: wait.String()}, &resp)
	return resp, err
}

func (c *client) extend(ctx context.Context, leases []queue.Claimed) (ExtendResponse, error) {
	var resp ExtendResponse
	err := c.post(ctx, "extend", ExtendRequest{Leases: leases}, &resp)
	return resp, err
}

func (c *client) ack(ctx context.Context, results []Ack) (AckResponse, error) {
	var resp AckResponse
	err := c.post(ctx, "ack", AckRequest{Results: results}, &resp)
	return resp, err
}
