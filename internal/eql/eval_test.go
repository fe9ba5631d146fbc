package eql

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestMatch evaluates expressions for spans of the hand-built traces.
func TestMatch(t *testing.T) {
	k, o := kiekerTrace(), otlpTrace()
	tests := []struct {
		expr string
		tr   *trace.Trace
		span int
		want bool
	}{
		// the documentation's examples
		{`time > 500ms and class ~= "Dao"`, k, 1, true},
		{`time > 500ms and class ~= "Dao"`, k, 0, false},
		{`time > 500ms and class ~= "Dao"`, k, 2, false},
		{`errors > 0 or http.status_code >= 500`, o, 0, true},
		{`errors > 0 or http.status_code >= 500`, o, 1, true},
		{`errors > 0 or http.status_code >= 500`, k, 3, false},
		{`trace = 'GET /api/orders' and pct > 50 --deep`, o, 0, true},
		{`trace = 'GET /api/orders' and pct > 50 --deep`, o, 1, false},

		// method: the name in a Kieker signature, an OTLP span's name
		{`method = 'doGet'`, k, 0, true},
		{`method = 'findAll'`, k, 1, true},
		{`method = 'connect'`, k, 2, true},
		{`method = 'GET /api/orders'`, o, 0, true},
		// class, signature, trace, host
		{`class = 'org.shop.dao.OrderDao'`, k, 2, true},
		{`class = 'io.opentelemetry.jdbc'`, o, 1, true},
		{`signature = 'public java.util.List org.shop.dao.OrderDao.findAll()'`, k, 1, true},
		{`signature = 'SELECT orders'`, o, 1, true},
		{`trace ~= '^public void org.shop.web.OrderServlet.doGet\('`, k, 3, true},
		{`type = 'GET /api/orders'`, o, 1, true},
		{`host = 'web1'`, k, 2, true},
		{`host = null`, o, 0, true},
		{`host = 'db-host'`, o, 1, true},
		// time, clock, calls, errors, pct
		{`time = 800ms`, k, 0, true},
		{`time = 600000000`, k, 1, true},
		{`time >= 0.6s and time < 601ms`, k, 1, true},
		{`time / 1ms = 50`, k, 3, true},
		{`clock = 1709294400000000000`, k, 0, true},
		{`clock = 1709294400000000000 + 60ms`, k, 2, true},
		{`calls = 4 and errors = 1`, k, 0, true},
		{`calls = 2 and errors = 1`, k, 1, true},
		{`calls = 1 and errors = 1`, k, 2, true},
		{`calls = 1 and errors = 0`, k, 3, true},
		{`calls = 2 and errors = 1`, o, 0, true},
		{`pct = 100`, k, 0, true},
		{`pct = 75`, k, 1, true},
		{`pct = 6.25`, k, 3, true},
		{`pct = 20`, o, 1, true},

		// attributes of every type
		{`SQL = 'select * from orders'`, k, 1, true},
		{`SQL ~= 'orders$'`, k, 1, true},
		{`SQL = null`, k, 0, true},
		{`SQL != null`, k, 1, true},
		{`SQL <> null`, k, 0, false},
		{`rows = 42 and rows > 41.5 and rows = '42'`, k, 1, true},
		{`http.method = 'GET'`, o, 0, true},
		{`http.method = "get"`, o, 0, false}, // case-sensitive
		{`http.method ~= '(?i)get'`, o, 0, true},
		{`http.status_code = 503 and http.status_code = '503'`, o, 0, true},
		{`http.status_code >= 500 and http.status_code < 600`, o, 0, true},
		{`http.status_code + 1 = 504`, o, 0, true},
		{`http.flavor = 1.1 and http.flavor = '1.1' and http.flavor > 1`, o, 0, true},
		{`cached = false and not cached and cached = 'false'`, o, 0, true},
		{`sampled = true and sampled and sampled = 'true'`, o, 0, true},
		{`ratio = 0.25 and ratio * 4 = 1 and ratio = '0.25'`, o, 0, true},
		{`payload = 'aGVsbG8='`, o, 0, true},
		{`tags = '["a","b"]' and tags ~= '"b"'`, o, 0, true},
		{`zip = 7 and zip = '007' and zip != '7'`, o, 0, true},
		{`big > 9223372036854775807 and big = 1e20`, o, 0, true},
		{`neg = -5 and neg < 0 and -neg = 5`, o, 0, true},
		{`empty = '' and empty != null and not empty`, o, 0, true},
		{`nan = nan`, o, 0, false},
		{`nan != 1`, o, 0, true},
		{`nan`, o, 0, false},
		{`notnum = '12abc'`, o, 0, true}, // an int that is not one: its text
		{`mask & 4 = 4 and mask | 1 = 13 and mask ^ 15 = 3 and ~mask = -13`, o, 0, true},
		{"`method` = 'POST' and method = 'GET /api/orders'", o, 0, true},
		{"`my-key` = 'x'", o, 0, true},
		{`db.system = 'postgresql'`, o, 1, true},
		{`service.name = 'orders'`, o, 1, true},
		{`host.name = 'db-host'`, o, 1, true},
		{`missing = null`, o, 0, true},

		// null semantics: comparisons with null are false except = null / != null
		{`missing = 'x'`, o, 0, false},
		{`missing != 'x'`, o, 0, false},
		{`not missing = 'x'`, o, 0, true},
		{`missing < 1 or missing >= 1`, o, 0, false},
		{`missing = missing`, o, 0, false},
		{`missing + 1 = null`, o, 0, true},
		{`missing ~= ''`, o, 0, false},
		{`null = null`, o, 0, true},
		{`null != null`, o, 0, false},
		{`missing`, o, 0, false},
		{`not missing`, o, 0, true},

		// types: mixed comparisons do not hold (but != does)
		{`'5' = 5`, k, 0, false},
		{`'5' != 5`, k, 0, true},
		{`'a' < 1 or 'a' >= 1`, k, 0, false},
		{`true = 1`, k, 0, false},
		{`false < true`, k, 0, true},
		{`'abc' < 'abd' and 'B' < 'a'`, k, 0, true},
		{`1 = 1.0 and 2 > 1.5 and 1.5 < 2`, k, 0, true},
		{`9007199254740993 > 9007199254740992.0`, k, 0, true}, // exact, no rounding to float
		{`9223372036854775807 < 9223372036854775808.0`, k, 0, true},
		{`-9223372036854775808 = -9223372036854775808.0`, k, 0, true},

		// arithmetic
		{`2 + 2 = 4 and 25 / 5 = 5 and 3 * 3 + 4 * 4 = 25 and 25 % 3 = 1`, k, 0, true},
		{`7 / 2 = 3 and -7 / 2 = -3 and 7.0 / 2 = 3.5 and 7 % -3 = 1`, k, 0, true},
		{`1m + 5s = 65000000000`, k, 0, true},
		{`1 / 0 = null and 1 % 0 = null and 1.0 / 0 = null and 1.5 % 0 = null`, k, 0, true},
		{`9223372036854775807 + 1 > 9223372036854775807`, k, 0, true},     // overflow: float
		{`-9223372036854775808 - 1 = -9223372036854775808.0`, k, 0, true}, // a float: rounded
		{`9223372036854775807 * 2 > 0 and -9223372036854775808 * -1 > 0`, k, 0, true},
		{`-9223372036854775808 / -1 > 0 and -9223372036854775808 % -1 = 0`, k, 0, true},
		{`-(-9223372036854775808) > 0`, k, 0, true},
		{`1e308 * 10 > 1e308 and 1e308 * 10 - 1e308 * 10 = null`, k, 0, true},
		{`'ab' + 'cd' = 'abcd' and 'n' + 1 = 'n1' and class + '#' + method = 'org.shop.Cache#put'`, k, 3, true},
		{`'a' - 'b' = null and true + 1 = null and 'a' * 2 = null`, k, 0, true},
		{`1 | 2 = 3 and 1 & 3 = 1 and 1 ^ 3 = 2 and ~ -1 = 0`, k, 0, true},
		{`1.5 | 1 = null and ~1.5 = null and ~'a' = null and -'a' = null`, k, 0, true},
		{`-1.5 < 0 and - -1 = 1 and -(1) = -1`, k, 0, true},

		// logic, truthiness
		{`2 = 2 and 4 = 4`, k, 0, true},
		{`2 = 2 && 4 = 4`, k, 0, true},
		{`4 = 3 or 2 = 2`, k, 0, true},
		{`4 = 3 || 2 = 2`, k, 0, true},
		{`4 = 4 and 2 = 3`, k, 0, false},
		{`not true`, k, 0, false},
		{`! 1 = 2`, k, 0, true},
		{`1 and 'x' and 0.5 and true`, k, 0, true},
		{`0 or '' or 0.0 or false or null`, k, 0, false},
		{`errors`, k, 1, true},
		{`errors`, k, 3, false},
		{`(1 = 1) = true`, k, 0, true},

		// regular expressions: anywhere unless anchored, as in zico
		{`'abcde' ~= 'a.*e'`, k, 0, true},
		{`'abcde' ~= 'a.*f'`, k, 0, false},
		{`'abcde' ~= 'bcd'`, k, 0, true},
		{`'abcde' ~= '^bcd$'`, k, 0, false},
		{`'abcde' ~= '^abc'`, k, 0, true},
		{`'a1.5' ~= '\d\.\d$' and 'a1.5' ~= "\\d\\.\\d$"`, k, 0, true},
		{`time ~= '^800000000$'`, k, 0, true},
		{`pct ~= '^6.25$'`, k, 3, true},
		{`(1 = 1) ~= 'true'`, k, 0, true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%d", tc.expr, tc.span), func(t *testing.T) {
			e, err := Parse(tc.expr)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := e.Match(tc.tr, &tc.tr.Spans[tc.span]); got != tc.want {
				t.Errorf("Match = %v, want %v", got, tc.want)
			}
			// A copy of the span (as the store passes the root) is found
			// again: the same result.
			cp := tc.tr.Spans[tc.span]
			if got := e.Match(tc.tr, &cp); got != tc.want {
				t.Errorf("Match(copy) = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestMatchTrace checks the root and the deep search, and that they agree
// with Match.
func TestMatchTrace(t *testing.T) {
	k, o := kiekerTrace(), otlpTrace()
	tests := []struct {
		expr       string
		tr         *trace.Trace
		root, deep bool
	}{
		{`time > 500ms and class ~= "Dao"`, k, false, true},
		{`calls = 4`, k, true, true},
		{`calls = 2 and errors = 1`, k, false, true},
		{`errors > 0 and calls = 1`, k, false, true},
		{`pct < 10`, k, false, true},
		{`trace = 'GET /api/orders' and pct > 50`, o, true, true},
		{`db.system = 'postgresql'`, o, false, true},
		{`method = 'nothing'`, o, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.expr, func(t *testing.T) {
			e, err := Parse(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			if got := e.MatchTrace(tc.tr, false); got != tc.root {
				t.Errorf("MatchTrace(root) = %v, want %v", got, tc.root)
			}
			if got := e.MatchTrace(tc.tr, true); got != tc.deep {
				t.Errorf("MatchTrace(deep) = %v, want %v", got, tc.deep)
			}
			any := false
			for i := range tc.tr.Spans {
				any = any || e.Match(tc.tr, &tc.tr.Spans[i])
			}
			if any != tc.deep {
				t.Errorf("Match over every span = %v, MatchTrace(deep) = %v", any, tc.deep)
			}
		})
	}
	e, _ := Parse("calls > 0")
	var nilExpr *Expr
	for _, c := range []struct {
		name string
		got  bool
	}{
		{"nil trace", e.MatchTrace(nil, true)},
		{"no spans", e.MatchTrace(&trace.Trace{}, false)},
		{"nil Expr", nilExpr.MatchTrace(k, true)},
		{"nil Expr Match", nilExpr.Match(k, &k.Spans[0])},
		{"nil span", e.Match(k, nil)},
	} {
		if c.got {
			t.Errorf("%s: matched", c.name)
		}
	}
	// A trace without a root (every parent missing but marked): every
	// span is looked at, as the store does.
	noRoot := otlpTrace()
	noRoot.Spans[0].Parent = 5
	e, _ = Parse("db.system = 'postgresql'")
	if !e.MatchTrace(noRoot, false) {
		t.Error("trace without root: no span looked at")
	}
}

// TestMatchOutsideTrace evaluates spans without their trace, or not in
// it: trace-level values are null, the subtree is the span alone.
func TestMatchOutsideTrace(t *testing.T) {
	k := kiekerTrace()
	stray := k.Spans[1]
	stray.SpanID = 99
	for _, tc := range []struct {
		expr string
		tr   *trace.Trace
		want bool
	}{
		{"trace = null and pct = null and calls = 1 and errors = 0", nil, true},
		{"calls = 1 and errors = 0 and pct = 75", k, true},
		{"method = 'findAll' and time = 600ms", nil, true},
	} {
		e, err := Parse(tc.expr)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.Match(tc.tr, &stray); got != tc.want {
			t.Errorf("%s: Match = %v, want %v", tc.expr, got, tc.want)
		}
	}
	// A zero-length trace has no pct.
	z := &trace.Trace{Spans: []trace.Span{{Parent: -1, Start: 5, End: 5}}}
	e, _ := Parse("pct = null")
	if !e.MatchTrace(z, false) {
		t.Error("pct of a zero-length trace is not null")
	}
}

func TestMethodOf(t *testing.T) {
	for in, want := range map[string]string{
		"public void org.a.B.m(int)":                  "m",
		"org.a.B.m()":                                 "m",
		"public static java.lang.String a.B.<init>()": "<init>",
		"m()":                       "m",
		"GET /api/orders":           "GET /api/orders",
		"GET /api/orders(v2)":       "GET /api/orders(v2)",
		"(anonymous)":               "(anonymous)",
		"SELECT orders":             "SELECT orders",
		"":                          "",
		"http://x/y(1)":             "http://x/y(1)",
		"public void org.a.B.m(int": "public void org.a.B.m(int",
	} {
		if got := methodOf(in); got != want {
			t.Errorf("methodOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAttrValue(t *testing.T) {
	tests := []struct {
		v    string
		t    trace.ValueType
		want value
	}{
		{"42", trace.TypeInt, value{k: kInt, i: 42, s: "42", text: true}},
		{"x", trace.TypeInt, value{k: kStr, s: "x"}},
		{"0.5", trace.TypeDouble, value{k: kFloat, f: 0.5, s: "0.5", text: true}},
		{"+Inf", trace.TypeDouble, value{k: kFloat, f: math.Inf(1), s: "+Inf", text: true}},
		{"true", trace.TypeBool, value{k: kBool, b: true, s: "true", text: true}},
		{"TRUE", trace.TypeBool, value{k: kStr, s: "TRUE"}},
		{"42", trace.TypeString, value{k: kInt, i: 42, s: "42", text: true}},
		{"-1.5e3", trace.TypeString, value{k: kFloat, f: -1500, s: "-1.5e3", text: true}},
		{"+1", trace.TypeString, value{k: kStr, s: "+1"}},
		{" 1", trace.TypeString, value{k: kStr, s: " 1"}},
		{"1.", trace.TypeString, value{k: kStr, s: "1."}},
		{"1e", trace.TypeString, value{k: kStr, s: "1e"}},
		{"0x10", trace.TypeString, value{k: kStr, s: "0x10"}},
		{"Inf", trace.TypeString, value{k: kStr, s: "Inf"}},
		{"1e999", trace.TypeString, value{k: kStr, s: "1e999"}},
		{"false", 0, value{k: kBool, s: "false", text: true}},
		{"42", trace.TypeBytes, value{k: kStr, s: "42"}},
		{"[1]", trace.TypeJSON, value{k: kStr, s: "[1]"}},
	}
	for _, tc := range tests {
		if got := attrValue(tc.v, tc.t); got != tc.want {
			t.Errorf("attrValue(%q, %v) = %+v, want %+v", tc.v, tc.t, got, tc.want)
		}
	}
}

// TestConcatBound: + of strings stops at maxConcat (null beyond).
func TestConcatBound(t *testing.T) {
	big := strings.Repeat("x", maxConcat/2+1)
	tr := &trace.Trace{Spans: []trace.Span{{Parent: -1, Attributes: []trace.Attr{{Key: "b", Value: big}}}}}
	e, err := Parse("b + b = null and b + 'y' != null")
	if err != nil {
		t.Fatal(err)
	}
	if !e.MatchTrace(tr, false) {
		t.Error("concatenation beyond the bound is not null")
	}
}

// TestSubtreeCounts compares the one-pass counts with the per-span walk
// on every sample trace (a broken one too), and with the descendants by
// ancestry on random well-formed trees in tree order.
func TestSubtreeCounts(t *testing.T) {
	check := func(name string, tr *trace.Trace, ancestry bool) {
		calls, errs := subtreeCounts(tr)
		for i := range tr.Spans {
			c := evalCtx{t: tr, s: &tr.Spans[i], idx: -2, calls: -1, tspan: -1}
			c.subtree()
			if c.calls != int64(calls[i]) || c.errs != int64(errs[i]) {
				t.Fatalf("%s span %d: walk %d/%d, pass %d/%d", name, i, c.calls, c.errs, calls[i], errs[i])
			}
			if !ancestry {
				continue
			}
			var n, e int32
			for j := range tr.Spans {
				for a := j; a >= 0; a = int(tr.Spans[a].Parent) {
					if a == i {
						n++
						if tr.Spans[j].Error {
							e++
						}
						break
					}
				}
			}
			if n != calls[i] || e != errs[i] {
				t.Fatalf("%s span %d: descendants %d/%d, pass %d/%d", name, i, n, e, calls[i], errs[i])
			}
		}
	}
	for ti, tr := range sampleTraces() {
		check(fmt.Sprintf("sample %d", ti), tr, ti < 2)
	}
	r := rand.New(rand.NewPCG(7, 8))
	for k := range 200 {
		// A random forest built depth-first: tree order.
		var spans []trace.Span
		var grow func(parent int32, depth int32)
		grow = func(parent, depth int32) {
			spans = append(spans, trace.Span{Parent: parent, Depth: depth, Error: r.IntN(3) == 0})
			me := int32(len(spans) - 1)
			for depth < 6 && r.IntN(3) != 0 && len(spans) < 200 {
				grow(me, depth+1)
			}
		}
		for range 1 + r.IntN(3) {
			grow(-1, 0)
		}
		check(fmt.Sprintf("random %d", k), &trace.Trace{Spans: spans}, true)
	}
}

// TestConcurrentMatch: one Expr, many goroutines (run with -race).
func TestConcurrentMatch(t *testing.T) {
	e, err := Parse(`(class ~= '(?i)dao' or http.method ~= '^G') and calls >= 1 and pct > 0`)
	if err != nil {
		t.Fatal(err)
	}
	traces := sampleTraces()
	done := make(chan bool)
	for range 4 {
		go func() {
			n := 0
			for range 200 {
				for _, tr := range traces {
					if e.MatchTrace(tr, true) {
						n++
					}
					_ = e.String()
				}
			}
			done <- n == 200*3
		}()
	}
	for range 4 {
		if !<-done {
			t.Error("a goroutine saw other results")
		}
	}
}

func BenchmarkMatch(b *testing.B) {
	k := kiekerTrace()
	for _, q := range []string{
		`time > 500ms and class ~= "Dao"`,
		`errors > 0 or rows >= 40`,
		`method = 'findAll' and SQL ~= '(?i)from orders'`,
	} {
		e, err := Parse(q)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(q, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				e.Match(k, &k.Spans[1])
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	q := `trace = 'GET /api/orders' and (pct > 50 or time > 1.5s) and class ~= "Dao" -- slow`
	b.SetBytes(int64(len(q)))
	for b.Loop() {
		if _, err := Parse(q); err != nil {
			b.Fatal(err)
		}
	}
}
