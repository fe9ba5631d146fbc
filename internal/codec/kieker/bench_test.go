package kieker

import (
	"fmt"
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
)

// benchRecords returns about n records of the realistic mix: traces of a
// TraceMetadata followed by nested Before/After events (one in 30 calls
// fails), over 50 operations of 10 classes.
func benchRecords(n int) []record.Record {
	cat := record.Builtin()
	meta := cat.Lookup(record.TraceMetadata)
	before := cat.Lookup(record.BeforeOperationEvent)
	after := cat.Lookup(record.AfterOperationEvent)
	failed := cat.Lookup(record.AfterOperationFailedEvent)
	var ops, classes []string
	for i := 0; i < 50; i++ {
		cls := fmt.Sprintf("com.example.shop.service.Component%d", i%10)
		classes = append(classes, cls)
		ops = append(ops, fmt.Sprintf("public java.util.List %s.operation%d(long, java.lang.String)", cls, i))
	}
	var out []record.Record
	ts := int64(1795312704163886691)
	call := 0
	for trace := int64(1); len(out) < n; trace++ {
		traceID := trace * 7919
		out = append(out, record.Record{Type: meta, LoggingTimestamp: -1, Values: []record.Value{
			record.IntValue(traceID), record.IntValue(1), record.StringValue("<no-session-id>"),
			record.StringValue("shop-host-01"), record.IntValue(traceID), record.IntValue(-1)}})
		order := int64(0)
		var stack []int
		for k := 0; k < 10; k++ {
			op := (int(trace)*13 + k*7) % len(ops)
			stack = append(stack, op)
			ts += 1200
			out = append(out, record.Record{Type: before, LoggingTimestamp: -1, Values: []record.Value{
				record.IntValue(ts), record.IntValue(traceID), record.IntValue(order),
				record.StringValue(ops[op]), record.StringValue(classes[op])}})
			order++
			if k%3 == 2 || k == 9 {
				for len(stack) > 0 {
					op := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					ts += 800
					call++
					vals := []record.Value{record.IntValue(ts), record.IntValue(traceID), record.IntValue(order),
						record.StringValue(ops[op]), record.StringValue(classes[op])}
					typ := after
					if call%30 == 0 {
						typ = failed
						vals = append(vals, record.StringValue("java.lang.IllegalStateException: out of stock"))
					}
					out = append(out, record.Record{Type: typ, LoggingTimestamp: -1, Values: vals})
					order++
				}
			}
		}
	}
	return out
}

// benchBinary returns the mix as a .bin file, its string table and the
// record count.
func benchBinary(tb testing.TB, n int) ([]byte, *Strings, int) {
	recs := benchRecords(n)
	e := NewEncoder(EncoderOptions{})
	var data []byte
	for i := range recs {
		var err error
		if data, err = e.Append(data, &recs[i]); err != nil {
			tb.Fatal(err)
		}
	}
	strs := NewStrings(0)
	for _, en := range e.NewEntries() {
		if err := strs.Set(en.ID, en.Value); err != nil {
			tb.Fatal(err)
		}
	}
	return data, strs, len(recs)
}

func reportPerRecord(b *testing.B, records int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(records), "ns/record")
}

// readSize is the read buffer of the decode benchmarks: a source reads
// this much, decodes it into a batch, hands the batch on and resets it.
const readSize = 64 << 10

// decodeReads decodes data as a source does, readSize bytes at a time.
func decodeReads(b *testing.B, d *Decoder, data []byte, batch *record.Batch) {
	for pos := 0; pos < len(data); {
		end := min(pos+readSize, len(data))
		n, err := d.Decode(data[pos:end], batch)
		if err != nil {
			b.Fatal(err)
		}
		pos += n
		batch.Reset()
	}
}

// BenchmarkBaselineCopy is the baseline the decoding benchmarks compare
// with: copying the same bytes in the same read-sized pieces, the least a
// reader of them must do. Report decoders as a ratio of its MB/s.
func BenchmarkBaselineCopy(b *testing.B) {
	data, _, n := benchBinary(b, 10000)
	buf := make([]byte, readSize)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		for pos := 0; pos < len(data); pos += readSize {
			copy(buf, data[pos:min(pos+readSize, len(data))])
		}
	}
	reportPerRecord(b, n)
}

func BenchmarkDecodeBinary(b *testing.B) {
	data, strs, n := benchBinary(b, 10000)
	d := NewDecoder(Options{Strings: strs})
	var batch record.Batch
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		decodeReads(b, d, data, &batch)
	}
	reportPerRecord(b, n)
}

func BenchmarkDecodeInlineTCP(b *testing.B) {
	recs := benchRecords(10000)
	e := NewEncoder(EncoderOptions{Inline: true})
	var data []byte
	for i := range recs {
		data, _ = e.Append(data, &recs[i])
	}
	var batch record.Batch
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		// A new connection each time: the registry is rebuilt.
		decodeReads(b, NewDecoder(Options{Inline: true}), data, &batch)
	}
	reportPerRecord(b, len(recs))
}

func BenchmarkDecodeASCII(b *testing.B) {
	recs := benchRecords(10000)
	var reg Registry
	strs := NewStrings(0)
	var data []byte
	for i := range recs {
		id, isNew := reg.ID(recs[i].Type.Name)
		if isNew {
			_ = strs.Set(id, recs[i].Type.Name)
		}
		data = AppendLine(data, id, &recs[i])
	}
	var batch record.Batch
	d := NewTextDecoder(TextOptions{Strings: strs})
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		for pos := 0; pos < len(data); {
			end := min(pos+readSize, len(data))
			n, err := d.Decode(data[pos:end], &batch)
			if err != nil {
				b.Fatal(err)
			}
			pos += n
			batch.Reset()
		}
	}
	reportPerRecord(b, len(recs))
}

func BenchmarkEncodeBinary(b *testing.B) {
	recs := benchRecords(10000)
	e := NewEncoder(EncoderOptions{})
	var buf []byte
	for i := range recs {
		buf, _ = e.Append(buf, &recs[i])
	}
	e.NewEntries()
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = buf[:0]
		for i := range recs {
			buf, _ = e.Append(buf, &recs[i])
		}
	}
	reportPerRecord(b, len(recs))
}

func BenchmarkEncodeASCII(b *testing.B) {
	recs := benchRecords(10000)
	var reg Registry
	var buf []byte
	for i := range recs {
		id, _ := reg.ID(recs[i].Type.Name)
		buf = AppendLine(buf, id, &recs[i])
	}
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = buf[:0]
		for i := range recs {
			id, _ := reg.ID(recs[i].Type.Name)
			buf = AppendLine(buf, id, &recs[i])
		}
	}
	reportPerRecord(b, len(recs))
}

// BenchmarkDecodeFrames: BenchmarkDecodeBinary's stream decoded into
// values (values), values and frames (frames, Options.KeepFrames) and
// frames only (only, Options.FramesOnly for every type, as serve has it
// for a bridge into a binary log: the trace metadata too).
func BenchmarkDecodeFrames(b *testing.B) {
	data, strs, n := benchBinary(b, 10000)
	for _, mode := range []string{"values", "frames", "only"} {
		b.Run(mode, func(b *testing.B) {
			o := Options{Strings: strs, KeepFrames: mode != "values"}
			if mode == "only" {
				o.FramesOnly = func(*record.Type) bool { return true }
			}
			d := NewDecoder(o)
			var batch record.Batch
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				decodeReads(b, d, data, &batch)
			}
			reportPerRecord(b, n)
		})
	}
}
