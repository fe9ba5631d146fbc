package zico_test

import (
	"math/rand/v2"
	"testing"

	"github.com/tracebridge/tracebridge/internal/codec/zico"
	"github.com/tracebridge/tracebridge/internal/codec/zico/zicotest"
)

// benchPayloads returns the first DATA payload of a connection (symbols
// and a trace of n records) and a later one (the same trace, symbols
// known), with the symbol table the first one leaves.
func benchPayloads(b *testing.B, n int) (first, later []byte, syms *zico.SymbolMap) {
	rng := rand.New(rand.NewPCG(11, uint64(n)))
	p := zicotest.NewPayload(zicotest.NewRegistry())
	r := zicotest.Generate(rng, n, clock)
	first = p.Append(nil, &r)
	later = p.Append(nil, &r)
	syms = zico.NewSymbolMap(0, 0)
	if err := zico.NewDecoder(zico.Limits{}).DecodeData(first, syms, func(zico.Object) error { return nil }); err != nil {
		b.Fatal(err)
	}
	return first, later, syms
}

// BenchmarkDecodeData decodes DATA payloads of one trace as a session
// does (symbols resolved); records/s counts trace records.
//
//	go test -run '^$' -bench DecodeData -benchmem ./internal/codec/zico/
func BenchmarkDecodeData(b *testing.B) {
	for _, bc := range []struct {
		name    string
		records int
		first   bool // with the connection's first symbols
	}{
		{"records=100", 100, false},
		{"records=1000", 1000, false},
		{"records=10000", 10000, false},
		{"records=1000/first", 1000, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			first, later, syms := benchPayloads(b, bc.records)
			payload := later
			if bc.first {
				payload = first
			}
			d := zico.NewDecoder(zico.Limits{})
			records := 0
			visit := func(o zico.Object) error {
				if t, ok := o.(*zico.Trace); ok {
					records += t.Records
				}
				return nil
			}
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			for b.Loop() {
				if bc.first {
					syms.Reset()
				}
				if err := d.DecodeData(payload, syms, visit); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkCopy is the baseline: copying the payload of
// BenchmarkDecodeData/records=1000 once.
func BenchmarkCopy(b *testing.B) {
	_, later, _ := benchPayloads(b, 1000)
	dst := make([]byte, len(later))
	b.SetBytes(int64(len(later)))
	for b.Loop() {
		copy(dst, later)
	}
}

// BenchmarkFrames reads DATA frames of the records=1000 payload from a
// stream (header, CRC, payload copy), without decoding.
func BenchmarkFrames(b *testing.B) {
	_, later, _ := benchPayloads(b, 1000)
	frame := zico.AppendFrame(nil, zico.Data, later)
	fr := zico.NewFrameReader(&loopReader{b: frame}, 0)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fr.Next(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncode writes the records=1000 trace as the test agent does.
func BenchmarkEncode(b *testing.B) {
	rng := rand.New(rand.NewPCG(11, 1000))
	r := zicotest.Generate(rng, 1000, clock)
	p := zicotest.NewPayload(zicotest.NewRegistry())
	buf := p.Append(nil, &r)
	b.SetBytes(int64(len(p.Append(buf[:0], &r))))
	b.ReportAllocs()
	for b.Loop() {
		buf = p.Append(buf[:0], &r)
	}
}
