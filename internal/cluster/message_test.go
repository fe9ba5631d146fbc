package cluster

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

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

// records encodes the records idx of b as a section's records.
func records(t testing.TB, b *record.Batch, idx []int) []byte {
	enc := kieker.NewEncoder(kieker.EncoderOptions{Inline: true})
	var buf []byte
	for _, i := range idx {
		var err error
		if buf, err = enc.Append(buf, &b.Records[i]); err != nil {
			t.Fatal(err)
		}
	}
	return buf
}

// encode is what the publisher does for the records idx of b: a message
// of one section.
func encode(t testing.TB, b *record.Batch, idx []int) []byte {
	return appendSection([]byte(magic), &b.Origin, records(t, b, idx))
}

// section is a section as Decode hands it on.
type section struct {
	id      SectionID
	origin  record.Origin
	records []record.Record
}

// decodeAll decodes msg into its sections.
func decodeAll(msg []byte) ([]section, error) {
	var out []section
	err := NewDecoder(nil).Decode(msg, &record.Batch{}, func(id SectionID, b *record.Batch) {
		out = append(out, section{id: id, origin: b.Origin, records: cloneRecords(b)})
	})
	return out, err
}

func cloneRecords(b *record.Batch) []record.Record {
	out := make([]record.Record, len(b.Records))
	for i, r := range b.Records {
		out[i] = r
		out[i].Values = append([]record.Value(nil), r.Values...)
	}
	return out
}

func sameRecords(t *testing.T, want, got []record.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := &want[i], &got[i]
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

func TestMessageRoundTrip(t *testing.T) {
	b := testBatch(t)
	msg := encode(t, b, []int{0, 1, 2, 3, 4})
	got, err := decodeAll(msg)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("%d sections, want 1", len(got))
	}
	if diff := cmp.Diff(b.Origin, got[0].origin); diff != "" {
		t.Errorf("origin (-want +got):\n%s", diff)
	}
	sameRecords(t, b.Records, got[0].records)
}

// TestMessageSections: a message of several sections (the batches of
// several requests) gives each back with its origin and an id that
// depends on its host, service and records only.
func TestMessageSections(t *testing.T) {
	b := testBatch(t)
	other := *b
	other.Origin = record.Origin{Receiver: "zico", Peer: "10.0.0.2:1", Host: "db-1", Service: "orders", Session: "9"}
	retry := *b
	retry.Origin.Peer, retry.Origin.Session = "10.0.0.1:6666", "8" // the same batch on a new connection
	msg := []byte(magic)
	msg = appendSection(msg, &b.Origin, records(t, b, []int{0, 1}))
	msg = appendSection(msg, &other.Origin, records(t, &other, []int{2, 3}))
	msg = appendSection(msg, &retry.Origin, records(t, &retry, []int{0, 1}))
	got, err := decodeAll(msg)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d sections, want 3", len(got))
	}
	for i, w := range []struct {
		o   record.Origin
		idx []int
	}{{b.Origin, []int{0, 1}}, {other.Origin, []int{2, 3}}, {retry.Origin, []int{0, 1}}} {
		if diff := cmp.Diff(w.o, got[i].origin); diff != "" {
			t.Errorf("section %d: origin (-want +got):\n%s", i, diff)
		}
		var want []record.Record
		for _, k := range w.idx {
			want = append(want, b.Records[k])
		}
		sameRecords(t, want, got[i].records)
	}
	if got[0].id != got[2].id {
		t.Errorf("a retry on another connection: id %x, want %x", got[2].id, got[0].id)
	}
	if got[0].id == got[1].id {
		t.Errorf("two different sections share id %x", got[0].id)
	}
}

// TestMessageGolden pins the format byte for byte (docs/CLUSTER.md):
// go test -run TestMessageGolden ./internal/cluster -update writes it.
func TestMessageGolden(t *testing.T) {
	b := testBatch(t)
	other := record.Origin{Receiver: "zico", Peer: "10.0.0.2:1", Host: "db-1", Service: "orders", Session: "9"}
	msg := []byte(magic)
	msg = appendSection(msg, &b.Origin, records(t, b, []int{0}))
	msg = appendSection(msg, &other, records(t, b, []int{2}))
	golden := filepath.Join("testdata", "message.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, msg, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(msg, want) {
		t.Errorf("the message's bytes changed (-update rewrites %s):\n got %q\nwant %q", golden, msg, want)
	}
	got, err := decodeAll(want)
	if err != nil || len(got) != 2 || got[1].origin != other {
		t.Fatalf("the golden message decodes to %+v, %v", got, err)
	}
	// The sections' ids are a contract between nodes and versions (the
	// JetStream message id, the owners' duplicate key): pinned too.
	var ids []byte
	for _, sec := range got {
		ids = fmt.Appendf(ids, "%x\n", sec.id[:])
	}
	goldenIDs := filepath.Join("testdata", "message.ids.golden")
	if *update {
		if err := os.WriteFile(goldenIDs, ids, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wantIDs, err := os.ReadFile(goldenIDs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ids, wantIDs) {
		t.Errorf("the sections' ids changed (-update rewrites %s):\n got %s\nwant %s", goldenIDs, ids, wantIDs)
	}
}

var update = flag.Bool("update", false, "rewrite the golden files")

// TestMessageFormat1: a message of the first format (one origin, the
// records up to the end) decodes as one section with the id the
// publisher gave such messages.
func TestMessageFormat1(t *testing.T) {
	b := testBatch(t)
	rec := records(t, b, []int{0, 1, 2})
	msg := append(appendOrigin([]byte(magic1), &b.Origin), rec...)
	got, err := decodeAll(msg)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].origin != b.Origin {
		t.Fatalf("sections %+v, want one from %+v", got, b.Origin)
	}
	sameRecords(t, b.Records[:3], got[0].records)
	if want := sectionID(b.Origin.Host, b.Origin.Service, rec); got[0].id != want {
		t.Errorf("id %x, want %x", got[0].id, want)
	}
}

// TestDedupe: an id seen within the window is refused, one seen longer
// ago is new again, and the window keeps at most maxSeen ids.
func TestDedupe(t *testing.T) {
	var d dedupe
	id := func(i int) SectionID { return SectionID{byte(i), byte(i >> 8), byte(i >> 16)} }
	t0 := int64(time.Hour)
	if !d.add(id(1), t0) || d.add(id(1), t0+int64(time.Minute)) {
		t.Fatal("a repeated id within the window was not refused")
	}
	if !d.add(id(2), t0+int64(time.Minute)) {
		t.Fatal("a new id was refused")
	}
	if !d.add(id(1), t0+int64(dedupeWindow)+1) {
		t.Error("an id seen more than the window ago was refused")
	}
	if d.add(id(2), t0+int64(dedupeWindow)+2) {
		t.Error("an id seen within the window was taken again")
	}
	var e dedupe
	for i := range maxSeen + 10 {
		e.add(id(i), t0)
	}
	if len(e.ids) > maxSeen || len(e.fifo)-e.head > maxSeen {
		t.Errorf("%d ids kept, at most %d wanted", len(e.ids), maxSeen)
	}
	if !e.add(id(0), t0) || e.add(id(maxSeen+5), t0) {
		t.Error("the oldest id beyond the bound is still refused, or a recent one is not")
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
		"length past end": appendSection([]byte(magic), &b.Origin, nil)[:len(magic)+len(appendOrigin(nil, &b.Origin))],
		"unknown class":   appendSection([]byte(magic), &b.Origin, kieker.AppendRegistryEntry(nil, 0, "no.such.Type", true)),
		"huge origin len": append([]byte(magic), 0xff, 0xff, 0xff, 0xff, 0x0f),
		"huge section":    append(appendOrigin([]byte(magic), &b.Origin), 0xff, 0xff, 0xff, 0xff, 0x0f),
	} {
		t.Run(name, func(t *testing.T) {
			err := NewDecoder(nil).Decode(m, &record.Batch{}, func(SectionID, *record.Batch) {})
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
// error encodes to a message that decodes to the same sections (origins,
// record counts and ids).
func FuzzDecode(f *testing.F) {
	b := testBatch(f)
	f.Add(encode(f, b, []int{0, 1, 2, 3, 4}))
	f.Add(encode(f, b, []int{2}))
	two := appendSection(encode(f, b, []int{0}), &record.Origin{Host: "x"}, records(f, b, []int{3}))
	f.Add(two)
	f.Add(append(appendOrigin([]byte(magic1), &b.Origin), records(f, b, []int{1})...))
	f.Add(appendSection([]byte(magic), &record.Origin{}, nil))
	f.Add([]byte(magic))
	f.Fuzz(func(t *testing.T, msg []byte) {
		got, err := decodeAll(msg)
		if err != nil {
			return
		}
		again := []byte(magic)
		for _, s := range got {
			sb := &record.Batch{Origin: s.origin, Records: s.records}
			idx := make([]int, len(s.records))
			for i := range idx {
				idx[i] = i
			}
			again = appendSection(again, &s.origin, records(t, sb, idx))
		}
		back, err := decodeAll(again)
		if err != nil {
			t.Fatalf("re-encoded message: %v", err)
		}
		if len(back) != len(got) {
			t.Fatalf("re-encoded: %d sections, want %d", len(back), len(got))
		}
		for i := range got {
			if back[i].origin != got[i].origin || len(back[i].records) != len(got[i].records) {
				t.Fatalf("re-encoded section %d: %d records %+v, want %d %+v", i, len(back[i].records), back[i].origin, len(got[i].records), got[i].origin)
			}
		}
	})
}
