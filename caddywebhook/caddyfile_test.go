package caddywebhook

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	// The directives the golden files combine with webhook_receiver.
	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

var update = flag.Bool("update", false, "rewrite the golden JSON of testdata/adapt")

// goldenSeparator splits a testdata/adapt file into its Caddyfile and the
// JSON it must adapt to, as Caddy's own caddyfile_adapt tests do.
const goldenSeparator = "\n----------\n"

// adapt runs the Caddyfile adapter on input and returns indented JSON.
func adapt(t *testing.T, input string) ([]byte, error) {
	t.Helper()
	adapter := caddyfile.Adapter{ServerType: httpcaddyfile.ServerType{}}
	out, _, err := adapter.Adapt([]byte(input), map[string]any{"filename": "Caddyfile"})
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, out, "", "\t"); err != nil {
		t.Fatalf("indent adapted JSON: %v", err)
	}
	return buf.Bytes(), nil
}

// TestAdaptGolden adapts each testdata/adapt/*.caddyfiletest and compares
// the JSON with the golden half of the file. Run with -update to rewrite
// the golden halves after an intended change, then review the diff.
func TestAdaptGolden(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "adapt", "*.caddyfiletest"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no golden files in testdata/adapt")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".caddyfiletest"), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			input, want, ok := strings.Cut(string(raw), goldenSeparator)
			if !ok {
				t.Fatalf("%s: no %q separator line", file, strings.TrimSpace(goldenSeparator))
			}
			got, err := adapt(t, input)
			if err != nil {
				t.Fatalf("adapt: %v", err)
			}
			if *update {
				if err := os.WriteFile(file, []byte(input+goldenSeparator+string(got)+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if strings.TrimSpace(string(got)) != strings.TrimSpace(want) {
				t.Errorf("adapted JSON differs from %s\n--- got\n%s\n--- want\n%s", file, got, want)
			}
		})
	}
}

// TestAdaptErrors checks that bad configs fail at adapt time with a message
// that names the directive and the problem.
func TestAdaptErrors(t *testing.T) {
	t.Parallel()
	const site = ":8080 {\n\twebhook_receiver {\n%s\n\t}\n}\n"
	receiver := func(body string) string { return strings.Replace(site, "%s", body, 1) }
	global := func(body string) string { return "{\n\twebhook {\n" + body + "\n\t}\n}\n:8080 {\n\trespond ok\n}\n" }
	tests := []struct {
		name  string
		input string
		want  []string // every piece must appear in the error
	}{
		{"global/unknown option", global("\t\tworkerz 4"), []string{"webhook", `unknown option "workerz"`}},
		{"global/argument on the option line", "{\n\twebhook fast\n}\n", []string{"webhook", `unexpected argument "fast"`}},
		{"global/unknown backend", global("\t\tstorage redis /x"), []string{"webhook", `unknown backend "redis"`, "want sqlite or postgres"}},
		{"global/storage twice", global("\t\tstorage sqlite /a.db\n\t\tstorage postgres {env.PG}"), []string{"webhook", "storage is given twice"}},
		{"global/sqlite with a block", global("\t\tstorage sqlite /a.db {\n\t\t\tschema x\n\t\t}"), []string{"webhook", "storage sqlite takes no block"}},
		{"global/postgres unknown option", global("\t\tstorage postgres {env.PG} {\n\t\t\tpool 3\n\t\t}"), []string{"webhook", "storage postgres", `unknown option "pool"`}},
		{"global/postgres schema without name", global("\t\tstorage postgres {env.PG} {\n\t\t\tschema\n\t\t}"), []string{"webhook", "storage postgres", "schema needs one name"}},
		{"global/postgres max_conns zero", global("\t\tstorage postgres {env.PG} {\n\t\t\tmax_conns 0\n\t\t}"), []string{"webhook", "storage postgres", "max_conns must be at least 1"}},
		{"global/postgres dsn split in two", global("\t\tstorage postgres host=h password=canary-pw"), []string{"webhook", "storage needs a backend and its location"}},
		{"global/storage without path", global("\t\tstorage sqlite"), []string{"webhook", "storage needs a backend and its location"}},
		// Each storage module reads the options beside the storage line
		// and refuses those of another backend.
		{"global/postgres with synchronous", global("\t\tsynchronous normal\n\t\tstorage postgres postgres://h/db"), []string{"webhook", "synchronous applies to sqlite only"}},
		{"global/postgres with min_free_space", global("\t\tmin_free_space 1GiB\n\t\tstorage postgres postgres://h/db"), []string{"webhook", "min_free_space applies to sqlite only"}},
		{"global/min_free_space not a size", global("\t\tmin_free_space lots"), []string{"webhook", "min_free_space", `"lots" is not a size`}},
		{"global/store_timeout not a duration", global("\t\tstore_timeout soon"), []string{"webhook", "store_timeout", `"soon" is not a positive duration`}},
		{"global/postgres store_timeout not a duration", global("\t\tstore_timeout 0s\n\t\tstorage postgres postgres://h/db"), []string{"webhook", "store_timeout", `"0s" is not a positive duration`}},
		{"global/workers not a number", global("\t\tworkers many"), []string{"webhook", "workers", `"many"`}},
		{"global/workers negative", global("\t\tworkers -1"), []string{"webhook", "workers", `"-1"`}},
		{"global/max_attempts zero", global("\t\tmax_attempts 0"), []string{"webhook", "max_attempts must be at least 1"}},
		{"global/max_tails zero", global("\t\tmax_tails 0"), []string{"webhook", "max_tails must be at least 1"}},
		{"global/tail_max_lag not a duration", global("\t\ttail_max_lag slow"), []string{"webhook", "tail_max_lag", `"slow" is not a positive duration`}},
		{"global/lease not a duration", global("\t\tlease soon"), []string{"webhook", "lease", `"soon" is not a positive duration`}},
		{"global/retention two values", global("\t\tretention 1d 2d"), []string{"webhook", "retention needs one duration"}},
		{"global/backoff one value", global("\t\tbackoff 1s"), []string{"webhook", "backoff needs two durations"}},
		{"global/max_batch zero", global("\t\tmax_batch 0"), []string{"webhook", "max_batch must be at least 1"}},
		{"global/notify twice", global("\t\tnotify http http://127.0.0.1:9/\n\t\tnotify http http://127.0.0.1:9/"), []string{"webhook", "notify is given twice"}},
		{"global/notify without kind", global("\t\tnotify"), []string{"webhook: notify needs a target kind", "notify http <url>"}},
		{"global/notify unknown kind", global("\t\tnotify pager 1234"), []string{"webhook: notify", `unknown target kind "pager"`}},
		{"global/notify window not a duration", global("\t\tnotify http http://127.0.0.1:9/ {\n\t\t\twindow soon\n\t\t}"), []string{"webhook", "notify: window", `"soon" is not a positive duration`}},
		{"global/notify pending_age missing", global("\t\tnotify http http://127.0.0.1:9/ {\n\t\t\tpending_age\n\t\t}"), []string{"webhook", "notify: pending_age needs one duration"}},
		{"global/notify max_attempts zero", global("\t\tnotify http http://127.0.0.1:9/ {\n\t\t\tmax_attempts 0\n\t\t}"), []string{"webhook: notify", "max_attempts", `"0" is not a number of at least 1`}},
		{"global/notify option error from the target", global("\t\tnotify http http://127.0.0.1:9/ {\n\t\t\tcolour blue\n\t\t}"), []string{"http target", `unknown option "colour"`}},
		{"global/encryption key without value", global("\t\tencryption {\n\t\t\tkey 2026-12\n\t\t}"), []string{"webhook: encryption: key needs an id and a placeholder"}},
		{"global/encryption key with three values", global("\t\tencryption {\n\t\t\tkey 2026-12 canary-pw {env.K}\n\t\t}"), []string{"webhook: encryption: key needs an id and a placeholder"}},
		{"global/encryption without a key", global("\t\tencryption {\n\t\t\tdecrypt_only\n\t\t}"), []string{"webhook: encryption: no key"}},
		{"global/encryption unknown option", global("\t\tencryption {\n\t\t\tcipher aes\n\t\t}"), []string{"webhook: encryption", `unknown option "cipher"`}},
		{"global/encryption argument", global("\t\tencryption on"), []string{"webhook: encryption takes a block"}},
		{"global/encryption twice", global("\t\tencryption {\n\t\t\tkey a {env.A}\n\t\t}\n\t\tencryption {\n\t\t\tkey b {env.B}\n\t\t}"), []string{"webhook: encryption is given twice"}},
		{"receiver/unknown option", receiver("\t\tsorce github"), []string{"webhook_receiver", `unknown option "sorce"`}},
		{"receiver/argument on the directive line", ":8080 {\n\twebhook_receiver /a /b\n}\n", []string{"webhook_receiver", `unexpected argument "/b"`}},
		{"receiver/source without name", receiver("\t\tsource"), []string{"webhook_receiver", "source needs one name"}},
		{"receiver/secret with two values", receiver("\t\tsecret a b"), []string{"webhook_receiver", "secret needs exactly one value"}},
		{"receiver/max_body bad", receiver("\t\tmax_body lots"), []string{"webhook_receiver", "max_body", `"lots"`}},
		{"receiver/delivery_id from cookie", receiver("\t\tdelivery_id cookie id"), []string{"webhook_receiver", "delivery_id", `"cookie" is not header or json`}},
		{"receiver/event_type without name", receiver("\t\tevent_type header"), []string{"webhook_receiver", "event_type needs a source and a name"}},
		// The engine's options are lines of the receiver; the hmac block,
		// their other spelling, is refused naming its replacement.
		{"receiver/hmac block", receiver("\t\thmac {\n\t\t\theader X-Sig\n\t\t}"), []string{"webhook_receiver", "hmac block is not supported", "signature_header"}},
		{"receiver/hmac argument", receiver("\t\thmac sha256"), []string{"webhook_receiver", "hmac block is not supported"}},
		{"receiver/engine option unknown", receiver("\t\tsignature_colour blue"), []string{"webhook_receiver", `unknown option "signature_colour"`}},
		{"receiver/public_key with two values", receiver("\t\tpublic_key a b"), []string{"webhook_receiver", "public_key needs exactly one value"}},
		{"receiver/public_url without url", receiver("\t\tpublic_url"), []string{"webhook_receiver", "public_url needs one URL"}},
		{"receiver/signed_content split", receiver("\t\tsigned_content {timestamp} {body}"), []string{"webhook_receiver", "signed_content needs one value", "quote it"}},
		{"receiver/to without kind", receiver("\t\tto"), []string{"webhook_receiver", "to needs a target kind"}},
		{"receiver/to unknown kind", receiver("\t\tto carrier-pigeon coop"), []string{"webhook_receiver", `unknown target kind "carrier-pigeon"`, "http", "exec"}},
		{"receiver/to events empty", receiver("\t\tto http http://127.0.0.1:9/ {\n\t\t\tevents\n\t\t}"), []string{"webhook_receiver", "to http", "events needs at least one event type"}},
		{"receiver/to name twice", receiver("\t\tto http http://127.0.0.1:9/ {\n\t\t\tname a b\n\t\t}"), []string{"webhook_receiver", "to http", "name needs one value"}},
		{"receiver/to max_attempts zero", receiver("\t\tto http http://127.0.0.1:9/ {\n\t\t\tmax_attempts 0\n\t\t}"), []string{"webhook_receiver", "to http", "max_attempts", `"0" is not a number of at least 1`}},
		{"receiver/to max_attempts missing", receiver("\t\tto exec /bin/true {\n\t\t\tmax_attempts\n\t\t}"), []string{"webhook_receiver", "to exec", "max_attempts needs one number"}},
		{"receiver/to backoff one value", receiver("\t\tto http http://127.0.0.1:9/ {\n\t\t\tbackoff 1s\n\t\t}"), []string{"webhook_receiver", "to http", "backoff needs two durations"}},
		{"receiver/to backoff not a duration", receiver("\t\tto http http://127.0.0.1:9/ {\n\t\t\tbackoff 1s soon\n\t\t}"), []string{"webhook_receiver", "to http", "backoff", `"soon" is not a positive duration`}},
		{"receiver/to rate without period", receiver("\t\tto http http://127.0.0.1:9/ {\n\t\t\trate 50\n\t\t}"), []string{"webhook_receiver", "to http", `rate "50"`, "<n>/s"}},
		{"receiver/to rate unknown period", receiver("\t\tto http http://127.0.0.1:9/ {\n\t\t\trate 5/d\n\t\t}"), []string{"webhook_receiver", "to http", `rate "5/d"`, "s, m or h"}},
		{"receiver/to concurrency zero", receiver("\t\tto http http://127.0.0.1:9/ {\n\t\t\tconcurrency 0\n\t\t}"), []string{"webhook_receiver", "to http", "concurrency", `"0" is not a number of at least 1`}},
		{"receiver/to circuit_breaker unknown option", receiver("\t\tto http http://127.0.0.1:9/ {\n\t\t\tcircuit_breaker {\n\t\t\t\tthreshold 3\n\t\t\t}\n\t\t}"), []string{"webhook_receiver", "to http: circuit_breaker", `unknown option "threshold"`}},
		{"receiver/to circuit_breaker cooldown bad", receiver("\t\tto exec /bin/true {\n\t\t\tcircuit_breaker {\n\t\t\t\tcooldown soon\n\t\t\t}\n\t\t}"), []string{"webhook_receiver", "to exec: circuit_breaker", "cooldown", `"soon" is not a positive duration`}},
		{"receiver/to circuit_breaker max below cooldown", receiver("\t\tto http http://127.0.0.1:9/ {\n\t\t\tcircuit_breaker {\n\t\t\t\tcooldown 1m\n\t\t\t\tmax_cooldown 1s\n\t\t\t}\n\t\t}"), []string{"webhook_receiver", "circuit_breaker", "max_cooldown is shorter than its cooldown"}},
		{"receiver/to http option error from the target", receiver("\t\tto http http://127.0.0.1:9/ {\n\t\t\tcolour blue\n\t\t}"), []string{"http target", `unknown option "colour"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := adapt(t, tt.input)
			if err == nil {
				t.Fatalf("adapt succeeded; want an error containing %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "canary-pw") {
				t.Errorf("error %q quotes the DSN's password", err)
			}
		})
	}
}

// TestCaddyfileLoadErrors loads Caddyfiles whose values are checked when
// the config loads, not by the unmarshaler, which only parses: each must
// still fail, with a message that names the directive and the problem.
func TestCaddyfileLoadErrors(t *testing.T) {
	tests := []struct {
		name   string
		global string   // lines of the webhook global option
		recv   string   // lines of the webhook_receiver
		want   []string // every piece must appear in the error
	}{
		{"global/synchronous off", "synchronous off", "", []string{"webhook", "synchronous", `"off" is not full or normal`}},
		{"global/min_free_space under the floor", "min_free_space 1MiB", "", []string{"webhook", "min_free_space is 1048576 bytes, must be at least"}},
		{"global/backoff max below base", "backoff 1m 1s", "", []string{"webhook", "backoff", "shorter than its base"}},
		{"global/notify backoff max below base", "notify http http://127.0.0.1:9/ {\n\t\t\tbackoff 1m 1s\n\t\t}", "", []string{"webhook: notify", "backoff max is shorter than its base"}},
		{"global/notify exec program missing", "notify exec /nonexistent/caddywebhook-notify", "", []string{"webhook: notify", `program "/nonexistent/caddywebhook-notify" does not exist`}},
		{"receiver/to backoff max below base", "", "to http http://127.0.0.1:9/ {\n\t\t\tbackoff 1m 1s\n\t\t}", []string{"webhook_receiver", `target "http"`, "backoff max is shorter than its base"}},
		{"receiver/tolerance bad", "", "tolerance forever", []string{"webhook_receiver", "tolerance", `"forever"`}},
		{"receiver/tolerance zero", "", "tolerance 0s", []string{"webhook_receiver", "tolerance", `"0s" is not a positive duration`}},
		{"receiver/max_body too big", "", "max_body 1GB", []string{"webhook_receiver", "max_body", "64MiB"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			global := "storage sqlite " + h.dbPath
			if strings.Contains(tt.global, "storage") {
				global = ""
			}
			input := "{\n\tadmin off\n\twebhook {\n\t\t" + global + "\n\t\t" + tt.global + "\n\t}\n}\n" +
				"http://" + h.addr + " {\n\twebhook_receiver {\n\t\tsource s\n\t\tscheme github\n\t\tsecret {env." + testSecretEnv + "}\n\t\t" + tt.recv + "\n\t}\n}\n"
			cfg, err := adapt(t, input)
			if err != nil {
				t.Fatalf("adapt: %v; the unmarshaler should only parse", err)
			}
			err = caddy.Load(cfg, true)
			if err == nil {
				t.Fatal("config loaded; want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestAdaptKeepsSecretsAsWritten checks that a placeholder secret reaches
// the JSON as the placeholder: values are resolved at Provision only.
func TestAdaptKeepsSecretsAsWritten(t *testing.T) {
	t.Parallel()
	out, err := adapt(t, ":8080 {\n\twebhook_receiver {\n\t\tsource s\n\t\tscheme github\n\t\tsecret {env.HOOK_SECRET}\n\t}\n}\n")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`"{env.HOOK_SECRET}"`)) {
		t.Errorf("placeholder not kept in JSON:\n%s", out)
	}
}
