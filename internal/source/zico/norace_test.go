//go:build !race

package zico

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/zico/zicotest"
)

// TestTraceIDAllocs: the id costs no allocation per record (not under
// -race, whose sync.Pool drops what it is given).
func TestTraceIDAllocs(t *testing.T) {
	root := zicotest.Generate(rand.New(rand.NewPCG(3, 4)), 50, time.Unix(1_700_000_000, 0))
	tr := &Trace{Root: &root}
	TraceID("h", tr)
	if n := testing.AllocsPerRun(100, func() { TraceID("h", tr) }); n > 0 {
		t.Errorf("%v allocations per trace of 50 calls", n)
	}
}
