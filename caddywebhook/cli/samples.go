package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/caddywebhook/caddywebhook/signature/samples"
)

// The sample events sign and send use without --body: the providers'
// envelopes and fields, with fresh ids and times (signature/samples).

// listSamples prints the samples, of scheme when it is not empty: one line
// each, with where the provider puts the event type and the delivery id.
func listSamples(out io.Writer, scheme string, asJSON bool) error {
	var list []samples.Info
	for _, info := range samples.List() {
		if scheme == "" || info.Scheme == scheme {
			list = append(list, info)
		}
	}
	if scheme != "" && len(list) == 0 {
		return fmt.Errorf("no samples for scheme %q: samples exist for %s", scheme, strings.Join(samples.Schemes(), ", "))
	}
	if asJSON {
		type row struct {
			Scheme     string   `json:"scheme"`
			Event      string   `json:"event"`
			Aliases    []string `json:"aliases,omitempty"`
			EventType  string   `json:"event_type"`
			DeliveryID string   `json:"delivery_id"`
			Doc        string   `json:"doc"`
		}
		rows := make([]row, len(list))
		for i, info := range list {
			rows[i] = row{info.Scheme, info.Event, info.Aliases, where(info.EventType, "event_type_field", "none"), where(info.DeliveryID, "delivery_id_field", "none (the body's hash)"), info.Doc}
		}
		b, err := json.Marshal(rows)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	}
	tw := newTable(out)
	fmt.Fprintln(tw, "SCHEME\tEVENT (--event)\tEVENT TYPE\tDELIVERY ID")
	for _, info := range list {
		name := info.Event
		if len(info.Aliases) > 0 {
			name += " (or " + strings.Join(info.Aliases, ", ") + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", info.Scheme, name, where(info.EventType, "event_type_field", "none"), where(info.DeliveryID, "delivery_id_field", "none (the body's hash)"))
	}
	return tw.Flush()
}

// where says where a sample's provider puts a value, for the list:
// option is the receiver's option that reads it when the scheme does not
// by itself, none what to say when the provider sends none.
func where(l samples.Location, option, none string) string {
	switch {
	case l.IsZero():
		return none
	case l.Option:
		return l.String() + " (with " + option + ")"
	}
	return l.String()
}
