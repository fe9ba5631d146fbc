package eql

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// gen writes random valid expressions in every spelling the language
// has: alternative operators, keyword case, both quotes, hex and L
// literals, durations, comments, odd spacing, redundant parentheses.
type gen struct {
	r     *rand.Rand
	sb    strings.Builder
	depth int
}

func (g *gen) pick(s ...string) string { return s[g.r.IntN(len(s))] }

func (g *gen) space() {
	switch g.r.IntN(12) {
	case 0:
		g.sb.WriteString("\n")
	case 1:
		g.sb.WriteString(g.pick(" -- note\n", " // note\r\n", "\t"))
	default:
		g.sb.WriteString(" ")
	}
}

// expr writes an expression whose loosest operator binds no looser than
// level (precOr … precAtom).
func (g *gen) expr(level int) {
	g.depth++
	defer func() { g.depth-- }()
	if g.depth > 6 || g.depth > 1 && g.r.IntN(4) == 0 {
		level = precAtom
	} else if level < precAtom {
		level += g.r.IntN(precAtom - level + 1)
	}
	switch level {
	case precOr, precAnd:
		g.expr(level + 1)
		n := 1 + g.r.IntN(2)
		for range n {
			g.space()
			if level == precOr {
				g.sb.WriteString(g.pick("or", "OR", "||", "Or"))
			} else {
				g.sb.WriteString(g.pick("and", "AND", "&&"))
			}
			g.space()
			g.expr(level + 1)
		}
	case precNot:
		g.sb.WriteString(g.pick("not ", "NOT ", "!", "! "))
		g.expr(precNot)
	case precCmp:
		g.expr(precCmp + 1)
		switch g.r.IntN(6) {
		case 0:
			g.sb.WriteString(g.pick(" ~= ", "~="))
			g.str(g.pick("Dao", "^GET ", `\d+$`, "(?i)select", "a|b", ""))
		case 1:
			g.sb.WriteString(g.pick(" = ", " == ", " != ", " <> "))
			g.sb.WriteString("null")
		default:
			g.sb.WriteString(" " + g.pick("=", "==", "!=", "<>", "<", "<=", ">", ">=") + " ")
			g.expr(precCmp + 1)
		}
	case precBitOr, precBitAnd, precAdd, precMul:
		ops := map[int][]string{
			precBitOr: {"|", "^"}, precBitAnd: {"&"}, precAdd: {"+", "-"}, precMul: {"*", "/", "%"},
		}[level]
		g.expr(level + 1)
		for range 1 + g.r.IntN(2) {
			g.sb.WriteString(" " + g.pick(ops...) + " ")
			g.expr(level + 1)
		}
	case precUnary:
		g.sb.WriteString(g.pick("- ", "~", "-(", "~ "))
		if strings.HasSuffix(g.sb.String(), "(") {
			g.expr(precOr)
			g.sb.WriteString(")")
		} else {
			g.expr(precUnary)
		}
	default:
		g.atom()
	}
}

func (g *gen) str(s string) {
	if g.r.IntN(2) == 0 {
		g.sb.WriteString("'" + strings.ReplaceAll(s, `'`, `\'`) + "'")
	} else {
		g.sb.WriteString(`"` + strings.ReplaceAll(s, `"`, `\"`) + `"`)
	}
}

func (g *gen) atom() {
	switch g.r.IntN(11) {
	case 0:
		g.sb.WriteString("(")
		g.expr(precOr)
		g.sb.WriteString(")")
	case 1:
		g.sb.WriteString(g.pick("method", "class", "trace", "type", "time", "calls", "errors", "host", "clock", "pct", "signature"))
	case 2:
		g.sb.WriteString(g.pick("SQL", "rows", "http.status_code", "http.method", "ratio", "zip", "cached", "missing", "mask", "Method"))
	case 3:
		g.sb.WriteString(g.pick("`method`", "`my-key`", "`a b`", "`null`", "`rows`"))
	case 4:
		g.sb.WriteString(strconv.FormatInt(g.r.Int64N(1000)-(g.r.Int64N(2)*500), 10))
	case 5:
		g.sb.WriteString(g.pick("0x0f", "0xFFL", "42L", "9223372036854775807", "-9223372036854775808", "0"))
	case 6:
		g.sb.WriteString(g.pick("1.5", "0.25", "2e3", "1.5E-3", "-0.0", "100.0", "6.25"))
	case 7:
		g.sb.WriteString(g.pick("500ms", "1.5s", "10ns", "20us", "2m", "1h", "0.5h", "-1ms", "1.25us"))
	case 8:
		g.str(g.pick("abc", "GET /api/orders", "it's", `say "hi"`, `a\nb`, `\t\\`, "zażółć", "", "007", "42"))
	case 9:
		g.sb.WriteString(g.pick("null", "true", "false", "NULL", "True"))
	default:
		g.sb.WriteString(g.pick("time", "calls", "rows", "pct"))
	}
}

// checkRoundTrip checks, for a parsed expression, that Parse(e.String())
// is the same tree, String is stable, and both match the same spans.
func checkRoundTrip(t *testing.T, in string, e *Expr) {
	t.Helper()
	s := e.String()
	if len(s) > MaxLen {
		return // normalising lengthened it beyond the limit (a=1 → a = 1)
	}
	e2, err := Parse(s)
	if err != nil {
		t.Fatalf("input %q\nString %q\ndoes not parse: %v", in, s, err)
	}
	if a, b := e.sexpr(), e2.sexpr(); a != b {
		t.Fatalf("input %q\nString %q\ntree  %s\nagain %s", in, s, a, b)
	}
	if s2 := e2.String(); s2 != s {
		t.Fatalf("input %q\nString %q\nagain  %q", in, s, s2)
	}
	for ti, tr := range sampleTraces() {
		for i := range tr.Spans {
			if a, b := e.Match(tr, &tr.Spans[i]), e2.Match(tr, &tr.Spans[i]); a != b {
				t.Fatalf("input %q\nString %q\ntrace %d span %d: Match %v, again %v", in, s, ti, i, a, b)
			}
		}
		any := false
		for i := range tr.Spans {
			any = any || e.Match(tr, &tr.Spans[i])
		}
		if deep := e.MatchTrace(tr, true); deep != any {
			t.Fatalf("input %q: trace %d: MatchTrace(deep) %v, Match over the spans %v", in, ti, deep, any)
		}
		e.MatchTrace(tr, false)
	}
}

// TestRoundTrip is the property: for random expressions e,
// Parse(e.String()) is equivalent to e.
func TestRoundTrip(t *testing.T) {
	for _, q := range sampleQueries {
		e, err := Parse(q)
		if err != nil {
			t.Fatalf("%q: %v", q, err)
		}
		checkRoundTrip(t, q, e)
	}
	n := 3000
	if testing.Short() {
		n = 300
	}
	g := &gen{r: rand.New(rand.NewPCG(1, 2))}
	parsed := 0
	for range n {
		g.sb.Reset()
		g.expr(precOr)
		in := g.sb.String()
		e, err := Parse(in)
		if err != nil {
			if len(in) > MaxLen {
				continue
			}
			t.Fatalf("generated %q: %v", in, err)
		}
		parsed++
		checkRoundTrip(t, in, e)
	}
	if parsed < n*9/10 {
		t.Errorf("only %d of %d generated expressions parsed", parsed, n)
	}
}
