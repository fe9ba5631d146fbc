package eql

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestHints: what the top-level "and"s of an expression require, and
// nothing from under an "or" or a "not".
func TestHints(t *testing.T) {
	for _, c := range []struct {
		expr  string
		want  Hints
		tests []string // the keys of AttrTests
	}{
		{`time > 20ms and http.status_code = "500"`, Hints{MinDuration: 20 * ms, Attrs: []trace.Attr{{Key: "http.status_code", Value: "500"}}}, []string{"http.status_code"}},
		{`500us <= time and errors > 0 and class ~= "Bookstore.*"`, Hints{MinDuration: 500_000, Errors: true, Text: "Bookstore"}, nil},
		{`method = "findAll" and signature = "public java.util.List org.shop.dao.OrderDao.findAll()"`,
			Hints{Text: "public java.util.List org.shop.dao.OrderDao.findAll()"}, nil},
		{`time > 1.5ms`, Hints{MinDuration: 1_500_000}, nil},
		{`time > 20ms or errors > 0`, Hints{}, nil},
		{`not (time > 20ms)`, Hints{}, nil},
		{`time < 20ms and http.status_code = 500 and service.name = "orders"`, Hints{}, []string{"http.status_code"}},
		{`errors >= 1 and rows != null`, Hints{Errors: true}, nil},
		{`500 <= http.status_code and ratio < 0.5`, Hints{}, []string{"http.status_code", "ratio"}},
	} {
		e, err := Parse(c.expr)
		if err != nil {
			t.Fatal(err)
		}
		got := e.Hints()
		if d := cmp.Diff(c.want, got, cmpopts.IgnoreFields(Hints{}, "AttrTests")); d != "" {
			t.Errorf("%s (-want +got):\n%s", c.expr, d)
		}
		// A test for each attribute comparison at the top.
		var keys []string
		for _, a := range got.AttrTests {
			keys = append(keys, a.Key)
		}
		if want := c.tests; !cmp.Equal(keys, want, cmpopts.EquateEmpty()) {
			t.Errorf("%s: attribute tests of %q, want %q", c.expr, keys, want)
		}
	}
	// The tests hold for a value read as any type.
	e, _ := Parse(`http.status_code = 500 and user.id != "u1" and size > 1.5`)
	for i, c := range []struct {
		yes, no []string
	}{
		{[]string{"500", "500.0", "+500", "5e2"}, []string{"200", "50", "5000", "x"}},
		{[]string{"u2", "1", ""}, []string{"u1"}},
		{[]string{"2", "1.6", "1e9"}, []string{"1.5", "1", "-3"}},
	} {
		test := e.Hints().AttrTests[i]
		for _, v := range c.yes {
			if !test.Test(v) {
				t.Errorf("%s: %q fails", test.Key, v)
			}
		}
		for _, v := range c.no {
			if test.Test(v) {
				t.Errorf("%s: %q passes", test.Key, v)
			}
		}
	}
}

// TestHintsHold: every trace an expression matches, root only or deep,
// meets the expression's hints.
func TestHintsHold(t *testing.T) {
	traces := []*trace.Trace{kiekerTrace(), otlpTrace()}
	for _, expr := range []string{
		`time > 100ms`, `time >= 800ms and errors > 0`, `class = "org.shop.dao.OrderDao"`, `method = "findAll"`,
		`SQL = "select * from orders"`, `rows = "42"`, `http.status_code = "503" and time > 999ms`,
		`signature ~= "OrderDao\\.connect"`, `trace = "GET /api/orders" and ratio = "0.25"`, `errors != 0 and class ~= "org.shop"`,
		`rows = 42`, `ratio < 0.3`, `rows > 41`, `http.status_code >= 500`, `42 = rows`, `ratio != 1`,
	} {
		e, err := Parse(expr)
		if err != nil {
			t.Fatal(err)
		}
		h := e.Hints()
		matched := 0
		for _, deep := range []bool{false, true} {
			for _, tr := range traces {
				if !e.MatchTrace(tr, deep) {
					continue
				}
				matched++
				if tr.Duration() < h.MinDuration || h.Errors && tr.Errors() == 0 {
					t.Errorf("%s (deep %v): trace %s lasts %d, %d errors; hints %+v", expr, deep, tr.ID, tr.Duration(), tr.Errors(), h)
				}
				for _, a := range h.Attrs {
					if !anySpan(tr, func(s *trace.Span) bool { v, ok := s.Attr(a.Key); return ok && v.Value == a.Value }) {
						t.Errorf("%s (deep %v): no span has %s=%s", expr, deep, a.Key, a.Value)
					}
				}
				for _, a := range h.AttrTests {
					if !anySpan(tr, func(s *trace.Span) bool { v, ok := s.Attr(a.Key); return ok && a.Test(v.Value) }) {
						t.Errorf("%s (deep %v): no span's %s passes the test", expr, deep, a.Key)
					}
				}
				if h.Text != "" && !anySpan(tr, func(s *trace.Span) bool {
					return strings.Contains(strings.ToLower(s.Operation+"\x00"+s.Component), strings.ToLower(h.Text))
				}) {
					t.Errorf("%s (deep %v): no span holds %q", expr, deep, h.Text)
				}
			}
		}
		if matched == 0 {
			t.Errorf("%s matches nothing: the test shows nothing", expr)
		}
	}
}

func anySpan(t *trace.Trace, f func(*trace.Span) bool) bool {
	for i := range t.Spans {
		if f(&t.Spans[i]) {
			return true
		}
	}
	return false
}
