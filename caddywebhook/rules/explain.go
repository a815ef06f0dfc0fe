package rules

import (
	"context"
	"fmt"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// Note is something a rule did on one event that its author most likely
// did not mean, found by running it once more with every value it computed
// kept. Line and Column are 1-based positions in the expression's source.
type Note struct {
	Line, Column int
	Message      string
}

func (n Note) String() string {
	return fmt.Sprintf("line %d, column %d: %s", n.Line, n.Column, n.Message)
}

// Explain runs f's expressions on in once more and returns what they did
// that a reader would not expect: today, an equality between values of
// different types (`body.ref == 1` on a string field), which CEL answers
// with false rather than an error, so a filter that can never match loads
// and runs without a word. The body's types are known only at run time, so
// this is for `rules test` and the admin API, never the ingest path: it
// plans each expression again with state tracking, which costs as much as
// the compile.
func (f *Filter) Explain(in *Input) []Note {
	if f == nil {
		return nil
	}
	var notes []Note
	for _, p := range f.progs {
		notes = append(notes, p.explain(in)...)
	}
	return notes
}

// explain evaluates p with every subexpression's value kept and reports
// the comparisons of values of different types.
func (p *program) explain(in *Input) []Note {
	env, err := environment()
	if err != nil {
		return nil
	}
	prg, err := env.Program(p.ast, cel.CostLimit(p.costLimit), cel.EvalOptions(cel.OptTrackState), cel.InterruptCheckFrequency(interruptEvery))
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeoutCause(context.Background(), p.timeLimit, errTimeLimit)
	defer cancel()
	_, det, _ := prg.ContextEval(ctx, in) // an error is the filter's own report
	if det == nil || det.State() == nil {
		return nil
	}
	state := det.State()
	info := p.ast.NativeRep().SourceInfo()
	var notes []Note
	calls := celast.MatchDescendants(celast.NavigateAST(p.ast.NativeRep()), celast.KindMatcher(celast.CallKind))
	for _, e := range calls {
		call := e.AsCall()
		if fn := call.FunctionName(); fn != operators.Equals && fn != operators.NotEquals || len(call.Args()) != 2 {
			continue
		}
		l, lok := state.Value(call.Args()[0].ID())
		r, rok := state.Value(call.Args()[1].ID())
		if !lok || !rok || comparable(l, r) {
			continue
		}
		loc := info.GetStartLocation(e.ID())
		verdict := "false"
		if call.FunctionName() == operators.NotEquals {
			verdict = "true"
		}
		notes = append(notes, Note{
			Line:   max(loc.Line(), 1),
			Column: max(loc.Column()+1, 1), // cel's column is 0-based
			Message: fmt.Sprintf("compared %s with %s: values of different types are never equal, so this is always %s",
				article(l), article(r), verdict),
		})
	}
	return notes
}

// comparable reports whether CEL compares l and r by value: the same type,
// numbers of any kind (the environment compares them across types), or a
// null on either side (a test for a missing value).
func comparable(l, r ref.Val) bool {
	if types.IsError(l) || types.IsError(r) || types.IsUnknown(l) || types.IsUnknown(r) {
		return true
	}
	lt, rt := l.Type().TypeName(), r.Type().TypeName()
	if lt == rt || l == types.NullValue || r == types.NullValue {
		return true
	}
	return isNumber(l) && isNumber(r)
}

func isNumber(v ref.Val) bool {
	switch v.(type) {
	case types.Int, types.Uint, types.Double:
		return true
	}
	return false
}

// article names a value's type for a reader: "a string", "an int".
func article(v ref.Val) string {
	name := v.Type().TypeName()
	switch name {
	case "int", "uint":
		return "an " + name
	case "google.protobuf.Value", "map":
		return "a map"
	case "list":
		return "a list"
	}
	return "a " + name
}
