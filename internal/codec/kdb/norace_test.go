//go:build !race

package kdb

import (
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
)

// Allocation counts differ under the race detector; .ci/run runs the
// allocation tests once more without it.

func TestBinaryAllocations(t *testing.T) {
	m := defaultMapping(t)
	data := eventStream(t, m, 1000)
	d := NewDecoder(m, Options{})
	var b record.Batch
	decode := func() {
		b.Reset()
		if n, err := d.Decode(data, &b); err != nil || n != len(data) {
			t.Fatalf("%d, %v", n, err)
		}
	}
	decode()
	if allocs := testing.AllocsPerRun(20, decode); allocs/1000 >= 0.1 {
		t.Fatalf("%.3f allocations per record, want < 0.1", allocs/1000)
	}
}
