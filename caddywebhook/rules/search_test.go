package rules

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestCompileSearch: a search sees what a filter sees, and a search of
// jobs the job too; what is not a bool, or not declared, is a
// CompileError with its position.
func TestCompileSearch(t *testing.T) {
	ev := func(job *Job) *Event {
		return &Event{Body: []byte(`{"customer":"cus_1","amount":4200}`), Header: http.Header{"X-Event": {"order.paid"}},
			EventType: "order.paid", Source: "shop", DeliveryID: "d1", Job: job}
	}
	dead := &Job{ID: 7, Target: "billing", Status: "dead", Attempts: 3, Replays: 1, LastError: "upstream answered 500"}
	tests := []struct {
		name      string
		src       string
		jobs      bool
		job       *Job
		want      bool
		line, col int    // of a CompileError; 0 when it compiles
		msg       string // a substring of the CompileError's message
	}{
		{name: "body and event type", src: `event_type == "order.paid" && body.customer == "cus_1"`, want: true},
		{name: "stored headers", src: `headers["x-event"] == "order.paid"`, want: true},
		{name: "no match", src: `body.customer == "cus_2"`},
		{name: "job fields", src: `job.target == "billing" && job.status == "dead" && job.attempts >= 3 && job.replays == 1 && job.id == 7`, jobs: true, job: dead, want: true},
		{name: "job error text", src: `job.last_error.contains("500")`, jobs: true, job: dead, want: true},
		{name: "job and body", src: `body.amount > 1000 && job.status != "done"`, jobs: true, job: dead, want: true},
		{name: "no job in a search of events", src: `job.status == "dead"`, line: 1, col: 1, msg: "undeclared reference to 'job'"},
		{name: "not a bool", src: `body.amount + 1 == 2 ? "a" : "b"`, line: 1, col: 1, msg: "yields string; want bool"},
		{name: "syntax error on line 2", src: "event_type == \"order.paid\" &&\n  body.customer ==", line: 2, col: 19, msg: "Syntax error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := CompileSearch(tt.src, tt.jobs, Options{})
			if tt.line != 0 {
				var ce *CompileError
				if !errors.As(err, &ce) || ce.Line != tt.line || ce.Column != tt.col || !strings.Contains(ce.Message, tt.msg) {
					t.Fatalf("CompileSearch = %v, want line %d column %d: …%s…", err, tt.line, tt.col, tt.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := f.Match(NewInput(ev(tt.job))); ok != tt.want || err != nil {
				t.Errorf("Match = %v, %v; want %v", ok, err, tt.want)
			}
		})
	}
}

// TestSearchErrors: the errors a search tells apart from a non-match: a
// value that is not a bool, and an evaluation the limits stopped.
func TestSearchErrors(t *testing.T) {
	body := largeListBody(20000)
	tests := []struct {
		name string
		src  string
		opts Options
		want error
	}{
		{name: "dyn, not a bool", src: `body.items[0]`, want: ErrNotBool},
		{name: "cost limit", src: `body.items.map(x, body.items.filter(y, y == x).size()).size() > 0`, opts: Options{CostLimit: 10_000, TimeLimit: time.Hour}, want: ErrLimit},
		{name: "time limit", src: `body.items.map(x, body.items.filter(y, y == x).size()).size() > 0`, opts: Options{TimeLimit: time.Millisecond}, want: ErrLimit},
		{name: "straight-line cost limit", src: `string(raw).contains("zz") || string(raw).contains("yy")`, opts: Options{CostLimit: 1000}, want: ErrLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := CompileSearch(tt.src, false, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			ok, err := f.Match(NewInput(&Event{Body: body}))
			if ok || !errors.Is(err, tt.want) {
				t.Errorf("Match = %v, %v; want %v", ok, err, tt.want)
			}
			if errors.Is(err, ErrLimit) && errors.Is(err, ErrNotBool) {
				t.Errorf("error %v is both ErrLimit and ErrNotBool", err)
			}
		})
	}
	t.Run("a missing key is neither", func(t *testing.T) {
		f, err := CompileSearch(`body.customer == "x"`, false, Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Match(NewInput(&Event{Body: []byte(`{}`)}))
		if err == nil || errors.Is(err, ErrLimit) || errors.Is(err, ErrNotBool) {
			t.Errorf("Match = %v, want an error that is neither ErrLimit nor ErrNotBool", err)
		}
	})
}
