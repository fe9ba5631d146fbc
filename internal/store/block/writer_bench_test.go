package block

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// BenchmarkWriter builds a block of 32 MiB of trace bodies (a head's
// worth) in pages of 64 KiB, as the store cuts a head: bodies of about
// 2 KiB of varints, half of them repeating (symbol ids), half not (ids,
// times), so that the pages compress about as a store's do.
func BenchmarkWriter(b *testing.B) {
	const traces, bodySize = 16384, 2048
	rng := rand.New(rand.NewPCG(1, 2))
	bodies := make([][]byte, traces)
	for i := range bodies {
		var body []byte
		for len(body) < bodySize {
			body = binary.AppendUvarint(body, uint64(rng.IntN(64)))
			body = binary.AppendUvarint(body, rng.Uint64()>>rng.IntN(64))
		}
		bodies[i] = body
	}
	dict := []string{"", "op"}
	b.SetBytes(traces * bodySize)
	b.ReportAllocs()
	for b.Loop() {
		w := NewWriter(64 << 10)
		for i, body := range bodies {
			w.Add(body, Summary{ID: trace.ID{Lo: uint64(i + 1)}, Start: int64(i), Duration: 10, Spans: 8, Name: 1})
		}
		if _, _, err := w.Finish(dict, nil); err != nil {
			b.Fatal(err)
		}
	}
}
