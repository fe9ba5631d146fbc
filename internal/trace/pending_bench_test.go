package trace

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/record"
)

// benchSpans returns batches of span records shaped like bench/otlp's
// load: traces of 8 spans alternating HTTP server spans (a path and a
// user id that never repeat) and database client spans, the resources of
// 8 services, one scope, an event on one span in 8, an error on one in
// 50. Strings that repeat are shared, as the OTLP decoder interns them;
// the others are allocated per span.
func benchSpans(batches, perBatch int) []*record.Batch {
	var res [8]*Resource
	for i := range res {
		svc := "service-" + strconv.Itoa(i)
		res[i] = &Resource{Attributes: []Attr{
			{Key: "service.name", Value: svc, Type: TypeString}, {Key: "service.version", Value: "1.4.2", Type: TypeString},
			{Key: "host.name", Value: "node-" + strconv.Itoa(i), Type: TypeString}, {Key: "process.pid", Value: strconv.Itoa(4000 + i), Type: TypeInt},
			{Key: "telemetry.sdk.name", Value: "opentelemetry", Type: TypeString}, {Key: "telemetry.sdk.language", Value: "go", Type: TypeString},
			{Key: "telemetry.sdk.version", Value: "1.38.0", Type: TypeString},
		}}
	}
	scope := &Scope{Name: "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp", Version: "0.63.0"}
	var out []*record.Batch
	n := 0
	for range batches {
		b := &record.Batch{}
		for j := range perBatch {
			id := ID{Hi: uint64(n/8 + 1), Lo: uint64(n/8+1) * 7}
			svc := n / 8 % 8
			s := Span{SpanID: SpanID(n + 1), Start: int64(1e15 + n*1000), End: int64(1e15 + n*1000 + 500_000),
				Service: "service-" + strconv.Itoa(svc), Host: "node-" + strconv.Itoa(svc), Resource: res[svc], Scope: scope}
			if n%8 != 0 {
				s.ParentID = SpanID(n)
			}
			if j%2 == 0 {
				s.Operation, s.Kind = "GET /api/orders/{id}", KindServer
				s.Attributes = []Attr{{Key: "http.request.method", Value: "GET", Type: TypeString},
					{Key: "http.route", Value: "/api/orders/{id}", Type: TypeString},
					{Key: "url.path", Value: "/api/orders/" + strconv.Itoa(n*7919), Type: TypeString},
					{Key: "http.response.status_code", Value: "200", Type: TypeInt},
					{Key: "server.address", Value: "shop.example.com", Type: TypeString},
					{Key: "server.port", Value: "8443", Type: TypeInt},
					{Key: "user_agent.original", Value: "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko)", Type: TypeString},
					{Key: "enduser.id", Value: "user-" + strconv.Itoa(n*31), Type: TypeString}}
			} else {
				s.Operation, s.Kind = "SELECT orders", KindClient
				s.Attributes = []Attr{{Key: "db.system", Value: "postgresql", Type: TypeString},
					{Key: "db.statement", Value: "SELECT * FROM orders WHERE id = $1", Type: TypeString},
					{Key: "db.name", Value: "shop", Type: TypeString}, {Key: "thread.id", Value: "17", Type: TypeInt}}
			}
			if n%8 == 3 {
				s.Events = []Event{{Name: "cache.miss", Time: s.Start + 100, Attributes: []Attr{{Key: "cache.key", Value: "k" + strconv.Itoa(n), Type: TypeString}}}}
			}
			if n%50 == 7 {
				s.Status, s.StatusMessage = StatusError, "boom"
			}
			AppendSpan(b, id, &s)
			n++
		}
		out = append(out, b)
	}
	return out
}

// restamp gives the traces of the batches new ids (round r), so that
// sending them again makes new traces.
func restamp(bs []*record.Batch, r int) {
	for _, b := range bs {
		for i := range b.Records {
			v := b.Records[i].Values
			v[SpanTraceIDHigh] = record.IntValue(v[SpanTraceIDLow].Int()/7 + int64(r)<<40)
		}
	}
}

// BenchmarkAssembleSpans: span records through the assembler into traces
// (a span per op), with a window that closes each trace two rounds of
// batches after its spans arrived, as a running bridge's does.
func BenchmarkAssembleSpans(b *testing.B) {
	for _, c := range []struct {
		name         string
		lean, packed bool
	}{{"lean=false", false, false}, {"lean=true", true, false}, {"packed", false, true}} {
		b.Run(c.name, func(b *testing.B) {
			bs := benchSpans(64, 256)
			now := time.Unix(0, 0)
			var traces, spans int
			a := NewAssembler(Options{Window: time.Second, Lean: c.lean, Packed: c.packed, Now: func() time.Time { return now },
				Emit: func(t *Trace) { traces++; spans += t.SpanCount() }})
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for r, i := 0, 0; i < b.N; r++ {
				restamp(bs, r)
				for _, bt := range bs {
					a.AddBatch(bt)
					i += len(bt.Records)
				}
				now = now.Add(500 * time.Millisecond)
				a.Tick()
			}
			a.Flush()
			runtime.GC() // the garbage made is part of the cost
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(spans), "cpu-ns/span")
		})
	}
}

// BenchmarkPendingSpans measures the heap a span waiting for its trace
// keeps (B/pending: live heap after a GC ÷ spans held).
func BenchmarkPendingSpans(b *testing.B) {
	bs := benchSpans(64, 256)
	const rounds = 8 // 131,072 spans held
	var held float64
	for range b.N {
		a := NewAssembler(Options{Window: time.Hour, Clock: WallClock})
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		n := 0
		for r := range rounds {
			restamp(bs, r)
			for _, bt := range bs {
				a.AddBatch(bt)
				n += len(bt.Records)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		held = float64(m1.HeapAlloc-m0.HeapAlloc) / float64(n)
		runtime.KeepAlive(a)
	}
	b.ReportMetric(held, "B/pending")
}
