package store

import (
	"strconv"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// BenchmarkHeadNote measures what a head notes of each trace besides its
// body (head.note: the block filter with the head's term index, the
// catalogue, the hosts) for OTLP-like traces of 8 spans whose url.path
// and enduser.id are mostly unique (as bench/otlp sends them): the
// filter's cost per pair never seen. A head takes 4,000 traces, then a
// new one begins. cpu-ns/span is the process's CPU time (the collector's
// too) a span.
func BenchmarkHeadNote(b *testing.B) {
	const traces, spans = 4000, 8
	method, port := []string{"GET", "POST", "PUT"}, []string{"8080", "8443"}
	ts := make([]*trace.Trace, traces)
	rows := make([]int, traces)
	for i := range ts {
		t := &trace.Trace{ID: trace.ID{Hi: 1, Lo: uint64(i + 1)}}
		for j := range spans {
			n := i*spans + j
			t.Spans = append(t.Spans, trace.Span{SpanID: trace.SpanID(j + 1), Parent: int32(j - 1), Operation: "GET /item", Service: "web", Host: "alpha",
				Start: int64(n), End: int64(n + 10), Source: trace.FromSpan, OrderIndex: -1, EOI: -1, ESS: -1,
				Attributes: []trace.Attr{{Key: "http.method", Value: method[n%3]}, {Key: "url.path", Value: "/item/" + strconv.Itoa(n)},
					{Key: "enduser.id", Value: "user-" + strconv.Itoa(n/3)}, {Key: "net.peer.port", Value: port[n%2]}}})
		}
		ts[i] = t
		rows[i] = spans
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		h := newHeadValue("x", "alpha", "x.wal", time.Unix(0, 0))
		for _, t := range ts {
			row := summarize(t, h.syms)
			h.rows.append(row)
			h.note(t, &row, 100)
		}
		n += traces * spans
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(n), "cpu-ns/span")
}
