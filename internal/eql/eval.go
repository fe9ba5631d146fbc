package eql

import (
	"cmp"
	"math"
	"strconv"
	"strings"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// kind is the type of a value.
type kind uint8

const (
	kNull kind = iota
	kBool
	kInt
	kFloat
	kStr
)

// value is the result of evaluating a node.
type value struct {
	k kind
	b bool
	i int64
	f float64
	// s is a string's value, or the text of an attribute that reads as
	// a number or boolean (text set): compared with a string, that text
	// is compared.
	s    string
	text bool
}

func boolean(b bool) value { return value{k: kBool, b: b} }

// maxConcat bounds the strings + makes (beyond it: null).
const maxConcat = 4 << 10

// truthy: null, false, 0, NaN and "" are false, anything else true.
func truthy(v value) bool {
	switch v.k {
	case kBool:
		return v.b
	case kInt:
		return v.i != 0
	case kFloat:
		return v.f != 0 && !math.IsNaN(v.f)
	case kStr:
		return v.s != ""
	}
	return false
}

// str is v as text (for ~= and string +).
func (v value) str() string {
	switch {
	case v.k == kStr || v.text:
		return v.s
	case v.k == kInt:
		return strconv.FormatInt(v.i, 10)
	case v.k == kFloat:
		return strconv.FormatFloat(v.f, 'g', -1, 64)
	case v.k == kBool:
		return strconv.FormatBool(v.b)
	}
	return ""
}

func isNum(v value) bool { return v.k == kInt || v.k == kFloat }

// Match evaluates the expression for span s of trace t and reports
// whether the result is true (not null, false, 0, NaN or ""). s is
// usually one of t.Spans; a copy of one is found again by its id, times,
// position and operation. calls and errors cost a walk of the span's
// subtree and pct one of the trace: to evaluate many spans of a trace use
// MatchTrace, which does that once. A nil Expr or span matches nothing.
func (e *Expr) Match(t *trace.Trace, s *trace.Span) bool {
	if e == nil || s == nil {
		return false
	}
	c := evalCtx{t: t, s: s, idx: -2, calls: -1, tspan: -1}
	return truthy(c.eval(e.root))
}

// MatchTrace reports whether the expression holds for the root span of t
// (the first span without a parent; every span of a trace without one),
// or, deep, for any span of t.
func (e *Expr) MatchTrace(t *trace.Trace, deep bool) bool {
	if e == nil || t == nil || len(t.Spans) == 0 {
		return false
	}
	c := evalCtx{t: t, calls: -1, tspan: -1}
	if !deep {
		for i := range t.Spans {
			if t.Spans[i].Parent < 0 {
				c.s, c.idx = &t.Spans[i], i
				return truthy(c.eval(e.root))
			}
		}
	}
	var calls, errs []int32
	if e.uses&usesSubtree != 0 {
		calls, errs = subtreeCounts(t)
	}
	for i := range t.Spans {
		c.s, c.idx = &t.Spans[i], i
		if calls != nil {
			c.calls, c.errs = int64(calls[i]), int64(errs[i])
		}
		if truthy(c.eval(e.root)) {
			return true
		}
	}
	return false
}

// subtreeCounts returns, per span, the spans and the spans in error of
// its subtree (itself included), as evalCtx.subtree defines it: the run
// of spans after a span whose parents lie within the run. One pass with a
// stack of the runs still open: a span closes the open runs that began
// after its parent (all of them if its parent is not before it).
func subtreeCounts(t *trace.Trace) (calls, errs []int32) {
	n := len(t.Spans)
	calls, errs = make([]int32, n), make([]int32, n+1)
	for i := range t.Spans { // errs: prefix counts for now
		errs[i+1] = errs[i]
		if t.Spans[i].Error {
			errs[i+1]++
		}
	}
	stack := make([]int32, 0, 64)
	closeRun := func(i, end int) { calls[i] = int32(end - i) }
	for j := range t.Spans {
		p := int(t.Spans[j].Parent)
		for len(stack) > 0 && (p < 0 || p >= j || int(stack[len(stack)-1]) > p) {
			closeRun(int(stack[len(stack)-1]), j)
			stack = stack[:len(stack)-1]
		}
		stack = append(stack, int32(j))
	}
	for _, i := range stack {
		closeRun(int(i), n)
	}
	for i := range calls {
		errs[i] = errs[i+int(calls[i])] - errs[i]
	}
	return calls, errs[:n]
}

// evalCtx is one evaluation: the span and what was worked out about it.
type evalCtx struct {
	t           *trace.Trace
	s           *trace.Span
	idx         int   // s's index in t.Spans (-1: not there; -2: not looked up)
	calls, errs int64 // s's subtree (calls -1: not counted yet)
	tspan       int64 // the trace's duration (-1: not computed yet)
}

func (c *evalCtx) eval(n *node) value {
	switch n.op {
	case opLit:
		return n.val
	case opIdent:
		if n.b == bAttr {
			return attr(c.s, n.name)
		}
		return c.builtin(n.b)
	case opOr:
		return boolean(truthy(c.eval(n.l)) || truthy(c.eval(n.r)))
	case opAnd:
		return boolean(truthy(c.eval(n.l)) && truthy(c.eval(n.r)))
	case opNot:
		return boolean(!truthy(c.eval(n.l)))
	case opIsNull:
		return boolean(c.eval(n.l).k == kNull)
	case opNotNull:
		return boolean(c.eval(n.l).k != kNull)
	case opRe:
		v := c.eval(n.l)
		return boolean(v.k != kNull && n.re.MatchString(v.str()))
	case opEq, opNe, opLt, opLe, opGt, opGe:
		return boolean(compareOp(n.op, c.eval(n.l), c.eval(n.r)))
	case opAdd, opSub, opMul, opDiv, opRem:
		return arith(n.op, c.eval(n.l), c.eval(n.r))
	case opBitAnd, opBitOr, opBitXor:
		a, b := c.eval(n.l), c.eval(n.r)
		if a.k != kInt || b.k != kInt {
			return value{}
		}
		switch n.op {
		case opBitAnd:
			return value{k: kInt, i: a.i & b.i}
		case opBitOr:
			return value{k: kInt, i: a.i | b.i}
		}
		return value{k: kInt, i: a.i ^ b.i}
	case opBitNot:
		if v := c.eval(n.l); v.k == kInt {
			return value{k: kInt, i: ^v.i}
		}
		return value{}
	case opNeg:
		v := c.eval(n.l)
		switch {
		case v.k == kInt && v.i != math.MinInt64:
			return value{k: kInt, i: -v.i}
		case v.k == kInt:
			return value{k: kFloat, f: -float64(v.i)}
		case v.k == kFloat:
			return value{k: kFloat, f: -v.f}
		}
		return value{}
	}
	return value{}
}

// strOrNull is a built-in string: empty means unknown, null.
func strOrNull(s string) value {
	if s == "" {
		return value{}
	}
	return value{k: kStr, s: s}
}

func (c *evalCtx) builtin(b builtin) value {
	s := c.s
	switch b {
	case bMethod:
		return strOrNull(methodOf(s.Operation))
	case bClass:
		return strOrNull(s.Component)
	case bSignature:
		return strOrNull(s.Operation)
	case bHost:
		return strOrNull(s.Host)
	case bTime:
		return value{k: kInt, i: s.Duration()}
	case bClock:
		return value{k: kInt, i: s.Start}
	case bTrace:
		if c.t == nil {
			return value{}
		}
		return strOrNull(c.t.Name())
	case bCalls, bErrors:
		c.subtree()
		if b == bCalls {
			return value{k: kInt, i: c.calls}
		}
		return value{k: kInt, i: c.errs}
	case bPct:
		if c.tspan < 0 {
			c.tspan = 0
			if c.t != nil {
				c.tspan = c.t.Duration()
			}
		}
		if c.tspan <= 0 {
			return value{}
		}
		return value{k: kFloat, f: 100 * float64(s.Duration()) / float64(c.tspan)}
	}
	return value{}
}

// subtree counts the spans and the spans in error below c.s (itself
// included). In tree order a subtree is the run of spans after its root
// whose parents lie within it.
func (c *evalCtx) subtree() {
	if c.calls >= 0 {
		return
	}
	if c.idx == -2 {
		c.idx = indexOf(c.t, c.s)
	}
	c.calls, c.errs = 1, 0
	if c.s.Error {
		c.errs = 1
	}
	if c.idx < 0 {
		return
	}
	spans := c.t.Spans
	for j := c.idx + 1; j < len(spans); j++ {
		if p := int(spans[j].Parent); p < c.idx || p >= j {
			break
		}
		c.calls++
		if spans[j].Error {
			c.errs++
		}
	}
}

// indexOf returns the index of s in t.Spans: s itself, or a copy of one
// (same id, times, position and operation); -1 if neither.
func indexOf(t *trace.Trace, s *trace.Span) int {
	if t == nil {
		return -1
	}
	for i := range t.Spans {
		if &t.Spans[i] == s {
			return i
		}
	}
	for i := range t.Spans {
		x := &t.Spans[i]
		if x.SpanID == s.SpanID && x.Start == s.Start && x.End == s.End &&
			x.Parent == s.Parent && x.Depth == s.Depth && x.Operation == s.Operation {
			return i
		}
	}
	return -1
}

// methodOf returns the method name of an operation: of a Kieker
// signature such as "public void org.app.Shop.buy(int)" the name before
// the parameters (buy); any other operation (an OTLP span name) whole.
func methodOf(op string) string {
	i := strings.IndexByte(op, '(')
	if i <= 0 || op[len(op)-1] != ')' {
		return op
	}
	m := op[:i]
	if j := strings.LastIndexByte(m, ' '); j >= 0 {
		m = m[j+1:]
	}
	if j := strings.LastIndexByte(m, '.'); j >= 0 {
		m = m[j+1:]
	}
	if m == "" || strings.ContainsAny(m, "/:") {
		return op
	}
	return m
}

// attr returns the value of the span's attribute key (null when absent),
// Kieker's positions (kieker.traceId, kieker.sessionId, …) included.
// service.name and host.name fall back to the span's Service and Host,
// where OTLP's resource attributes went.
func attr(s *trace.Span, key string) value {
	if a, ok := s.Attr(key); ok {
		return attrValue(a.Value, a.Type)
	}
	switch key {
	case "service.name":
		return strOrNull(s.Service)
	case "host.name":
		return strOrNull(s.Host)
	}
	return value{}
}

// attrValue types an attribute's text: ints, doubles and booleans as
// such; strings that read as decimal numbers, or true or false, as
// numbers and booleans that keep their text; anything else a string.
func attrValue(v string, t trace.ValueType) value {
	switch t {
	case trace.TypeBytes, trace.TypeJSON:
		return value{k: kStr, s: v}
	case trace.TypeInt:
		if i, err := strconv.ParseInt(v, 10, 64); err == nil {
			return value{k: kInt, i: i, s: v, text: true}
		}
	case trace.TypeDouble:
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return value{k: kFloat, f: f, s: v, text: true}
		}
	}
	switch {
	case v == "true" || v == "false":
		return value{k: kBool, b: v == "true", s: v, text: true}
	case isDecimal(v):
		if i, err := strconv.ParseInt(v, 10, 64); err == nil {
			return value{k: kInt, i: i, s: v, text: true}
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return value{k: kFloat, f: f, s: v, text: true}
		}
	}
	return value{k: kStr, s: v}
}

// isDecimal reports whether s is a decimal number: -?d+(.d+)?([eE][+-]?d+)?
func isDecimal(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	digits := func() bool {
		st := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		return i > st
	}
	if !digits() {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	return i == len(s)
}

// compareOp evaluates a comparison: false when either side is null;
// numbers numerically, strings bytewise, a string and an attribute's
// number or boolean by the attribute's text. Values that do not compare
// are unequal and unordered.
func compareOp(o op, a, b value) bool {
	if a.k == kNull || b.k == kNull {
		return false
	}
	c, ok := compare(a, b)
	switch o {
	case opEq:
		return ok && c == 0
	case opNe:
		return !ok || c != 0
	case opLt:
		return ok && c < 0
	case opLe:
		return ok && c <= 0
	case opGt:
		return ok && c > 0
	}
	return ok && c >= 0 // opGe
}

func compare(a, b value) (int, bool) {
	switch {
	case isNum(a) && isNum(b):
		return compareNum(a, b)
	case a.k == kStr && b.k == kStr,
		a.k == kStr && b.text, a.text && b.k == kStr:
		return strings.Compare(a.s, b.s), true
	case a.k == kBool && b.k == kBool:
		return compareBool(a.b, b.b), true
	}
	return 0, false
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case b:
		return -1
	}
	return 1
}

func compareNum(a, b value) (int, bool) {
	switch {
	case a.k == kInt && b.k == kInt:
		return cmp.Compare(a.i, b.i), true
	case a.k == kInt:
		if math.IsNaN(b.f) {
			return 0, false
		}
		return compareIntFloat(a.i, b.f), true
	case b.k == kInt:
		if math.IsNaN(a.f) {
			return 0, false
		}
		return -compareIntFloat(b.i, a.f), true
	}
	if math.IsNaN(a.f) || math.IsNaN(b.f) {
		return 0, false
	}
	switch {
	case a.f < b.f:
		return -1, true
	case a.f > b.f:
		return 1, true
	}
	return 0, true
}

// compareIntFloat compares exactly (no rounding of i to a float64).
func compareIntFloat(i int64, f float64) int {
	switch {
	case f >= 1<<63:
		return -1
	case f < -(1 << 63):
		return 1
	}
	t := math.Trunc(f)
	if c := cmp.Compare(i, int64(t)); c != 0 {
		return c
	}
	switch {
	case f > t:
		return -1
	case f < t:
		return 1
	}
	return 0
}

// arith evaluates + - * / %: integers stay integers (division truncates,
// as in zico) unless they overflow; division by zero, NaN and anything
// but numbers are null, except + with a string, which concatenates.
func arith(o op, a, b value) value {
	if a.k == kNull || b.k == kNull {
		return value{}
	}
	if !isNum(a) || !isNum(b) {
		if o == opAdd && (a.k == kStr || b.k == kStr) {
			x, y := a.str(), b.str()
			if len(x)+len(y) > maxConcat {
				return value{}
			}
			return value{k: kStr, s: x + y}
		}
		return value{}
	}
	if a.k == kInt && b.k == kInt {
		if r, ok := intArith(o, a.i, b.i); ok {
			return value{k: kInt, i: r}
		}
		if o == opDiv || o == opRem {
			if b.i == 0 {
				return value{}
			}
		}
	}
	x, y := toFloat(a), toFloat(b)
	var r float64
	switch o {
	case opAdd:
		r = x + y
	case opSub:
		r = x - y
	case opMul:
		r = x * y
	case opDiv:
		if y == 0 {
			return value{}
		}
		r = x / y
	case opRem:
		if y == 0 {
			return value{}
		}
		r = math.Mod(x, y)
	}
	if math.IsNaN(r) {
		return value{}
	}
	return value{k: kFloat, f: r}
}

func toFloat(v value) float64 {
	if v.k == kInt {
		return float64(v.i)
	}
	return v.f
}

// intArith computes a o b, or reports that it overflows (or divides by
// zero).
func intArith(o op, a, b int64) (int64, bool) {
	switch o {
	case opAdd:
		r := a + b
		return r, (r > a) == (b > 0)
	case opSub:
		r := a - b
		return r, (r < a) == (b > 0)
	case opMul:
		if a == 0 || b == 0 {
			return 0, true
		}
		r := a * b
		if (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) || r/b != a {
			return 0, false
		}
		return r, true
	case opDiv:
		if b == 0 || a == math.MinInt64 && b == -1 {
			return 0, false
		}
		return a / b, true
	case opRem:
		if b == 0 {
			return 0, false
		}
		if b == -1 {
			return 0, true
		}
		return a % b, true
	}
	return 0, false
}
