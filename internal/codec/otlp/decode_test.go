package otlp

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// A few protobuf writers for hand-made messages.
func pbVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func pbTag(b []byte, num, wt int) []byte { return pbVarint(b, uint64(num<<3|wt)) }

func pbBytes(b []byte, num int, v []byte) []byte {
	b = pbTag(b, num, wireBytes)
	b = pbVarint(b, uint64(len(v)))
	return append(b, v...)
}

// request wraps spans (Span messages) in one resource and scope.
func request(resource []byte, spans ...[]byte) []byte {
	var ss []byte
	ss = pbBytes(ss, 1, pbBytes(nil, 1, []byte("scope")))
	for _, s := range spans {
		ss = pbBytes(ss, 2, s)
	}
	var rs []byte
	if resource != nil {
		rs = pbBytes(rs, 1, resource)
	}
	rs = pbBytes(rs, 2, ss)
	return pbBytes(nil, 1, rs)
}

var (
	tid16 = []byte("0123456789abcdef")
	sid8  = []byte("span-id!")
)

func okSpan(extra ...[]byte) []byte {
	s := pbBytes(nil, 1, tid16)
	s = pbBytes(s, 2, sid8)
	s = pbBytes(s, 5, []byte("op"))
	for _, e := range extra {
		s = append(s, e...)
	}
	return s
}

func kvString(k, v string) []byte {
	return pbBytes(pbBytes(nil, 1, []byte(k)), 2, pbBytes(nil, 1, []byte(v)))
}

func TestMalformedProto(t *testing.T) {
	good := request(nil, okSpan())
	tests := []struct {
		name   string
		msg    []byte
		offset int
		reason string
	}{
		{"truncated length", good[:len(good)-1], 1, "length"},
		{"truncated varint", []byte{0x0a, 0x80}, 1, "varint truncated"},
		{"field 0", []byte{0x00}, 0, "field number 0"},
		{"group", []byte{0x0b}, 0, "wire type 3"},
		{"wrong wire type", []byte{0x08, 0x01}, 0, "resource_spans): wire type 0"},
		{"span name as varint", request(nil, append(okSpan(), pbTag(nil, 5, wireVarint)[0], 1)), -1, "field 5 (name): wire type 0, want 2"},
		{"fixed64 truncated", request(nil, append(okSpan(), pbTag(nil, 7, wireFixed64)[0], 1, 2)), -1, "fixed64 truncated"},
		{"varint of 11 bytes", append(pbTag(nil, 9, wireVarint), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), 1, "longer than 10 bytes"},
		{"bad attribute", request(nil, okSpan(pbBytes(nil, 9, []byte{0x0a, 0x05}))), -1, "exceeds"},
		{"bad resource", request([]byte{0x0a, 0x02, 0x0a}), -1, "exceeds"},
	}
	d := NewDecoder(Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &record.Batch{}
			_, err := d.DecodeProto(tt.msg, b, nil)
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want an *Error wrapping ErrMalformed", err)
			}
			if !strings.Contains(e.Reason, tt.reason) {
				t.Errorf("reason %q, want it to say %q", e.Reason, tt.reason)
			}
			if tt.offset >= 0 && e.Offset != tt.offset {
				t.Errorf("offset %d, want %d (%v)", e.Offset, tt.offset, err)
			}
			if e.Offset < 0 || e.Offset > len(tt.msg) {
				t.Errorf("offset %d outside the message of %d bytes", e.Offset, len(tt.msg))
			}
			if b.Len() != 0 {
				t.Errorf("%d records kept of a malformed message", b.Len())
			}
		})
	}
}

// TestMalformedKeepsBatches: a malformed message takes back what it added,
// in every batch, and leaves records of earlier messages alone.
func TestMalformedKeepsBatches(t *testing.T) {
	d := NewDecoder(Options{MaxBatch: 2})
	b := &record.Batch{}
	if _, err := d.DecodeProto(request(nil, okSpan()), b, nil); err != nil {
		t.Fatal(err)
	}
	spans := [][]byte{okSpan(), okSpan(), okSpan(), okSpan(), okSpan()}
	msg := request(nil, spans...)
	msg = append(msg, 0x0a, 0x05) // truncated at the end
	var more []*record.Batch
	res, err := d.DecodeProto(msg, b, func() *record.Batch { nb := &record.Batch{}; more = append(more, nb); return nb })
	if err == nil {
		t.Fatal("no error")
	}
	if b.Len() != 1 {
		t.Errorf("first batch has %d records, want the 1 of the earlier message", b.Len())
	}
	for _, m := range more {
		if m.Len() != 0 {
			t.Errorf("a batch from next keeps %d records", m.Len())
		}
	}
	if res.Spans != 0 {
		t.Errorf("Result.Spans = %d after an error", res.Spans)
	}
}

func TestRejectedSpans(t *testing.T) {
	long := strings.Repeat("x", 100)
	deep := pbBytes(nil, 1, []byte("x"))
	for range 5 {
		deep = pbBytes(nil, 5, pbBytes(nil, 1, deep)) // array of one item
	}
	tests := []struct {
		name   string
		span   []byte
		reason string
	}{
		{"trace id of 15 bytes", pbBytes(pbBytes(nil, 1, tid16[:15]), 2, sid8), "trace id of 15 bytes, want 16"},
		{"zero trace id", pbBytes(pbBytes(nil, 1, make([]byte, 16)), 2, sid8), "trace id is missing or all zero"},
		{"no trace id", pbBytes(nil, 2, sid8), "trace id is missing"},
		{"span id of 4 bytes", pbBytes(pbBytes(nil, 1, tid16), 2, sid8[:4]), "span id of 4 bytes, want 8"},
		{"zero span id", pbBytes(pbBytes(nil, 1, tid16), 2, make([]byte, 8)), "span id is missing or all zero"},
		{"parent id of 9 bytes", okSpan(pbBytes(nil, 4, []byte("123456789"))), "parent span id of 9 bytes"},
		{"link trace id of 3 bytes", okSpan(pbBytes(nil, 13, pbBytes(nil, 1, []byte("abc")))), "link at offset"},
		{"too many attributes", okSpan(pbBytes(nil, 9, kvString("a", "1")), pbBytes(nil, 9, kvString("b", "2")), pbBytes(nil, 9, kvString("c", "3")), pbBytes(nil, 9, kvString("d", "4"))), "more than 3 attributes"},
		{"long name", okSpan(pbBytes(nil, 5, []byte(long))), "name of 100 bytes, limit 64"},
		{"long attribute value", okSpan(pbBytes(nil, 9, kvString("k", long))), "string_value of 100 bytes"},
		{"long key", okSpan(pbBytes(nil, 9, kvString(long, "v"))), "key of 100 bytes"},
		{"deep value", okSpan(pbBytes(nil, 9, pbBytes(pbBytes(nil, 1, []byte("k")), 2, deep))), "nested deeper than 4"},
		{"too many events", okSpan(pbBytes(nil, 11, nil), pbBytes(nil, 11, nil), pbBytes(nil, 11, nil)), "more than 2 events"},
		{"too many links", okSpan(pbBytes(nil, 13, nil), pbBytes(nil, 13, nil), pbBytes(nil, 13, nil)), "more than 2 links"},
	}
	d := NewDecoder(Options{MaxAttributes: 3, MaxStringLen: 64, MaxDepth: 4, MaxEvents: 2, MaxLinks: 2})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &record.Batch{}
			res, err := d.DecodeProto(request(nil, okSpan(), tt.span, okSpan()), b, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Rejected != 1 || res.Spans != 2 || b.Len() != 2 {
				t.Fatalf("rejected %d, kept %d (%d records), want 1 and 2", res.Rejected, res.Spans, b.Len())
			}
			if !strings.Contains(res.Reason, tt.reason) || !strings.HasPrefix(res.Reason, "span at offset ") {
				t.Errorf("reason %q, want it to say %q", res.Reason, tt.reason)
			}
		})
	}
}

func TestResourceLimitRejectsItsSpans(t *testing.T) {
	d := NewDecoder(Options{MaxAttributes: 1})
	attrs := pbBytes(nil, 1, kvString("a", "1"))
	attrs = pbBytes(attrs, 1, kvString("b", "2"))
	msg := request(attrs, okSpan(), okSpan())
	msg = append(msg, request(nil, okSpan())...) // a second resource, within limits
	b := &record.Batch{}
	r, err := d.DecodeProto(msg, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Rejected != 2 || r.Spans != 1 {
		t.Fatalf("rejected %d, kept %d; want 2 and 1", r.Rejected, r.Spans)
	}
	if !strings.Contains(r.Reason, "resource at offset") || !strings.Contains(r.Reason, "more than 1 attributes") {
		t.Errorf("reason %q", r.Reason)
	}
}

// TestScopeKeptAndLimited: a scope's version and attributes reach the
// span records (trace.ScopeOf reads them back), shared by its spans; a
// scope with more attributes than the limit rejects its spans only.
func TestScopeKeptAndLimited(t *testing.T) {
	scoped := func(nattrs int, spans ...[]byte) []byte {
		sc := pbBytes(nil, 1, []byte("lib"))
		sc = pbBytes(sc, 2, []byte("1.2.3"))
		for i := range nattrs {
			sc = pbBytes(sc, 3, kvString("k"+strconv.Itoa(i), "v"))
		}
		ss := pbBytes(nil, 1, sc)
		for _, s := range spans {
			ss = pbBytes(ss, 2, s)
		}
		rs := pbBytes(nil, 1, pbBytes(nil, 1, kvString("deployment.environment", "prod")))
		rs = pbBytes(rs, 2, ss)
		return pbBytes(nil, 1, rs)
	}
	d := NewDecoder(Options{MaxAttributes: 2})
	msg := append(scoped(2, okSpan(), okSpan()), scoped(3, okSpan())...)
	b := &record.Batch{}
	r, err := d.DecodeProto(msg, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Spans != 2 || r.Rejected != 1 || !strings.Contains(r.Reason, "scope at offset") {
		t.Fatalf("kept %d, rejected %d (%q); want 2 and 1 for the scope", r.Spans, r.Rejected, r.Reason)
	}
	for i := range b.Records {
		sc := trace.ScopeOf(&b.Records[i])
		want := &trace.Scope{Name: "lib", Version: "1.2.3", Attributes: []trace.Attr{{Key: "k0", Value: "v", Type: trace.TypeString}, {Key: "k1", Value: "v", Type: trace.TypeString}}}
		if !sc.Equal(want) {
			t.Errorf("span %d: scope %+v, want %+v", i, sc, want)
		}
		if res := trace.ResourceAttrs(&b.Records[i]); len(res) != 1 || res[0].Key != "deployment.environment" {
			t.Errorf("span %d: resource %v", i, res)
		}
	}
	if b.Records[0].Values[trace.SpanResource].List() != b.Records[1].Values[trace.SpanResource].List() {
		t.Error("the spans of one scope do not share the resource list")
	}
}

func TestTooLarge(t *testing.T) {
	d := NewDecoder(Options{MaxMessageSize: 10})
	for _, json := range []bool{false, true} {
		_, err := decodeWith(d, make([]byte, 11), json)
		if !errors.Is(err, ErrTooLarge) {
			t.Errorf("json %v: err = %v, want ErrTooLarge", json, err)
		}
	}
}

// TestRecord checks one span's record field by field, the mapping the
// package comment documents.
func TestRecord(t *testing.T) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	ra := rs.Resource().Attributes()
	ra.PutStr("service.name", "shop")
	ra.PutInt("process.pid", 4711)
	ra.PutStr("deployment.environment", "prod")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("io.opentelemetry.http")
	s := ss.Spans().AppendEmpty()
	s.SetTraceID(pcommon.TraceID{0: 1, 15: 2})
	s.SetSpanID(pcommon.SpanID{7: 3})
	s.SetParentSpanID(pcommon.SpanID{0: 0x80})
	s.SetName("GET /cart")
	s.SetKind(ptrace.SpanKindServer)
	s.SetStartTimestamp(1000)
	s.SetEndTimestamp(2500)
	s.Status().SetCode(ptrace.StatusCodeError)
	s.Status().SetMessage("boom")
	s.TraceState().FromRaw("a=1")
	s.SetFlags(1)
	a := s.Attributes()
	a.PutStr("http.method", "GET")
	a.PutInt("thread.id", 12)
	a.PutStr("thread.name", "worker-1")
	a.PutStr("code.namespace", "org.shop.Cart")
	a.PutDouble("ratio", 0.5)
	a.PutDouble("big", 1e21)
	a.PutBool("ok", true)
	a.PutEmptyBytes("raw").FromRaw([]byte{0xff, 0x00})
	sl := a.PutEmptySlice("tags")
	sl.AppendEmpty().SetStr("a<b")
	sl.AppendEmpty().SetInt(2)
	m := a.PutEmptyMap("m")
	m.PutStr("z", "last")
	m.PutBool("a", false)
	e := s.Events().AppendEmpty()
	e.SetName("exception")
	e.SetTimestamp(2000)
	e.Attributes().PutStr("exception.type", "IOError")
	e.Attributes().PutInt("n", 3)
	l := s.Links().AppendEmpty()
	l.SetTraceID(pcommon.TraceID{15: 9})
	l.SetSpanID(pcommon.SpanID{7: 8})
	l.TraceState().FromRaw("b=2")

	for _, json := range []bool{false, true} {
		var msg []byte
		if json {
			msg = jsonOf(t, td)
		} else {
			msg = protoOf(t, td)
		}
		res, err := decodeWith(NewDecoder(Options{}), msg, json)
		if err != nil {
			t.Fatal(err)
		}
		recs := records(res.Batches)
		if len(recs) != 1 {
			t.Fatalf("%d records", len(recs))
		}
		got := show(recs)[0]
		want := []string{
			`traceIdHigh="72057594037927936"`, `traceIdLow="2"`, `spanId="3"`, `parentSpanId="-9223372036854775808"`,
			`name="GET /cart"`, `service="shop"`, `hostname="shop"`,
			`startTimeUnixNano="1000"`, `endTimeUnixNano="2500"`, `kind="2"`, `statusCode="2"`, `statusMessage="boom"`,
			`scope="io.opentelemetry.http"`, `component="org.shop.Cart"`, `thread="12"`, `process="4711"`,
			`attributes=["http.method" "GET" "thread.id" "12" "thread.name" "worker-1" "code.namespace" "org.shop.Cart" "ratio" "0.5" "big" "1e+21" "ok" "true" "raw" "/wA=" "tags" "[\"a<b\",2]" "m" "{\"a\":false,\"z\":\"last\"}"]`,
			`attributeTypes=["1" "3" "1" "1" "4" "4" "2" "5" "6" "6"]`,
			`resource=["service.name" "shop" "process.pid" "4711" "deployment.environment" "prod"]`, `resourceTypes=["1" "3" "1"]`,
			`events=["exception" "2000" "{\"exception.type\":\"IOError\",\"n\":3}"]`,
			`links=["00000000000000000000000000000009" "0000000000000008" "b=2" "{}"]`,
			`traceState="a=1"`, `flags="1"`,
		}
		if d := diffStrings(got, want); d != "" {
			t.Errorf("json %v (-want +got):\n%s", json, d)
		}
		// The trace package reads the resource back.
		if tr := trace.ResourceAttrs(&recs[0]); len(tr) != 3 || tr[2].Key != "deployment.environment" {
			t.Errorf("trace.ResourceAttrs = %v", tr)
		}
		if b := res.Batches[0]; b.Origin.Host != "shop" || b.Origin.Service != "shop" {
			t.Errorf("origin %+v, want host and service shop", b.Origin)
		}
	}
}

func diffStrings(got, want []string) string {
	var sb strings.Builder
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			sb.WriteString("- " + w + "\n+ " + g + "\n")
		}
	}
	return sb.String()
}

// TestBatchesAndOrigin: spans go into batches of MaxBatch; a batch's
// origin names the host and service when all its spans share them.
func TestBatchesAndOrigin(t *testing.T) {
	td := ptrace.NewTraces()
	for i, svc := range []string{"a", "a", "b"} {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", svc)
		rs.Resource().Attributes().PutStr("host.name", "h")
		ss := rs.ScopeSpans().AppendEmpty()
		for j := range 3 {
			s := ss.Spans().AppendEmpty()
			s.SetTraceID(pcommon.TraceID{0: 1})
			s.SetSpanID(pcommon.SpanID{0: byte(i), 1: byte(j), 7: 1})
		}
	}
	d := NewDecoder(Options{MaxBatch: 4})
	first := &record.Batch{Origin: record.Origin{Receiver: "r", Peer: "p", Session: "s"}}
	res, err := d.DecodeProto(protoOf(t, td), first, func() *record.Batch { return &record.Batch{} })
	if err != nil {
		t.Fatal(err)
	}
	var lens []int
	var origins []record.Origin
	for _, b := range res.Batches {
		lens = append(lens, b.Len())
		origins = append(origins, b.Origin)
	}
	if want := []int{4, 4, 1}; !slices.Equal(lens, want) {
		t.Fatalf("batch sizes %v, want %v", lens, want)
	}
	want := []record.Origin{
		{Receiver: "r", Peer: "p", Session: "s", Host: "h", Service: "a"},
		{Receiver: "r", Peer: "p", Session: "s"}, // a and b
		{Receiver: "r", Peer: "p", Session: "s", Host: "h", Service: "b"},
	}
	for i := range want {
		if origins[i] != want[i] {
			t.Errorf("batch %d origin %+v, want %+v", i, origins[i], want[i])
		}
	}
	// The resource list is shared within a batch, made anew per batch.
	b0 := res.Batches[0]
	if b0.Records[0].Values[trace.SpanResource].List() != b0.Records[1].Values[trace.SpanResource].List() {
		t.Error("the spans of one resource in one batch do not share the resource list")
	}
}

// TestAllocations: once warm, decoding allocates nothing per span but
// the strings it has not seen before (here one unique user id per span;
// a hot string evicted from the decoder's table now and then may cost
// one more).
func TestAllocations(t *testing.T) {
	const spans = 200
	msgs := make([][]byte, 40)
	uid := 0
	for m := range msgs {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "shop")
		rs.Resource().Attributes().PutStr("host.name", "node-1")
		rs.Resource().Attributes().PutStr("telemetry.sdk.language", "go")
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("otelhttp")
		for i := range spans {
			s := ss.Spans().AppendEmpty()
			s.SetTraceID(pcommon.TraceID{0: byte(m), 1: byte(i), 15: 1})
			s.SetSpanID(pcommon.SpanID{0: byte(i), 7: 1})
			s.SetName([]string{"GET /cart", "GET /items", "db.query"}[i%3])
			s.SetKind(ptrace.SpanKindServer)
			a := s.Attributes()
			a.PutStr("http.request.method", "GET")
			a.PutStr("http.route", []string{"/cart", "/items", "/items/{id}"}[i%3])
			a.PutInt("http.response.status_code", 200)
			a.PutInt("thread.id", int64(i%8))
			a.PutDouble("load", 0.5)
			a.PutBool("cached", i%2 == 0)
			a.PutEmptySlice("tags").FromRaw([]any{"a", "b"})
			uid++
			a.PutStr("enduser.id", fmt.Sprintf("user-%08d", uid)) // never seen before
			l := s.Links().AppendEmpty()
			l.SetTraceID(pcommon.TraceID{15: 1})
			l.SetSpanID(pcommon.SpanID{7: 1})
		}
		msgs[m] = protoOf(t, td)
	}
	d := NewDecoder(Options{Strings: NewStrings()})
	b := &record.Batch{}
	n := 0
	run := func() {
		b.Reset()
		res, err := d.DecodeProto(msgs[n%len(msgs)], b, nil)
		if err != nil || res.Spans != spans {
			t.Fatalf("%d spans, %v", res.Spans, err)
		}
		n++
	}
	for range 5 {
		run()
	}
	allocs := testing.AllocsPerRun(30, run)
	if allocs > spans*1.1+5 {
		t.Errorf("%.0f allocations per message of %d spans with %d new strings", allocs, spans, spans)
	}
	t.Logf("%.0f allocations per message of %d spans with %d new strings", allocs, spans, spans)
}

// TestMissingServiceIsUnknownService: a resource without service.name is
// trace.UnknownService, as OpenTelemetry's SDKs name it (service, host
// and the batch's origin), in protobuf and in JSON; a service.name the SDK
// set (unknown_service:<executable>) is kept.
func TestMissingServiceIsUnknownService(t *testing.T) {
	td := ptrace.NewTraces()
	for i, svc := range []string{"", "unknown_service:prog"} {
		rs := td.ResourceSpans().AppendEmpty()
		if svc != "" {
			rs.Resource().Attributes().PutStr("service.name", svc)
		}
		s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		s.SetTraceID(pcommon.TraceID{0: 1})
		s.SetSpanID(pcommon.SpanID{0: byte(i + 1)})
	}
	want := [][2]string{{trace.UnknownService, trace.UnknownService}, {"unknown_service:prog", "unknown_service:prog"}}
	js, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	for _, enc := range []string{"proto", "json"} {
		var res Result
		var err error
		if enc == "proto" {
			res, err = NewDecoder(Options{}).DecodeProto(protoOf(t, td), &record.Batch{}, nil)
		} else {
			res, err = NewDecoder(Options{}).DecodeJSON(js, &record.Batch{}, nil)
		}
		if err != nil {
			t.Fatal(enc, err)
		}
		var got [][2]string
		for _, b := range res.Batches {
			for i := range b.Records {
				v := b.Records[i].Values
				got = append(got, [2]string{v[trace.SpanService].Str(), v[trace.SpanHost].Str()})
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: (service, host) %v, want %v", enc, got, want)
		}
	}
	res, _ := NewDecoder(Options{}).DecodeProto(protoOf(t, ptraceOne(t, "")), &record.Batch{}, nil)
	if o := res.Batches[0].Origin; o.Service != trace.UnknownService || o.Host != trace.UnknownService {
		t.Errorf("origin %+v, want %s", o, trace.UnknownService)
	}
}

// ptraceOne is one span of a resource with service.name svc ("": none).
func ptraceOne(t *testing.T, svc string) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	if svc != "" {
		rs.Resource().Attributes().PutStr("service.name", svc)
	}
	s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.SetTraceID(pcommon.TraceID{0: 1})
	s.SetSpanID(pcommon.SpanID{0: 1})
	return td
}
