package streammsg

import (
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
)

// benchBatch is 1000 Kieker events with interned strings, as a
// connection's decoder makes them.
func benchBatch() *record.Batch {
	cat := record.Builtin()
	b := &record.Batch{}
	sigs := []string{"public void org.example.shop.Cart.add(int)", "public int org.example.shop.Cart.size()"}
	for i := range 1000 {
		t := cat.Lookup(record.BeforeOperationEvent)
		if i%2 == 1 {
			t = cat.Lookup(record.AfterOperationEvent)
		}
		r := b.Add(t, -1)
		r.Values[0] = record.IntValue(1_700_000_000_000_000_000 + int64(i)*137)
		r.Values[1] = record.IntValue(int64(i / 20))
		r.Values[2] = record.IntValue(int64(i % 20))
		r.Values[3] = record.StringValue(sigs[i/2%2])
		r.Values[4] = record.StringValue("org.example.shop.Cart")
	}
	return b
}

func BenchmarkAppendBinary(b *testing.B) {
	batch := benchBatch()
	h := Header{Run: 1, Meta: 1, BatchRecords: 1000, Parts: []PartRef{{TypeID: 1, Host: "h"}}, Count: 1000}
	var enc Encoder
	buf := enc.AppendBinary(nil, &h, batch.Records)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = enc.AppendBinary(buf[:0], &h, batch.Records)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/record")
}

func BenchmarkRecords(b *testing.B) {
	batch := benchBatch()
	h := Header{Run: 1, Meta: 1, BatchRecords: 1000, Parts: []PartRef{{TypeID: 1, Host: "h"}}, Count: 1000}
	var enc Encoder
	// One type per part, as the sink publishes: decode the Before events.
	typ := batch.Records[0].Type
	var recs []record.Record
	for i := range batch.Records {
		if batch.Records[i].Type == typ {
			recs = append(recs, batch.Records[i])
		}
	}
	h.Count, h.BatchRecords = len(recs), uint32(len(recs))
	msg := enc.AppendBinary(nil, &h, recs)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	var m Message
	var out record.Batch
	var in record.Interner
	for b.Loop() {
		if err := m.Parse(msg); err != nil {
			b.Fatal(err)
		}
		out.Reset()
		if err := m.Records(typ, &out, &in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
}
