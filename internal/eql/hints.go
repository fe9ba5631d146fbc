package eql

import (
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Hints are conditions every trace an expression matches meets, read off
// the comparisons the expression's top-level "and"s require, so that a
// store can use its indexes and filters before it evaluates the
// expression on each trace left. They only narrow: a trace that meets the
// hints may still not match.
type Hints struct {
	// MinDuration: time > X or time >= X (ns): the trace lasts at least
	// that long, since no span outlasts its trace. 0: no hint.
	MinDuration int64
	// Errors: errors > 0 (or >= 1, != 0): the trace has a span in error.
	Errors bool
	// Attrs: KEY = "text": some span has the attribute with that text
	// (an attribute's value compares to a string by its text).
	Attrs []trace.Attr
	// Text: a string some span's operation or class contains (ignoring
	// case): the longest of class, method, signature and trace = "text",
	// and of the literal prefixes of ~= patterns; "" when none.
	Text string
	// AttrTests: KEY op literal (=, !=, <, <=, >, >=; any literal): some
	// span has the attribute KEY with a value that passes Test. Test
	// takes the value's text and holds if the comparison holds for it
	// read as any type (a string, an int, a double), so that a store may
	// apply it to the distinct values it keeps without their types.
	AttrTests []AttrTest
}

// AttrTest is one of Hints.AttrTests.
type AttrTest struct {
	Key  string
	Test func(text string) bool
}

// Hints returns the conditions every trace the expression matches meets
// (with MatchTrace, deep or not).
func (e *Expr) Hints() Hints {
	var h Hints
	if e == nil {
		return h
	}
	var walk func(n *node)
	walk = func(n *node) {
		if n.op == opAnd {
			walk(n.l)
			walk(n.r)
			return
		}
		h.add(n)
	}
	walk(e.root)
	return h
}

// add notes what comparison n requires.
func (h *Hints) add(n *node) {
	switch n.op {
	case opEq, opNe, opLt, opLe, opGt, opGe, opRe:
	default:
		return
	}
	id, lit, o := n.l, n.r, n.op
	if id.op == opLit && lit.op == opIdent && o != opRe {
		id, lit, o = lit, id, flip(o)
	}
	if id.op != opIdent {
		return
	}
	if o == opRe {
		switch id.b {
		case bClass, bMethod, bSignature, bTrace:
			if p, _ := n.re.LiteralPrefix(); len(p) >= 3 {
				h.text(p)
			}
		}
		return
	}
	if lit.op != opLit {
		return
	}
	v := lit.val
	switch id.b {
	case bTime:
		d := v.i
		if v.k == kFloat {
			d = int64(v.f) // rounded down: still a bound
		} else if v.k != kInt {
			return
		}
		if (o == opGt || o == opGe) && d > h.MinDuration {
			h.MinDuration = d
		}
	case bErrors:
		if v.k == kInt && (o == opGt && v.i >= 0 || o == opGe && v.i >= 1 || o == opNe && v.i == 0) {
			h.Errors = true
		}
	case bClass, bMethod, bSignature, bTrace:
		if v.k == kStr && o == opEq && v.s != "" {
			h.text(v.s)
		}
	case bAttr:
		switch id.name {
		case "service.name", "host.name": // fields, not attributes, where OTLP's resource went
			return
		}
		if v.k == kStr && o == opEq {
			h.Attrs = append(h.Attrs, trace.Attr{Key: id.name, Value: v.s})
		}
		// A missing attribute compares false with anything: the span
		// that makes the comparison true has the attribute.
		h.AttrTests = append(h.AttrTests, AttrTest{Key: id.name, Test: func(text string) bool {
			for _, t := range [...]trace.ValueType{trace.TypeString, trace.TypeInt, trace.TypeDouble, trace.TypeBytes} {
				if compareOp(o, attrValue(text, t), v) {
					return true
				}
			}
			return false
		}})
	}
}

func (h *Hints) text(s string) {
	if len(s) > len(h.Text) {
		h.Text = s
	}
}

// flip turns "lit op ident" into "ident op' lit".
func flip(o op) op {
	switch o {
	case opLt:
		return opGt
	case opLe:
		return opGe
	case opGt:
		return opLt
	case opGe:
		return opLe
	}
	return o
}
