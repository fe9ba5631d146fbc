package api

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Limits of parameters.
const (
	maxRegex      = 4096   // bytes of a regular expression
	maxRegexInsts = 10_000 // instructions of its compiled program
	maxParam      = 8192   // bytes of any other parameter value
	maxRepeats    = 64     // values of a repeatable parameter
	maxBudget     = 60 * time.Second
)

// params reads a request's parameters as its route declares them; the
// first problem of each parameter is kept, and check reports them all as
// one 400.
type params struct {
	rt   *route
	q    url.Values
	path func(string) string
	errs []string
}

// unknown reports parameters the route does not declare (Jaeger's routes
// ignore them, as Jaeger does).
func (p *params) unknown() error {
	if p.rt.jaeger {
		return nil
	}
	var bad []string
	for k := range p.q {
		if p.rt.param(k) == nil {
			bad = append(bad, strconv.Quote(k))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	var known []string
	for _, pr := range p.rt.params {
		if pr.in == inQuery {
			known = append(known, pr.name)
		}
	}
	msg := fmt.Sprintf("unknown parameter %s", strings.Join(bad, ", "))
	if len(known) > 0 {
		msg += fmt.Sprintf(" (%s %s takes %s)", p.rt.method, p.rt.path, strings.Join(known, ", "))
	} else {
		msg += fmt.Sprintf(" (%s %s takes none)", p.rt.method, p.rt.path)
	}
	return errorf(http.StatusBadRequest, "%s", msg)
}

func (p *params) bad(name, format string, args ...any) {
	p.errs = append(p.errs, name+": "+fmt.Sprintf(format, args...))
}

// check returns the problems found so far as a 400.
func (p *params) check() error {
	if len(p.errs) == 0 {
		return nil
	}
	return errorf(http.StatusBadRequest, "%s", strings.Join(p.errs, "; "))
}

// decl returns the declaration of a parameter; reading one the route
// does not declare is a programming error, reported as a 500.
func (p *params) decl(name string) *param {
	pr := p.rt.param(name)
	if pr == nil {
		panic(fmt.Sprintf("api: route %s %s reads undeclared parameter %q", p.rt.method, p.rt.path, name))
	}
	return pr
}

// str returns a parameter's value ("" when absent).
func (p *params) str(name string) string {
	pr := p.decl(name)
	if pr.in == inPath {
		return p.path(name)
	}
	vs := p.q[name]
	if len(vs) == 0 {
		return ""
	}
	if len(vs) > 1 && !pr.repeat {
		p.bad(name, "given %d times, at most once", len(vs))
	}
	if len(vs[0]) > maxParam {
		p.bad(name, "longer than %d bytes", maxParam)
		return ""
	}
	return vs[0]
}

// has reports whether a parameter is present.
func (p *params) has(name string) bool {
	p.decl(name)
	_, ok := p.q[name]
	return ok
}

// strs returns every value of a repeatable parameter.
func (p *params) strs(name string) []string {
	p.decl(name)
	vs := p.q[name]
	if len(vs) > maxRepeats {
		p.bad(name, "given %d times, at most %d", len(vs), maxRepeats)
		return nil
	}
	for _, v := range vs {
		if len(v) > maxParam {
			p.bad(name, "longer than %d bytes", maxParam)
			return nil
		}
	}
	return vs
}

// int returns an integer within [lo, hi], def when absent.
func (p *params) int(name string, def, lo, hi int) int {
	s := p.str(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < lo || v > hi {
		p.bad(name, "%q: want a whole number from %d to %d", s, lo, hi)
		return def
	}
	return v
}

// bool returns a flag: absent false; present without a value, true, 1:
// true; false, 0: false.
func (p *params) bool(name string) bool {
	if !p.has(name) {
		return false
	}
	s := p.str(name)
	switch strings.ToLower(s) {
	case "", "true", "1", "yes":
		return true
	case "false", "0", "no":
		return false
	}
	p.bad(name, "%q: want true or false", s)
	return false
}

// dur returns a duration (Go's syntax, or days: 7d) within [lo, hi].
func (p *params) dur(name string, def, lo, hi time.Duration) time.Duration {
	s := p.str(name)
	if s == "" {
		return def
	}
	d, err := pipeline.ParseDuration(s)
	if err != nil || d < lo || d > hi {
		bounds := fmt.Sprintf("from %v to %v", lo, hi)
		if hi >= 1<<62 { // no bound but what a duration holds
			bounds = fmt.Sprintf("of at least %v", lo)
		}
		p.bad(name, "%q: want a duration %s (Go syntax: 250ms, 1.5s, 2m; or days: 7d)", s, bounds)
		return def
	}
	return d
}

// when returns a point in time as unix ns: RFC 3339, or a duration
// before now (15m, 2h, 7d); 0 when absent.
func (p *params) when(name string, now time.Time) int64 {
	s := p.str(name)
	if s == "" {
		return 0
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		if t.Year() < 1678 || t.Year() > 2261 { // beyond int64 ns
			p.bad(name, "%q: out of range", s)
			return 0
		}
		return t.UnixNano()
	}
	d, err := pipeline.ParseDuration(s)
	if err != nil || d < 0 {
		p.bad(name, "%q: want RFC 3339 (2026-11-24T10:00:00Z) or a duration before now (15m, 2h, 7d)", s)
		return 0
	}
	return now.Add(-d).UnixNano()
}

// oneOf returns a value that must be one of choices (def when absent).
func (p *params) oneOf(name, def string, choices ...string) string {
	s := p.str(name)
	if s == "" {
		return def
	}
	if !slices.Contains(choices, s) {
		p.bad(name, "%q: want one of %s", s, strings.Join(choices, ", "))
		return def
	}
	return s
}

// traceID returns the trace id of a path parameter: 32 hex digits or a
// decimal Kieker traceId.
func (p *params) traceID(name string) trace.ID {
	s := p.str(name)
	id, err := trace.ParseID(s)
	if err != nil {
		p.bad(name, "%v", err)
	}
	return id
}

// compileRegex compiles a user's regular expression within the limits:
// RE2 syntax, at most maxRegex bytes and maxRegexInsts instructions.
func compileRegex(expr string) (*regexp.Regexp, error) {
	if len(expr) > maxRegex {
		return nil, fmt.Errorf("regular expression over %d bytes", maxRegex)
	}
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, err
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return nil, err
	}
	if len(prog.Inst) > maxRegexInsts {
		return nil, fmt.Errorf("regular expression too complex (%d instructions, at most %d)", len(prog.Inst), maxRegexInsts)
	}
	return regexp.Compile(expr)
}
