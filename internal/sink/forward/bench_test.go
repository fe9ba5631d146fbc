package forward

import (
	"context"
	"testing"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/record"
)

func BenchmarkForwardKieker(b *testing.B) { benchForward(b, Kieker) }

func BenchmarkForwardKDB(b *testing.B) { benchForward(b, KDB) }

// benchForward sends batches of 1024 BeforeOperationEvents to a loopback
// server that discards them. Bytes are the encoded records (registry
// entries, sent once per connection, not counted).
func benchForward(b *testing.B, proto Protocol) {
	rec := newReceiver(b, proto)
	rec.discard = true
	rec.start()
	defer rec.stop()
	s, err := New(Config{URL: rec.url()}, Settings{})
	if err != nil {
		b.Fatal(err)
	}
	batch := events(0, 1024)
	b.SetBytes(int64(encodedSize(b, proto, batch)))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Consume(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N*batch.Len())/b.Elapsed().Seconds(), "records/s")
}

// encodedSize is the size of batch on the wire once every string has been
// registered.
func encodedSize(tb testing.TB, proto Protocol, batch *record.Batch) int {
	var buf []byte
	var err error
	if proto == KDB {
		m, err := kdb.DefaultMapping(cat)
		if err != nil {
			tb.Fatal(err)
		}
		enc := kdb.NewEncoder(m, kdb.Options{})
		for i := range batch.Records {
			if buf, err = enc.AppendBinary(buf, &batch.Records[i]); err != nil {
				tb.Fatal(err)
			}
		}
		return len(buf)
	}
	enc := kieker.NewEncoder(kieker.EncoderOptions{Inline: true})
	for range 2 {
		buf = buf[:0]
		for i := range batch.Records {
			if buf, err = enc.Append(buf, &batch.Records[i]); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return len(buf)
}
