package trace

import (
	"github.com/tracebridge/tracebridge/internal/record"
)

// KiekerKey is the routing key of every Kieker trace record
// (TraceMetadata, Before/After and the other events of a trace,
// OperationExecutionRecords, invocation identifiers): see RouteKey.
const KiekerKey uint64 = 0x4b69656b6572 // "Kieker"

// RouteKey is the one rule that says which records must meet in one
// Assembler: records with the same key must be added to the same one;
// records with different keys never belong to one trace. ok is false for a
// record that is part of no trace (an Assembler ignores it). ti is the
// record's TypeInfo (a TypeCache's, or Classify's).
//
//   - A span record (OTLP, zorka, our clients' spans) is keyed by its
//     128-bit trace id: spans link across traces only by Links, which
//     are data, not assembly, so a trace's spans need each other only.
//   - Every Kieker trace record has one key, KiekerKey. Kieker links
//     traces of different trace ids while assembling them, and what it
//     links arrives on different connections, in any order: a
//     TraceMetadata names its parent thread's traceId (parentTraceId), an
//     invocation identifier names the invocation that created its task on
//     another thread, process or node, and OperationExecutionRecords of
//     one traceId come from every process a request crossed. No key
//     smaller than "all of Kieker" (a host, a session, a connection, a
//     traceId) keeps those together without first seeing the link, which
//     may arrive last; so a Kieker stream is assembled in one place, as
//     before sharding, and only span records spread over the shards.
//
// A span record whose trace id has a zero high half names the same trace
// as a Kieker record of that traceId (KiekerID); routed apart, the two
// are assembled as two traces. Sources do not mix them (span records come
// from OTLP, zorka and our clients, whose ids are random).
//
// The cluster's JetStream partitions use the same rule, so that one
// bridge's assembler sees a whole trace (Shard maps a key to one of n).
func RouteKey(ti *TypeInfo, r *record.Record) (key uint64, ok bool) {
	switch ti.Role {
	case RoleMeta, RoleBefore, RoleAfter, RoleEvent, RoleOER, RoleInvocation:
		return KiekerKey, true
	}
	if !ti.Span || len(r.Values) != spanFields {
		return 0, false
	}
	v := r.Values
	return Mix(uint64(v[SpanTraceIDHigh].Int()) ^ Mix(uint64(v[SpanTraceIDLow].Int()))), true
}

// Shard returns which of n shards (0 … n-1) key goes to.
func Shard(key uint64, n int) int {
	if n <= 1 {
		return 0
	}
	return int(Mix(key) % uint64(n))
}

// Router applies RouteKey to records, classifying their types once. It is
// not safe for concurrent use.
type Router struct {
	types TypeCache
}

// Key returns r's routing key (RouteKey).
func (rt *Router) Key(r *record.Record) (key uint64, ok bool) {
	switch r.Type {
	case nil:
		return 0, false
	case SpanType:
		// (Most records a bridge routes: no type lookup.)
		return RouteKey(&spanTypeInfo, r)
	}
	return RouteKey(rt.types.Get(r.Type), r)
}

// spanTypeInfo is SpanType's TypeInfo.
var spanTypeInfo = *Classify(SpanType)

// AddShard is AddBatch for the records of b that route to shard me:
// route[i] is record i's shard (route nil: every record). A sharded bridge
// hands one batch to several Assemblers, each taking its own records.
func (a *Assembler) AddShard(b *record.Batch, route []uint8, me uint8) {
	if route == nil {
		a.AddBatch(b)
		return
	}
	if a.opt.Clock == WallClock {
		a.batchNow = a.opt.Now().UnixNano() // one clock reading per batch
		defer func() { a.batchNow = 0 }()
	}
	for i := range b.Records {
		if i < len(route) && route[i] == me {
			a.Add(&b.Records[i], &b.Origin)
		}
	}
	a.finishComplete()
	a.limit()
}
