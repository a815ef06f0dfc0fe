package samples

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

// newRenderer is a renderer at now with the fragments of fragments (JSON).
func newRenderer(t *testing.T, now time.Time, fragments map[string]string) *renderer {
	t.Helper()
	r := &renderer{now: now, event: "invoice.paid", fragments: map[string]*value{}, vars: map[string]string{}}
	for name, text := range fragments {
		v, err := parseJSON([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		r.fragments[name] = v
	}
	return r
}

// renderText renders the JSON template text and returns the JSON out.
func renderText(t *testing.T, r *renderer, text string) (string, error) {
	t.Helper()
	v, err := parseJSON([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.render(v, 0)
	if err != nil {
		return "", err
	}
	return string(appendJSON(nil, out)), nil
}

func TestGenerators(t *testing.T) {
	now := time.Date(2031, 1, 2, 3, 4, 5, 678901234, time.UTC)
	tests := []struct {
		name, template string
		want           *regexp.Regexp // the whole output
	}{
		{"event", `"{{event}}"`, regexp.MustCompile(`^"invoice\.paid"$`)},
		{"uuid, version 4", `"{{uuid}}"`, regexp.MustCompile(`^"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"$`)},
		{"hex", `"{{hex 40}}"`, regexp.MustCompile(`^"[0-9a-f]{40}"$`)},
		{"hex, odd length", `"{{hex 7}}"`, regexp.MustCompile(`^"[0-9a-f]{7}"$`)},
		{"alnum in a string", `"cus_{{alnum 14}}"`, regexp.MustCompile(`^"cus_[0-9A-Za-z]{14}"$`)},
		{"lower", `"{{lower 9}}"`, regexp.MustCompile(`^"[0-9a-z]{9}"$`)},
		{"upper", `"T{{upper 10}}"`, regexp.MustCompile(`^"T[0-9A-Z]{10}"$`)},
		{"digits, a string", `"{{digits 7}}"`, regexp.MustCompile(`^"[1-9][0-9]{6}"$`)},
		{"int, a number", `"{{int 13}}"`, regexp.MustCompile(`^[1-9][0-9]{12}$`)},
		{"int inside a string stays text", `"gid://shopify/Order/{{int 13}}"`, regexp.MustCompile(`^"gid://shopify/Order/[1-9][0-9]{12}"$`)},
		{"unix, a number", `"{{unix}}"`, regexp.MustCompile(`^1925089445$`)},
		{"unix with an offset", `"{{unix+30d}}"`, regexp.MustCompile(`^` + strconv.FormatInt(now.Add(30*24*time.Hour).Unix(), 10) + `$`)},
		{"unix in a string", `"{{unix}}.000200"`, regexp.MustCompile(`^"1925089445\.000200"$`)},
		{"unixms", `"{{unixms-1s}}"`, regexp.MustCompile(`^1925089444678$`)},
		{"time", `"{{time}}"`, regexp.MustCompile(`^"2031-01-02T03:04:05Z"$`)},
		{"time.ms", `"{{time.ms}}"`, regexp.MustCompile(`^"2031-01-02T03:04:05\.678Z"$`)},
		{"time.us back 2m", `"{{time.us-2m}}"`, regexp.MustCompile(`^"2031-01-02T03:02:05\.678901Z"$`)},
		{"time.local", `"{{time.local}}"`, regexp.MustCompile(`^"2031-01-01T22:04:05-05:00"$`)},
		{"time ahead 1h", `"{{time+1h}}"`, regexp.MustCompile(`^"2031-01-02T04:04:05Z"$`)},
		{"ulid", `"txn_{{ulid}}"`, regexp.MustCompile(`^"txn_[0-9a-hjkmnp-tv-z]{26}"$`)},
		{"snowflake", `"{{snowflake}}"`, regexp.MustCompile(`^"[0-9]{18,19}"$`)},
		{"spaces inside braces", `"{{ hex  4 }}"`, regexp.MustCompile(`^"[0-9a-f]{4}"$`)},
		{"two placeholders", `"{{time}}/{{event}}"`, regexp.MustCompile(`^"2031-01-02T03:04:05Z/invoice\.paid"$`)},
		{"no placeholder", `"a {single} brace"`, regexp.MustCompile(`^"a \{single\} brace"$`)},
		{"literals untouched", `[1.50,true,null,"x"]`, regexp.MustCompile(`^\[1\.50,true,null,"x"\]$`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := renderText(t, newRenderer(t, now, nil), tt.template)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.want.MatchString(got) {
				t.Errorf("%s rendered %s, want %s", tt.template, got, tt.want)
			}
		})
	}
}

// TestTimeIDs: the ids that encode a time encode the rendering's.
func TestTimeIDs(t *testing.T) {
	now := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	r := newRenderer(t, now, nil)
	snow, _, err := r.expand("snowflake-1d")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(snow, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if ms := int64(n>>22) + discordEpoch; ms != now.Add(-24*time.Hour).UnixMilli() {
		t.Errorf("snowflake %s encodes %v, want a day before %v", snow, time.UnixMilli(ms).UTC(), now)
	}
	ulid, _, err := r.expand("ulid")
	if err != nil {
		t.Fatal(err)
	}
	var ms int64
	for _, c := range ulid[:10] {
		ms = ms<<5 | int64(strings.IndexRune(crockford, c))
	}
	if ms != now.UnixMilli() {
		t.Errorf("ulid %s encodes %d ms, want %d", ulid, ms, now.UnixMilli())
	}
}

func TestSameValue(t *testing.T) {
	r := newRenderer(t, time.Now(), map[string]string{"customer": `{"id":"cus_{{alnum 14 #customer}}"}`})
	out, err := renderText(t, r, `{
		"a": "{{uuid}}", "b": "{{uuid}}", "c": "{{uuid #other}}",
		"d": "{{ uuid  #other }}",
		"id": "{{digits 7 #order}}", "order_id": "{{int 7 #order}}",
		"customer": "{{use customer}}", "again": "x-cus_{{alnum 14 #customer}}"
	}`)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := parseJSON([]byte(out))
	get := func(k string) string { return v.member(k).text }
	if get("a") != get("b") {
		t.Errorf("the same placeholder gave %s and %s", get("a"), get("b"))
	}
	if get("a") == get("c") {
		t.Error("a label did not make a second value")
	}
	if get("c") != get("d") {
		t.Error("spacing inside the braces made another value")
	}
	if v.member("id").kind != kindString || v.member("order_id").kind != kindLiteral || get("id") != get("order_id") {
		t.Errorf("digits and int of one label: %q (%v) and %q (%v), want one value, a string and a number",
			get("id"), v.member("id").kind, get("order_id"), v.member("order_id").kind)
	}
	if "x-"+v.member("customer").member("id").text != get("again") {
		t.Errorf("a fragment's placeholder and the body's differ: %s, %s", v.member("customer").member("id").text, get("again"))
	}
}

// TestFreshValues: two renderings share no random value.
func TestFreshValues(t *testing.T) {
	const tmpl = `["{{uuid}}","{{hex 32}}","{{alnum 24}}","{{int 12}}","{{ulid}}","{{snowflake}}"]`
	now := time.Now()
	a, _ := renderText(t, newRenderer(t, now, nil), tmpl)
	b, _ := renderText(t, newRenderer(t, now, nil), tmpl)
	av, _ := parseJSON([]byte(a))
	bv, _ := parseJSON([]byte(b))
	for i := range av.elems {
		if av.elems[i].text == bv.elems[i].text {
			t.Errorf("element %d is %s in both renderings", i, av.elems[i].text)
		}
	}
}

func TestTemplateErrors(t *testing.T) {
	tests := []struct {
		name, template, want string
		fragments            map[string]string
	}{
		{"unknown generator", `"{{nosuch}}"`, `{{nosuch}}: unknown generator "nosuch"`, nil},
		{"no generator", `"{{ #label}}"`, "no generator", nil},
		{"missing length", `"{{hex}}"`, "takes one argument, a length", nil},
		{"length too long", `"{{hex 500}}"`, `length "500": want 1 to 128`, nil},
		{"argument to uuid", `"{{uuid 4}}"`, "takes no argument", nil},
		{"offset on hex", `"{{hex+1d 4}}"`, "hex takes no offset", nil},
		{"bad unit", `"{{unix+3w}}"`, "the unit is one of s, m, h, d", nil},
		{"bad offset", `"{{unix+d}}"`, "write a number and a unit", nil},
		{"unterminated", `"a {{uuid"`, "{{ without }}", nil},
		{"int too long for a number", `"{{int 19}}"`, "more than 15 digits", nil},
		{"unknown fragment", `"{{use nosuch}}"`, `no fragment "nosuch"`, nil},
		{"fragment inside text", `"x{{use a}}"`, "a fragment must be a whole string", map[string]string{"a": `1`}},
		{"fragment loop", `"{{use a}}"`, "fragments nested deeper than 8", map[string]string{"a": `{"b":"{{use a}}"}`}},
		{"error names its member", `{"data":{"id":"{{nosuch}}"}}`, "data: id: {{nosuch}}", nil},
		{"error names its element", `["ok","{{nosuch}}"]`, "[1]: {{nosuch}}", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := renderText(t, newRenderer(t, time.Now(), tt.fragments), tt.template)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestKeepsOrder: a body is sent in the order of its file, with its
// text unescaped where JSON allows.
func TestKeepsOrder(t *testing.T) {
	const in = `{"zeta":1,"alpha":{"y":[3,2,1],"b":"<a&b>","q":"say \"hi\"\n","u":"é✓"},"mid":null}`
	v, err := parseJSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(appendJSON(nil, v)); got != in {
		t.Errorf("round trip:\n got %s\nwant %s", got, in)
	}
	if _, err := parseJSON([]byte(`{"a":1,"a":2}`)); err == nil || !strings.Contains(err.Error(), `member "a" twice`) {
		t.Errorf("a duplicate member: %v", err)
	}
	if _, err := parseJSON([]byte(`{"a":1} {}`)); err == nil {
		t.Error("data after the value was accepted")
	}
}

func TestLoadErrors(t *testing.T) {
	const scheme = `{"scheme":"stripe","doc":"https://x","content_type":"application/json","event_type":{"field":"type"},"delivery_id":{"field":"id"}}`
	const event = `{"event":"invoice.paid","doc":"https://x","body":{"id":"evt_1","type":"{{event}}"}}`
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"loads", map[string]string{"s/scheme.json": scheme, "s/a.json": event}, ""},
		{"unknown key", map[string]string{"s/scheme.json": scheme, "s/a.json": `{"event":"x","doc":"https://x","bodyy":{}}`}, `unknown field "bodyy"`},
		{"no doc", map[string]string{"s/scheme.json": scheme, "s/a.json": `{"event":"x","body":{}}`}, "event, doc and body are required"},
		{"body not an object", map[string]string{"s/scheme.json": scheme, "s/a.json": `{"event":"x","doc":"https://x","body":[1]}`}, "body is an array, not an object"},
		{"body a plain string", map[string]string{"s/scheme.json": scheme, "s/a.json": `{"event":"x","doc":"https://x","body":"hello"}`}, "body is a string, not an object"},
		{"two samples of one event", map[string]string{"s/scheme.json": scheme, "s/a.json": event, "s/b.json": event}, "event invoice.paid has two samples"},
		{"no scheme file", map[string]string{"s/a.json": event}, "scheme.json"},
		{"scheme without content type", map[string]string{"s/scheme.json": `{"scheme":"stripe"}`}, "scheme and content_type are required"},
		{"form field not a string", map[string]string{
			"s/scheme.json": `{"scheme":"twilio","doc":"https://x","content_type":"application/x-www-form-urlencoded","form":true,"event_type":{},"delivery_id":{}}`,
			"s/a.json":      `{"event":"sms","doc":"https://x","body":{"NumMedia":0}}`,
		}, "form field NumMedia is a number, not a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for name, text := range tt.files {
				fsys["data/"+name] = &fstest.MapFile{Data: []byte(text)}
			}
			c, err := load(fsys, "data")
			if tt.want == "" {
				if err != nil || len(c.list) != 1 || c.list[0].Event != "invoice.paid" {
					t.Fatalf("load: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestEmbeddedLoads: the embedded data loads, which every other test
// relies on without saying so.
func TestEmbeddedLoads(t *testing.T) {
	c, err := load(dataFS, "data")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.list) < 25 {
		t.Errorf("%d samples", len(c.list))
	}
}
