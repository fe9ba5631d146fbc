package eql

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestHints: what the top-level "and"s of an expression require, and
// nothing from under an "or" or a "not".
func TestHints(t *testing.T) {
	for _, c := range []struct {
		expr string
		want Hints
	}{
		{`time > 20ms and http.status_code = "500"`, Hints{MinDuration: 20 * ms, Attrs: []trace.Attr{{Key: "http.status_code", Value: "500"}}}},
		{`500us <= time and errors > 0 and class ~= "Bookstore.*"`, Hints{MinDuration: 500_000, Errors: true, Text: "Bookstore"}},
		{`method = "findAll" and signature = "public java.util.List org.shop.dao.OrderDao.findAll()"`,
			Hints{Text: "public java.util.List org.shop.dao.OrderDao.findAll()"}},
		{`time > 1.5ms`, Hints{MinDuration: 1_500_000}},
		{`time > 20ms or errors > 0`, Hints{}},
		{`not (time > 20ms)`, Hints{}},
		{`time < 20ms and http.status_code = 500 and service.name = "orders"`, Hints{}},
		{`errors >= 1 and rows != null`, Hints{Errors: true}},
	} {
		e, err := Parse(c.expr)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(c.want, e.Hints()); d != "" {
			t.Errorf("%s (-want +got):\n%s", c.expr, d)
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
