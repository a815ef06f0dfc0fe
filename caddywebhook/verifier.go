package caddywebhook

import (
	"github.com/caddyserver/caddy/v2"

	"github.com/caddywebhook/caddywebhook/signature"
)

// provisionVerifier builds the verifier, and what the hot path reads of
// the scheme, from the options. An option it cannot read is an error
// naming it; without a scheme or a key there is nothing to build, and
// Validate says what is missing.
func (rc *Receiver) provisionVerifier() error {
	if rc.Scheme == "" || len(rc.secrets) == 0 && len(rc.publicKeys) == 0 {
		return nil
	}
	cfg, err := rc.signatureConfig()
	if err != nil {
		return err
	}
	v, err := signature.New(cfg)
	if err != nil {
		return rc.errf("%w", err)
	}
	rc.verifier = v
	rc.needsURL = signature.UsesURL(v)
	rc.handshaker, _ = v.(signature.Handshaker)
	if d, ok := signature.Lookup(rc.Scheme); ok {
		rc.getAllowed = d.GETHandshake
		rc.acceptStatus = d.AcceptStatus
		rc.keptSecret = newReceiverSecrets(d)
	}
	return nil
}

// signatureConfig reads the signature options into a signature.Config,
// and the ordering key's on_dead into orderingHold.
func (rc *Receiver) signatureConfig() (signature.Config, error) {
	cfg := signature.Config{
		Scheme:      rc.Scheme,
		Secrets:     rc.secrets,
		PublicKeys:  rc.publicKeys,
		SecretMode:  signature.SecretMode(rc.SecretMode),
		PublicURL:   rc.PublicURL,
		VerifyToken: rc.verifyToken,
	}
	switch rc.Tolerance {
	case "":
	case "off":
		cfg.IgnoreTimestamp = true
	default:
		d, err := caddy.ParseDuration(rc.Tolerance)
		if err != nil || d <= 0 {
			return cfg, rc.errf("tolerance %q is not a positive duration or off", rc.Tolerance)
		}
		cfg.Tolerance = d
	}
	if f := rc.DeliveryID; f != nil {
		if err := rc.checkSource("delivery_id", *f); err != nil {
			return cfg, err
		}
		cfg.DeliveryIDHeader, cfg.DeliveryIDField = f.Header, f.JSON
	}
	if f := rc.EventType; f != nil {
		if err := rc.checkSource("event_type", *f); err != nil {
			return cfg, err
		}
		cfg.EventTypeHeader, cfg.EventTypeField = f.Header, f.JSON
	}
	if k := rc.OrderingKey; k != nil {
		if err := rc.checkSource("ordering_key", FieldSource{Header: k.Header, JSON: k.JSON}); err != nil {
			return cfg, err
		}
		switch k.OnDead {
		case "", "hold":
			rc.orderingHold = true
		case "release":
			rc.orderingHold = false
		default:
			return cfg, rc.errf("ordering_key: on_dead %q is not hold or release", k.OnDead)
		}
		cfg.OrderingKeyHeader, cfg.OrderingKeyField = k.Header, k.JSON
	}
	if h := rc.HMAC; h != nil {
		cfg.SignatureHeader, cfg.SignatureSyntax, cfg.SignatureKey = h.Header, h.Syntax, h.Key
		cfg.Algorithm, cfg.Encoding, cfg.SignaturePrefix = h.Algorithm, h.Encoding, h.Prefix
		cfg.SignedContent, cfg.TimestampHeader, cfg.TimestampKey, cfg.TimestampFormat = h.SignedContent, h.TimestampHeader, h.TimestampKey, h.TimestampFormat
		cfg.TimestampField = h.TimestampField
	}
	return cfg, nil
}

// checkSource refuses a source of opt (delivery_id, event_type,
// ordering_key) that names both a header and a JSON field, or neither.
func (rc *Receiver) checkSource(opt string, f FieldSource) error {
	if (f.Header == "") == (f.JSON == "") {
		return rc.errf("%s: set exactly one of header and json", opt)
	}
	return nil
}
