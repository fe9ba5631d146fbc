package store

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestKiekerPositionStoredWhenThere: a span's Kieker position (trace body
// version 3) reads back exactly whatever it is: none (a span record's
// −1, −1, −1, 0, stored as nothing), a Kieker span's, one whose values
// happen to equal some of the defaults, and extremes; bodyTerms agrees
// with the decoded trace for each body; a span without a position costs
// its fields' bytes no more.
func TestKiekerPositionStoredWhenThere(t *testing.T) {
	id := trace.ID{Hi: 0xfedcba9876543210, Lo: 0xf123456789abcdef}
	positions := []struct {
		name          string
		oi, eoi, ess  int32
		kid           int64
		wantFlagUnset bool
	}{
		{"none", -1, -1, -1, 0, true},
		{"an event call's", 3, -1, -1, 4658150164341456896, false},
		{"an execution's", -1, 2, 1, 77, false},
		{"the trace id's own", 0, 0, 0, int64(id.Lo), false},
		{"defaults but the trace id", -1, -1, -1, 1, false},
		{"defaults but orderIndex", 0, -1, -1, 0, false},
		{"extremes", 1<<31 - 1, -1 << 31, 0, -1 << 63, false},
	}
	for _, p := range positions {
		for _, src := range []trace.Source{trace.FromSpan, trace.FromEvents, trace.FromExecution} {
			tr := &trace.Trace{ID: id, Spans: []trace.Span{{SpanID: 9, Parent: -1, Operation: "op", Start: 10, End: 20,
				OrderIndex: p.oi, EOI: p.eoi, ESS: p.ess, KiekerTrace: p.kid, Source: src,
				Attributes: []trace.Attr{{Key: "k", Value: "v", Type: trace.TypeString}}}}}
			e := encoder{syms: newSymbols()}
			body := bytes.Clone(e.encodeTrace(tr))
			got, err := decodeTrace(body, e.syms)
			if err != nil {
				t.Fatalf("%s, source %d: %v", p.name, src, err)
			}
			if d := cmp.Diff(tr, got, cmpopts.IgnoreUnexported(trace.Span{}), cmpopts.EquateEmpty()); d != "" {
				t.Errorf("%s, source %d (-want +got):\n%s", p.name, src, d)
			}
			checkBodyTerms(t, p.name, body, e.syms)
			// The span's flags byte follows the trace's header: version,
			// id (16), part, broken count, start (varint), no resources,
			// no scopes, one span.
			flags := body[1+16+1+1+1+1+1+1]
			if set := flags&kiekerFlag != 0; set == p.wantFlagUnset {
				t.Errorf("%s, source %d: Kieker flag set %v, want %v", p.name, src, set, !p.wantFlagUnset)
			}
		}
	}
}
