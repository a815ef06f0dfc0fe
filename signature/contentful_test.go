package signature

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Contentful's request verification
// (https://contentful.com/developers/docs/webhooks/request-verification)
// refers to node-apps-toolkit's verifyRequest for the algorithm: HMAC-SHA256
// in hex over "<method>\n<path>\n<signed headers>\n<body>", the headers
// named in x-contentful-signed-headers lower-cased, sorted and joined as
// name:value with ';', the path as getNormalizedEncodedURI encodes it.
// The vectors are computed with openssl, and again with Node's crypto,
// querystring.escape and encodeURI as the toolkit calls them:
//
//	S=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
//	H='x-contentful-signed-headers:x-contentful-signed-headers,x-contentful-timestamp,x-contentful-topic;x-contentful-timestamp:1700000000000;x-contentful-topic:ContentManagement.Entry.publish'
//	printf 'POST\n/hook\n%s\n%s' "$H" "$body" | openssl dgst -sha256 -hmac "$S" -hex
//	printf 'POST\n/hooks/cf?space%%253Dabc%%2526env%%253Dmaster\n%s\n%s' "$H" "$body" | openssl dgst -sha256 -hmac "$S" -hex
//
// contentfulUnsignedTSSig signs a list without the timestamp:
//
//	printf 'POST\n/hook\nx-contentful-signed-headers:x-contentful-signed-headers,x-contentful-topic;x-contentful-topic:ContentManagement.Entry.publish\n%s' "$body" | openssl dgst -sha256 -hmac "$S" -hex
const (
	contentfulSecret   = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	contentfulBody     = `{"sys":{"id":"abc"}}`
	contentfulTS       = "1700000000000"
	contentfulTopic    = "ContentManagement.Entry.publish"
	contentfulList     = "x-contentful-signed-headers,x-contentful-timestamp,x-contentful-topic"
	contentfulURL      = "https://hooks.example.com/hook"
	contentfulSig      = "58cb1139596103ad3c2115fbd6d64a8788b548f550f9ce99f1c2e017c75951b2"
	contentfulQueryURL = "https://hooks.example.com/hooks/cf?space=abc&env=master"
	contentfulQuerySig = "f81ce81484843fcdd848eb814025d98d7ec3d3f68a2932813d005b341e884c0d"

	contentfulUnsignedTSSig = "54e00c03a1c9821de5e455d8946bdaa43b92e3a7ade31fd832462fb5ad54f141"
)

// contentfulHeader is the vector's header with kv set on top; a value of
// "" deletes the header.
func contentfulHeader(kv ...string) http.Header {
	h := hdr(
		"X-Contentful-Signature", contentfulSig,
		"X-Contentful-Signed-Headers", contentfulList,
		"X-Contentful-Timestamp", contentfulTS,
		"X-Contentful-Topic", contentfulTopic,
		"Content-Type", "application/vnd.contentful.management.v1+json",
	)
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			h.Del(kv[i])
		} else {
			h.Set(kv[i], kv[i+1])
		}
	}
	return h
}

func TestContentful(t *testing.T) {
	at := clockAt(t, "1700000000")
	cfg := Config{Scheme: "contentful", Secrets: []string{contentfulSecret}, Now: at}
	vector := post(contentfulURL, contentfulHeader(), contentfulBody)
	want := Result{DeliveryID: bodyID([]byte(contentfulBody)), EventType: contentfulTopic}

	withKey := post(contentfulURL, contentfulHeader("X-Contentful-Idempotency-Key", "4f1c2d"), contentfulBody)
	stale := cfg
	stale.Now = func() time.Time { return at().Add(DefaultTolerance + time.Second) }
	proxied := cfg
	proxied.PublicURL = "https://hooks.example.com/hooks/cf"
	behindProxy := post("http://10.0.0.7:8080/cf?space=abc&env=master", contentfulHeader("X-Contentful-Signature", contentfulQuerySig), contentfulBody)
	repeated := post(contentfulURL, contentfulHeader(), contentfulBody)
	repeated.Header.Add("X-Contentful-Topic", contentfulTopic)
	tooMany := contentfulList
	for i := range maxContentfulHeaders {
		tooMany += ",x-h" + strconv.Itoa(i)
	}

	runVerifyCases(t, []verifyCase{
		{name: "vector", cfg: cfg, req: vector, want: want},
		{name: "second secret of two", cfg: Config{Scheme: "contentful", Secrets: []string{"old", contentfulSecret}, Now: at}, req: vector, want: Result{SecretIndex: 1, DeliveryID: want.DeliveryID, EventType: contentfulTopic}},
		{name: "idempotency key is the delivery id", cfg: cfg, req: withKey, want: Result{DeliveryID: "4f1c2d", EventType: contentfulTopic}},
		{name: "list in any case and order, with spaces and a repeat", cfg: cfg, req: post(contentfulURL, contentfulHeader("X-Contentful-Signed-Headers", " X-Contentful-Topic, x-contentful-timestamp ,x-contentful-signed-headers,x-contentful-topic"), contentfulBody), want: want},
		{name: "upper-case hex", cfg: cfg, req: post(contentfulURL, contentfulHeader("X-Contentful-Signature", strings.ToUpper(contentfulSig)), contentfulBody), want: want},
		{name: "query escaped twice", cfg: cfg, req: post(contentfulQueryURL, contentfulHeader("X-Contentful-Signature", contentfulQuerySig), contentfulBody), want: want},
		{name: "public URL behind a proxy, query from the request", cfg: proxied, req: behindProxy, want: want},
		{name: "unsigned header changed", cfg: cfg, req: post(contentfulURL, contentfulHeader("Content-Type", "text/plain"), contentfulBody), want: want},
		{name: "one byte of the body changed", cfg: cfg, req: flipped(vector, 3), err: ErrNoMatch},
		{name: "signed header changed", cfg: cfg, req: post(contentfulURL, contentfulHeader("X-Contentful-Topic", "ContentManagement.Entry.delete"), contentfulBody), err: ErrNoMatch},
		{name: "timestamp changed", cfg: cfg, req: post(contentfulURL, contentfulHeader("X-Contentful-Timestamp", "1700000000001"), contentfulBody), err: ErrNoMatch},
		{name: "header dropped from the list", cfg: cfg, req: post(contentfulURL, contentfulHeader("X-Contentful-Signed-Headers", "x-contentful-signed-headers,x-contentful-timestamp"), contentfulBody), err: ErrNoMatch},
		{name: "another path", cfg: cfg, req: post("https://hooks.example.com/hook2", contentfulHeader(), contentfulBody), err: ErrNoMatch},
		{name: "query added", cfg: cfg, req: post(contentfulURL+"?a=1", contentfulHeader(), contentfulBody), err: ErrNoMatch},
		{name: "another method", cfg: cfg, req: Request{Method: http.MethodPut, URL: contentfulURL, Header: contentfulHeader(), Body: []byte(contentfulBody)}, err: ErrNoMatch},
		{name: "stale timestamp", cfg: stale, req: vector, err: ErrTimestamp},
		{name: "stale but forged", cfg: stale, req: flipped(vector, 3), err: ErrNoMatch},
		{name: "timestamp not in the list", cfg: cfg, req: post(contentfulURL, contentfulHeader("X-Contentful-Signed-Headers", "x-contentful-signed-headers,x-contentful-topic", "X-Contentful-Signature", contentfulUnsignedTSSig), contentfulBody), err: ErrMalformedHeader},
		{name: "list not in the list", cfg: cfg, req: post(contentfulURL, contentfulHeader("X-Contentful-Signed-Headers", "x-contentful-timestamp,x-contentful-topic"), contentfulBody), err: ErrMalformedHeader},
		{name: "signed header missing", cfg: cfg, req: post(contentfulURL, contentfulHeader("X-Contentful-Topic", ""), contentfulBody), err: ErrMissingHeader},
		{name: "signed header sent twice", cfg: cfg, req: repeated, err: ErrMalformedHeader},
		{name: "empty name in the list", cfg: cfg, req: post(contentfulURL, contentfulHeader("X-Contentful-Signed-Headers", contentfulList+","), contentfulBody), err: ErrMalformedHeader},
		{name: "not a header name in the list", cfg: cfg, req: post(contentfulURL, contentfulHeader("X-Contentful-Signed-Headers", contentfulList+",a b"), contentfulBody), err: ErrMalformedHeader},
		{name: "too many names", cfg: cfg, req: post(contentfulURL, contentfulHeader("X-Contentful-Signed-Headers", tooMany), contentfulBody), err: ErrMalformedHeader},
		{name: "no signature", cfg: cfg, req: post(contentfulURL, contentfulHeader("X-Contentful-Signature", ""), contentfulBody), err: ErrMissingHeader},
		{name: "no list", cfg: cfg, req: post(contentfulURL, contentfulHeader("X-Contentful-Signed-Headers", ""), contentfulBody), err: ErrMissingHeader},
		{name: "no timestamp", cfg: cfg, req: post(contentfulURL, contentfulHeader("X-Contentful-Timestamp", ""), contentfulBody), err: ErrMissingHeader},
		{name: "signature not hex", cfg: cfg, req: post(contentfulURL, contentfulHeader("X-Contentful-Signature", "zz"+contentfulSig[2:]), contentfulBody), err: ErrMalformedHeader},
		{name: "signature short", cfg: cfg, req: post(contentfulURL, contentfulHeader("X-Contentful-Signature", contentfulSig[2:]), contentfulBody), err: ErrMalformedHeader},
		{name: "timestamp not a number", cfg: cfg, req: post(contentfulURL, contentfulHeader("X-Contentful-Timestamp", "17e11"), contentfulBody), err: ErrMalformedHeader},
	})
}

func TestContentfulSign(t *testing.T) {
	h, err := Sign("contentful", contentfulSecret, []byte(contentfulBody), SignOptions{
		EventType: contentfulTopic, Timestamp: time.UnixMilli(1700000000000), URL: "/hook",
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"X-Contentful-Signature":      contentfulSig,
		"X-Contentful-Signed-Headers": contentfulList,
		"X-Contentful-Timestamp":      contentfulTS,
		"X-Contentful-Topic":          contentfulTopic,
	} {
		if got := h.Get(name); got != want {
			t.Errorf("Sign: %s = %q, want %q", name, got, want)
		}
	}

	// Round trip with an id, a further header, a PUT and a query.
	opts := SignOptions{
		ID: "key-1", EventType: "ContentManagement.Asset.save", Method: http.MethodPut,
		URL: "https://hooks.example.com/cf?x=1&y=%41", Header: hdr("X-Contentful-Webhook-Name", "site"),
		Timestamp: testNow,
	}
	req := signedRequest(t, "contentful", contentfulSecret, contentfulBody, opts)
	req.Method = http.MethodPut
	if got := req.Header.Get("X-Contentful-Signed-Headers"); got != "x-contentful-idempotency-key,x-contentful-signed-headers,x-contentful-timestamp,x-contentful-topic,x-contentful-webhook-name" {
		t.Errorf("Sign: signed headers %q", got)
	}
	v := setup(t, Config{Scheme: "contentful", Secrets: []string{contentfulSecret}, Now: fixedClock})
	got, err := v.Verify(req)
	if err != nil {
		t.Fatalf("Verify of a signed request: %v", err)
	}
	if want := (Result{DeliveryID: "key-1", EventType: "ContentManagement.Asset.save"}); got != want {
		t.Errorf("Verify = %+v, want %+v", got, want)
	}
	req.Header.Set("X-Contentful-Webhook-Name", "other")
	if _, err := v.Verify(req); err == nil {
		t.Error("Verify accepted a changed X-Contentful-Webhook-Name")
	}

	if !UsesURL(setup(t, Config{Scheme: "contentful", Secrets: []string{"s"}, PublicURL: "https://h/p"})) {
		t.Error("UsesURL = false: the query is the request's")
	}
	for _, u := range []string{"https://h/p?x=1", "ftp://h/p", "https://h/p#f"} {
		if _, err := New(Config{Scheme: "contentful", Secrets: []string{"s"}, PublicURL: u}); err == nil {
			t.Errorf("New accepted PublicURL %q", u)
		}
	}
}

// TestContentfulPath holds the path encoding to Node's: the wants are what
// getNormalizedEncodedURI (querystring.escape, then encodeURI) returns for
// the path and query, printed with node.
func TestContentfulPath(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"/hook", "/hook"},
		{"https://hooks.example.com/hooks/cf?space=abc&env=master", "/hooks/cf?space%253Dabc%2526env%253Dmaster"},
		{"/a b/ü?x=ü y&z=%41", "/a%20b/%C3%BC?x%253D%25C3%25BC%2520y%2526z%253D%252541"},
		{"/p?", "/p"},
		{"/p?a=1?b=2", "/p?a%253D1"},
		{"/semi;colon,@:$&=+!~*'()#x", "/semi;colon,@:$&=+!~*'()#x"},
		{"/%41", "/%2541"},
		{"https://h.example", "/"},
		{"https://h.example?a", "/?a"},
		{"", ""},
	} {
		path, query := contentfulURI(tc.url)
		if got := string(appendContentfulPath(nil, path, query)); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.url, got, tc.want)
		}
	}
}

// FuzzContentfulSignedHeaders holds the signed-headers parser to a plain
// one: split at commas, trim, lower-case, sort, drop repeats; refuse an
// empty or invalid name and more than maxContentfulHeaders names.
func FuzzContentfulSignedHeaders(f *testing.F) {
	for _, s := range []string{contentfulList, "", ",", "a,,b", " B , a ,b", "x-a,X-A", "a b", "é", strings.Repeat("a,", 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		var names contentfulNames
		ok := names.parse(value)

		var want []string
		wantOK := true
		for name := range strings.SplitSeq(value, ",") {
			name = strings.TrimSpace(name)
			if !ValidHeaderName(name) || len(name) > maxContentfulName {
				wantOK = false
			}
			want = append(want, strings.ToLower(name))
		}
		slices.Sort(want)
		want = slices.Compact(want)
		if len(want) > maxContentfulHeaders {
			wantOK = false
		}
		if ok != wantOK {
			t.Fatalf("parse(%q) = %v, want %v", value, ok, wantOK)
		}
		if !ok {
			return
		}
		var got []string
		for _, name := range names.list[:names.n] {
			got = append(got, strings.ToLower(name))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("parse(%q) = %q, want %q", value, got, want)
		}
		var values [maxContentfulHeaders]string
		head := string(appendContentfulHead(nil, "", "", "", &names, &values))
		if names.signs(contentfulListName) && !strings.Contains(head, contentfulListName+":"+strings.Join(want, ",")) {
			t.Fatalf("head %q does not sign the list %q", head, want)
		}
	})
}
