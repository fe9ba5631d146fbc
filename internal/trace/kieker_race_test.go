//go:build race

package trace

// hugeTraceEvents is the length of TestHugeKiekerTraceBoundedMemory's
// trace: under the race detector (ten times slower) 2 M events.
const hugeTraceEvents = 2_000_000
