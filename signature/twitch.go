package signature

import (
	"fmt"
	"net/http"
	"time"
)

// Twitch EventSub (webhook transport) signs the message id, the timestamp
// and the body, concatenated, with HMAC-SHA256 keyed with the
// subscription's secret, in Twitch-Eventsub-Message-Signature:
// sha256=<hex> (https://dev.twitch.tv/docs/eventsub/handling-webhook-events).
// The timestamp is RFC 3339 with nanoseconds, and Twitch asks receivers to
// refuse messages older than 10 minutes. The delivery id is the message id
// (the same on redelivery) and the event type the subscription type.
//
// Right after a subscription is created Twitch sends a signed
// webhook_callback_verification message, whose challenge must come back
// as text/plain.
const (
	headerTwitchID        = "Twitch-Eventsub-Message-Id"
	headerTwitchTimestamp = "Twitch-Eventsub-Message-Timestamp"
	headerTwitchType      = "Twitch-Eventsub-Message-Type"
)

func init() {
	s := presetScheme(Preset{
		Name: "twitch",
		Defaults: Config{
			SignatureHeader:  "Twitch-Eventsub-Message-Signature",
			SignaturePrefix:  "sha256=",
			SignedContent:    "{id}{header." + headerTwitchTimestamp + "}{body}",
			DeliveryIDHeader: headerTwitchID,
			EventTypeHeader:  "Twitch-Eventsub-Subscription-Type",
			Tolerance:        10 * time.Minute,
		},
		Forward:   []string{"Twitch-Eventsub-Subscription-Type", headerTwitchType},
		Handshake: twitchHandshake,
		Sender:    Sender{ID: SenderIDUUID},
	})
	// The engine reads unix timestamps; this one is RFC 3339, so it is
	// checked here, after the MAC.
	build := s.build
	s.build = func(cfg Config, b base) (Verifier, error) {
		v, err := build(cfg, b)
		if err != nil {
			return nil, err
		}
		return &twitchVerifier{v.(*engine)}, nil
	}
	s.sign = func(secret string, body []byte, opts SignOptions) (http.Header, error) {
		ts := opts.Timestamp
		if ts.IsZero() {
			ts = time.Now()
		}
		opts.Header = opts.Header.Clone()
		if opts.Header == nil {
			opts.Header = http.Header{}
		}
		opts.Header.Set(headerTwitchTimestamp, ts.UTC().Format(time.RFC3339Nano))
		return signEngine(s, secret, body, opts)
	}
	register(s)
}

var (
	twitchTimestampErrors = newHeaderErrors("twitch", headerTwitchTimestamp)
	twitchNoChallenge     = fmt.Errorf("twitch: webhook_callback_verification without a challenge: %w", ErrMalformedHeader)
)

// twitchVerifier checks the RFC 3339 timestamp of a verified message.
type twitchVerifier struct{ *engine }

// Verify implements Verifier.
func (v *twitchVerifier) Verify(req Request) (Result, error) {
	ts, err := twitchTimestampErrors.get(req.Header, headerTwitchTimestamp)
	if err != nil {
		return Result{}, err
	}
	res, err := v.engine.Verify(req)
	if err != nil {
		return Result{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return Result{}, twitchTimestampErrors.malformed
	}
	if err := v.checkTime(t.Unix()); err != nil {
		return Result{}, err
	}
	return res, nil
}

func (v *twitchVerifier) checkHeaders(h http.Header) error {
	if _, err := twitchTimestampErrors.get(h, headerTwitchTimestamp); err != nil {
		return err
	}
	return v.engine.checkHeaders(h)
}

func twitchHandshake(v Verifier, req Request) (HandshakeResponse, bool, error) {
	if req.Method != http.MethodPost || req.Header.Get(headerTwitchType) != "webhook_callback_verification" {
		return HandshakeResponse{}, false, nil
	}
	if _, err := v.Verify(req); err != nil {
		return HandshakeResponse{}, false, err
	}
	var vals [1]string
	var found [1]bool
	lookupJSON(req.Body, []string{"challenge"}, vals[:], found[:])
	if !echoable(vals[0]) {
		return HandshakeResponse{}, false, twitchNoChallenge
	}
	resp := textAnswer(vals[0])
	resp.ContentType = "text/plain"
	return resp, true, nil
}

var _ Verifier = (*twitchVerifier)(nil)
