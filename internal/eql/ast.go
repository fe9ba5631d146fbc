package eql

import (
	"math"
	"regexp"
	"strconv"
	"strings"
)

// op is what a node does.
type op uint8

const (
	opLit   op = iota // val
	opIdent           // a built-in (b) or an attribute (name)
	opOr
	opAnd
	opNot
	opEq
	opNe
	opRe // l ~= r, r a string literal compiled into re
	opLt
	opLe
	opGt
	opGe
	opIsNull  // l = null
	opNotNull // l != null
	opBitOr
	opBitXor
	opBitAnd
	opAdd
	opSub
	opMul
	opDiv
	opRem
	opNeg
	opBitNot
)

// Precedence levels, loosest first. zico's (EqlOp): or, and, not, the
// comparisons, | and ^, &, + and -, * / %, the prefix ~ (and our -).
const (
	precOr = iota + 1
	precAnd
	precNot
	precCmp
	precBitOr
	precBitAnd
	precAdd
	precMul
	precUnary
	precAtom
)

var opInfo = [...]struct {
	sym  string // the normalised spelling
	prec int
}{
	opLit:     {"", precAtom},
	opIdent:   {"", precAtom},
	opOr:      {"or", precOr},
	opAnd:     {"and", precAnd},
	opNot:     {"not", precNot},
	opEq:      {"=", precCmp},
	opNe:      {"!=", precCmp},
	opRe:      {"~=", precCmp},
	opLt:      {"<", precCmp},
	opLe:      {"<=", precCmp},
	opGt:      {">", precCmp},
	opGe:      {">=", precCmp},
	opIsNull:  {"=", precCmp},
	opNotNull: {"!=", precCmp},
	opBitOr:   {"|", precBitOr},
	opBitXor:  {"^", precBitOr},
	opBitAnd:  {"&", precBitAnd},
	opAdd:     {"+", precAdd},
	opSub:     {"-", precAdd},
	opMul:     {"*", precMul},
	opDiv:     {"/", precMul},
	opRem:     {"%", precMul},
	opNeg:     {"-", precUnary},
	opBitNot:  {"~", precUnary},
}

// builtin names a property of the span or its trace.
type builtin uint8

const (
	bAttr builtin = iota // not a built-in: an attribute
	bMethod
	bClass
	bTrace
	bTime
	bCalls
	bErrors
	bHost
	bClock
	bPct
	bSignature
)

var builtinNames = [...]string{
	bMethod: "method", bClass: "class", bTrace: "trace", bTime: "time",
	bCalls: "calls", bErrors: "errors", bHost: "host", bClock: "clock",
	bPct: "pct", bSignature: "signature",
}

// builtins maps the identifiers to built-ins; "type" is zico's name of
// the trace type (EqlTraceRecordMatcher), an alias of trace.
var builtins = map[string]builtin{
	"method": bMethod, "class": bClass, "trace": bTrace, "type": bTrace,
	"time": bTime, "calls": bCalls, "errors": bErrors, "host": bHost,
	"clock": bClock, "pct": bPct, "signature": bSignature,
}

// node is a node of the expression tree.
type node struct {
	op   op
	pos  int // byte offset of the operator or operand in the source
	l, r *node
	val  value          // opLit
	dur  bool           // opLit: written as a duration
	b    builtin        // opIdent
	name string         // opIdent: the attribute's key
	re   *regexp.Regexp // opRe
}

func (n *node) prec() int {
	if n.op == opLit && n.isNegative() {
		return precUnary // written with a leading "-"
	}
	return opInfo[n.op].prec
}

func (n *node) isNumber() bool {
	return n.op == opLit && (n.val.k == kInt || n.val.k == kFloat)
}

func (n *node) isNegative() bool {
	return n.op == opLit && (n.val.k == kInt && n.val.i < 0 || n.val.k == kFloat && math.Signbit(n.val.f))
}

func (n *node) isNullLit() bool { return n.op == opLit && n.val.k == kNull }

// render writes the normalised form: canonical operator spellings,
// lower-case keywords, single-quoted strings, durations in their largest
// exact unit, and parentheses only where precedence needs them.
func (n *node) render(sb *strings.Builder) {
	switch n.op {
	case opLit:
		renderLit(sb, n)
	case opIdent:
		renderIdent(sb, n)
	case opNot:
		sb.WriteString("not ")
		renderOperand(sb, n.l, n.l.prec() < precNot)
	case opNeg:
		sb.WriteByte('-')
		switch {
		case n.l.op == opNeg || n.l.isNegative():
			sb.WriteByte(' ') // "--" would start a comment
			n.l.render(sb)
		default:
			// -(5): -5 would read as a literal.
			renderOperand(sb, n.l, n.l.prec() < precUnary || n.l.isNumber())
		}
	case opBitNot:
		sb.WriteByte('~')
		renderOperand(sb, n.l, n.l.prec() < precUnary)
	case opIsNull, opNotNull:
		renderOperand(sb, n.l, n.l.prec() < precCmp)
		sb.WriteByte(' ')
		sb.WriteString(opInfo[n.op].sym)
		sb.WriteString(" null")
	default: // binary, left-associative
		p := opInfo[n.op].prec
		renderOperand(sb, n.l, n.l.prec() < p)
		sb.WriteByte(' ')
		sb.WriteString(opInfo[n.op].sym)
		sb.WriteByte(' ')
		renderOperand(sb, n.r, n.r.prec() <= p)
	}
}

func renderOperand(sb *strings.Builder, n *node, paren bool) {
	if paren {
		sb.WriteByte('(')
	}
	n.render(sb)
	if paren {
		sb.WriteByte(')')
	}
}

func renderIdent(sb *strings.Builder, n *node) {
	if n.b != bAttr {
		sb.WriteString(builtinNames[n.b])
		return
	}
	if _, clash := builtins[n.name]; !clash && isName(n.name) {
		sb.WriteString(n.name)
		return
	}
	sb.WriteByte('`')
	sb.WriteString(n.name)
	sb.WriteByte('`')
}

// durUnits are the duration suffixes, largest first.
var durUnits = []struct {
	sfx string
	ns  int64
}{{"h", 3600e9}, {"m", 60e9}, {"s", 1e9}, {"ms", 1e6}, {"us", 1e3}, {"ns", 1}}

func renderLit(sb *strings.Builder, n *node) {
	v := n.val
	switch v.k {
	case kNull:
		sb.WriteString("null")
	case kBool:
		sb.WriteString(strconv.FormatBool(v.b))
	case kInt:
		if !n.dur {
			sb.WriteString(strconv.FormatInt(v.i, 10))
			return
		}
		if v.i == 0 {
			sb.WriteString("0s")
			return
		}
		mag := v.i
		if mag < 0 {
			sb.WriteByte('-')
			mag = -mag // durations are within ±MaxInt64
		}
		for _, u := range durUnits {
			if mag%u.ns == 0 {
				sb.WriteString(strconv.FormatInt(mag/u.ns, 10))
				sb.WriteString(u.sfx)
				return
			}
		}
	case kFloat:
		s := strconv.FormatFloat(v.f, 'g', -1, 64)
		sb.WriteString(s)
		if !strings.ContainsAny(s, ".e") {
			sb.WriteString(".0") // stays a decimal number
		}
	case kStr:
		quote(sb, v.s)
	}
}

// quote writes s in single quotes with zico's escapes.
func quote(sb *strings.Builder, s string) {
	sb.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'', '\\':
			sb.WriteByte('\\')
			sb.WriteByte(c)
		case '\n':
			sb.WriteString(`\n`)
		case '\r':
			sb.WriteString(`\r`)
		case '\t':
			sb.WriteString(`\t`)
		case '\b':
			sb.WriteString(`\b`)
		case '\f':
			sb.WriteString(`\f`)
		default:
			sb.WriteByte(c)
		}
	}
	sb.WriteByte('\'')
}

// sexpr writes the tree fully parenthesised, for tests: (op l r).
func (n *node) sexpr(sb *strings.Builder) {
	switch n.op {
	case opLit, opIdent:
		n.render(sb)
	case opNot, opNeg, opBitNot:
		sb.WriteString("(" + opInfo[n.op].sym + " ")
		n.l.sexpr(sb)
		sb.WriteByte(')')
	case opIsNull:
		sb.WriteString("(isnull ")
		n.l.sexpr(sb)
		sb.WriteByte(')')
	case opNotNull:
		sb.WriteString("(notnull ")
		n.l.sexpr(sb)
		sb.WriteByte(')')
	default:
		sb.WriteString("(" + opInfo[n.op].sym + " ")
		n.l.sexpr(sb)
		sb.WriteByte(' ')
		n.r.sexpr(sb)
		sb.WriteByte(')')
	}
}
