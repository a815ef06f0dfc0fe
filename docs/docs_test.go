// Package docs_test holds the documentation to the code: every Caddyfile
// snippet on README.md and the pages under docs/ is as `caddy fmt` writes
// it, and adapts where it is a whole config; every `caddy webhook …`
// command and flag the pages name exists; the module list OPERATIONS.md
// prints is the binary's; every subcommand is in `caddy webhook --help`'s
// usage line and in ADMIN.md's synopsis; ADMIN.md's table of endpoints is
// the admin API's. These are the mistakes a newcomer found in the docs,
// made impossible to repeat.
package docs_test

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddywebhook/caddywebhook"
)

// pages returns README.md and every page under docs/, from this directory.
func pages(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("..", "README.md"))
	sort.Strings(files)
	return files
}

// block is one fenced code block of a page.
type block struct {
	page string
	line int // of the opening fence
	lang string
	text string
}

// fenced returns the fenced code blocks of a page.
func fenced(t *testing.T, page string) []block {
	t.Helper()
	src, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var (
		out   []block
		cur   *block
		lines []string
	)
	for i, line := range strings.Split(string(src), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &block{page: page, line: i + 1, lang: strings.TrimPrefix(trimmed, "```")}
			lines = lines[:0]
		case cur != nil && trimmed == "```":
			cur.text = dedent(lines)
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			lines = append(lines, line)
		}
	}
	return out
}

// dedent removes the indentation a list item gives a fenced block.
func dedent(lines []string) string {
	indent := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, " "))
		if indent < 0 || n < indent {
			indent = n
		}
	}
	var b strings.Builder
	for _, l := range lines {
		if len(l) >= indent && indent > 0 {
			l = l[indent:]
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// TestCaddyfileSnippets: every caddyfile block is formatted as `caddy fmt`
// formats it (Caddy warns "input is not formatted" on every load of one
// that is not), and every block that is a whole config (a site block, or a
// global options block) adapts, with its placeholders standing for values.
func TestCaddyfileSnippets(t *testing.T) {
	n := 0
	for _, page := range pages(t) {
		for _, b := range fenced(t, page) {
			if b.lang != "caddyfile" {
				continue
			}
			n++
			name := filepath.Base(b.page) + ":" + strconv.Itoa(b.line)
			t.Run(name, func(t *testing.T) {
				if formatted := string(caddyfile.Format([]byte(b.text))); formatted != b.text {
					t.Errorf("%s:%d: not as `caddy fmt` writes it; it writes:\n%s", b.page, b.line, formatted)
				}
				if !wholeConfig(b.text) {
					return
				}
				adapter := caddyconfig.GetAdapter("caddyfile")
				_, warnings, err := adapter.Adapt([]byte(b.text), map[string]any{"filename": "Caddyfile"})
				if err != nil {
					t.Fatalf("%s:%d: does not adapt: %v\n%s", b.page, b.line, err, b.text)
				}
				for _, w := range warnings {
					if strings.Contains(w.Message, "not formatted") {
						continue // reported above
					}
					t.Errorf("%s:%d: adapting warns: %s", b.page, b.line, w.String())
				}
			})
		}
	}
	if n < 20 {
		t.Fatalf("found only %d caddyfile blocks: is the fence parser broken?", n)
	}
}

// wholeConfig tells a whole Caddyfile (it opens with a site address or the
// global options block) from a fragment such as a `to` block or a
// directive's lines, a syntax synopsis (`<name>`, `a|b`) or an excerpt
// (`…`).
func wholeConfig(text string) bool {
	if strings.Contains(text, "…") || regexp.MustCompile(`<[a-z][a-z _.…-]*>`).MatchString(text) {
		return false
	}
	first := ""
	for line := range strings.Lines(text) {
		l := strings.TrimSpace(line)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		first = l
		break
	}
	if first == "{" {
		return true
	}
	addr, ok := strings.CutSuffix(first, "{")
	if !ok {
		return false
	}
	addr = strings.TrimSpace(addr)
	return addr != "" && !strings.Contains(addr, " ") &&
		(strings.Contains(addr, ".") || strings.HasPrefix(addr, ":") || strings.Contains(addr, "localhost") || strings.HasPrefix(addr, "http"))
}

// webhookCommand is the `caddy webhook` command tree as the binary builds it.
func webhookCommand(t *testing.T) *cobra.Command {
	t.Helper()
	c, ok := caddycmd.Commands()["webhook"]
	if !ok {
		t.Fatal("no `caddy webhook` command registered")
	}
	// As caddycmd turns a Command into the cobra command it runs.
	root := &cobra.Command{Use: c.Name + " " + c.Usage, Short: c.Short, Long: c.Long}
	c.CobraFunc(root)
	return root
}

// commandRef is a `caddy webhook …` command line as a page names it.
var commandRef = regexp.MustCompile(`caddy webhook((?: [a-z][a-z-]*){1,2})((?: [^\x60\n|]*)?)`)

// TestCommandsNamedExist: every `caddy webhook <sub> [<sub>]` a page names
// is a command of the binary, and every --flag written after it on the
// same line is a flag of that command.
func TestCommandsNamedExist(t *testing.T) {
	root := webhookCommand(t)
	n := 0
	for _, page := range pages(t) {
		src, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			for _, m := range commandRef.FindAllStringSubmatch(line, -1) {
				words := strings.Fields(m[1])
				cmd, rest := find(root, words)
				if cmd == root {
					// Prose such as "caddy webhook command" or "the caddy
					// webhook CLI": a word that is no command, after
					// nothing that is.
					if !looksLikeCommand(words[0]) {
						continue
					}
					t.Errorf("%s:%d: `caddy webhook %s` is not a command (line: %s)", page, i+1, words[0], strings.TrimSpace(line))
					continue
				}
				n++
				args := strings.Join(rest, " ") + " " + m[2]
				for _, flag := range regexp.MustCompile(`(?:^|[\s\[(|])--([a-z][a-z-]*)`).FindAllStringSubmatch(args, -1) {
					if cmd.Flags().Lookup(flag[1]) == nil && cmd.InheritedFlags().Lookup(flag[1]) == nil && root.PersistentFlags().Lookup(flag[1]) == nil {
						t.Errorf("%s:%d: `caddy webhook %s` has no flag --%s", page, i+1, cmd.CommandPath()[len(root.Name())+1:], flag[1])
					}
				}
			}
		}
	}
	if n < 30 {
		t.Fatalf("found only %d `caddy webhook` commands in the docs: is the pattern broken?", n)
	}
}

// find walks the command tree along words and returns the deepest command
// found and the words left over.
func find(root *cobra.Command, words []string) (*cobra.Command, []string) {
	cmd := root
	for i, w := range words {
		var next *cobra.Command
		for _, c := range cmd.Commands() {
			if c.Name() == w || slices.Contains(c.Aliases, w) {
				next = c
			}
		}
		if next == nil {
			return cmd, words[i:]
		}
		cmd = next
	}
	return cmd, nil
}

// looksLikeCommand tells a word written as a subcommand from prose that
// follows "caddy webhook" in a sentence.
func looksLikeCommand(w string) bool {
	switch w {
	case "command", "commands", "cli", "and", "or", "is", "to", "the", "with", "calls", "prints", "subcommand", "subcommands":
		return false
	}
	return true
}

// TestSubcommandsListed: every subcommand of `caddy webhook` is named in
// the usage line that `caddy webhook --help` prints and in ADMIN.md's
// synopsis, and both name nothing else.
func TestSubcommandsListed(t *testing.T) {
	root := webhookCommand(t)
	var subs []string
	for _, c := range root.Commands() {
		if c.Name() != "help" && c.Name() != "completion" {
			subs = append(subs, c.Name())
		}
	}
	sort.Strings(subs)

	usage := regexp.MustCompile(`<([a-z |-]+)>`).FindStringSubmatch(root.Use)
	if usage == nil {
		t.Fatalf("`caddy webhook --help`'s usage line %q lists no subcommands", root.Use)
	}
	checkListed(t, "`caddy webhook --help`'s usage line", usage[1], subs)

	admin, err := os.ReadFile("ADMIN.md")
	if err != nil {
		t.Fatal(err)
	}
	synopsis := regexp.MustCompile("(?m)^caddy webhook <([a-z |-]+)>").FindSubmatch(admin)
	if synopsis == nil {
		t.Fatal("ADMIN.md has no synopsis line `caddy webhook <…>`")
	}
	checkListed(t, "ADMIN.md's synopsis", string(synopsis[1]), subs)
}

// checkListed compares a list of alternatives (`stats|list|rules test`)
// with the subcommands.
func checkListed(t *testing.T, where, list string, subs []string) {
	t.Helper()
	var named []string
	for _, alt := range strings.Split(list, "|") {
		named = append(named, strings.Fields(alt)[0])
	}
	sort.Strings(named)
	for _, s := range subs {
		if !slices.Contains(named, s) {
			t.Errorf("%s does not name `%s`", where, s)
		}
	}
	for _, s := range named {
		if !slices.Contains(subs, s) {
			t.Errorf("%s names `%s`, which is not a subcommand", where, s)
		}
	}
}

// TestModuleList: the module list OPERATIONS.md shows
// (`caddy list-modules --versions --skip-standard`) is the plugin's modules,
// all of them, with the count Caddy prints.
func TestModuleList(t *testing.T) {
	var ours []string
	for _, id := range caddy.Modules() {
		mod, err := caddy.GetModule(id)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(reflectPkg(mod), "github.com/caddywebhook/caddywebhook") {
			ours = append(ours, id)
		}
	}
	sort.Strings(ours)

	src, err := os.ReadFile("OPERATIONS.md")
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(src, []byte("$ caddy list-modules --versions --skip-standard\n"))
	if i < 0 {
		t.Fatal("OPERATIONS.md no longer shows `caddy list-modules --versions --skip-standard`")
	}
	var listed []string
	count := ""
	for line := range strings.Lines(string(src[i:])) {
		l := strings.TrimSpace(line)
		if strings.HasPrefix(l, "Non-standard modules:") {
			count = strings.TrimSpace(strings.TrimPrefix(l, "Non-standard modules:"))
			break
		}
		if f := strings.Fields(l); len(f) == 2 && f[1] == "v0.1.0" {
			listed = append(listed, f[0])
		}
	}
	if !slices.Equal(listed, ours) {
		t.Errorf("OPERATIONS.md lists modules\n%v\nthe binary has\n%v", listed, ours)
	}
	if count != strconv.Itoa(len(ours)) {
		t.Errorf("OPERATIONS.md says %q non-standard modules, the binary has %d", count, len(ours))
	}
}

// reflectPkg is the package path of a module's type.
func reflectPkg(m caddy.ModuleInfo) string {
	t := reflect.TypeOf(m.New())
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.PkgPath()
}

// TestEndpointsListed: ADMIN.md's table of endpoints names every route of
// the admin API's one table in caddywebhook/admin.go, and nothing else.
func TestEndpointsListed(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "caddywebhook", "admin.go"))
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for _, m := range regexp.MustCompile(`\{"((?:GET|POST|DELETE) /webhook/[^"]*)"`).FindAllSubmatch(src, -1) {
		// The page spells the mux's {job} and {event} as {id}.
		routes = append(routes, regexp.MustCompile(`\{[a-z]+\}`).ReplaceAllString(string(m[1]), "{id}"))
	}
	if len(routes) == 0 {
		t.Fatal("caddywebhook/admin.go has no routes table")
	}

	admin, err := os.ReadFile("ADMIN.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(admin), "\n| Method and path | Does |\n|---|---|\n")
	if !ok {
		t.Fatal("ADMIN.md has no table of endpoints")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	var listed []string
	for _, row := range strings.Split(table, "\n") {
		first, _, _ := strings.Cut(strings.TrimPrefix(row, "| "), " |")
		for _, m := range regexp.MustCompile("`([A-Z]+ /webhook/[^`]*)`").FindAllStringSubmatch(first, -1) {
			listed = append(listed, m[1])
		}
	}
	for _, r := range routes {
		if !slices.Contains(listed, r) {
			t.Errorf("ADMIN.md's table of endpoints does not name `%s`", r)
		}
	}
	for _, l := range listed {
		if !slices.Contains(routes, l) {
			t.Errorf("ADMIN.md's table of endpoints names `%s`, which caddywebhook/admin.go does not route", l)
		}
	}
}
