package rules

import (
	"net/http"
	"net/url"
	"strings"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
)

// Event is what the rules of one event see. Header and RawQuery are read
// as given: at ingest the request's, at delivery the headers stored with
// the event (content type, event-type header) and no query.
type Event struct {
	Body   []byte
	Header http.Header
	// RawQuery is the request URL's query, without the '?'; it is parsed
	// only when a rule reads `query`.
	RawQuery   string
	EventType  string
	Source     string
	DeliveryID string
	// Job is the job a search of jobs looks at with the event (the job
	// variable); nil for every other expression.
	Job *Job
}

// Job is what a search of jobs sees of one job of its event, as the job
// variable: job.id, job.target, job.status, job.attempts, job.replays and
// job.last_error.
type Job struct {
	ID                int64
	Target, Status    string
	Attempts, Replays int
	LastError         string
}

// Input is an Event as CEL variables. The body is parsed at most once, on
// the first rule that reads `body`, and shared by every rule run on the same
// Input; a rule that reads only headers or the event type never parses it.
// An Input is not safe for concurrent use.
type Input struct {
	ev      *Event
	body    ref.Val
	headers ref.Val
	query   ref.Val
}

// NewInput returns the variables for ev; ev must not change while the Input
// is in use.
func NewInput(ev *Event) *Input { return &Input{ev: ev} }

var _ interpreter.Activation = (*Input)(nil)

// ResolveName implements interpreter.Activation.
func (in *Input) ResolveName(name string) (any, bool) {
	switch name {
	case varBody:
		if in.body == nil {
			in.body = parseBody(in.ev.Body)
		}
		return in.body, true
	case varRaw:
		return types.Bytes(in.ev.Body), true
	case varHeaders:
		if in.headers == nil {
			in.headers = firstValues(in.ev.Header, true)
		}
		return in.headers, true
	case varQuery:
		if in.query == nil {
			q, _ := url.ParseQuery(in.ev.RawQuery) // what parses of a malformed query
			in.query = firstValues(q, false)
		}
		return in.query, true
	case varEventType:
		return types.String(in.ev.EventType), true
	case varSource:
		return types.String(in.ev.Source), true
	case varDeliveryID:
		return types.String(in.ev.DeliveryID), true
	case varJob:
		if j := in.ev.Job; j != nil {
			return types.DefaultTypeAdapter.NativeToValue(map[string]any{
				"id": j.ID, "target": j.Target, "status": j.Status,
				"attempts": j.Attempts, "replays": j.Replays, "last_error": j.LastError,
			}), true
		}
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (in *Input) Parent() interpreter.Activation { return nil }

// BodyParsed reports whether a rule run on in has parsed the body; tests use
// it to show that a rule that does not read `body` never parses it.
func (in *Input) BodyParsed() bool { return in.body != nil }

// firstValues maps each name of h to its first value, names lower-cased
// when lower is set (header names are case-insensitive; CEL map keys are
// not).
func firstValues(h map[string][]string, lower bool) ref.Val {
	m := make(map[string]string, len(h))
	for k, vs := range h {
		if len(vs) == 0 {
			continue
		}
		if lower {
			k = strings.ToLower(k)
		}
		if _, seen := m[k]; !seen {
			m[k] = vs[0]
		}
	}
	return types.DefaultTypeAdapter.NativeToValue(m)
}
