//go:build !race

package trace

// hugeTraceEvents is the length of TestHugeKiekerTraceBoundedMemory's
// trace.
const hugeTraceEvents = 10_000_000
