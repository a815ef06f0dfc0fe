package signature

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Microsoft Graph change notifications are not signed: each notification
// in the body's value array carries the clientState the subscription was
// created with, a shared secret, compared here in constant time with the
// secrets; every notification must carry one that matches, or the request
// is refused (https://learn.microsoft.com/en-us/graph/change-notifications-delivery-webhooks).
// The body is not integrity-protected beyond that, and the clientState
// is a secret in every payload: it is declared in SecretFields, so that the
// stored copy holds RedactedMarker instead and nobody who reads events can
// forge notifications.
//
// Graph sends no delivery id, and subscriptionId, changeType and resource
// repeat for every change to the same resource, so deduplicating on them
// would drop the second change; the delivery id is the body hash, which
// recognises a redelivery of the same bytes. The event type is the first
// notification's lifecycleEvent (lifecycle notifications) or changeType.
//
// Creating or renewing a subscription validates the endpoint: a POST with
// ?validationToken=<URL-encoded token>, unsigned, to be answered within 10
// seconds with 200, text/plain, and the decoded token; it is answered at
// once and never stored.
//
// Rich notifications (includeResourceData) are verified by clientState
// like any other, but their validationTokens, JWTs signed by Microsoft,
// are not checked (that needs Microsoft's signing keys, fetched and
// rotated over the network), and encryptedContent is stored as sent, for
// the target to decrypt.
const graphValidationToken = "validationToken"

func init() {
	register(&scheme{
		Scheme: Scheme{Name: "msgraph", Keys: KeySecrets, SecretFields: []string{"value[].clientState"}},
		build: func(cfg Config, b base) (Verifier, error) {
			return &graphVerifier{newTokenVerifier(b, cfg.Secrets, "msgraph", "clientState")}, nil
		},
		sign:              errUseSignBody,
		signBody:          signGraph,
		handshake:         graphHandshake,
		unsignedHandshake: graphMayHandshake,
	})
}

// Static so that refusing a request allocates nothing.
var (
	graphNotObject    = fmt.Errorf("msgraph: body: %w", ErrMalformedHeader)
	graphNoValue      = fmt.Errorf("msgraph: value: %w", ErrMissingHeader)
	graphBadValue     = fmt.Errorf("msgraph: value: %w", ErrMalformedHeader)
	graphNoState      = fmt.Errorf("msgraph: clientState: %w", ErrMissingHeader)
	graphNoMatch      = fmt.Errorf("msgraph: clientState: %w", ErrNoMatch)
	graphBadToken     = fmt.Errorf("msgraph: %s: %w", graphValidationToken, ErrMalformedHeader)
	graphTopKeys      = []string{"value"}
	graphItemKeys     = []string{"clientState", "lifecycleEvent", "changeType"}
	graphTokenInQuery = graphValidationToken + "="
)

// graphVerifier checks the clientState of every notification. It holds
// the token verifier as a field, not embedded, so that it does not take on
// that verifier's header check: the clientState is in the body, and no
// header tells whether it is there.
type graphVerifier struct {
	tokens *tokenVerifier
}

// Verify implements Verifier.
func (v *graphVerifier) Verify(req Request) (Result, error) {
	var raws [1][]byte
	if !lookupJSONRaw(req.Body, graphTopKeys, raws[:]) {
		return Result{}, graphNotObject
	}
	if raws[0] == nil {
		return Result{}, graphNoValue
	}
	var items []json.RawMessage
	if raws[0][0] != '[' || json.Unmarshal(raws[0], &items) != nil {
		return Result{}, graphBadValue
	}
	if len(items) == 0 {
		return Result{}, graphNoValue
	}
	index, typ := -1, ""
	for _, item := range items {
		var f [3][]byte
		if !lookupJSONRaw(item, graphItemKeys, f[:]) {
			return Result{}, graphBadValue
		}
		if len(f[0]) == 0 || f[0][0] != '"' {
			return Result{}, graphNoState
		}
		i, ok := v.tokens.match(jsonString(f[0]))
		if !ok {
			return Result{}, graphNoMatch
		}
		if index < 0 {
			index = i
			typ, _ = jsonScalar(f[1])
			if typ == "" {
				typ, _ = jsonScalar(f[2])
			}
		}
	}
	r := v.tokens.meta.result(index, req.Header, req.Body, "")
	if r.EventType == "" {
		r.EventType = typ
	}
	return r, nil
}

// graphMayHandshake: a POST whose query has validationToken.
func graphMayHandshake(req Request) bool {
	return req.Method == http.MethodPost && strings.Contains(req.URL, graphTokenInQuery)
}

// graphHandshake echoes the decoded validationToken as text/plain.
func graphHandshake(_ Verifier, req Request) (HandshakeResponse, bool, error) {
	if !graphMayHandshake(req) {
		return HandshakeResponse{}, false, nil
	}
	token, ok := queryValue(req.URL, graphValidationToken)
	if !ok {
		return HandshakeResponse{}, false, nil
	}
	if !echoable(token) {
		return HandshakeResponse{}, false, graphBadToken
	}
	return textAnswer(token), true, nil
}

// signGraph sets the clientState of each notification of body, a
// notification collection {"value":[…]}; any other JSON object is taken
// as one notification and wrapped in one.
func signGraph(key string, body []byte, _ SignOptions) ([]byte, error) {
	m, err := jsonObject(body)
	if err != nil {
		return nil, err
	}
	var items []map[string]json.RawMessage
	if raw, ok := m["value"]; ok {
		if err := json.Unmarshal(raw, &items); err != nil || slices.ContainsFunc(items, func(i map[string]json.RawMessage) bool { return i == nil }) {
			return nil, errors.New("value is not an array of objects")
		}
	} else {
		items, m = []map[string]json.RawMessage{m}, map[string]json.RawMessage{}
	}
	state, _ := json.Marshal(key)
	for _, item := range items {
		item["clientState"] = state
	}
	m["value"], _ = json.Marshal(items)
	return json.Marshal(m)
}

// core gives the handshake functions the keys, as for the verifiers that
// embed a base.
func (v *graphVerifier) core() *base { return &v.tokens.base }

var _ Verifier = (*graphVerifier)(nil)
