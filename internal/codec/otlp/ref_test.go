package otlp

import (
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// This file holds what the tests share: a generator of random trace
// exports (pdata), the reference conversion of pdata spans into span
// records (what the decoder must produce, computed from pdata's own
// reading of the message), and a readable form of records for diffs.

// gen makes random exports. Strings come from a small pool (so interning
// is exercised) plus odd ones (escapes, control characters, non-ASCII).
type gen struct {
	r *rand.Rand
	// json: values pdata's JSON cannot carry (invalid UTF-8, NaN and
	// infinities inside arrays and lists) are not generated.
	json bool
}

func newGen(seed uint64, json bool) *gen {
	return &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), json: json}
}

var pool = []string{
	"", "GET /api/orders", "db.query", "service-a", "service-b", "host-1", "k", "http.method", "http.status_code",
	"quote\"back\\slash", "tab\tnewline\nnul\x00", "<html>&amp;", "ünïcödé ✓ 日本", "\u2028\u2029", "emoji 😀",
	"thread.id", "thread.name", "code.namespace", "a/b", "x.y.z",
}

func (g *gen) str() string {
	if g.r.IntN(8) == 0 {
		var sb strings.Builder
		n := g.r.IntN(40)
		for range n {
			if !g.json && g.r.IntN(20) == 0 {
				sb.WriteByte(byte(0x80 + g.r.IntN(0x40))) // invalid UTF-8
				continue
			}
			sb.WriteRune(rune(0x20 + g.r.IntN(0x2000)))
		}
		return sb.String()
	}
	return pool[g.r.IntN(len(pool))]
}

func (g *gen) float(nested bool) float64 {
	switch g.r.IntN(12) {
	case 0:
		if g.json || nested {
			return 0.1
		}
		return math.NaN()
	case 1:
		if g.json || nested {
			return -2.5e-7
		}
		return math.Inf(1 - 2*g.r.IntN(2))
	case 2:
		return 1e21
	case 3:
		return 123456789
	case 4:
		return math.Copysign(0, -1)
	}
	return (g.r.Float64() - 0.5) * math.Pow(10, float64(g.r.IntN(40)-20))
}

func (g *gen) value(v pcommon.Value, depth int) {
	n := 7
	if depth >= 3 {
		n = 5
	}
	switch g.r.IntN(n + 1) {
	case 0:
		v.SetStr(g.str())
	case 1:
		v.SetBool(g.r.IntN(2) == 0)
	case 2:
		v.SetInt(int64(g.r.Uint64()) >> g.r.IntN(64))
	case 3:
		v.SetDouble(g.float(depth > 1))
	case 4:
		// Not empty: pdata reads empty bytes as nil, which its JSON of
		// a list writes as null (the decoder writes "", base64's empty).
		b := v.SetEmptyBytes()
		for range 1 + g.r.IntN(10) {
			b.Append(byte(g.r.IntN(256)))
		}
	case 5: // empty
	case 6:
		s := v.SetEmptySlice()
		for range g.r.IntN(4) {
			g.value(s.AppendEmpty(), depth+1)
		}
	case 7:
		m := v.SetEmptyMap()
		for range g.r.IntN(4) {
			g.value(m.PutEmpty(g.str()), depth+1)
		}
	}
}

func (g *gen) attrs(m pcommon.Map, n int) { g.attrsAt(m, n, 1) }

// attrsAt makes attributes whose values are at depth. An event's or a
// link's attributes are kept as a JSON object, so their values are
// nested (no NaN: pdata writes no JSON for it).
func (g *gen) attrsAt(m pcommon.Map, n, depth int) {
	for range g.r.IntN(n + 1) {
		g.value(m.PutEmpty(g.str()), depth)
	}
}

func (g *gen) id(b []byte) {
	for i := range b {
		b[i] = byte(g.r.IntN(256))
	}
}

// traces returns an export with about n spans.
func (g *gen) traces(n int) ptrace.Traces {
	td := ptrace.NewTraces()
	for n > 0 {
		rs := td.ResourceSpans().AppendEmpty()
		ra := rs.Resource().Attributes()
		if g.r.IntN(5) > 0 {
			ra.PutStr("service.name", pool[3+g.r.IntN(2)])
		}
		if g.r.IntN(3) > 0 {
			ra.PutStr("host.name", pool[5])
		}
		if g.r.IntN(3) == 0 {
			ra.PutInt("process.pid", int64(g.r.IntN(100000)))
		}
		g.attrs(ra, 3)
		for range 1 + g.r.IntN(3) {
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName(g.str())
			ss.Scope().SetVersion("1.0")
			g.attrs(ss.Scope().Attributes(), 2)
			for range 1 + g.r.IntN(5) {
				n--
				g.span(ss.Spans().AppendEmpty())
			}
		}
	}
	return td
}

func (g *gen) span(s ptrace.Span) {
	var tid pcommon.TraceID
	var sid, pid pcommon.SpanID
	g.id(tid[:])
	g.id(sid[:])
	s.SetTraceID(tid)
	s.SetSpanID(sid)
	if g.r.IntN(3) > 0 {
		g.id(pid[:])
		s.SetParentSpanID(pid)
	}
	if g.r.IntN(40) == 0 {
		s.SetTraceID(pcommon.TraceID{}) // rejected
	}
	s.SetName(g.str())
	s.SetKind(ptrace.SpanKind(g.r.IntN(7)))
	s.SetStartTimestamp(pcommon.Timestamp(g.r.Uint64() >> 1))
	s.SetEndTimestamp(pcommon.Timestamp(g.r.Uint64()))
	if g.r.IntN(4) == 0 {
		s.TraceState().FromRaw("vendor=" + pool[g.r.IntN(3)])
	}
	s.SetFlags(uint32(g.r.IntN(3)) << g.r.IntN(10))
	s.Status().SetCode(ptrace.StatusCode(g.r.IntN(4)))
	s.Status().SetMessage(g.str())
	g.attrs(s.Attributes(), 8)
	switch g.r.IntN(4) {
	case 0:
		s.Attributes().PutInt("thread.id", int64(g.r.IntN(100)))
	case 1:
		s.Attributes().PutStr("thread.name", "main")
		s.Attributes().PutStr("code.namespace", "org.example.Shop")
	}
	for range g.r.IntN(3) {
		e := s.Events().AppendEmpty()
		e.SetName(g.str())
		e.SetTimestamp(pcommon.Timestamp(g.r.Uint64() >> 1))
		g.attrsAt(e.Attributes(), 3, 2)
	}
	for range g.r.IntN(3) {
		l := s.Links().AppendEmpty()
		if g.r.IntN(6) > 0 {
			var lt pcommon.TraceID
			var ls pcommon.SpanID
			g.id(lt[:])
			g.id(ls[:])
			l.SetTraceID(lt)
			l.SetSpanID(ls)
		}
		if g.r.IntN(3) == 0 {
			l.TraceState().FromRaw("a=b")
		}
		l.SetFlags(uint32(g.r.IntN(2)))
		g.attrsAt(l.Attributes(), 2, 2)
	}
}

func protoOf(tb testing.TB, td ptrace.Traces) []byte {
	tb.Helper()
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func jsonOf(tb testing.TB, td ptrace.Traces) []byte {
	tb.Helper()
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalJSON()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// valueType maps pdata's value types to the record's.
func valueType(t pcommon.ValueType) trace.ValueType {
	switch t {
	case pcommon.ValueTypeBool:
		return trace.TypeBool
	case pcommon.ValueTypeInt:
		return trace.TypeInt
	case pcommon.ValueTypeDouble:
		return trace.TypeDouble
	case pcommon.ValueTypeBytes:
		return trace.TypeBytes
	case pcommon.ValueTypeSlice, pcommon.ValueTypeMap:
		return trace.TypeJSON
	}
	return trace.TypeString
}

// objectJSON is pdata's JSON of an attribute map (as an event's or a
// link's attributes are kept).
func objectJSON(m pcommon.Map) string {
	v := pcommon.NewValueMap()
	m.CopyTo(v.Map())
	return v.AsString()
}

// want is the reference: the span records of td (pdata's reading of the
// message), and the number of spans the decoder must reject.
func want(td ptrace.Traces) (recs []record.Record, rejected int) {
	var b record.Batch
	rss := td.ResourceSpans()
	for i := range rss.Len() {
		rs := rss.At(i)
		var service, host, process string
		var res [][3]string
		rs.Resource().Attributes().Range(func(k string, v pcommon.Value) bool {
			switch k {
			case "service.name":
				service = v.AsString()
			case "host.name":
				host = v.AsString()
			case "process.pid":
				process = v.AsString()
			}
			res = append(res, [3]string{k, v.AsString(), string(rune(valueType(v.Type())))})
			return true
		})
		if service == "" {
			service = trace.UnknownService
		}
		if host == "" {
			host = service
		}
		sss := rs.ScopeSpans()
		for j := range sss.Len() {
			ss := sss.At(j)
			spans := ss.Spans()
			for k := range spans.Len() {
				s := spans.At(k)
				tid, sid, pid := s.TraceID(), s.SpanID(), s.ParentSpanID()
				if tid.IsEmpty() || sid.IsEmpty() {
					rejected++
					continue
				}
				r := b.Add(trace.SpanType, record.NoTimestamp)
				v := r.Values
				v[trace.SpanTraceIDHigh] = record.IntValue(int64(beUint64(tid[:8])))
				v[trace.SpanTraceIDLow] = record.IntValue(int64(beUint64(tid[8:])))
				v[trace.SpanSpanID] = record.IntValue(int64(beUint64(sid[:])))
				v[trace.SpanParentID] = record.IntValue(int64(beUint64(pid[:])))
				v[trace.SpanName] = record.StringValue(s.Name())
				v[trace.SpanService] = record.StringValue(service)
				v[trace.SpanHost] = record.StringValue(host)
				v[trace.SpanStart] = record.IntValue(int64(s.StartTimestamp()))
				v[trace.SpanEnd] = record.IntValue(int64(s.EndTimestamp()))
				kind := int64(s.Kind())
				if kind < 0 || kind > 5 {
					kind = 0
				}
				v[trace.SpanKind] = record.IntValue(kind)
				code := int64(s.Status().Code())
				if code < 0 || code > 2 {
					code = 0
				}
				v[trace.SpanStatus] = record.IntValue(code)
				v[trace.SpanStatusMessage] = record.StringValue(s.Status().Message())
				v[trace.SpanScope] = record.StringValue(ss.Scope().Name())
				v[trace.SpanProcess] = record.StringValue(process)
				v[trace.SpanTraceState] = record.StringValue(s.TraceState().AsRaw())
				v[trace.SpanFlags] = record.IntValue(int64(s.Flags()))
				var attrs, types []record.Value
				var thread, threadName, component string
				s.Attributes().Range(func(k string, val pcommon.Value) bool {
					attrs = append(attrs, record.StringValue(k), record.StringValue(val.AsString()))
					types = append(types, record.IntValue(int64(valueType(val.Type()))))
					switch k {
					case "thread.id":
						thread = val.AsString()
					case "thread.name":
						threadName = val.AsString()
					case "code.namespace":
						component = val.AsString()
					}
					return true
				})
				if thread == "" {
					thread = threadName
				}
				v[trace.SpanThread] = record.StringValue(thread)
				v[trace.SpanComponent] = record.StringValue(component)
				v[trace.SpanAttributes] = record.ListValue(record.String, attrs)
				v[trace.SpanAttributeTypes] = record.ListValue(record.Byte, types)
				var rl, rt []record.Value
				for _, a := range res {
					rl = append(rl, record.StringValue(a[0]), record.StringValue(a[1]))
					rt = append(rt, record.IntValue(int64(a[2][0])))
				}
				// The scope's version and attributes follow the mark.
				if sc := ss.Scope(); sc.Version() != "" || sc.Attributes().Len() > 0 {
					rl = append(rl, record.StringValue(trace.ScopeVersionKey), record.StringValue(sc.Version()))
					rt = append(rt, record.IntValue(trace.ScopeMark))
					sc.Attributes().Range(func(k string, val pcommon.Value) bool {
						rl = append(rl, record.StringValue(k), record.StringValue(val.AsString()))
						rt = append(rt, record.IntValue(int64(valueType(val.Type()))))
						return true
					})
				}
				v[trace.SpanResource] = record.ListValue(record.String, rl)
				v[trace.SpanResourceTypes] = record.ListValue(record.Byte, rt)
				var events []record.Value
				for _, e := range s.Events().All() {
					events = append(events, record.StringValue(e.Name()),
						record.StringValue(fmt.Sprint(int64(e.Timestamp()))),
						record.StringValue(objectJSON(e.Attributes())))
				}
				v[trace.SpanEvents] = record.ListValue(record.String, events)
				var links []record.Value
				for _, l := range s.Links().All() {
					lt, ls := l.TraceID(), l.SpanID()
					links = append(links, record.StringValue(hex.EncodeToString(lt[:])),
						record.StringValue(hex.EncodeToString(ls[:])),
						record.StringValue(l.TraceState().AsRaw()),
						record.StringValue(objectJSON(l.Attributes())))
				}
				v[trace.SpanLinks] = record.ListValue(record.String, links)
			}
		}
	}
	for i := range b.Records {
		recs = append(recs, b.Records[i].Clone())
	}
	return recs, rejected
}

// show renders records for diffs: one line per field.
func show(recs []record.Record) [][]string {
	out := make([][]string, len(recs))
	for i := range recs {
		r := &recs[i]
		for j, f := range r.Type.Fields {
			v := r.Values[j]
			var s string
			if f.Array {
				var items []string
				if l := v.List(); l != nil {
					for _, it := range l.Items {
						items = append(items, fmt.Sprintf("%q", it.Format(f.Kind)))
					}
				}
				s = "[" + strings.Join(items, " ") + "]"
			} else {
				s = fmt.Sprintf("%q", v.Format(f.Kind))
			}
			out[i] = append(out[i], f.Name+"="+s)
		}
	}
	return out
}

// records collects the records of the batches.
func records(bs []*record.Batch) []record.Record {
	var out []record.Record
	for _, b := range bs {
		for i := range b.Records {
			out = append(out, b.Records[i].Clone())
		}
	}
	return out
}

// diff compares decoded records with the reference.
func diff(got, want []record.Record) string {
	return cmp.Diff(show(want), show(got))
}
