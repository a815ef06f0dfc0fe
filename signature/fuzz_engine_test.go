package signature

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"testing"
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
