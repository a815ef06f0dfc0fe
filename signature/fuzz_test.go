package signature

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// The fuzz targets run over their seeds with every go test; run one for
// longer with, for example:
//
//	go test -run '^$' -fuzz '^FuzzVerifyStripe$' -fuzztime 60s ./signature/

const fuzzSecret = "fuzz-secret"

// checkSentinel fails unless err is nil or wraps exactly one sentinel.
func checkSentinel(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	n := 0
	for _, s := range []error{ErrMissingHeader, ErrMalformedHeader, ErrNoMatch, ErrTimestamp} {
		if errors.Is(err, s) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("error %v wraps %d sentinels, want 1", err, n)
	}
}

func oracleMAC(newHash func() hash.Hash, key, body []byte, head ...string) []byte {
	m := hmac.New(newHash, key)
	m.Write([]byte(strings.Join(head, "")))
	m.Write(body)
	return m.Sum(nil)
}

// checkSignedRoundTrip signs body, which must verify, and then flips one
// byte of it, which must not.
func checkSignedRoundTrip(t *testing.T, v Verifier, scheme string, body []byte, flip uint, opts SignOptions) {
	t.Helper()
	opts.Timestamp = testNow
	h, err := Sign(scheme, fuzzSecret, body, opts)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	if _, err := v.Verify(reqOf(h, body)); err != nil {
		t.Fatalf("Verify of a signed body: %v", err)
	}
	if len(body) == 0 || scheme == SchemeGitLab {
		return
	}
	mutated := append([]byte(nil), body...)
	mutated[flip%uint(len(body))] ^= 0x20
	if _, err := v.Verify(reqOf(h, mutated)); !errors.Is(err, ErrNoMatch) {
		t.Fatalf("Verify of a mutated body: %v, want ErrNoMatch", err)
	}
}

func FuzzParseUnix(f *testing.F) {
	for _, s := range []string{"0", "1614265330", "01", "-1", "+1", "", "999999999999999999", "9999999999999999999", "1e9", " 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := parseUnix(s)
		if ok && strconv.FormatInt(n, 10) != s {
			t.Fatalf("parseUnix(%q) = %d, which formats differently", s, n)
		}
		if m, err := strconv.ParseInt(s, 10, 64); err == nil && m >= 0 && strconv.FormatInt(m, 10) == s && len(s) <= 18 && !ok {
			t.Fatalf("parseUnix(%q) refused a canonical timestamp", s)
		}
	})
}

func FuzzParseGitHub(f *testing.F) {
	f.Add(githubDocsSig)
	f.Add("sha256=")
	f.Add("sha1=757107ea0eb2509fc211221cce984b8a37570b6d")
	f.Add("sha256=757107EA0EB2509FC211221CCE984B8A37570B6D7586C22C46F4379C8B043E1G")
	f.Fuzz(func(t *testing.T, value string) {
		var sigs sigSet
		err := parseGitHub(value, &sigs)
		checkSentinel(t, err)
		if err == nil && !strings.EqualFold(value, githubPrefix+hex.EncodeToString(sigs.sig[0][:sha256.Size])) {
			t.Fatalf("parseGitHub(%q) accepted, decoded to something else", value)
		}
	})
}

func FuzzParseStripe(f *testing.F) {
	f.Add("t=1700000000,v1=" + stripeSig)
	f.Add("t=1700000000,v1=" + stripeSig + ",v1=" + strings.Repeat("a", 64) + ",v0=00")
	f.Add("t=1,v1=zz,v1=,scheme=x")
	f.Add("v1=" + stripeSig)
	f.Add("t=1,t=2,v1=" + stripeSig)
	f.Add(",,,")
	f.Fuzz(func(t *testing.T, value string) {
		var sigs sigSet
		ts, unix, err := parseStripe(value, &sigs)
		checkSentinel(t, err)
		if err != nil {
			return
		}
		if sigs.n < 1 || sigs.n > MaxSignatures {
			t.Fatalf("%d signatures accepted", sigs.n)
		}
		if strconv.FormatInt(unix, 10) != ts || !strings.Contains(value, "t="+ts) {
			t.Fatalf("timestamp %q (%d) not the header's", ts, unix)
		}
		for i := range sigs.n {
			if !strings.Contains(strings.ToLower(value), "v1="+hex.EncodeToString(sigs.sig[i][:sha256.Size])) {
				t.Fatalf("signature %d is not a v1 of the header", i)
			}
		}
	})
}

func FuzzParseStandard(f *testing.F) {
	f.Add(standardSpecSig)
	f.Add(standardSpecSig + " v1a,AAAA v2,x nocomma")
	f.Add(strings.TrimRight(standardSpecSig, "="))
	f.Add("   ")
	f.Add(strings.Repeat("v1,AAAA ", 20))
	f.Fuzz(func(t *testing.T, value string) {
		var sigs standardSigs
		err := parseStandard(value, &sigs)
		checkSentinel(t, err)
		if err != nil {
			return
		}
		if n := sigs.v1.n + sigs.nv1a; n < 1 || n > MaxSignatures {
			t.Fatalf("%d signatures accepted", n)
		}
		for i := range sigs.v1.n {
			enc := strings.TrimRight(base64.StdEncoding.EncodeToString(sigs.v1.sig[i][:sha256.Size]), "=")
			// Non-canonical trailing bits decode too; compare all but the last character.
			if !strings.Contains(value, "v1,"+enc[:len(enc)-1]) {
				t.Fatalf("signature %d is not a v1 of the header", i)
			}
		}
		for i := range sigs.nv1a {
			enc := strings.TrimRight(base64.StdEncoding.EncodeToString(sigs.v1a[i][:]), "=")
			if !strings.Contains(value, "v1a,"+enc[:len(enc)-1]) {
				t.Fatalf("signature %d is not a v1a of the header", i)
			}
		}
	})
}

func FuzzParseSlack(f *testing.F) {
	f.Add(slackDocsSig)
	f.Add("v1=" + slackDocsSig[3:])
	f.Add("v0")
	f.Add("v0=")
	f.Fuzz(func(t *testing.T, value string) {
		var sigs sigSet
		err := parseSlack(value, &sigs)
		checkSentinel(t, err)
		if err == nil && !strings.EqualFold(value, "v0="+hex.EncodeToString(sigs.sig[0][:sha256.Size])) {
			t.Fatalf("parseSlack(%q) accepted, decoded to something else", value)
		}
	})
}

func FuzzParseShopify(f *testing.F) {
	f.Add(shopifySig)
	f.Add(strings.TrimRight(shopifySig, "="))
	f.Add("====")
	f.Add(strings.Repeat("0", 64))
	f.Fuzz(func(t *testing.T, value string) {
		var sigs sigSet
		err := parseShopify(value, &sigs)
		checkSentinel(t, err)
		if err == nil {
			enc := base64.StdEncoding.EncodeToString(sigs.sig[0][:sha256.Size])
			if !strings.HasPrefix(value, enc[:42]) {
				t.Fatalf("parseShopify(%q) accepted, decoded to something else", value)
			}
		}
	})
}

func FuzzParseHMAC(f *testing.F) {
	f.Add("sha1=" + genericSHA1Hex)
	f.Add(genericSHA1Hex)
	f.Add("sha1=" + strings.ToUpper(genericSHA1Hex))
	f.Add("sha1=")
	f.Fuzz(func(t *testing.T, value string) {
		v := setup(t, Config{Scheme: SchemeHMAC, Secrets: []string{fuzzSecret}, SignatureHeader: "X-Sig", Algorithm: "sha1", SignaturePrefix: "sha1="}).(*engine)
		var sigs sigSet
		sigs.size = v.size
		_, err := v.parse(value, &sigs)
		checkSentinel(t, err)
		if err == nil && !strings.EqualFold(value, "sha1="+hex.EncodeToString(sigs.sig[0][:sha1.Size])) {
			t.Fatalf("parse(%q) accepted, decoded to something else", value)
		}
	})
}

// checkAgainstEncodingJSON is the oracle for lookupJSON: it must accept
// exactly the JSON objects json.Valid accepts, and read what decoding into
// a map reads.
func checkAgainstEncodingJSON(t *testing.T, body []byte, key string) {
	t.Helper()
	vals, found := make([]string, 1), make([]bool, 1)
	valid := lookupJSON(body, []string{key}, vals, found)
	trimmed := strings.TrimLeft(string(body), " \t\r\n")
	wantValid := json.Valid(body) && strings.HasPrefix(trimmed, "{")
	if valid != wantValid {
		t.Fatalf("lookupJSON valid = %v, json.Valid object = %v", valid, wantValid)
	}
	if !valid {
		if found[0] {
			t.Fatal("lookupJSON found a value in invalid JSON")
		}
		return
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("json.Unmarshal of a valid object: %v", err)
	}
	raw, ok := m[key]
	want, wantFound := "", false
	if ok {
		switch raw[0] {
		case '"':
			if err := json.Unmarshal(raw, &want); err != nil {
				t.Fatal(err)
			}
			wantFound = true
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			want, wantFound = string(raw), true
		}
	}
	if vals[0] != want || found[0] != wantFound {
		t.Fatalf("lookupJSON(%q) = %q, %v; encoding/json says %q, %v", key, vals[0], found[0], want, wantFound)
	}
}

func FuzzLookupJSON(f *testing.F) {
	f.Add([]byte(stripeBody), "id")
	f.Add([]byte(stripeBody), "type")
	f.Add([]byte(`{"id":"a","id":{"id":1},"x":[1,2,{"y":null}],"t\u0079pe":"\u00e9\ud800"}`), "type")
	f.Add([]byte(`{"id": -0.5E+3 , "b":true,"c":false}`), "id")
	f.Add([]byte("{\"id\":\"\xff\xfe\"}"), "id")
	f.Add([]byte(`{"a":[[[]]],"id":"x"} `), "id")
	f.Add([]byte(`{"id":"x",}`), "id")
	f.Add([]byte(`[]`), "id")
	f.Fuzz(func(t *testing.T, body []byte, key string) {
		checkAgainstEncodingJSON(t, body, key)
	})
}

func FuzzVerifyGitHub(f *testing.F) {
	f.Add([]byte(githubDocsBody), githubDocsSig, "d-1", uint(3))
	f.Add([]byte("{}"), "sha256=", "", uint(0))
	f.Add([]byte(""), "sha256="+strings.Repeat("0", 64), "x", uint(1))
	v := setup(f, Config{Scheme: SchemeGitHub, Secrets: []string{"other", fuzzSecret}})
	f.Fuzz(func(t *testing.T, body []byte, sig, delivery string, flip uint) {
		h := http.Header{"X-Hub-Signature-256": {sig}, "X-Github-Delivery": {delivery}}
		res, err := v.Verify(reqOf(h, body))
		checkSentinel(t, err)
		if err == nil {
			want := githubPrefix + hex.EncodeToString(oracleMAC(sha256.New, []byte(fuzzSecret), body))
			if res.SecretIndex != 1 || !strings.EqualFold(sig, want) {
				t.Fatalf("forged signature accepted: %+v", res)
			}
		}
		checkSignedRoundTrip(t, v, SchemeGitHub, body, flip, SignOptions{ID: delivery})
	})
}

func FuzzVerifyStripe(f *testing.F) {
	f.Add([]byte(stripeBody), "t=1700000000,v1="+stripeSig, uint(5))
	f.Add([]byte(`{"id":1}`), "t=1700000000,v1=00,v0=11", uint(0))
	f.Add([]byte(`not json`), "t=1,v1=", uint(2))
	v := setup(f, Config{Scheme: SchemeStripe, Secrets: []string{fuzzSecret}, Now: fixedClock})
	f.Fuzz(func(t *testing.T, body []byte, value string, flip uint) {
		res, err := v.Verify(reqOf(http.Header{"Stripe-Signature": {value}}, body))
		checkSentinel(t, err)
		if err == nil {
			var ts string
			for item := range strings.SplitSeq(value, ",") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(item), "t="); ok {
					ts = v
				}
			}
			want := "v1=" + hex.EncodeToString(oracleMAC(sha256.New, []byte(fuzzSecret), body, ts, "."))
			if !strings.Contains(strings.ToLower(value), want) {
				t.Fatalf("forged signature accepted: %+v", res)
			}
		}
		checkSignedRoundTrip(t, v, SchemeStripe, body, flip, SignOptions{})
	})
}

func FuzzVerifyStandard(f *testing.F) {
	f.Add([]byte(standardSpecBody), standardSpecID, standardSpecTS, standardSpecSig, uint(1))
	f.Add([]byte(`{"type":"x"}`), "id", "1700000000", "v1,AAAA v1a,BBBB", uint(0))
	f.Add([]byte(""), "", "", "", uint(0))
	key, _ := decodeStandardSecret(standardSpecSecret)
	v := setup(f, Config{Scheme: SchemeStandard, Secrets: []string{standardSpecSecret}, IgnoreTimestamp: true})
	f.Fuzz(func(t *testing.T, body []byte, id, ts, sig string, flip uint) {
		h := http.Header{"Webhook-Id": {id}, "Webhook-Timestamp": {ts}, "Svix-Signature": {sig}}
		res, err := v.Verify(reqOf(h, body))
		checkSentinel(t, err)
		if err == nil {
			want := base64.StdEncoding.EncodeToString(oracleMAC(sha256.New, key, body, id, ".", ts, "."))
			if !strings.Contains(sig, "v1,"+want[:42]) || res.DeliveryID != id {
				t.Fatalf("forged signature accepted: %+v", res)
			}
		}
		checkSignedRoundTripStandard(t, v, body, flip)
	})
}

// checkSignedRoundTripStandard is checkSignedRoundTrip for the standard
// scheme, whose secret must be base64.
func checkSignedRoundTripStandard(t *testing.T, v Verifier, body []byte, flip uint) {
	t.Helper()
	h, err := Sign(SchemeStandard, standardSpecSecret, body, SignOptions{ID: "msg_f", Timestamp: testNow})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(reqOf(h, body)); err != nil {
		t.Fatalf("Verify of a signed body: %v", err)
	}
	if len(body) > 0 {
		mutated := append([]byte(nil), body...)
		mutated[flip%uint(len(body))] ^= 0x20
		if _, err := v.Verify(reqOf(h, mutated)); !errors.Is(err, ErrNoMatch) {
			t.Fatalf("Verify of a mutated body: %v, want ErrNoMatch", err)
		}
	}
}

func FuzzVerifySlack(f *testing.F) {
	f.Add([]byte(slackDocsBody), slackDocsTS, slackDocsSig, uint(9))
	f.Add([]byte("a=b"), "1700000000", "v0=00", uint(0))
	v := setup(f, Config{Scheme: SchemeSlack, Secrets: []string{fuzzSecret}, Now: fixedClock})
	f.Fuzz(func(t *testing.T, body []byte, ts, sig string, flip uint) {
		h := http.Header{"X-Slack-Request-Timestamp": {ts}, "X-Slack-Signature": {sig}}
		res, err := v.Verify(reqOf(h, body))
		checkSentinel(t, err)
		if err == nil {
			want := "v0=" + hex.EncodeToString(oracleMAC(sha256.New, []byte(fuzzSecret), body, "v0:", ts, ":"))
			if !strings.EqualFold(sig, want) {
				t.Fatalf("forged signature accepted: %+v", res)
			}
		}
		checkSignedRoundTrip(t, v, SchemeSlack, body, flip, SignOptions{})
	})
}

func FuzzVerifyShopify(f *testing.F) {
	f.Add([]byte(shopifyBody), shopifySig, "e-1", uint(2))
	f.Add([]byte("{}"), "", "", uint(0))
	v := setup(f, Config{Scheme: SchemeShopify, Secrets: []string{fuzzSecret}})
	f.Fuzz(func(t *testing.T, body []byte, sig, eventID string, flip uint) {
		h := http.Header{"X-Shopify-Hmac-Sha256": {sig}, "X-Shopify-Event-Id": {eventID}}
		res, err := v.Verify(reqOf(h, body))
		checkSentinel(t, err)
		if err == nil {
			want := base64.StdEncoding.EncodeToString(oracleMAC(sha256.New, []byte(fuzzSecret), body))
			if !strings.HasPrefix(sig, want[:42]) {
				t.Fatalf("forged signature accepted: %+v", res)
			}
		}
		checkSignedRoundTrip(t, v, SchemeShopify, body, flip, SignOptions{ID: eventID})
	})
}

func FuzzVerifyGitLab(f *testing.F) {
	f.Add([]byte("{}"), fuzzSecret, "u-1")
	f.Add([]byte("{}"), fuzzSecret+"x", "")
	f.Add([]byte(""), "", "")
	v := setup(f, Config{Scheme: SchemeGitLab, Secrets: []string{"other", fuzzSecret}})
	f.Fuzz(func(t *testing.T, body []byte, token, uuid string) {
		res, err := v.Verify(reqOf(http.Header{"X-Gitlab-Token": {token}, "X-Gitlab-Event-Uuid": {uuid}}, body))
		checkSentinel(t, err)
		if err == nil && (token != fuzzSecret || res.SecretIndex != 1) {
			t.Fatalf("token %q accepted: %+v", token, res)
		}
		if err == nil && uuid != "" && len(uuid) <= MaxHeaderLen && res.DeliveryID != uuid {
			t.Fatalf("DeliveryID = %q, want %q", res.DeliveryID, uuid)
		}
		checkSignedRoundTrip(t, v, SchemeGitLab, body, 0, SignOptions{})
	})
}

func FuzzVerifyHMAC(f *testing.F) {
	f.Add([]byte(genericBody), "sha1="+genericSHA1Hex, uint(0))
	f.Add([]byte(`{"event_id":"e"}`), "sha1=", uint(4))
	v := setup(f, Config{Scheme: SchemeHMAC, Secrets: []string{fuzzSecret}, SignatureHeader: "X-Sig", Algorithm: "sha1", SignaturePrefix: "sha1=", DeliveryIDField: "event_id"})
	f.Fuzz(func(t *testing.T, body []byte, sig string, flip uint) {
		res, err := v.Verify(reqOf(http.Header{"X-Sig": {sig}}, body))
		checkSentinel(t, err)
		if err == nil {
			want := "sha1=" + hex.EncodeToString(oracleMAC(sha1.New, []byte(fuzzSecret), body))
			if !strings.EqualFold(sig, want) {
				t.Fatalf("forged signature accepted: %+v", res)
			}
		}
		checkSignedRoundTrip(t, v, SchemeHMAC, body, flip, SignOptions{SignatureHeader: "X-Sig", Algorithm: "sha1", SignaturePrefix: "sha1="})
	})
}
