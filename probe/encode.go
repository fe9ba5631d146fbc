package probe

import (
	"encoding/binary"
	"slices"
)

// Kieker's single-socket TCP encoding, big-endian (see FORMATS.md §2):
//
//	registry entry: int32 -1 | int32 id | int32 byte length | UTF-8 bytes
//	record frame:   int32 classNameId | int64 loggingTimestamp | fields
//
// with every string a registry id sent before its first use on the
// connection. The frames the probe writes:
//
//	TraceMetadata:             traceId long, threadId long, sessionId String,
//	                           hostname String, parentTraceId long, parentOrderId int
//	BeforeOperationEvent,
//	AfterOperationEvent:       timestamp long, traceId long, orderIndex int,
//	                           operationSignature String, classSignature String
//	AfterOperationFailedEvent: the five above, cause String
//	SplitEvent:                timestamp long, traceId long, orderIndex int
//	JoinEvent:                 the three above, joinedTraceId long
//	InvocationRecord:          invocationId long, processId int, nodeId String,
//	(tracebridge.trace.)       runnableId long, creationTime long,
//	                           parentInvocationId long, parentProcessId int,
//	                           parentNodeId String, parentOrderId int, traceId long

// Sizes of the frames, registry entries not counted.
const (
	sizeMeta   = 4 + 8 + 8 + 8 + 4 + 4 + 8 + 4
	sizeEvent  = 4 + 8 + 8 + 8 + 4 + 4 + 4
	sizeFailed = sizeEvent + 4
	sizeSplit  = 4 + 8 + 8 + 8 + 4
	sizeJoin   = sizeSplit + 8
	sizeInv    = 4 + 8 + 8 + 4 + 4 + 8 + 8 + 8 + 4 + 4 + 4 + 8
)

func appendInt32(dst []byte, v int32) []byte { return binary.BigEndian.AppendUint32(dst, uint32(v)) }
func appendInt64(dst []byte, v int64) []byte { return binary.BigEndian.AppendUint64(dst, uint64(v)) }

// appendEntry appends the registry entry giving s the id.
func appendEntry(dst []byte, id int32, s string) []byte {
	dst = appendInt32(dst, -1)
	dst = appendInt32(dst, id)
	dst = appendInt32(dst, int32(len(s)))
	return append(dst, s...)
}

// appendMeta appends a TraceMetadata frame from its two events; class,
// session and host are registry ids.
func appendMeta(dst []byte, class int32, meta, ext *event, session, host int32) []byte {
	dst = appendInt32(dst, class)
	dst = appendInt64(dst, meta.ts)
	dst = appendInt64(dst, meta.trace)
	dst = appendInt64(dst, ext.ts)
	dst = appendInt32(dst, session)
	dst = appendInt32(dst, host)
	dst = appendInt64(dst, ext.trace)
	return appendInt32(dst, meta.order)
}

// appendOperation appends a Before, After or AfterFailed frame (the cause
// only when failed is set); class, op, cls and cause are registry ids. The
// logging timestamp is the event's timestamp.
func appendOperation(dst []byte, class int32, ev *event, op, cls int32, failed bool, cause int32) []byte {
	size := sizeEvent
	if failed {
		size = sizeFailed
	}
	n := len(dst)
	dst = slices.Grow(dst, size)[:n+size]
	b := dst[n : n+size]
	be := binary.BigEndian
	be.PutUint32(b[0:], uint32(class))
	be.PutUint64(b[4:], uint64(ev.ts))
	be.PutUint64(b[12:], uint64(ev.ts))
	be.PutUint64(b[20:], uint64(ev.trace))
	be.PutUint32(b[28:], uint32(ev.order))
	be.PutUint32(b[32:], uint32(op))
	be.PutUint32(b[36:], uint32(cls))
	if failed {
		be.PutUint32(b[40:], uint32(cause))
	}
	return dst
}

// appendSplit appends a SplitEvent frame, or with join set a JoinEvent
// frame naming the joined trace; the logging timestamp is the event's.
func appendSplit(dst []byte, class int32, ev *event, join bool, joined int64) []byte {
	dst = appendInt32(dst, class)
	dst = appendInt64(dst, ev.ts)
	dst = appendInt64(dst, ev.ts)
	dst = appendInt64(dst, ev.trace)
	dst = appendInt32(dst, ev.order)
	if join {
		dst = appendInt64(dst, joined)
	}
	return dst
}

// appendInvocation appends an InvocationRecord frame from its two events
// (see invocation.go); class, node and pnode are registry ids. The logging
// timestamp is the creation time.
func appendInvocation(dst []byte, class int32, ev, ext *event, node, pnode int32) []byte {
	dst = appendInt32(dst, class)
	dst = appendInt64(dst, ev.ts)
	dst = appendInt64(dst, int64(ext.op)<<32|int64(ext.str))
	dst = appendInt32(dst, pid)
	dst = appendInt32(dst, node)
	dst = appendInt64(dst, ext.ts)
	dst = appendInt64(dst, ev.ts)
	dst = appendInt64(dst, ext.trace)
	dst = appendInt32(dst, ext.order)
	dst = appendInt32(dst, pnode)
	dst = appendInt32(dst, ev.order)
	return appendInt64(dst, ev.trace)
}

// registry maps string ids of the process-wide table to the ids of one
// connection's Kieker registry, which start at 0 on every connection. It
// belongs to the writer goroutine.
type registry struct {
	ids   []int32    // table string id → connection id, -1 when not sent yet
	opIDs [][2]int32 // table op id → connection ids of its two strings, -1 when not sent
	next  int32
	strs  []string // a copy of the table's strings, refreshed on demand
	ops   []opNames
}

func (r *registry) reset() {
	if len(r.ids) < int(numReservedStrings) {
		r.ids = make([]int32, numReservedStrings)
	}
	for i := range r.ids {
		r.ids[i] = -1
	}
	for i := range r.opIDs {
		r.opIDs[i] = [2]int32{-1, -1}
	}
	r.next = 0
}

// id returns the connection id of the table string id, appending its
// registry entry to *dst first when it has not been sent.
func (r *registry) id(dst *[]byte, id uint32) int32 {
	if int(id) < len(r.ids) {
		if c := r.ids[id]; c >= 0 {
			return c
		}
	} else {
		for len(r.ids) <= int(id) {
			r.ids = append(r.ids, -1)
		}
	}
	if int(id) >= len(r.strs) {
		r.strs = names.copyStrs(r.strs)
	}
	s := Unknown
	if int(id) < len(r.strs) {
		s = r.strs[id]
	}
	c := r.next
	r.next++
	r.ids[id] = c
	*dst = appendEntry(*dst, c, s)
	return c
}

// op returns the connection ids of the operation's strings, registering
// them first when needed.
func (r *registry) op(dst *[]byte, id uint32) (int32, int32) {
	if int(id) < len(r.opIDs) {
		if c := r.opIDs[id]; c[0] >= 0 {
			return c[0], c[1]
		}
	}
	if int(id) >= len(r.ops) {
		r.ops = names.copyOps(r.ops)
		if int(id) >= len(r.ops) {
			id = opUnknown
		}
	}
	n := r.ops[id]
	c := [2]int32{r.id(dst, n.op), r.id(dst, n.cls)}
	for len(r.opIDs) <= int(id) {
		r.opIDs = append(r.opIDs, [2]int32{-1, -1})
	}
	r.opIDs[id] = c
	return c[0], c[1]
}

// appendEvent appends the frame of ev (with ext, the second half of a
// TraceMetadata, JoinEvent or InvocationRecord), preceded by the registry entries of the strings it uses
// for the first time on the connection (class name first, then the string
// fields in order, as Kieker does).
func (r *registry) appendEvent(dst []byte, ev, ext *event, host uint32) []byte {
	switch ev.kind {
	case kindMeta:
		class := r.id(&dst, strTraceMetadata)
		session := r.id(&dst, ev.str)
		h := r.id(&dst, host)
		return appendMeta(dst, class, ev, ext, session, h)
	case kindBefore, kindAfter:
		cs := strBefore
		if ev.kind == kindAfter {
			cs = strAfter
		}
		class := r.id(&dst, cs)
		op, cls := r.op(&dst, ev.op)
		return appendOperation(dst, class, ev, op, cls, false, 0)
	case kindFailed:
		class := r.id(&dst, strFailed)
		op, cls := r.op(&dst, ev.op)
		cause := r.id(&dst, ev.str)
		return appendOperation(dst, class, ev, op, cls, true, cause)
	case kindSplit:
		return appendSplit(dst, r.id(&dst, strSplit), ev, false, 0)
	case kindJoin:
		return appendSplit(dst, r.id(&dst, strJoin), ev, true, ext.trace)
	case kindInv:
		class := r.id(&dst, strInvocation)
		node := r.id(&dst, host)
		pnode := r.id(&dst, ev.str)
		return appendInvocation(dst, class, ev, ext, node, pnode)
	}
	return dst
}
