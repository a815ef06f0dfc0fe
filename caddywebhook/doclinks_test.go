package caddywebhook

import (
	"bufio"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// The front page and the docs pages link into each other by path and by
// heading anchor; a heading renamed or a section moved breaks such links
// without a sound. TestDocLinks resolves every link that points inside the
// repository: a relative path must name a file or directory that exists, and
// an anchor (#…) must name a heading of the Markdown page it points into,
// derived as GitHub derives heading ids (github-slugger, which GitHub's
// renderer uses: lower case, punctuation dropped, spaces to hyphens, "-1",
// "-2"… appended to repeated headings).

// docPages are the Markdown files whose links are checked, relative to the
// module root.
var docPages = []string{"*.md", "docs/*.md"}

func TestDocLinks(t *testing.T) {
	t.Parallel()
	var files []string
	for _, pattern := range docPages {
		names, err := filepath.Glob(filepath.Join("..", pattern))
		if err != nil {
			t.Fatalf("list %s: %v", pattern, err)
		}
		files = append(files, names...)
	}
	if !slices.Contains(files, filepath.Join("..", "README.md")) {
		t.Fatalf("no README.md among %q", files)
	}
	for _, problem := range checkDocLinks(t, files) {
		t.Error(problem)
	}
}

func TestDocLinksCatchBroken(t *testing.T) {
	t.Parallel()
	other := "# Other\n\n## Its `section` (one)\n\n## Again\n\n## Again\n"
	tests := []struct {
		name string
		page string   // README.md's text; OTHER.md holds other, sub/ has a file
		want []string // one substring per problem, in order; none for a clean page
	}{
		{"anchor of own heading", "# Title\n\n## Try it\n\nSee [it](#try-it).\n", nil},
		{"anchor of a heading with code and punctuation", "[x](OTHER.md#its-section-one)\n", nil},
		{"repeated heading gets -1", "[x](OTHER.md#again-1)\n", nil},
		{"file and directory", "[a](OTHER.md) and [b](sub) and ![c](sub/pic.png)\n", nil},
		{"external and mail links are not followed", "[a](https://example.com/nope#x) [b](mailto:x@example.com)\n", nil},
		{"links in code are not links", "```md\n[a](#nowhere)\n```\n\n`[b](#nowhere)`\n", nil},
		{"reference definition", "[a][r]\n\n[r]: OTHER.md#again\n", nil},
		{"broken own anchor", "# Title\n\n[x](#try-it)\n", []string{"README.md:3: #try-it: no heading"}},
		{"broken anchor in another page", "[x](OTHER.md#its-section)\n", []string{"README.md:1: OTHER.md#its-section: no heading"}},
		{"repeated heading beyond its count", "[x](OTHER.md#again-2)\n", []string{"OTHER.md#again-2: no heading"}},
		{"missing file", "text\n[x](docs/NOPE.md)\n", []string{"README.md:2: docs/NOPE.md: no such file"}},
		{"missing image", "![x](sub/nope.png)\n", []string{"sub/nope.png: no such file"}},
		{"broken reference definition", "[r]: NOPE.md\n", []string{"NOPE.md: no such file"}},
		{"two on one line", "[a](#x) [b](#y)\n", []string{"#x: no heading", "#y: no heading"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeDocFile(t, filepath.Join(dir, "README.md"), tt.page)
			writeDocFile(t, filepath.Join(dir, "OTHER.md"), other)
			writeDocFile(t, filepath.Join(dir, "sub", "pic.png"), "")
			got := checkDocLinks(t, []string{filepath.Join(dir, "README.md")})
			for i := range got {
				got[i] = strings.TrimPrefix(got[i], dir+string(filepath.Separator))
			}
			if len(got) != len(tt.want) {
				t.Fatalf("problems = %q, want %d like %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}

	slugs := []struct{ heading, want string }{
		{"Global option `webhook` (the `webhook` app)", "global-option-webhook-the-webhook-app"},
		{"FIFO per key (`ordering_key`)", "fifo-per-key-ordering_key"},
		{"`POST /webhook/pause?source=S&target=T` and more", "post-webhookpausesourcestargett-and-more"},
		{"Rate, concurrency — and a [link](x.md)", "rate-concurrency--and-a-link"},
		{"Moving from SQLite to Postgres ##", "moving-from-sqlite-to-postgres"},
	}
	for _, s := range slugs {
		if got := headingSlug(s.heading); got != s.want {
			t.Errorf("headingSlug(%q) = %q, want %q", s.heading, got, s.want)
		}
	}
}

func writeDocFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

var (
	// inlineLink is the target of [text](target) or ![alt](target), with an
	// optional "title" after it.
	inlineLink = regexp.MustCompile(`\]\(<?([^)\s>]*)>?(?:\s+"[^"]*")?\)`)
	// linkDefinition is a reference definition, [label]: target.
	linkDefinition = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?`)
	// inlineCode is a code span, whose text is never a link.
	inlineCode = regexp.MustCompile("`[^`]*`")
	// hasScheme marks a link out of the repository (https:, mailto:).
	hasScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	// atxHeading is a "## Heading" line, with an optional closing "##".
	atxHeading = regexp.MustCompile(`^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)
	// linkText keeps the text of a link in a heading, as GitHub renders it.
	linkText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// docLink is one link of a page, by the line it is on.
type docLink struct {
	line   int
	target string
}

// checkDocLinks returns one problem per link of files that does not
// resolve, as "path:line: target: what is wrong".
func checkDocLinks(t *testing.T, files []string) []string {
	t.Helper()
	anchors := map[string]map[string]bool{} // by the page's clean path
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		_, a := readDocPage(t, path)
		anchors[path] = a
		return a
	}
	var problems []string
	for _, file := range files {
		links, _ := readDocPage(t, file)
		for _, l := range links {
			if hasScheme.MatchString(l.target) || l.target == "" {
				continue
			}
			rawPath, anchor, _ := strings.Cut(l.target, "#")
			path, err := url.PathUnescape(rawPath)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: bad escape in the path: %v", file, l.line, l.target, err))
				continue
			}
			dest := filepath.Clean(file)
			if path != "" {
				dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
				if _, err := os.Stat(dest); err != nil {
					problems = append(problems, fmt.Sprintf("%s:%d: %s: no such file or directory", file, l.line, l.target))
					continue
				}
			}
			// An anchor into code (#L10) is GitHub's line link; only a
			// page's headings are checked.
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			if !anchorsOf(dest)[anchor] {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: no heading with that anchor in %s", file, l.line, l.target, filepath.Base(dest)))
			}
		}
	}
	return problems
}

// readDocPage returns a Markdown page's links and the anchors of its
// headings, leaving out fenced code blocks and code spans.
func readDocPage(t *testing.T, path string) ([]docLink, map[string]bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	var links []docLink
	anchors := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20) // table rows run long
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		if m := atxHeading.FindStringSubmatch(line); m != nil {
			slug := headingSlug(m[1])
			if k := seen[slug]; k > 0 {
				anchors[fmt.Sprintf("%s-%d", slug, k)] = true
			} else {
				anchors[slug] = true
			}
			seen[slug]++
		}
		text := inlineCode.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(text, -1) {
			links = append(links, docLink{n, m[1]})
		}
		if m := linkDefinition.FindStringSubmatch(text); m != nil {
			links = append(links, docLink{n, m[1]})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return links, anchors
}

// headingSlug is the anchor GitHub gives a heading's text: the rendered
// text in lower case, without what is neither a letter, a mark, a digit, a
// connector such as "_", a space nor a hyphen, and with each space a hyphen.
func headingSlug(heading string) string {
	text := linkText.ReplaceAllString(heading, "$1")
	text = strings.TrimRight(strings.TrimSpace(text), "#")
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.Pc):
			b.WriteRune(r)
		}
	}
	return b.String()
}
