package split

import "github.com/tracebridge/tracebridge/internal/trace"

// childID is the traceId of the partial trace cut out of trace parent at
// its orderIndex (or eoi) order: a 64-bit mix of both (the finalizer of
// SplitMix64, applied twice). Merging recognises split children by it:
// a TraceMetadata whose traceId is childID(parentTraceId, parentOrderId).
// Kieker's own child traces (threads, remote calls) have ids of their own
// and never match but by a 2^-64 accident.
func childID(parent int64, order int32) int64 {
	x := uint64(parent) ^ 0x6a09e667f3bcc909
	x = trace.Mix(x)
	x ^= uint64(uint32(order)) * 0x9e3779b97f4a7c15
	x = trace.Mix(x ^ 0xbb67ae8584caa73b)
	id := int64(x)
	if id == -1 || id == parent { // -1 means "no trace" to Kieker
		id ^= 0x5555555555555555
	}
	return id
}
