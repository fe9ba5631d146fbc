//go:build !race

package stream_test

import (
	"context"
	"testing"

	sink "github.com/tracebridge/tracebridge/internal/sink/stream"
)

// TestAllocPacking: packing a batch while more wait allocates nothing
// per record (the packed batch's arena grows to its working size and is
// reused).
func TestAllocPacking(t *testing.T) {
	s, _ := newSink(t, sink.Config{})
	s.SetBacklog(func() int { return 1 })
	ctx := context.Background()
	b := events("h", 1, 0) // one record: 1,001 stay below a packed batch's 4,096
	allocs := testing.AllocsPerRun(1000, func() { s.Consume(ctx, b) })
	if allocs > 0 {
		t.Errorf("%.2f allocations per record packed", allocs)
	}
}
