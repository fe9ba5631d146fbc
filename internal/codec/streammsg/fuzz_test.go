package streammsg

import (
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
)

// FuzzMessage feeds arbitrary messages to Parse and Records: no panic, and
// what decodes re-encodes (binary) to a message that decodes to the same
// header and records.
func FuzzMessage(f *testing.F) {
	b := sample()
	var enc Encoder
	for _, h := range parts(b) {
		f.Add(enc.AppendBinary(nil, &h, b.Records))
		f.Add(enc.AppendJSON(nil, &h, b.Records))
	}
	nb := sample() // with null strings: format version 2
	nb.Records[0].Values[8] = record.NullString()
	nb.Records[1].Values[9].List().Items[1] = record.NullString()
	h := parts(nb)[0]
	f.Add(enc.AppendBinary(nil, &h, nb.Records))
	f.Add(enc.AppendJSON(nil, &h, nb.Records))
	f.Add([]byte{'T', 'B', 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		var m Message
		if err := m.Parse(data); err != nil {
			return
		}
		typ := allKinds
		if m.TypeID()%2 == 0 {
			typ = other
		}
		got := &record.Batch{}
		if err := m.Records(typ, got, nil); err != nil {
			if got.Len() != 0 {
				t.Fatalf("%d records left after an error", got.Len())
			}
			return
		}
		if got.Len() != m.Count {
			t.Fatalf("%d records, header says %d", got.Len(), m.Count)
		}
		if m.BatchRecords > 1<<16 {
			return // a batch too large to rebuild here
		}
		h := m.Header
		h.JSON = false
		h.Parts = append([]PartRef(nil), m.Parts...)
		// Re-encode: the records sit at their positions of a batch.
		recs := make([]record.Record, h.BatchRecords)
		for i := range got.Records {
			recs[h.Position(i)] = got.Records[i]
		}
		h.Positions = append([]uint32(nil), m.Positions...)
		out := enc.AppendBinary(nil, &h, recs)
		var m2 Message
		if err := m2.Parse(out); err != nil {
			t.Fatalf("re-encoded message: %v", err)
		}
		again := &record.Batch{}
		if err := m2.Records(typ, again, nil); err != nil {
			t.Fatalf("re-encoded records: %v", err)
		}
		for i := range got.Records {
			if !equalNaN(&got.Records[i], &again.Records[i]) {
				t.Fatalf("record %d differs after a round trip", i)
			}
		}
	})
}
