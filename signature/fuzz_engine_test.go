package signature

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Fuzz targets of the signed-content engine, the key parsers and the
// public-key schemes; run one for longer with, for example:
//
//	go test -run '^$' -fuzz '^FuzzCompileTemplate$' -fuzztime 60s ./signature/

// renderTemplate writes parts back as a template.
func renderTemplate(parts []part) string {
	var b strings.Builder
	for _, p := range parts {
		switch p.kind {
		case partText:
			r := strings.NewReplacer(`\`, `\\`, "{", "{{", "}", "}}", "\n", `\n`, "\r", `\r`, "\t", `\t`)
			b.WriteString(r.Replace(p.text))
		case partBody:
			b.WriteString("{body}")
		case partTimestamp:
			b.WriteString("{timestamp}")
		case partID:
			b.WriteString("{id}")
		case partURL:
			b.WriteString("{url}")
		case partMethod:
			b.WriteString("{method}")
		case partHeader:
			b.WriteString("{header." + p.text + "}")
		}
	}
	return b.String()
}

func FuzzCompileTemplate(f *testing.F) {
	for _, s := range []string{"{body}", "{timestamp}.{body}", `v0:{timestamp}:{body}`, "{method} {url}\\n{id}{header.X-A}",
		"{{literal}}", "{http.request.header.X-B}", "{", "}", `\`, `\q`, "{header.}", "{header.a b}", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tmpl string) {
		parts, err := compileTemplate(tmpl)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "SignedContent") {
				t.Fatalf("error %q does not name the field", err)
			}
			return
		}
		if len(parts) == 0 || len(parts) > maxTemplateParts {
			t.Fatalf("%d parts accepted", len(parts))
		}
		for i, p := range parts {
			if p.kind == partText && (p.text == "" || (i > 0 && parts[i-1].kind == partText)) {
				t.Fatalf("part %d: empty or unmerged text %+v", i, parts)
			}
		}
		again, err := compileTemplate(renderTemplate(parts))
		if err != nil || !slices.Equal(again, parts) {
			t.Fatalf("rendered %q compiles to %+v, %v; want %+v", renderTemplate(parts), again, err, parts)
		}
	})
}

// checkHexSigs fails unless each decoded signature appears in value after
// key=prefix (either case).
func checkHexSigs(t *testing.T, value, lead string, sigs *sigSet) {
	t.Helper()
	if sigs.n > MaxSignatures {
		t.Fatalf("%d signatures accepted", sigs.n)
	}
	for i := range sigs.n {
		if !strings.Contains(strings.ToLower(value), lead+hex.EncodeToString(sigs.sig[i][:sigs.size])) {
			t.Fatalf("signature %d is not in the header", i)
		}
	}
}

func FuzzParseEnginePairs(f *testing.F) {
	mac := strings.Repeat("ab", sha256.Size)
	for _, s := range []string{"ts=1700000000;h1=" + mac, "ts=1;h1=" + mac + ";h1=" + mac, "h1=" + mac, "ts=1", "ts=1;h1", " ; ", "ts=1;ts=2;h1=" + mac, "ts=1,h1=zz"} {
		f.Add(s)
	}
	v := setup(f, Config{Scheme: "paddle", Secrets: []string{fuzzSecret}}).(*engine)
	f.Fuzz(func(t *testing.T, value string) {
		var sigs sigSet
		sigs.size = v.size
		ts, err := v.parse(value, &sigs)
		checkSentinel(t, err)
		if err != nil {
			return
		}
		if sigs.n == 0 || !strings.Contains(value, "ts="+ts) {
			t.Fatalf("accepted with %d signatures, ts %q", sigs.n, ts)
		}
		checkHexSigs(t, value, "h1=", &sigs)
	})
}

func FuzzParseEngineList(f *testing.F) {
	mac := strings.Repeat("ab", sha256.Size)
	for _, s := range []string{"v1=" + mac, "v1=" + mac + " v1=" + mac, "v2=x,v1=" + mac, " , ", "v1=", strings.Repeat("v1=x ", 20)} {
		f.Add(s)
	}
	v := setup(f, Config{Scheme: SchemeHMAC, Secrets: []string{fuzzSecret}, SignatureHeader: "X-Sig", SignatureSyntax: "list", SignaturePrefix: "v1="}).(*engine)
	f.Fuzz(func(t *testing.T, value string) {
		var sigs sigSet
		sigs.size = v.size
		_, err := v.parse(value, &sigs)
		checkSentinel(t, err)
		if err == nil {
			checkHexSigs(t, value, "v1=", &sigs)
		}
	})
}

func FuzzParseKeys(f *testing.F) {
	for _, s := range []string{edPubHex, edPubB64, "whpk_" + edPubB64, edSeedHex, "whsk_" + edSeedB64, p256PubB64, p256PrivB64,
		"-----BEGIN PUBLIC KEY-----\n" + p256PubB64 + "\n-----END PUBLIC KEY-----\n", "whpk_", "", "-----BEGIN "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		quiet := func(err error) {
			if err != nil && len(s) >= 8 && strings.Contains(err.Error(), s) {
				t.Fatalf("error %q quotes the key", err)
			}
		}
		pub, err := parseEd25519Public(s)
		quiet(err)
		if err == nil && len(pub) != 32 {
			t.Fatalf("ed25519 public key of %d bytes", len(pub))
		}
		priv, err := parseEd25519Private(s)
		quiet(err)
		if err == nil && len(priv) != 64 {
			t.Fatalf("ed25519 private key of %d bytes", len(priv))
		}
		ec, err := parseP256Public(s)
		quiet(err)
		if err == nil && ec.Curve.Params().Name != "P-256" {
			t.Fatalf("curve %s accepted", ec.Curve.Params().Name)
		}
		_, err = parseP256Private(s)
		quiet(err)
	})
}

func FuzzVerifyPaddle(f *testing.F) {
	f.Add([]byte(paddleBody), "ts="+vectorTS+";h1="+paddleSig, uint(0))
	f.Add([]byte(`{"event_id":1}`), "ts=1;h1=", uint(3))
	v := setup(f, Config{Scheme: "paddle", Secrets: []string{"other", fuzzSecret}, Now: fixedClock})
	f.Fuzz(func(t *testing.T, body []byte, sig string, flip uint) {
		_, err := v.Verify(reqOf(http.Header{"Paddle-Signature": {sig}}, body))
		checkSentinel(t, err)
		checkSignedRoundTrip(t, v, "paddle", body, flip, SignOptions{})
	})
}

func FuzzVerifyEd25519(f *testing.F) {
	f.Add([]byte(telnyxBody), telnyxSig, vectorTS, uint(0))
	f.Add([]byte(`{}`), "AAAA", "01", uint(1))
	v := setup(f, Config{Scheme: SchemeTelnyx, PublicKeys: []string{otherEdKey(), edPubB64}, Now: fixedClock})
	f.Fuzz(func(t *testing.T, body []byte, sig, ts string, flip uint) {
		res, err := v.Verify(reqOf(http.Header{"Telnyx-Signature-Ed25519": {sig}, "Telnyx-Timestamp": {ts}}, body))
		checkSentinel(t, err)
		if err == nil && res.SecretIndex != 1 {
			t.Fatalf("verified with key %d", res.SecretIndex)
		}
		h, err := Sign(SchemeTelnyx, edSeedHex, body, SignOptions{Timestamp: testNow})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(reqOf(h, body)); err != nil {
			t.Fatalf("Verify of a signed body: %v", err)
		}
		if len(body) > 0 {
			mutated := append([]byte(nil), body...)
			mutated[flip%uint(len(body))] ^= 0x20
			if _, err := v.Verify(reqOf(h, mutated)); err == nil {
				t.Fatal("Verify of a mutated body succeeded")
			}
		}
	})
}

// FuzzJSONPath holds the nested-field lookup to encoding/json: the raw value
// at a dotted path is what decoding into nested maps finds.
func FuzzJSONPath(f *testing.F) {
	f.Add([]byte(`{"event":{"id":"e-1","type":"t"},"id":"x"}`), "event.id")
	f.Add([]byte(`{"a":{"b":{"c":1,"c":{"d":2}}}}`), "a.b.c.d")
	f.Add([]byte(`{"a":[{"b":1}],"a":{"\u0062":null}}`), "a.b")
	f.Add([]byte(`{"a":{"":{"":3}}}`), "a..")
	f.Fuzz(func(t *testing.T, body []byte, path string) {
		top, rest, nested := strings.Cut(path, ".")
		raws := make([][]byte, 1)
		if !lookupJSONRaw(body, []string{top}, raws) {
			return // validity is FuzzLookupJSON's oracle
		}
		got := raws[0]
		if nested {
			got = jsonAt(got, rest)
		}
		var want json.RawMessage = body
		for _, name := range strings.Split(path, ".") {
			var m map[string]json.RawMessage
			if len(want) == 0 || want[0] != '{' || json.Unmarshal(want, &m) != nil {
				want = nil
				break
			}
			want = m[name]
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("path %q = %q, encoding/json says %q", path, got, want)
		}
	})
}

// FuzzVerifyTimestampField verifies bodies whose timestamp field is
// arbitrary: only a fresh canonical timestamp passes, and a forged body is
// ErrNoMatch whatever it holds.
func FuzzVerifyTimestampField(f *testing.F) {
	f.Add([]byte(`{"webhookTimestamp":1700000000000}`), uint(3))
	f.Add([]byte(`{"webhookTimestamp":"1700000000000"}`), uint(0))
	f.Add([]byte(`{"webhookTimestamp":-1}`), uint(1))
	f.Add([]byte(`{"webhookTimestamp":17000000000000000000000}`), uint(1))
	v := setup(f, Config{Scheme: "linear", Secrets: []string{"other", fuzzSecret}, Now: fixedClock})
	f.Fuzz(func(t *testing.T, body []byte, flip uint) {
		h, err := Sign("linear", fuzzSecret, body, SignOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = v.Verify(reqOf(h, body))
		checkSentinel(t, err)
		if err != nil && !errors.Is(err, ErrTimestamp) {
			t.Fatalf("Verify of a signed body: %v", err)
		}
		if err == nil {
			raws := make([][]byte, 1)
			lookupJSONRaw(body, []string{"webhookTimestamp"}, raws)
			ms, ok := jsonScalar(raws[0])
			n, perr := strconv.ParseInt(ms, 10, 64)
			if !ok || perr != nil || n/1000 < testNow.Unix()-60 || n/1000 > testNow.Unix()+60 {
				t.Fatalf("accepted webhookTimestamp %q", ms)
			}
		}
		if len(body) > 0 {
			mutated := append([]byte(nil), body...)
			mutated[flip%uint(len(body))] ^= 0x20
			if _, err := v.Verify(reqOf(h, mutated)); !errors.Is(err, ErrNoMatch) {
				t.Fatalf("Verify of a mutated body: %v, want ErrNoMatch", err)
			}
		}
	})
}

// FuzzVerifyRFC3339 verifies arbitrary RFC 3339 timestamp headers: a
// signed one is accepted exactly when it parses and is within the
// tolerance, and every error wraps one sentinel.
func FuzzVerifyRFC3339(f *testing.F) {
	f.Add("2023-11-14T22:13:20Z")
	f.Add("2023-11-14T15:13:20.123456789-07:00")
	f.Add("2023-11-14T22:13:20")
	f.Add("2023-02-30T22:13:20Z")
	const secret = "s"
	cfg := Config{Scheme: SchemeHMAC, Secrets: []string{secret}, Now: fixedClock, SignatureHeader: "X-Sig", TimestampHeader: "X-Ts", TimestampFormat: "rfc3339", SignedContent: "{timestamp}{body}"}
	v := setup(f, cfg)
	f.Fuzz(func(t *testing.T, ts string) {
		body := []byte("{}")
		h := hdr("X-Ts", ts, "X-Sig", hexMAC(sha256.New, []byte(secret), body, ts))
		_, err := v.Verify(reqOf(h, body))
		checkSentinel(t, err)
		parsed, perr := time.Parse(time.RFC3339, ts)
		fresh := perr == nil && parsed.Unix() >= testNow.Unix()-300 && parsed.Unix() <= testNow.Unix()+300
		if h.Get("X-Ts") == ts && ts != "" && len(ts) <= MaxHeaderLen && (err == nil) != fresh {
			t.Fatalf("timestamp %q: err = %v, parsed %v, %v", ts, err, parsed, perr)
		}
	})
}
