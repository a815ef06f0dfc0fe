package caddywebhook

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// docs/CONFIGURATION.md, the configuration reference, restates the config
// fields' doc comments, which are also the JSON docs on caddyserver.com.
// This test keeps the two in step: every JSON field of every config struct
// has a row in its section's table, every row names a field, and the row's
// Default cell holds the doc comment's "Default: …" sentence (or "required"
// where the doc ends with "Required.").

// referencePage is the page that holds the configuration tables, from this
// package's directory.
const referencePage = "../docs/CONFIGURATION.md"

// readmeSections maps each heading of the configuration reference to the
// config structs its tables document, with the JSON path each struct's
// fields sit under in the table's JSON column.
var readmeSections = []struct {
	heading string // the reference page's line, as written
	structs []readmeStruct
}{
	{"### Global option `webhook` (the `webhook` app)", []readmeStruct{
		{"App", ""}, {"storage/sqlite.Storage", "storage."}, {"storage/postgres.Storage", "storage."},
		{"BackoffConfig", "backoff."}, {"EncryptionConfig", "encryption."}, {"EncryptionKey", "encryption.keys[]."},
	}},
	{"### Directive `webhook_receiver` (handler `http.handlers.webhook_receiver`)", []readmeStruct{
		{"Receiver", ""}, {"HMACOptions", "hmac."}, {"TargetConfig", "targets[]."},
		{"DeliverySettings", "targets[]."},
		{"CircuitBreakerConfig", "targets[].circuit_breaker."},
	}},
	{"### Failure notifications (`notify`)", []readmeStruct{{"NotifyConfig", "notify."}}},
	{"### Target `http` (`webhook.targets.http`)", []readmeStruct{{"targets/http.Target", ""}, {"targets/http.Resign", "resign."}}},
	{"### Target `exec` (`webhook.targets.exec`)", []readmeStruct{{"targets/exec.Target", ""}}},
	{"### Directive `webhook_dashboard` (handler `http.handlers.webhook_dashboard`)", []readmeStruct{{"dashboard.Dashboard", ""}}},
	{"### Directive `webhook_consumer` (handler `http.handlers.webhook_consumer`)", []readmeStruct{{"consumer.Handler", ""}}},
}

type readmeStruct struct {
	name   string // the Go type, after its directory when in a sub-package
	prefix string // its fields' JSON path in the reference, before the tag
}

// notConfig lists the Caddy modules whose JSON is not configuration, or
// holds no field: the pull target has no options of its own (its page is
// docs/CONSUMER.md).
var notConfig = []string{"adminAPI", "targets/pull.Target"}

// configField is one JSON field of a config struct, from its Go source.
type configField struct {
	path     string // JSON path as the reference writes it, e.g. "storage.max_batch"
	doc      bool   // the field has a doc comment
	def      string // what follows "Default:", or "" if the doc has none
	required bool   // the doc ends with "Required."
	typ      string // the Go type's name, without pointer or slice
}

// readmeRow is one row of a configuration table.
type readmeRow struct {
	line    int
	paths   []string // the code spans of the JSON cell
	def     string   // the Default cell
	matched bool
}

func TestReadmeReference(t *testing.T) {
	t.Parallel()
	fields, modules := parseConfigStructs(t)
	tables := parseReadmeTables(t, referencePage)

	documented := map[string]bool{}
	for _, sec := range readmeSections {
		for _, s := range sec.structs {
			documented[s.name] = true
		}
	}
	for _, sec := range readmeSections {
		rows, ok := tables[sec.heading]
		if !ok {
			t.Errorf("%s: no heading %q", referencePage, sec.heading)
			continue
		}
		for _, s := range sec.structs {
			fs, ok := fields[s.name]
			if !ok {
				t.Errorf("no config struct %s in the package", s.name)
				continue
			}
			for _, f := range fs {
				f.path = s.prefix + f.path
				checkField(t, sec.heading, f, documented[f.typ], rows)
			}
		}
		for _, r := range rows {
			if !r.matched {
				t.Errorf("%s:%d: row %v under %q names no config field", referencePage, r.line, r.paths, sec.heading)
			}
		}
	}
	for _, m := range modules {
		if !documented[m] && !slices.Contains(notConfig, m) {
			t.Errorf("Caddy module %s has no table in %s: add it to readmeSections", m, referencePage)
		}
	}
}

// checkField finds the row of f and compares its default. A nested config
// struct (nested) needs no row of its own: its fields have theirs.
func checkField(t *testing.T, heading string, f configField, nested bool, rows []*readmeRow) {
	t.Helper()
	var row *readmeRow
	for _, r := range rows {
		for _, p := range r.paths {
			// A row may document a field by a path into it, as
			// `targets[].deliver.kind` documents `targets[].deliver`.
			if p == f.path || strings.HasPrefix(p, f.path+".") || strings.HasPrefix(p, f.path+"[]") {
				r.matched = true
				if row == nil {
					row = r
				}
			}
		}
	}
	switch {
	case !f.doc:
		t.Errorf("field %q has no doc comment", f.path)
	case nested:
		// Documented, with its defaults, by its fields' rows.
	case row == nil:
		t.Errorf("%s, %q: no row for field %q", referencePage, heading, f.path)
	case f.def != "" && !containsPhrase(normalize(row.def), normalize(f.def)):
		t.Errorf("%s:%d: field %q: Default cell %q does not say the doc's default %q", referencePage, row.line, f.path, row.def, f.def)
	case f.required && !strings.Contains(normalize(row.def), "required"):
		t.Errorf("%s:%d: field %q is required, the Default cell says %q", referencePage, row.line, f.path, row.def)
	}
}

// parseConfigStructs reads the package's non-test Go files and returns the
// JSON fields of every struct type, and the types with a CaddyModule method.
func parseConfigStructs(t *testing.T) (map[string][]configField, []string) {
	t.Helper()
	// Every non-test Go file of the package and of its module packages,
	// whatever its build tags: a config struct must be documented on every
	// platform. A sub-package's types are named after its directory, as
	// "targets/http.Target".
	var names []string
	for _, pattern := range []string{"*.go", "storage/*/*.go", "targets/*/*.go", "consumer/*.go", "dashboard/*.go"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatalf("list package files: %v", err)
		}
		names = append(names, m...)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	var dirs []string
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatalf("parse package: %v", err)
		}
		files = append(files, f)
		dirs = append(dirs, filepath.ToSlash(filepath.Dir(name)))
	}
	structs := map[string]*ast.StructType{}
	var modules []string
	for i, file := range files {
		qualify := func(name string) string {
			if dirs[i] == "." {
				return name
			}
			return dirs[i] + "." + name
		}
		for _, decl := range file.Decls {
			switch d := decl.(type) {
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					if ts, ok := spec.(*ast.TypeSpec); ok {
						if st, ok := ts.Type.(*ast.StructType); ok {
							structs[qualify(ts.Name.Name)] = st
						}
					}
				}
			case *ast.FuncDecl:
				if d.Recv != nil && d.Name.Name == "CaddyModule" {
					modules = append(modules, qualify(typeName(d.Recv.List[0].Type)))
				}
			}
		}
	}

	fields := map[string][]configField{}
	for name, st := range structs {
		for _, f := range st.Fields.List {
			if f.Tag == nil || len(f.Names) == 0 || !f.Names[0].IsExported() {
				continue
			}
			tag, err := strconv.Unquote(f.Tag.Value)
			if err != nil {
				t.Fatalf("%s.%s: tag %s: %v", name, f.Names[0].Name, f.Tag.Value, err)
			}
			key, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
			if key == "" || key == "-" {
				continue
			}
			doc := strings.TrimSpace(f.Doc.Text())
			fields[name] = append(fields[name], configField{
				path:     key,
				doc:      doc != "",
				def:      docDefault(doc),
				required: strings.HasSuffix(doc, "Required."),
				typ:      typeName(f.Type),
			})
		}
	}
	return fields, modules
}

// typeName is the name of a possibly pointer or slice type, "" if none.
func typeName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.Ident:
			return x.Name
		case *ast.StarExpr:
			e = x.X
		case *ast.ArrayType:
			e = x.Elt
		default:
			return ""
		}
	}
}

// docDefault returns the default a field doc ends with: the text after the
// last "Default:", without its final period.
func docDefault(doc string) string {
	i := strings.LastIndex(doc, "Default:")
	if i < 0 {
		return ""
	}
	return strings.TrimSuffix(strings.TrimSpace(doc[i+len("Default:"):]), ".")
}

var codeSpan = regexp.MustCompile("`([^`]*)`")

// parseReadmeTables returns the rows of the configuration tables (those
// whose header has a JSON and a Default column) under each "###" heading.
func parseReadmeTables(t *testing.T, path string) map[string][]*readmeRow {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open the reference: %v", err)
	}
	defer f.Close()

	tables := map[string][]*readmeRow{}
	var heading string
	const (
		outside = iota
		configTable
		otherTable
	)
	state, jsonCol, defCol := outside, -1, -1
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case !strings.HasPrefix(line, "|"):
			state = outside
			if strings.HasPrefix(line, "#") {
				heading = line
				tables[heading] = nil
			}
			continue
		case state == otherTable:
			continue
		case state == outside:
			// A table's header row.
			state, jsonCol, defCol = otherTable, -1, -1
			for i, c := range tableCells(line) {
				switch {
				case strings.HasPrefix(c, "JSON"):
					jsonCol = i
				case c == "Default":
					defCol = i
				}
			}
			if jsonCol >= 0 && defCol >= 0 {
				state = configTable
			}
			continue
		case strings.HasPrefix(line, "|---"):
			continue
		}
		cells := tableCells(line)
		if len(cells) <= max(jsonCol, defCol) {
			t.Errorf("%s:%d: %d cells, want more than %d", path, n, len(cells), max(jsonCol, defCol))
			continue
		}
		row := &readmeRow{line: n, def: cells[defCol]}
		for _, m := range codeSpan.FindAllStringSubmatch(cells[jsonCol], -1) {
			row.paths = append(row.paths, m[1])
		}
		tables[heading] = append(tables[heading], row)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read the reference: %v", err)
	}
	return tables
}

// tableCells splits a Markdown table row, leaving "\|" inside a cell.
func tableCells(line string) []string {
	line = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(line), "|"), "|")
	var cells []string
	var cell strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cell.WriteByte('|')
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(cell.String()))
			cell.Reset()
		default:
			cell.WriteByte(line[i])
		}
	}
	return append(cells, strings.TrimSpace(cell.String()))
}

// normalize makes the reference's and Go doc text comparable: no backticks, one
// space between words, lower case.
func normalize(s string) string {
	return strings.ToLower(strings.Join(strings.Fields(strings.ReplaceAll(s, "`", "")), " "))
}

// containsPhrase reports whether phrase occurs in s as whole words, so a
// default of "4" is not found in "14".
func containsPhrase(s, phrase string) bool {
	isWord := func(b byte) bool {
		return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z'
	}
	for i := 0; ; {
		j := strings.Index(s[i:], phrase)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(phrase)
		if (start == 0 || !isWord(s[start-1])) && (end == len(s) || !isWord(s[end])) {
			return true
		}
		i = start + 1
	}
}

func TestReadmeHelpers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		s, phrase string
		want      bool
	}{
		{"whole word", "4", "4", true},
		{"inside a number", "14", "4", false},
		{"in a list", "2s, 15m", "15m", true},
		{"prefix of a word", "fullness", "full", false},
		{"second occurrence whole", "14 or 4", "4", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := containsPhrase(tt.s, tt.phrase); got != tt.want {
				t.Errorf("containsPhrase(%q, %q) = %v, want %v", tt.s, tt.phrase, got, tt.want)
			}
		})
	}

	cells := tableCells("| `a\\|b` | `x.y`, `x.z` | 10s |")
	if want := []string{"`a|b`", "`x.y`, `x.z`", "10s"}; !slices.Equal(cells, want) {
		t.Errorf("tableCells = %q, want %q", cells, want)
	}
	if got, want := docDefault("Lease is how long. Default: 1m."), "1m"; got != want {
		t.Errorf("docDefault = %q, want %q", got, want)
	}
}
