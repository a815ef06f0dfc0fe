package samples

import (
	"bytes"
	"cmp"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

//go:embed data
var dataFS embed.FS

// Info describes one sample.
type Info struct {
	// Scheme is the signature scheme whose sender sends the event
	// (signature.Schemes()).
	Scheme string
	// Event is the event type as the provider names it, and the name
	// Render takes: "push", "checkout.session.completed", "orders/create",
	// "Push Hook".
	Event string
	// Aliases are other names Render takes for the sample (GitLab's
	// object_kind "push" for "Push Hook").
	Aliases []string
	// Doc is the provider's documentation of the payload, which the
	// sample follows.
	Doc string
	// ContentType is the body's media type.
	ContentType string
	// EventType and DeliveryID are where the provider puts the event type
	// and the delivery id; zero when it sends none (the receiver's delivery
	// id is then the body hash).
	EventType, DeliveryID Location
}

// Location is where a request carries a value: a header, or a field of the
// body (a JSON path, members joined with dots, or a form field).
type Location struct {
	Header string
	Field  string
	// Option is set when the scheme's verifier reads the value only when
	// the receiver is configured to: with event_type_field (EventTypeField)
	// or delivery_id_field (DeliveryIDField) set to Field. Slack's
	// event.type and event_id are such values.
	Option bool
}

// IsZero reports whether l names no place: the provider sends no such value.
func (l Location) IsZero() bool { return l.Header == "" && l.Field == "" }

// String names the place: "header X-GitHub-Event", "body field type".
func (l Location) String() string {
	switch {
	case l.Header != "":
		return "header " + l.Header
	case l.Field != "":
		return "body field " + l.Field
	}
	return "none"
}

// Options are the choices of one rendering.
type Options struct {
	// Now is the time the sample happens at: its timestamps and the ids
	// that encode a time. Default: time.Now().
	Now time.Time
	// Set are overrides, each "path=value", applied in order as Event.Set
	// applies them, after DeliveryID.
	Set []string
	// DeliveryID, when set, replaces the fresh delivery id where the
	// provider carries it; a provider that sends none refuses it.
	DeliveryID string
}

// Event is one rendered sample: what the provider would send, less the
// signature.
type Event struct {
	// Scheme and Name say which sample this is (Name is Info.Event).
	Scheme, Name string
	// EventType is the event type where the provider puts it ("" when it
	// sends none: Twilio), and DeliveryID the delivery id ("" when it sends
	// none). They are what signature.SignOptions' EventType and ID take.
	EventType, DeliveryID string
	// Time is Options.Now: the time to sign at (SignOptions.Timestamp).
	Time time.Time
	// Header holds every header the provider sends besides its signature
	// and the signature's timestamp: Content-Type, User-Agent, the event
	// type and delivery id headers, and the rest.
	Header http.Header
	// Body is the body to send. Set keeps it up to date.
	Body []byte

	info *sample
	tree *value // the body; for a form, an object of strings
}

// Set overrides a field of the body, as `stripe trigger --override` does.
// For a JSON body, path names an existing value: members joined with dots,
// array elements as [n] or a segment of digits
// ("data.object.lines.data[0].amount", "items.0.price"); value is parsed
// as JSON when it is valid JSON ("2000", "true", `{"plan":"pro"}`,
// `"123"` for a string of digits), and is a string otherwise
// ("alice@example.com"). A path that does not exist, or that crosses a
// value that is not an object or an array, is an error: a new member is
// set through its parent (`metadata={"order":"42"}`). For a form body,
// path is a field name and value its text; a field the body lacks is
// added, as the provider adds its optional fields (Twilio's MediaUrl0).
// EventType and DeliveryID follow a change to the fields that hold them.
func (e *Event) Set(path, val string) error {
	if e.info.form {
		if path == "" {
			return errors.New("set: the field name is empty")
		}
		if v := e.tree.member(path); v != nil {
			v.text = val
		} else {
			e.tree.keys = append(e.tree.keys, path)
			e.tree.elems = append(e.tree.elems, &value{kind: kindString, text: val})
		}
	} else {
		nv, err := parseJSON([]byte(val))
		if err != nil {
			nv = &value{kind: kindString, text: val}
		}
		if err := set(e.tree, path, nv); err != nil {
			return fmt.Errorf("set %s: %w", path, err)
		}
	}
	e.sync()
	return nil
}

// setAssignment applies one "path=value" of Options.Set.
func (e *Event) setAssignment(a string) error {
	p, v, ok := strings.Cut(a, "=")
	if !ok {
		return fmt.Errorf("set %q: write it as path=value", a)
	}
	return e.Set(p, v)
}

// setDeliveryID puts id where the provider carries the delivery id.
func (e *Event) setDeliveryID(id string) error {
	loc := e.info.DeliveryID
	switch {
	case loc.Header != "":
		e.Header.Set(loc.Header, id)
		e.DeliveryID = id
		return nil
	case loc.Field != "":
		if e.info.form {
			return e.Set(loc.Field, id)
		}
		b, _ := json.Marshal(id)
		return e.Set(loc.Field, string(b))
	}
	return fmt.Errorf("%s sends no delivery id: the receiver's is the body hash", e.Scheme)
}

// sync re-encodes the body and reads the event type and delivery id from
// the fields that hold them.
func (e *Event) sync() {
	if e.info.form {
		var b strings.Builder
		for i, k := range e.tree.keys {
			if i > 0 {
				b.WriteByte('&')
			}
			b.WriteString(url.QueryEscape(k) + "=" + url.QueryEscape(e.tree.elems[i].text))
		}
		e.Body = []byte(b.String())
	} else {
		e.Body = appendJSON(e.Body[:0:0], e.tree)
	}
	e.EventType = e.read(e.info.EventType)
	e.DeliveryID = e.read(e.info.DeliveryID)
}

// read returns the value at loc: a header, or a field of the body.
func (e *Event) read(loc Location) string {
	switch {
	case loc.Header != "":
		return e.Header.Get(loc.Header)
	case loc.Field != "" && e.info.form:
		if v := e.tree.member(loc.Field); v != nil {
			return v.text
		}
	case loc.Field != "":
		v, err := lookup(e.tree, loc.Field)
		if err == nil {
			return scalarText(v)
		}
	}
	return ""
}

// Render returns a fresh rendering of the sample of event for scheme: new
// ids and timestamps of now, then the overrides of opts. event is the
// sample's name or one of its aliases.
func Render(scheme, event string, opts Options) (*Event, error) {
	s, err := find(scheme, event)
	if err != nil {
		return nil, err
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	r := &renderer{now: now, event: s.Event, fragments: s.fragments, vars: map[string]string{}}
	tree, err := r.render(s.body, 0)
	if err != nil {
		// The data is tested; this is a programming error made plain.
		return nil, fmt.Errorf("render sample %s %s: %w", s.Scheme, s.Event, err)
	}
	h := make(http.Header, len(s.headers)+1)
	h.Set("Content-Type", s.ContentType)
	for _, name := range slices.Sorted(maps.Keys(s.headers)) {
		text, err := r.text(s.headers[name])
		if err != nil {
			return nil, fmt.Errorf("render sample %s %s: header %s: %w", s.Scheme, s.Event, name, err)
		}
		h.Set(name, text)
	}
	if tree.kind != kindObject {
		return nil, fmt.Errorf("render sample %s %s: body is %s, not an object", s.Scheme, s.Event, tree.name())
	}
	e := &Event{Scheme: s.Scheme, Name: s.Event, Time: now, Header: h, info: s, tree: tree}
	e.sync()
	if opts.DeliveryID != "" {
		if err := e.setDeliveryID(opts.DeliveryID); err != nil {
			return nil, err
		}
	}
	for _, a := range opts.Set {
		if err := e.setAssignment(a); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// List returns every sample, sorted by scheme and then event.
func List() []Info {
	all := catalog().list
	out := make([]Info, len(all))
	for i, s := range all {
		out[i] = s.public()
	}
	return out
}

// Schemes returns the schemes that have samples, sorted.
func Schemes() []string {
	var names []string
	for _, s := range catalog().list {
		if len(names) == 0 || names[len(names)-1] != s.Scheme {
			names = append(names, s.Scheme)
		}
	}
	return names
}

// Lookup returns the description of the sample of event (or an alias) for
// scheme.
func Lookup(scheme, event string) (Info, bool) {
	s, err := find(scheme, event)
	if err != nil {
		return Info{}, false
	}
	return s.public(), true
}

func find(scheme, event string) (*sample, error) {
	c := catalog()
	var events []string
	for _, s := range c.list {
		if s.Scheme != scheme {
			continue
		}
		if s.Event == event || slices.Contains(s.Aliases, event) {
			return s, nil
		}
		events = append(events, s.Event)
	}
	if events == nil {
		return nil, fmt.Errorf("no samples for scheme %q: samples exist for %s", scheme, strings.Join(Schemes(), ", "))
	}
	return nil, fmt.Errorf("no %s sample of event %q: there are %s", scheme, event, strings.Join(events, ", "))
}

// sample is a loaded sample: its description and its templates.
type sample struct {
	Info
	form      bool
	headers   map[string]string
	body      *value
	fragments map[string]*value
}

func (s *sample) public() Info {
	i := s.Info
	i.Aliases = slices.Clone(i.Aliases)
	return i
}

// schemeFile is data/<scheme>/scheme.json: what every sample of the scheme
// shares.
type schemeFile struct {
	Scheme      string                     `json:"scheme"`
	Doc         string                     `json:"doc"`
	ContentType string                     `json:"content_type"`
	Form        bool                       `json:"form"`
	Headers     map[string]string          `json:"headers"`
	EventType   locationFile               `json:"event_type"`
	DeliveryID  locationFile               `json:"delivery_id"`
	Fragments   map[string]json.RawMessage `json:"fragments"`
}

type locationFile struct {
	Header string `json:"header"`
	Field  string `json:"field"`
	Option bool   `json:"option"`
}

// eventFile is data/<scheme>/<event>.json: one sample.
type eventFile struct {
	Event   string            `json:"event"`
	Aliases []string          `json:"aliases"`
	Doc     string            `json:"doc"`
	Headers map[string]string `json:"headers"`
	Body    json.RawMessage   `json:"body"`
}

type samplesCatalog struct {
	list []*sample
}

// catalog loads the embedded samples once. The data is part of the
// program and tested as such: a file that does not load is a programming
// error, as a scheme registered twice is in package signature.
var catalog = sync.OnceValue(func() *samplesCatalog {
	c, err := load(dataFS, "data")
	if err != nil {
		panic("samples: " + err.Error())
	}
	return c
})

// load reads every sample under dir of fsys.
func load(fsys fs.FS, dir string) (*samplesCatalog, error) {
	schemes, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	c := &samplesCatalog{}
	for _, d := range schemes {
		if !d.IsDir() {
			continue
		}
		list, err := loadScheme(fsys, path.Join(dir, d.Name()))
		if err != nil {
			return nil, err
		}
		c.list = append(c.list, list...)
	}
	slices.SortFunc(c.list, func(a, b *sample) int {
		return cmp.Or(cmp.Compare(a.Scheme, b.Scheme), cmp.Compare(a.Event, b.Event))
	})
	return c, nil
}

func loadScheme(fsys fs.FS, dir string) ([]*sample, error) {
	var sf schemeFile
	if err := readJSON(fsys, path.Join(dir, "scheme.json"), &sf); err != nil {
		return nil, err
	}
	if sf.Scheme == "" || sf.ContentType == "" {
		return nil, fmt.Errorf("%s/scheme.json: scheme and content_type are required", dir)
	}
	fragments := make(map[string]*value, len(sf.Fragments))
	for name, raw := range sf.Fragments {
		v, err := parseJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("%s/scheme.json: fragment %s: %w", dir, name, err)
		}
		fragments[name] = v
	}
	files, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var list []*sample
	for _, f := range files {
		if f.IsDir() || f.Name() == "scheme.json" || !strings.HasSuffix(f.Name(), ".json") {
			continue
		}
		file := path.Join(dir, f.Name())
		var ef eventFile
		if err := readJSON(fsys, file, &ef); err != nil {
			return nil, err
		}
		if ef.Event == "" || ef.Doc == "" || len(ef.Body) == 0 {
			return nil, fmt.Errorf("%s: event, doc and body are required", file)
		}
		body, err := parseJSON(ef.Body)
		if err != nil {
			return nil, fmt.Errorf("%s: body: %w", file, err)
		}
		if _, use := whole(body.text); body.kind != kindObject && (body.kind != kindString || !use) {
			// A body is an object, or one fragment shared by several
			// samples ("{{use order}}").
			return nil, fmt.Errorf("%s: body is %s, not an object", file, body.name())
		}
		if sf.Form {
			for i, v := range body.elems {
				if v.kind != kindString {
					return nil, fmt.Errorf("%s: form field %s is %s, not a string", file, body.keys[i], v.name())
				}
			}
		}
		headers := make(map[string]string, len(sf.Headers)+len(ef.Headers))
		for k, v := range sf.Headers {
			headers[k] = v
		}
		for k, v := range ef.Headers {
			headers[k] = v
		}
		for _, other := range list {
			if other.Event == ef.Event {
				return nil, fmt.Errorf("%s: event %s has two samples", file, ef.Event)
			}
		}
		list = append(list, &sample{
			Info: Info{
				Scheme: sf.Scheme, Event: ef.Event, Aliases: ef.Aliases, Doc: ef.Doc,
				ContentType: sf.ContentType,
				EventType:   Location(sf.EventType),
				DeliveryID:  Location(sf.DeliveryID),
			},
			form:      sf.Form,
			headers:   headers,
			body:      body,
			fragments: fragments,
		})
	}
	return list, nil
}

// readJSON decodes the file at name into v, refusing unknown fields: a
// misspelt key in a sample is an error, not a silent default.
func readJSON(fsys fs.FS, name string, v any) error {
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
