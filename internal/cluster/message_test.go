package cluster

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// testBatch holds spans of two traces, an OperationExecutionRecord, a
// Kieker event and a record outside any trace.
func testBatch(t testing.TB) *record.Batch {
	cat := trace.Types()
	b := &record.Batch{Origin: record.Origin{Receiver: "otlp", Peer: "10.0.0.1:5555", Host: "web-1", Service: "shop", Session: "7"}}
	for i, id := range []trace.ID{{Hi: 1, Lo: 2}, {Hi: 3, Lo: 4}} {
		trace.AppendSpan(b, id, &trace.Span{SpanID: trace.SpanID(10 + i), Operation: "GET /cart", Service: "shop", Host: "web-1", Start: 100, End: 200,
			Attributes: []trace.Attr{{Key: "http.status_code", Value: "200"}}})
	}
	oer := b.Add(cat.Lookup(record.OperationExecutionRecord), 5)
	oer.Values[0] = record.StringValue("void a.B.c()")
	oer.Values[1] = record.StringValue("sess")
	oer.Values[2] = record.IntValue(42)
	oer.Values[5] = record.StringValue("host-a")
	ev := b.Add(cat.Lookup(record.BeforeOperationEvent), 6)
	ev.Values[1] = record.IntValue(42)
	ev.Values[3] = record.StringValue("void a.B.c()")
	ev.Values[4] = record.StringValue("a.B")
	b.Add(cat.Lookup(record.Prefix+"misc.KiekerMetadataRecord"), 7)
	return b
}

// encode is what the publisher does for the records idx of b.
func encode(t testing.TB, b *record.Batch, idx []int) []byte {
	enc := kieker.NewEncoder(kieker.EncoderOptions{Inline: true})
	buf := appendOrigin(nil, &b.Origin)
	for _, i := range idx {
		var err error
		if buf, err = enc.Append(buf, &b.Records[i]); err != nil {
			t.Fatal(err)
		}
	}
	return buf
}

func TestMessageRoundTrip(t *testing.T) {
	b := testBatch(t)
	msg := encode(t, b, []int{0, 1, 2, 3, 4})
	got := &record.Batch{}
	if err := NewDecoder(nil).Decode(msg, got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(b.Origin, got.Origin); diff != "" {
		t.Errorf("origin (-want +got):\n%s", diff)
	}
	if got.Len() != b.Len() {
		t.Fatalf("%d records, want %d", got.Len(), b.Len())
	}
	for i := range b.Records {
		w, g := &b.Records[i], &got.Records[i]
		if w.Type != g.Type || w.LoggingTimestamp != g.LoggingTimestamp || len(w.Values) != len(g.Values) {
			t.Fatalf("record %d: %s/%d, want %s/%d", i, g.Type.Name, g.LoggingTimestamp, w.Type.Name, w.LoggingTimestamp)
		}
		for j := range w.Values {
			if !w.Values[j].Equal(g.Values[j]) {
				t.Errorf("record %d (%s) field %s: %v, want %v", i, w.Type.Name, w.Type.Fields[j].Name, g.Values[j], w.Values[j])
			}
		}
	}
}

func TestDecodeMalformed(t *testing.T) {
	b := testBatch(t)
	msg := encode(t, b, []int{0, 1})
	for name, m := range map[string][]byte{
		"empty":           nil,
		"no magic":        []byte("XXXX"),
		"origin cut":      msg[:6],
		"record cut":      msg[:len(msg)-3],
		"unknown class":   append(appendOrigin(nil, &b.Origin), kieker.AppendRegistryEntry(nil, 0, "no.such.Type", true)...),
		"huge origin len": append([]byte(magic), 0xff, 0xff, 0xff, 0xff, 0x0f),
	} {
		t.Run(name, func(t *testing.T) {
			err := NewDecoder(nil).Decode(m, &record.Batch{})
			if name == "unknown class" && err == nil {
				return // a registry entry alone holds no record
			}
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err %v, want ErrMalformed", err)
			}
		})
	}
}

func TestPartition(t *testing.T) {
	b := testBatch(t)
	p := NewPartitioner(32)
	a, c := p.Partition(&b.Records[0], &b.Origin), p.Partition(&b.Records[1], &b.Origin)
	if a < 0 || c < 0 || a >= 32 || c >= 32 {
		t.Fatalf("spans in partitions %d and %d", a, c)
	}
	// The same trace id: the same partition, whatever the origin (every
	// node computes it alike).
	again := &record.Batch{}
	trace.AppendSpan(again, trace.ID{Hi: 1, Lo: 2}, &trace.Span{SpanID: 99})
	if got := p.Partition(&again.Records[0], &record.Origin{Host: "elsewhere"}); got != a {
		t.Errorf("span of trace 1/2 from another host: partition %d, want %d", got, a)
	}
	// Every Kieker trace record meets in one partition, whatever its
	// traceId or host (trace.RouteKey).
	oer, ev := p.Partition(&b.Records[2], &b.Origin), p.Partition(&b.Records[3], &record.Origin{Host: "other"})
	if oer != ev || oer != trace.Shard(trace.KiekerKey, 32) {
		t.Errorf("OER in partition %d, Kieker event in %d: want both in %d", oer, ev, trace.Shard(trace.KiekerKey, 32))
	}
	if got := p.Partition(&b.Records[4], &b.Origin); got != -1 {
		t.Errorf("a record outside traces: partition %d, want -1 (not published)", got)
	}
}

// FuzzDecode: no input makes Decode panic, and what it decodes without
// error encodes to a message that decodes to the same records.
func FuzzDecode(f *testing.F) {
	b := testBatch(f)
	f.Add(encode(f, b, []int{0, 1, 2, 3, 4}))
	f.Add(encode(f, b, []int{2}))
	f.Add(appendOrigin(nil, &record.Origin{}))
	f.Add([]byte(magic))
	f.Fuzz(func(t *testing.T, msg []byte) {
		got := &record.Batch{}
		if err := NewDecoder(nil).Decode(msg, got); err != nil {
			return
		}
		idx := make([]int, got.Len())
		for i := range idx {
			idx[i] = i
		}
		again := &record.Batch{}
		if err := NewDecoder(nil).Decode(encode(t, got, idx), again); err != nil {
			t.Fatalf("re-encoded message: %v", err)
		}
		if again.Len() != got.Len() || again.Origin != got.Origin {
			t.Fatalf("re-encoded: %d records %+v, want %d %+v", again.Len(), again.Origin, got.Len(), got.Origin)
		}
	})
}
