package cli

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/caddywebhook/caddywebhook/caddywebhook/adminapi"
	"github.com/caddywebhook/caddywebhook/caddywebhook/internal/human"
	"github.com/caddywebhook/caddywebhook/queue"
)

// rekeyPoll spaces the reads of a rekey's progress while the command
// follows it.
const rekeyPoll = 500 * time.Millisecond

func rekeyCommand(run cliRunner) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rekey [--to-plain-text] [--no-vacuum] [--detach] | --status | --stop",
		Short: "Puts every stored value under the first encryption key, while Caddy keeps receiving and delivering",
		Long: `
Re-encrypts, in the background, every stored payload, header and error text
that is not under the first key of the encryption block: values under older
keys, and events stored before encryption was turned on. It works in small
chunks while Caddy receives and delivers, and prints its progress until it
ends; Ctrl-C leaves it running (--stop stops it). Stopped for any reason, a
restart included, it resumes where it was when started again; with nothing
left to do it does nothing. When it ends, 'caddy webhook stats' shows the
values under each key: a key with none left may be removed from the config.

With a SQLite queue, the first rekey that meets plain text ends with a
VACUUM of the file, so that nothing of the plain text stays in its free
pages: the one step that is not online (about 12 s a GiB; the command says
how long beforehand, and senders whose events cannot be stored meanwhile get
503 and send again). --no-vacuum skips it, and leaves that plain text in the
file until a later rekey vacuums it.

--to-plain-text writes every sealed value plain again: the way out of
encryption, with decrypt_only in the encryption block (docs/CONFIGURATION.md).
`,
		Example: `  caddy webhook rekey
  caddy webhook rekey --detach && caddy webhook rekey --status
  caddy webhook rekey --stop`,
		Args: noArgs,
		RunE: run((*client).rekey),
	}
	fl := cmd.Flags()
	fl.Bool("to-plain-text", false, "Write every sealed value plain (needs decrypt_only in the encryption block)")
	fl.Bool("no-vacuum", false, "Skip the SQLite VACUUM at the end; plain text may then remain in the file's free pages")
	fl.Bool("detach", false, "Start the rekey and return; --status shows its progress")
	fl.Bool("status", false, "Show the running or last rekey")
	fl.Bool("stop", false, "Stop the running rekey; it resumes where it stopped when started again")
	cmd.MarkFlagsMutuallyExclusive("status", "stop", "to-plain-text")
	cmd.MarkFlagsMutuallyExclusive("status", "stop", "no-vacuum")
	cmd.MarkFlagsMutuallyExclusive("status", "stop", "detach")
	return cmd
}

func (c *client) rekey(cmd *cobra.Command, _ []string) error {
	fl := cmd.Flags()
	var st adminapi.RekeyResponse
	switch {
	case flagSet(cmd, "status"):
		if ok, err := c.call(http.MethodGet, "/webhook/rekey", &st); !ok {
			return err
		}
		return c.rekeyReport(st)
	case flagSet(cmd, "stop"):
		if ok, err := c.call(http.MethodDelete, "/webhook/rekey", &st); !ok {
			return err
		}
		return c.rekeyReport(st)
	}
	q := url.Values{}
	for _, name := range []string{"to-plain-text", "no-vacuum"} {
		if v, _ := fl.GetBool(name); v {
			q.Set(strings.ReplaceAll(name, "-", "_"), "true")
		}
	}
	uri := "/webhook/rekey"
	if len(q) > 0 {
		uri += "?" + q.Encode()
	}
	if ok, err := c.call(http.MethodPost, uri, &st); !ok {
		return err
	}
	if flagSet(cmd, "detach") {
		fmt.Fprintf(c.out, "rekey started; `%s` shows its progress\n", c.hint("rekey", "--status"))
		return nil
	}
	fmt.Fprintf(c.out, "rekey started; Ctrl-C leaves it running, `%s` stops it\n", c.hint("rekey", "--stop"))
	last := ""
	for st.Running {
		if line := rekeyLine(st.Progress); line != "" && line != last {
			fmt.Fprintln(c.out, line)
			last = line
		}
		time.Sleep(rekeyPoll)
		if ok, err := c.call(http.MethodGet, "/webhook/rekey", &st); !ok {
			return err
		}
	}
	return c.rekeyReport(st)
}

// flagSet reports whether the boolean flag name is given and true.
func flagSet(cmd *cobra.Command, name string) bool {
	v, _ := cmd.Flags().GetBool(name)
	return v
}

// under names where a rekey puts values.
func under(p queue.RekeyProgress) string {
	if p.Target == "" {
		return "plain text"
	}
	return "key " + p.Target
}

// rekeyLine is one line of a running rekey's progress.
func rekeyLine(p queue.RekeyProgress) string {
	switch p.Phase {
	case "walk":
		return fmt.Sprintf("  %s: %d of %d values under %s", p.Table, p.Resealed, p.Resealed+p.Remaining, under(p))
	case "vacuum":
		if p.VacuumSeconds > 0 {
			return fmt.Sprintf("  vacuuming the file: the write lock is held for about %s; senders get 503 meanwhile and send again",
				human.Duration(time.Duration(p.VacuumSeconds*float64(time.Second))))
		}
	}
	return ""
}

// rekeyReport prints a rekey's state, and fails when it failed.
func (c *client) rekeyReport(st adminapi.RekeyResponse) error {
	p := st.Progress
	switch {
	case st.Started.IsZero():
		fmt.Fprintf(c.out, "no rekey has run since Caddy started; `%s` starts one\n", c.hint("rekey"))
		return nil
	case st.Running:
		fmt.Fprintf(c.out, "rekey running since %s\n", when(st.Started, c.now()))
		if line := rekeyLine(p); line != "" {
			fmt.Fprintln(c.out, line)
		}
		return nil
	case p.Nothing:
		fmt.Fprintf(c.out, "nothing to do: every value is under %s\n", under(p))
	case st.Stopped:
		fmt.Fprintf(c.out, "rekey stopped: %d values moved under %s, %d left; `%s` resumes it\n", p.Resealed, under(p), p.Remaining, c.hint("rekey"))
	case st.Error != "":
		fmt.Fprintf(c.out, "rekey failed after %d values moved under %s, %d left\n", p.Resealed, under(p), p.Remaining)
	default:
		fmt.Fprintf(c.out, "rekey done: %d values moved under %s", p.Resealed, under(p))
		if p.Remaining > 0 {
			fmt.Fprintf(c.out, "; %d left", p.Remaining)
		}
		fmt.Fprintln(c.out)
	}
	if p.Skipped > 0 {
		fmt.Fprintf(c.out, "%d values could not be opened and stay as they are", p.Skipped)
		if len(p.MissingKeys) > 0 {
			fmt.Fprintf(c.out, ": sealed under %s, not in the encryption block", strings.Join(p.MissingKeys, ", "))
		}
		fmt.Fprintln(c.out)
	}
	switch p.Vacuum {
	case "":
	case "done":
		fmt.Fprintln(c.out, "the file was vacuumed: no plain text is left in its free pages")
	case "skipped":
		fmt.Fprintln(c.out, "VACUUM skipped (--no-vacuum): plain text may remain in the file's free pages until a rekey vacuums it")
	default:
		fmt.Fprintln(c.out, "VACUUM "+p.Vacuum)
	}
	if st.Error != "" {
		return errors.New(st.Error)
	}
	return nil
}

// keysSummary prints the values under each encryption key, with what to
// do about the keys an operator may still need.
func (c *client) keysSummary(st adminapi.StatsResponse) {
	if len(st.Keys) == 0 {
		return
	}
	fmt.Fprintln(c.out, "\nencrypted values by key:")
	tw := newTable(c.out)
	for _, k := range st.Keys {
		note := ""
		if !k.Listed {
			note = "  not in the encryption block: their jobs fail until it is listed again"
		}
		fmt.Fprintf(tw, "  %s\t%d%s\n", k.KeyID, k.Values, note)
	}
	tw.Flush()
	if st.PlainEvents > 0 {
		fmt.Fprintf(c.out, "  plain events: %d\n", st.PlainEvents)
	}
	if len(st.Keys) > 1 || st.PlainEvents > 0 {
		fmt.Fprintf(c.out, "`%s` puts them all under the first key; a key with no value left may then be removed\n", c.hint("rekey"))
	}
}
