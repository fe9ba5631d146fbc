//go:build !race

package zico_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/tracebridge/tracebridge/internal/codec/zico"
	"github.com/tracebridge/tracebridge/internal/codec/zico/zicotest"
)

// Allocation counts differ under the race detector; .ci/run runs the
// allocation tests once more without it.

// TestFrameReaderAllocsGrowWithData: a frame that claims 1 MiB and sends 10
// bytes does not make the reader allocate the megabyte.
func TestFrameReaderAllocsGrowWithData(t *testing.T) {
	in := zico.AppendFrame(nil, zico.Data, make([]byte, 1<<20))[:zico.HeaderSize+10]
	allocs := testing.AllocsPerRun(10, func() {
		fr := zico.NewFrameReader(bytes.NewReader(in), 0)
		if _, err := fr.Next(); !errors.Is(err, zico.ErrTruncated) {
			t.Fatal(err)
		}
	})
	if allocs > 10 {
		t.Fatalf("%v allocations", allocs)
	}
	// Measured in bytes: far below the claimed megabyte.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		fr := zico.NewFrameReader(bytes.NewReader(in), 0)
		fr.Next()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / 10; per > 200<<10 {
		t.Fatalf("%d bytes allocated for a 10-byte payload", per)
	}
}

// TestFrameReaderNoAllocs: reading frames of a steady size allocates
// nothing.
func TestFrameReaderNoAllocs(t *testing.T) {
	frame := zico.AppendFrame(nil, zico.Data, bytes.Repeat([]byte("x"), 5000))
	r := &loopReader{b: frame}
	fr := zico.NewFrameReader(r, 0)
	fr.Next()
	if allocs := testing.AllocsPerRun(100, func() {
		if _, err := fr.Next(); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Fatalf("%v allocations per frame", allocs)
	}
}

// TestDecodeAllocs: once its memory has grown, a Decoder allocates for a
// payload only the strings it carries.
func TestDecodeAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	reg := zicotest.NewRegistry()
	p := zicotest.NewPayload(reg)
	syms := zico.NewSymbolMap(0, 0)
	d := zico.NewDecoder(zico.Limits{})
	r := zicotest.Generate(rng, 3000, clock)
	first := p.Append(nil, &r)
	if err := d.DecodeData(first, syms, func(zico.Object) error { return nil }); err != nil {
		t.Fatal(err)
	}
	steady := p.Append(nil, &r) // symbols sent already
	strs := 0
	r.Walk(func(rec *zico.TraceRecord, _ int) bool {
		for _, a := range rec.Attrs {
			for v := &a.Value; v != nil; v = v.Elem {
				if v.Kind == zico.KindString {
					strs++
				}
			}
		}
		for x := rec.Exception; x != nil; x = x.Cause {
			if x.Message != "" {
				strs++
			}
		}
		return true
	})
	allocs := testing.AllocsPerRun(20, func() {
		if err := d.DecodeData(steady, syms, func(zico.Object) error { return nil }); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%d records, %d strings, %.0f allocations", countRecords(&r), strs, allocs)
	if allocs > float64(strs) {
		t.Fatalf("%.0f allocations for a payload of %d strings", allocs, strs)
	}
}
