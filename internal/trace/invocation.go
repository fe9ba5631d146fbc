package trace

import (
	"fmt"

	"github.com/tracebridge/tracebridge/internal/record"
)

// InvocationTypeName is the record type of invocation identifiers (the
// scheme of the seed "inter-thread trace reconstruction"): a task — a
// Runnable, a goroutine, a pthread, a future, an asyncio task — is unique
// where threads are reused, so our clients identify each task they run by
// an invocation id, and name the invocation that created it, and the call
// that was open there. The assembler hangs the task's Kieker trace (the
// events it ran, under their own traceId) under that call, across
// threads, and across processes and nodes when the parent's identifier
// travels with a request.
const InvocationTypeName = "tracebridge.trace.InvocationRecord"

// Field indexes of InvocationType.
const (
	InvID              = iota // long: unique within the process (a counter)
	InvProcessID              // int: the process id
	InvNodeID                 // string: the node (host) the process runs on
	InvRunnableID             // long: the task (runnable, goroutine, thread) it identifies
	InvCreationTime           // long: when the task was created, epoch ns
	InvParentID               // long: the invocation that created the task, -1: none
	InvParentProcessID        // int: its process
	InvParentNodeID           // string: its node
	InvParentOrderID          // int: the orderIndex of the call open in the parent when the task was created (-1: unknown)
	InvTraceID                // long: the Kieker traceId of the events the task ran
	invFields
)

// InvocationType is the record type of InvocationTypeName.
var InvocationType = record.MustType(InvocationTypeName,
	record.Field{Name: "invocationId", Kind: record.Long},
	record.Field{Name: "processId", Kind: record.Int},
	record.Field{Name: "nodeId", Kind: record.String},
	record.Field{Name: "runnableId", Kind: record.Long},
	record.Field{Name: "creationTime", Kind: record.Long},
	record.Field{Name: "parentInvocationId", Kind: record.Long},
	record.Field{Name: "parentProcessId", Kind: record.Int},
	record.Field{Name: "parentNodeId", Kind: record.String},
	record.Field{Name: "parentOrderId", Kind: record.Int},
	record.Field{Name: "traceId", Kind: record.Long},
)

// InvocationIRL describes InvocationType in Kieker's record language.
const InvocationIRL = `package tracebridge.trace

entity InvocationRecord {
	long invocationId
	int processId
	string nodeId
	long runnableId
	long creationTime
	long parentInvocationId
	int parentProcessId
	string parentNodeId
	int parentOrderId
	long traceId
}
`

// invKey identifies an invocation: its id within its process on its node.
type invKey struct {
	node string
	pid  int32
	id   int64
}

func (k invKey) String() string { return fmt.Sprintf("%s/%d/%d", k.node, k.pid, k.id) }

// invocation links the Kieker trace an invocation ran to the trace of the
// invocation that created it: at once when that one is known, else when
// its identifier arrives (within the window).
func (a *Assembler) invocation(r *record.Record) {
	a.st.Records++
	v := r.Values
	key := invKey{node: v[InvNodeID].Str(), pid: int32(v[InvProcessID].Int()), id: v[InvID].Int()}
	kid := v[InvTraceID].Int()
	th := a.thread(kid, v[InvCreationTime].Int())
	th.inv, th.hasInv = key, true
	if a.invs == nil {
		a.invs, a.waiting = map[invKey]int64{}, map[invKey][]int64{}
	}
	a.invs[key] = kid
	if pid := v[InvParentID].Int(); pid != -1 {
		pk := invKey{node: v[InvParentNodeID].Str(), pid: int32(v[InvParentProcessID].Int()), id: pid}
		th.porder, th.byInv = int32(v[InvParentOrderID].Int()), true
		if pkid, ok := a.invs[pk]; ok {
			a.link(th, pkid)
		} else {
			th.waitFor, th.waiting = pk, true
			a.waiting[pk] = append(a.waiting[pk], kid)
		}
	}
	// Tasks this invocation created that arrived first.
	for _, ckid := range a.waiting[key] {
		if c := a.threads[ckid]; c != nil && c.waiting && c.waitFor == key {
			c.waiting = false
			a.link(c, kid)
		}
	}
	delete(a.waiting, key)
}

// link makes Kieker trace th a part of trace pkid, begun by the call open
// there at th.porder.
func (a *Assembler) link(th *thread, pkid int64) {
	if pkid == th.kid {
		return
	}
	th.parent = pkid
	pt := a.thread(pkid, 0)
	a.merge(pt.fam, th.fam)
}

// forget drops what the assembler keeps of th's invocation when its trace
// ends; a task still waiting for its parent's identifier is a broken link.
func (a *Assembler) forget(th *thread, broken *[]string) {
	if th.hasInv && a.invs[th.inv] == th.kid {
		delete(a.invs, th.inv)
	}
	if !th.waiting {
		return
	}
	th.waiting = false
	*broken = append(*broken, fmt.Sprintf("trace %d: invocation %s names parent invocation %s, which is missing", th.kid, th.inv, th.waitFor))
	kids := a.waiting[th.waitFor]
	for i, k := range kids {
		if k == th.kid {
			kids = append(kids[:i], kids[i+1:]...)
			break
		}
	}
	if len(kids) == 0 {
		delete(a.waiting, th.waitFor)
	} else {
		a.waiting[th.waitFor] = kids
	}
}

// AppendInvocation adds an invocation identifier to b.
func AppendInvocation(b *record.Batch, inv Invocation) {
	r := b.Add(InvocationType, record.NoTimestamp)
	v := r.Values
	v[InvID] = record.IntValue(inv.ID)
	v[InvProcessID] = record.IntValue(int64(inv.ProcessID))
	v[InvNodeID] = record.StringValue(inv.Node)
	v[InvRunnableID] = record.IntValue(inv.RunnableID)
	v[InvCreationTime] = record.IntValue(inv.CreationTime)
	v[InvParentID] = record.IntValue(inv.ParentID)
	v[InvParentProcessID] = record.IntValue(int64(inv.ParentProcessID))
	v[InvParentNodeID] = record.StringValue(inv.ParentNode)
	v[InvParentOrderID] = record.IntValue(int64(inv.ParentOrderID))
	v[InvTraceID] = record.IntValue(inv.TraceID)
}

// Invocation is an invocation identifier (InvocationType's fields).
type Invocation struct {
	ID              int64
	ProcessID       int32
	Node            string
	RunnableID      int64
	CreationTime    int64
	ParentID        int64 // -1: none
	ParentProcessID int32
	ParentNode      string
	ParentOrderID   int32 // -1: unknown
	TraceID         int64
}
