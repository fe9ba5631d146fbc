package main

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// place is where a span runs: a service's process on a host.
type place struct {
	service, host string
	pid           int64
}

// span is one generated span before it is encoded.
type span struct {
	id, parent uint64
	name       string
	place      int // index in traceGen.places
	thread     string
	start, end int64
	kind       ptrace.SpanKind
	err        bool
}

// traceGen makes one trace of n spans shaped like a batch job fanned out
// over a cluster: a gateway's root span calls jobs on worker services
// (4 hosts, 8 threads each), each job a deep in-thread call tree of
// methods that now and then calls another service on another host.
// Start times nest inside their parents, children one after another.
type traceGen struct {
	rng    *rand.Rand
	places []place
	spans  []span
	next   uint64
}

var methods = []string{
	"OrderImporter.importBatch", "OrderImporter.parseLine", "OrderValidator.validate", "PriceService.quote",
	"CurrencyConverter.convert", "InventoryClient.reserve", "OrderRepository.save", "JdbcTemplate.update",
	"AuditLog.append", "Json.serialize", "Cache.get", "Cache.put", "RuleEngine.evaluate", "TaxCalculator.compute",
}

func newTraceGen(seed uint64) *traceGen {
	g := &traceGen{rng: rand.New(rand.NewPCG(seed, 99))}
	g.places = append(g.places, place{"gateway", "edge-0", 100})
	for h := range 4 {
		g.places = append(g.places, place{fmt.Sprintf("worker-%d", h), fmt.Sprintf("node-%d", h), int64(1000 + h)})
	}
	g.places = append(g.places, place{"inventory", "db-0", 2000}, place{"pricing", "db-1", 2001})
	return g
}

func (g *traceGen) add(parent uint64, name string, pl int, thread string, start, end int64, kind ptrace.SpanKind) uint64 {
	g.next++
	g.spans = append(g.spans, span{id: g.next, parent: parent, name: name, place: pl, thread: thread, start: start, end: end, kind: kind,
		err: g.rng.IntN(20_000) == 0})
	return g.next
}

// generate makes a trace of n spans (n >= 2) starting at start.
func (g *traceGen) generate(n int, start int64) []span {
	g.spans = make([]span, 0, n)
	dur := int64(n) * 40_000 // 40 µs a span: a million spans, 40 s
	root := g.add(0, "POST /api/import", 0, "http-nio-8080-exec-1", start, start+dur, ptrace.SpanKindServer)
	left := n - 1
	jobs := max(1, min(left/2, 256))
	per := left / jobs
	for j := range jobs {
		size := per
		if j == jobs-1 {
			size = left - per*(jobs-1)
		}
		pl := 1 + j%4
		thread := fmt.Sprintf("pool-1-thread-%d", j/4%8+1)
		// Jobs on one thread run one after another; threads in parallel.
		slot := dur / int64((jobs+31)/32)
		s := start + 1000 + int64(j/32)*slot
		id := g.add(root, "ImportJob.run", pl, thread, s, s+slot*9/10, ptrace.SpanKindInternal)
		g.subtree(id, pl, thread, s+500, s+slot*9/10-500, size-1, 1)
	}
	return g.spans
}

// subtree adds n spans below parent within [start, end).
func (g *traceGen) subtree(parent uint64, pl int, thread string, start, end int64, n, depth int) {
	if n <= 0 {
		return
	}
	k := n
	if depth < 14 && n > 1 {
		k = 1 + g.rng.IntN(min(n, 6))
	}
	rest := n - k
	// Share the rest among the children at random.
	sizes := make([]int, k)
	for range rest {
		sizes[g.rng.IntN(k)]++
	}
	slot := max(1, (end-start)/int64(k))
	for c := range k {
		cs := start + int64(c)*slot
		ce := cs + max(1, slot*(6+int64(g.rng.IntN(4)))/10)
		if sizes[c] > 3 && g.rng.IntN(12) == 0 {
			// A call to another service: a client span here, the server
			// span and its subtree there.
			target := 5 + g.rng.IntN(2)
			cl := g.add(parent, "HTTP POST "+g.places[target].service, pl, thread, cs, ce, ptrace.SpanKindClient)
			srv := g.add(cl, "POST /"+g.places[target].service+"/reserve", target, fmt.Sprintf("worker-%d", g.rng.IntN(16)),
				cs+200, ce-200, ptrace.SpanKindServer)
			g.subtree(srv, target, g.spans[len(g.spans)-1].thread, cs+300, ce-300, sizes[c]-1, depth+2)
			continue
		}
		id := g.add(parent, methods[g.rng.IntN(len(methods))], pl, thread, cs, ce, ptrace.SpanKindInternal)
		g.subtree(id, pl, thread, cs+100, ce-100, sizes[c], depth+1)
	}
}

// encode makes OTLP/HTTP protobuf requests of at most batch spans each,
// a resource per place, as SDKs batch them.
func encode(traceID [16]byte, spans []span, places []place, batch int) ([][]byte, error) {
	var out [][]byte
	for lo := 0; lo < len(spans); lo += batch {
		hi := min(len(spans), lo+batch)
		td := ptrace.NewTraces()
		scopes := map[int]ptrace.SpanSlice{}
		for _, s := range spans[lo:hi] {
			ss, ok := scopes[s.place]
			if !ok {
				rs := td.ResourceSpans().AppendEmpty()
				pl := places[s.place]
				rs.Resource().Attributes().PutStr("service.name", pl.service)
				rs.Resource().Attributes().PutStr("host.name", pl.host)
				rs.Resource().Attributes().PutInt("process.pid", pl.pid)
				sc := rs.ScopeSpans().AppendEmpty()
				sc.Scope().SetName("bench/web")
				ss = sc.Spans()
				scopes[s.place] = ss
			}
			p := ss.AppendEmpty()
			p.SetTraceID(pcommon.TraceID(traceID))
			p.SetSpanID(spanID(s.id))
			if s.parent != 0 {
				p.SetParentSpanID(spanID(s.parent))
			}
			p.SetName(s.name)
			p.SetKind(s.kind)
			p.SetStartTimestamp(pcommon.Timestamp(s.start))
			p.SetEndTimestamp(pcommon.Timestamp(s.end))
			p.Attributes().PutStr("thread.name", s.thread)
			if s.err {
				p.Status().SetCode(ptrace.StatusCodeError)
				p.Status().SetMessage("java.sql.SQLTransientConnectionException")
				ev := p.Events().AppendEmpty()
				ev.SetName("exception")
				ev.SetTimestamp(pcommon.Timestamp(s.end))
				ev.Attributes().PutStr("exception.type", "java.sql.SQLTransientConnectionException")
				ev.Attributes().PutStr("exception.message", "connection is not available, request timed out after 30000ms")
				ev.Attributes().PutStr("exception.stacktrace", "java.sql.SQLTransientConnectionException: connection is not available\n\tat com.zaxxer.hikari.pool.HikariPool.createTimeoutException(HikariPool.java:696)\n\tat shop.OrderRepository.save(OrderRepository.java:42)")
			}
		}
		b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			return nil, fmt.Errorf("encoding spans %d to %d: %w", lo, hi, err)
		}
		out = append(out, b)
	}
	return out, nil
}

func spanID(n uint64) pcommon.SpanID {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n|1<<62) // never zero
	return b
}
