package otlp

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracebridge/tracebridge/internal/record"
)

// typical is an export as instrumented services send them: 512 spans
// of two services, HTTP and database attributes, an event on every
// eighth span. Paths and user ids differ from span to span and from
// message to message (seed), as they do in the wild.
func typical(seed int) ptrace.Traces {
	r := rand.New(rand.NewPCG(uint64(seed), 1))
	td := ptrace.NewTraces()
	for svc := range 2 {
		rs := td.ResourceSpans().AppendEmpty()
		ra := rs.Resource().Attributes()
		ra.PutStr("service.name", fmt.Sprintf("service-%d", svc))
		ra.PutStr("host.name", "node-17")
		ra.PutInt("process.pid", 4242)
		ra.PutStr("telemetry.sdk.language", "go")
		ra.PutStr("telemetry.sdk.version", "1.47.0")
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp")
		for i := range 256 {
			s := ss.Spans().AppendEmpty()
			s.SetTraceID(pcommon.TraceID{0: byte(svc), 1: byte(i / 8), 14: byte(seed), 15: 1})
			s.SetSpanID(pcommon.SpanID{0: byte(svc), 6: byte(i >> 8), 7: byte(i) + 1})
			s.SetParentSpanID(pcommon.SpanID{0: byte(svc), 7: byte(i/8*8) + 1})
			s.SetName(fmt.Sprintf("GET /api/v1/items/{id}#%d", i%16))
			s.SetKind(ptrace.SpanKindServer)
			s.SetStartTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + i*1000))
			s.SetEndTimestamp(pcommon.Timestamp(1_700_000_000_000_050_000 + i*1000))
			a := s.Attributes()
			a.PutStr("http.request.method", "GET")
			a.PutStr("url.path", fmt.Sprintf("/api/v1/items/%d", r.IntN(1000000)))
			a.PutStr("enduser.id", fmt.Sprintf("u%06d", r.IntN(1000000)))
			a.PutInt("http.response.status_code", 200)
			a.PutStr("server.address", "shop.example.com")
			a.PutInt("server.port", 443)
			a.PutStr("user_agent.original", "Mozilla/5.0 (X11; Linux x86_64)")
			a.PutStr("db.system", "postgresql")
			a.PutStr("db.statement", "SELECT * FROM items WHERE id = $1")
			a.PutInt("thread.id", int64(i%8))
			a.PutDouble("load", 0.25)
			if i%8 == 0 {
				e := s.Events().AppendEmpty()
				e.SetName("cache.miss")
				e.SetTimestamp(pcommon.Timestamp(1_700_000_000_000_010_000 + i*1000))
				e.Attributes().PutStr("cache.key", "items")
			}
			s.Status().SetCode(ptrace.StatusCodeOk)
		}
	}
	return td
}

// BenchmarkDecode decodes 16 different typical messages in turn.
func BenchmarkDecode(b *testing.B) {
	const n = 16
	spans := typical(0).SpanCount()
	for _, enc := range []string{"proto", "json"} {
		json := enc == "json"
		msgs := make([][]byte, n)
		size := 0
		for i := range msgs {
			if json {
				msgs[i] = jsonOf(b, typical(i))
			} else {
				msgs[i] = protoOf(b, typical(i))
			}
			size += len(msgs[i])
		}
		b.Run(enc, func(b *testing.B) {
			d := NewDecoder(Options{MaxBatch: 1 << 20})
			batch := &record.Batch{}
			b.SetBytes(int64(size / n))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				batch.Reset()
				var err error
				if json {
					_, err = d.DecodeJSON(msgs[i%n], batch, nil)
				} else {
					_, err = d.DecodeProto(msgs[i%n], batch, nil)
				}
				if err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*spans), "ns/span")
		})
		// The baseline: pdata's unmarshalling of the same messages, which
		// the OpenTelemetry Collector's receiver does (before any
		// conversion).
		b.Run(enc+"/pdata", func(b *testing.B) {
			b.SetBytes(int64(size / n))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := pdataRead(msgs[i%n], json); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*spans), "ns/span")
		})
	}
}
