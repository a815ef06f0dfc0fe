// Command demo builds Caddy with the plugin and runs it on
// Caddyfile.example, saying what it does while it builds:
//
//	go run ./cmd/demo
//
// It is README.md's first command. A plain `go run ./cmd/caddy run …`
// prints nothing while it compiles some 600 packages, which takes minutes
// on a small machine the first time; a newcomer cannot tell a slow build
// from a hang. This program resolves the modules, then builds ./caddy with
// `go build -v` and counts the packages as the compiler reports them, and
// then runs `./caddy run --config Caddyfile.example` in its place. Later
// runs find everything built and start Caddy in a second or two; the
// ./caddy it leaves behind is the binary README.md's other commands use.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	config := flag.String("config", "Caddyfile.example", "the Caddyfile to run")
	out := flag.String("o", "caddy", "where to build the Caddy binary")
	flag.Parse()
	if err := run(*config, *out); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(config, out string) error {
	if err := checkRoot(config); err != nil {
		return err
	}
	say("resolving modules (the first run downloads them)")
	total, err := countPackages()
	if err != nil {
		return err
	}
	bin := displayPath(out)
	say(fmt.Sprintf("building Caddy with the plugin into %s: %d packages to compile (a few minutes the first time; seconds once they are in Go's build cache)", bin, total))
	start := time.Now()
	if err := build(out, total, os.Stderr); err != nil {
		return err
	}
	say(fmt.Sprintf("built %s in %s; starting: %s run --config %s", bin, time.Since(start).Round(100*time.Millisecond), bin, config))
	return runCaddy(out, config)
}

// displayPath writes a binary's path as a shell runs it: ./caddy for a
// file in the current directory.
func displayPath(p string) string {
	if filepath.IsAbs(p) || strings.ContainsRune(p, filepath.Separator) {
		return p
	}
	return "." + string(filepath.Separator) + p
}

// checkRoot makes sure the program runs from the repository's root, where
// ./cmd/caddy and the config are.
func checkRoot(config string) error {
	for _, p := range []string{"go.mod", filepath.Join("cmd", "caddy"), config} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%s not found: run this from the root of a clone of the caddywebhook repository (go run ./cmd/demo)", p)
		}
	}
	return nil
}

// countPackages counts the packages the build must compile, those not in
// Go's build cache; listing them also downloads the modules a fresh
// machine lacks, which is the first run's other wait.
func countPackages() (int, error) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if .Stale}}{{.ImportPath}}{{end}}", "./cmd/caddy")
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("go list ./cmd/caddy: %w", err)
	}
	n := 0
	for line := range strings.Lines(string(b)) {
		if strings.TrimSpace(line) != "" {
			n++
		}
	}
	return n, nil
}

// build runs go build -v and turns the package names it prints into a
// progress line on w.
func build(out string, total int, w io.Writer) error {
	cmd := exec.Command("go", "build", "-v", "-o", out, "./cmd/caddy")
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return fmt.Errorf("go build: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("go build: %w", err)
	}
	p := newProgress(w, total, isTerminal(w))
	other := p.read(pipe)
	err = cmd.Wait()
	p.done()
	if err != nil {
		// What go build said that was not a package name is the error.
		fmt.Fprint(w, other)
		return fmt.Errorf("go build ./cmd/caddy: %w", err)
	}
	return nil
}

// progress reports the packages go build -v names, one line updated in
// place on a terminal, or a line every tenth of the total elsewhere (a
// log, CI).
type progress struct {
	w        io.Writer
	total    int
	tty      bool
	compiled int
	shown    int // the last count written
}

func newProgress(w io.Writer, total int, tty bool) *progress {
	return &progress{w: w, total: max(total, 1), tty: tty}
}

// read consumes go build's output: each line that names a package counts
// as one compiled; anything else (errors) is returned to be shown.
func (p *progress) read(r io.Reader) string {
	var other strings.Builder
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if isPackageLine(line) {
			p.compiled++
			p.show()
			continue
		}
		other.WriteString(line)
		other.WriteByte('\n')
	}
	return other.String()
}

// isPackageLine tells a package path, as go build -v prints each package
// it compiles, from an error or a note.
func isPackageLine(line string) bool {
	return line != "" && !strings.ContainsAny(line, " \t:") && !strings.HasPrefix(line, "#")
}

func (p *progress) show() {
	n := min(p.compiled, p.total)
	if p.tty {
		fmt.Fprintf(p.w, "\rdemo: compiled %d of %d packages (%d%%)", n, p.total, 100*n/p.total)
		return
	}
	if step := max(p.total/10, 1); n-p.shown >= step {
		fmt.Fprintf(p.w, "demo: compiled %d of %d packages\n", n, p.total)
		p.shown = n
	}
}

// done ends the progress line.
func (p *progress) done() {
	if p.tty && p.compiled > 0 {
		fmt.Fprintln(p.w)
	}
}

func say(msg string) { fmt.Fprintln(os.Stderr, "demo:", msg) }

// isTerminal reports whether w is a character device, where a line can be
// rewritten in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
