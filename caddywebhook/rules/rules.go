// Package rules compiles and runs content rules: CEL filters that decide
// which targets take an event, and CEL transforms that reshape the request a
// target receives. It knows nothing of Caddy, so it can be tested and
// benchmarked on its own; the caddywebhook package compiles a config's rules
// once per load and runs them at ingest (filters) and delivery (transforms).
//
// CEL is the language of Caddy's own `expression` matcher. Every program is
// parsed and type-checked at compile, so a typo is a config error with its
// line and column, and runs under a cost limit, so no rule can burn unbounded
// CPU on a hostile body.
package rules

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"
)

// DefaultCostLimit is the cost limit of every program unless Options sets
// another: the CEL runtime cost (about one unit per operation, plus about
// one per ten bytes a string function walks) after which an evaluation
// stops with an error. One million lets a rule search a 1 MB body's text a
// few times over, and is thousands of times what a filter on a few fields
// costs.
const DefaultCostLimit = 1_000_000

// DefaultTimeLimit bounds the run time of a program that loops (a
// comprehension: all, exists, map, filter), in addition to its cost limit.
// cel-go's cost tracker slows down quadratically inside a long
// comprehension, so the cost limit alone would let such a rule run for
// seconds before it stops it; a straight-line rule cannot loop and runs
// without a clock.
const DefaultTimeLimit = 100 * time.Millisecond

// interruptEvery is how many comprehension steps run between two checks of
// the time limit.
const interruptEvery = 64

// DefaultMaxOutput caps a transform's output (body and headers together), in
// bytes, unless Options sets another.
const DefaultMaxOutput = 1 << 20

// maxExpressionSize bounds the source of one expression, in code points; a
// rule is a line of config, not a program.
const maxExpressionSize = 16 << 10

// Options bound the programs Compile returns. The zero value takes the
// defaults.
type Options struct {
	// CostLimit is the runtime cost after which an evaluation stops. Default:
	// DefaultCostLimit.
	CostLimit uint64
	// TimeLimit bounds the run time of a program that loops. Default:
	// DefaultTimeLimit.
	TimeLimit time.Duration
	// MaxOutput caps a transform's output, in bytes. Default:
	// DefaultMaxOutput.
	MaxOutput int
}

func (o Options) timeLimit() time.Duration {
	if o.TimeLimit <= 0 {
		return DefaultTimeLimit
	}
	return o.TimeLimit
}

func (o Options) costLimit() uint64 {
	if o.CostLimit == 0 {
		return DefaultCostLimit
	}
	return o.CostLimit
}

func (o Options) maxOutput() int {
	if o.MaxOutput <= 0 {
		return DefaultMaxOutput
	}
	return o.MaxOutput
}

// The variables an expression sees.
const (
	varBody       = "body"
	varRaw        = "raw"
	varHeaders    = "headers"
	varQuery      = "query"
	varEventType  = "event_type"
	varSource     = "source"
	varDeliveryID = "delivery_id"
	// varJob is a search's job, seen only by the searches of jobs.
	varJob = "job"
)

var (
	envOnce sync.Once
	envVal  *cel.Env
	envErr  error
)

// environment returns the one CEL environment every rule compiles in. It is
// built once per process: building it costs milliseconds, and it holds no
// per-config state.
func environment() (*cel.Env, error) {
	envOnce.Do(func() {
		envVal, envErr = cel.NewEnv(
			cel.Variable(varBody, cel.DynType),
			cel.Variable(varRaw, cel.BytesType),
			cel.Variable(varHeaders, cel.MapType(cel.StringType, cel.StringType)),
			cel.Variable(varQuery, cel.MapType(cel.StringType, cel.StringType)),
			cel.Variable(varEventType, cel.StringType),
			cel.Variable(varSource, cel.StringType),
			cel.Variable(varDeliveryID, cel.StringType),
			// JSON numbers are doubles; comparing one with an int literal
			// (`body.amount > 1000`) must work as a reader expects.
			cel.CrossTypeNumericComparisons(true),
			cel.OptionalTypes(),
			ext.Strings(),
			ext.Encoders(),
			cel.ParserExpressionSizeLimit(maxExpressionSize),
			getFunction(),
		)
	})
	return envVal, envErr
}

var (
	jobEnvOnce sync.Once
	jobEnvVal  *cel.Env
	jobEnvErr  error
)

// jobEnvironment is environment with the job variable of a search of
// jobs: the same language and functions, one more name.
func jobEnvironment() (*cel.Env, error) {
	jobEnvOnce.Do(func() {
		env, err := environment()
		if err != nil {
			jobEnvErr = err
			return
		}
		jobEnvVal, jobEnvErr = env.Extend(cel.Variable(varJob, cel.MapType(cel.StringType, cel.DynType)))
	})
	return jobEnvVal, jobEnvErr
}

// CompileError is a rule that does not parse or type-check. Line and Column
// are 1-based positions in the expression's source.
type CompileError struct {
	Line, Column int
	Message      string
}

func (e *CompileError) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Message)
}

// program is one compiled expression.
type program struct {
	src string
	ast *cel.Ast // checked, for Explain's second plan
	prg cel.Program
	// loops is set when the expression holds a comprehension; only then
	// does eval run it under the time limit.
	loops     bool
	timeLimit time.Duration
	costLimit uint64
}

// compile parses, type-checks and plans one expression. want lists the
// kinds of output it may have (dyn is always accepted: its type is known
// only at run time); what names them in the error.
func compile(src string, opts Options, what string, want ...celtypes) (*program, error) {
	return compileIn(environment, src, opts, what, want...)
}

// compileIn is compile in the environment env returns.
func compileIn(env func() (*cel.Env, error), src string, opts Options, what string, want ...celtypes) (*program, error) {
	if strings.TrimSpace(src) == "" {
		return nil, errors.New("empty expression")
	}
	e, err := env()
	if err != nil {
		return nil, fmt.Errorf("build cel environment: %w", err)
	}
	ast, iss := e.Compile(src)
	if iss.Err() != nil {
		return nil, firstIssue(iss)
	}
	out := ast.OutputType()
	if k := out.Kind(); k != types.DynKind && k != types.AnyKind {
		ok := false
		for _, w := range want {
			if k == w {
				ok = true
				break
			}
		}
		if !ok {
			return nil, &CompileError{Line: 1, Column: 1, Message: fmt.Sprintf("yields %s; want %s", out, what)}
		}
	}
	loops := len(celast.MatchDescendants(celast.NavigateAST(ast.NativeRep()), celast.KindMatcher(celast.ComprehensionKind))) > 0
	popts := []cel.ProgramOption{
		cel.CostLimit(opts.costLimit()),
		cel.EvalOptions(cel.OptOptimize),
	}
	if loops {
		popts = append(popts, cel.InterruptCheckFrequency(interruptEvery))
	}
	prg, err := e.Program(ast, popts...)
	if err != nil {
		return nil, fmt.Errorf("plan expression: %w", err)
	}
	return &program{src: src, ast: ast, prg: prg, loops: loops, timeLimit: opts.timeLimit(), costLimit: opts.costLimit()}, nil
}

// celtypes is a kind of CEL value a program may yield.
type celtypes = types.Kind

// firstIssue turns the first of cel's issues into a CompileError: one
// message, with its position, reads better in a config error than cel's
// multi-line report with a snippet.
func firstIssue(iss *cel.Issues) error {
	errs := iss.Errors()
	if len(errs) == 0 {
		return iss.Err()
	}
	e := errs[0]
	line, col := e.Location.Line(), e.Location.Column()+1 // cel's column is 0-based
	if line < 1 {
		line = 1
	}
	if col < 1 {
		col = 1
	}
	// cel names the (always empty) container in an undeclared reference;
	// it means nothing to a reader of a config.
	msg := strings.TrimSuffix(e.Message, " (in container '')")
	return &CompileError{Line: line, Column: col, Message: msg}
}

// eval runs p on in.
func (p *program) eval(in *Input) (ref.Val, error) {
	var (
		out ref.Val
		err error
	)
	if p.loops {
		ctx, cancel := context.WithTimeoutCause(context.Background(), p.timeLimit, errTimeLimit)
		out, _, err = p.prg.ContextEval(ctx, in)
		cancel()
	} else {
		out, _, err = p.prg.Eval(in)
	}
	if err != nil {
		var cancelled interpreter.EvalCancelledError
		if errors.Is(err, errTimeLimit) || (errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded) {
			return nil, limitError{err}
		}
		return nil, err
	}
	if types.IsError(out) {
		return nil, out.(*types.Err)
	}
	return out, nil
}

// errTimeLimit is the cause an evaluation stopped by the time limit names.
var errTimeLimit = errors.New("time limit exceeded")

// ErrLimit is what the error of an evaluation that the cost limit or the
// time limit stopped is (errors.Is): the expression costs too much for
// this input, and evaluating it again will not change that.
var ErrLimit = errors.New("evaluation limit exceeded")

// ErrNotBool is what the error of a filter whose value is not a bool is
// (errors.Is): a dyn expression such as body.amount, whose type only the
// event tells.
var ErrNotBool = errors.New("not a bool")

// limitError is an evaluation stopped by a limit: its text is cel's, and
// it is ErrLimit.
type limitError struct{ err error }

func (e limitError) Error() string        { return e.err.Error() }
func (e limitError) Unwrap() error        { return e.err }
func (e limitError) Is(target error) bool { return target == ErrLimit }

// Filter is a compiled filter: a boolean expression that decides whether a
// target takes an event. Several expressions are ANDed.
type Filter struct {
	progs []*program
}

// CompileFilter compiles the filter expressions srcs, ANDed; none returns
// a nil Filter, which takes every event. The error is a *CompileError,
// wrapped with the expression's number when there are several ("filter 2:
// line 1, column 5: …").
func CompileFilter(srcs []string, opts Options) (*Filter, error) {
	if len(srcs) == 0 {
		return nil, nil
	}
	f := &Filter{}
	for i, src := range srcs {
		p, err := compile(src, opts, "bool", types.BoolKind)
		if err != nil {
			if len(srcs) > 1 {
				return nil, fmt.Errorf("filter %d: %w", i+1, err)
			}
			return nil, err
		}
		f.progs = append(f.progs, p)
	}
	return f, nil
}

// CompileSearch compiles src, the expression of a search of stored events
// (the admin API's where): a filter, as CompileFilter makes, over the same
// variables, and with jobs over a job of the event too (the job variable:
// Event.Job). The error is a *CompileError, as a filter's is; an
// expression whose type is known not to be bool is one.
func CompileSearch(src string, jobs bool, opts Options) (*Filter, error) {
	env := environment
	if jobs {
		env = jobEnvironment
	}
	p, err := compileIn(env, src, opts, "bool", types.BoolKind)
	if err != nil {
		return nil, err
	}
	return &Filter{progs: []*program{p}}, nil
}

// Sources returns the expressions f was compiled from.
func (f *Filter) Sources() []string {
	if f == nil {
		return nil
	}
	s := make([]string, len(f.progs))
	for i, p := range f.progs {
		s[i] = p.src
	}
	return s
}

// Match reports whether f takes the event in. A nil Filter takes every
// event. An evaluation error (a missing field, a non-bool result, the cost
// limit) does not take the event and is returned, so the caller can log
// and count it.
func (f *Filter) Match(in *Input) (bool, error) {
	if f == nil {
		return true, nil
	}
	for _, p := range f.progs {
		out, err := p.eval(in)
		if err != nil {
			return false, err
		}
		b, ok := out.(types.Bool)
		if !ok {
			return false, fmt.Errorf("filter yields %s, %w", typeName(out), ErrNotBool)
		}
		if !b {
			return false, nil
		}
	}
	return true, nil
}
