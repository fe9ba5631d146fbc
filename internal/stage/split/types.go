package split

import (
	"strings"

	"github.com/tracebridge/tracebridge/internal/record"
)

// role is what a record type is to trace splitting.
type role uint8

const (
	roleNone   role = iota // not part of a trace: passed on in place
	roleMeta               // TraceMetadata, ApplicationTraceMetadata
	roleBefore             // opens a call (BeforeOperationEvent and kin)
	roleAfter              // closes a call (AfterOperationEvent, …FailedEvent and kin)
	roleEvent              // another event of a trace (Call, Split, Join, …): a point in the caller's frame
	roleOER                // OperationExecutionRecord
)

// typeInfo is what splitting needs to know about a record type: its role
// and where its fields are. Field indexes are -1 when absent.
type typeInfo struct {
	role role

	traceID, orderIndex int // events; traceID also for metadata and OERs
	class, op           int // events: classSignature, operationSignature; OERs: op

	parentTraceID, parentOrderID int // metadata

	session, host, eoi, ess int // OERs
}

// operationPackage holds Kieker's Before/After/Call event types (with the
// constructor and object variants below it).
const operationPackage = record.Prefix + "flow.trace.operation."

// classify works out the role of a type. Before and After events are the
// types of Kieker's flow.trace.operation packages whose short name starts
// with Before, EntryLevelBefore or After, and that have a long traceId, an
// int orderIndex and a string classSignature; every other type with a long
// traceId and an int orderIndex is a point event of its trace.
func classify(t *record.Type) *typeInfo {
	ti := &typeInfo{
		traceID: field(t, "traceId", record.Long), orderIndex: field(t, "orderIndex", record.Int),
		class: field(t, "classSignature", record.String), op: field(t, "operationSignature", record.String),
		parentTraceID: -1, parentOrderID: -1, session: -1, host: -1, eoi: -1, ess: -1,
	}
	switch t.Name {
	case record.TraceMetadata, record.ApplicationTraceMetadata:
		ti.parentTraceID = field(t, "parentTraceId", record.Long)
		ti.parentOrderID = field(t, "parentOrderId", record.Int)
		if ti.traceID >= 0 && ti.parentTraceID >= 0 && ti.parentOrderID >= 0 {
			ti.role = roleMeta
		}
		return ti
	case record.OperationExecutionRecord:
		ti.session = field(t, "sessionId", record.String)
		ti.host = field(t, "hostname", record.String)
		ti.eoi = field(t, "eoi", record.Int)
		ti.ess = field(t, "ess", record.Int)
		if ti.traceID >= 0 && ti.op >= 0 && ti.eoi >= 0 && ti.ess >= 0 {
			ti.role = roleOER
		}
		return ti
	}
	if ti.traceID < 0 || ti.orderIndex < 0 {
		return ti
	}
	ti.role = roleEvent
	if strings.HasPrefix(t.Name, operationPackage) && ti.class >= 0 {
		short := t.ShortName()
		switch {
		case strings.HasPrefix(short, "Before"), strings.HasPrefix(short, "EntryLevelBefore"):
			ti.role = roleBefore
		case strings.HasPrefix(short, "After"):
			ti.role = roleAfter
		}
	}
	return ti
}

func field(t *record.Type, name string, k record.Kind) int {
	i := t.FieldIndex(name)
	if i < 0 || t.Fields[i].Kind != k || t.Fields[i].Array {
		return -1
	}
	return i
}

// typeCache remembers typeInfo per type. A few recent types are checked
// first: streams are long runs of few types (Before, After, …).
type typeCache struct {
	recent [4]struct {
		t  *record.Type
		ti *typeInfo
	}
	next int
	m    map[*record.Type]*typeInfo
}

// maxCachedTypes bounds the table (types are few; a catalogue that keeps
// growing at run time must not grow it without end).
const maxCachedTypes = 4096

func (c *typeCache) get(t *record.Type) *typeInfo {
	for i := range c.recent {
		if c.recent[i].t == t {
			return c.recent[i].ti
		}
	}
	ti, ok := c.m[t]
	if !ok {
		ti = classify(t)
		if c.m == nil || len(c.m) >= maxCachedTypes {
			c.m = make(map[*record.Type]*typeInfo)
		}
		c.m[t] = ti
	}
	r := &c.recent[c.next]
	r.t, r.ti = t, ti
	c.next = (c.next + 1) % len(c.recent)
	return ti
}

// childID is the traceId of the partial trace cut out of trace parent at
// its orderIndex (or eoi) order: a 64-bit mix of both (the finalizer of
// SplitMix64, applied twice). Merging recognises split children by it:
// a TraceMetadata whose traceId is childID(parentTraceId, parentOrderId).
// Kieker's own child traces (threads, remote calls) have ids of their own
// and never match but by a 2^-64 accident.
func childID(parent int64, order int32) int64 {
	x := uint64(parent) ^ 0x6a09e667f3bcc909
	x = mix64(x)
	x ^= uint64(uint32(order)) * 0x9e3779b97f4a7c15
	x = mix64(x ^ 0xbb67ae8584caa73b)
	id := int64(x)
	if id == -1 || id == parent { // -1 means "no trace" to Kieker
		id ^= 0x5555555555555555
	}
	return id
}

func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
