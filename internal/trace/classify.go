package trace

import (
	"strings"

	"github.com/tracebridge/tracebridge/internal/record"
)

// Role is what a record type is to a trace.
type Role uint8

// The roles.
const (
	RoleNone       Role = iota // not part of a trace
	RoleMeta                   // TraceMetadata, ApplicationTraceMetadata: starts a trace (a thread's part of it)
	RoleBefore                 // opens a call (BeforeOperationEvent and kin)
	RoleAfter                  // closes a call (AfterOperationEvent, …FailedEvent and kin)
	RoleEvent                  // another event of a trace (Call, Split, Join, …): a point in the caller's frame
	RoleOER                    // OperationExecutionRecord: a whole call (tin, tout, eoi, ess)
	RoleInvocation             // InvocationType: an invocation identifier linking a task's trace to its creator's
)

var roleNames = [...]string{RoleNone: "none", RoleMeta: "metadata", RoleBefore: "before", RoleAfter: "after", RoleEvent: "event", RoleOER: "execution", RoleInvocation: "invocation"}

// String names the role.
func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return "role?"
}

// TypeInfo is what trace processing needs to know about a record type: its
// role and where its fields are. A field index is -1 when the type has no
// such field (of the expected kind).
type TypeInfo struct {
	Role Role
	// Failed is set for the After…FailedEvent types (the call threw).
	Failed bool
	// Split and Join are set for Kieker's concurrency events.
	Split, Join bool
	// Span is set for tracebridge's span records (SpanType).
	Span bool

	// Events: traceId, orderIndex, timestamp, classSignature,
	// operationSignature; TraceID also for metadata and OERs, Op for OERs.
	TraceID, OrderIndex, Timestamp int
	Class, Op                      int
	// Cause is the exception class of a failed event.
	Cause int
	// CalleeClass and CalleeOp are a CallOperationEvent's callee.
	CalleeClass, CalleeOp int

	// Metadata: the parent trace and the call in it that started this
	// trace; ThreadID, Session and Host also.
	ParentTraceID, ParentOrderID int
	ThreadID                     int

	// Session and Host: metadata and OERs. Tin, Tout, EOI and ESS: OERs.
	Session, Host       int
	Tin, Tout, EOI, ESS int
}

// operationPackage holds Kieker's Before/After/Call event types (with the
// constructor and object variants below it).
const operationPackage = record.Prefix + "flow.trace.operation."

// Classify works out the role of a type. Before and After events are the
// types of Kieker's flow.trace.operation packages whose short name starts
// with Before, EntryLevelBefore or After, and that have a long traceId, an
// int orderIndex and a string classSignature; every other type with a long
// traceId and an int orderIndex is a point event of its trace.
func Classify(t *record.Type) *TypeInfo {
	ti := &TypeInfo{
		TraceID: Field(t, "traceId", record.Long), OrderIndex: Field(t, "orderIndex", record.Int),
		Timestamp: Field(t, "timestamp", record.Long),
		Class:     Field(t, "classSignature", record.String), Op: Field(t, "operationSignature", record.String),
		Cause:       Field(t, "cause", record.String),
		CalleeClass: Field(t, "calleeClassSignature", record.String), CalleeOp: Field(t, "calleeOperationSignature", record.String),
		ParentTraceID: -1, ParentOrderID: -1, ThreadID: -1, Session: -1, Host: -1,
		Tin: -1, Tout: -1, EOI: -1, ESS: -1,
	}
	switch t.Name {
	case record.TraceMetadata, record.ApplicationTraceMetadata:
		ti.ParentTraceID = Field(t, "parentTraceId", record.Long)
		ti.ParentOrderID = Field(t, "parentOrderId", record.Int)
		ti.ThreadID = Field(t, "threadId", record.Long)
		ti.Session = Field(t, "sessionId", record.String)
		ti.Host = Field(t, "hostname", record.String)
		if ti.TraceID >= 0 && ti.ParentTraceID >= 0 && ti.ParentOrderID >= 0 {
			ti.Role = RoleMeta
		}
		return ti
	case SpanTypeName:
		ti.Span = t.SameFields(SpanType)
		return ti
	case InvocationTypeName:
		if t.SameFields(InvocationType) {
			ti.Role = RoleInvocation
		}
		return ti
	case record.OperationExecutionRecord:
		ti.Session = Field(t, "sessionId", record.String)
		ti.Host = Field(t, "hostname", record.String)
		ti.Tin = Field(t, "tin", record.Long)
		ti.Tout = Field(t, "tout", record.Long)
		ti.EOI = Field(t, "eoi", record.Int)
		ti.ESS = Field(t, "ess", record.Int)
		if ti.TraceID >= 0 && ti.Op >= 0 && ti.EOI >= 0 && ti.ESS >= 0 {
			ti.Role = RoleOER
		}
		return ti
	}
	if ti.TraceID < 0 || ti.OrderIndex < 0 {
		return ti
	}
	ti.Role = RoleEvent
	switch t.Name {
	case record.SplitEvent:
		ti.Split = true
	case record.JoinEvent:
		ti.Join = true
	}
	if strings.HasPrefix(t.Name, operationPackage) && ti.Class >= 0 {
		short := t.ShortName()
		switch {
		case strings.HasPrefix(short, "Before"), strings.HasPrefix(short, "EntryLevelBefore"):
			ti.Role = RoleBefore
		case strings.HasPrefix(short, "After"):
			ti.Role = RoleAfter
			ti.Failed = strings.Contains(short, "Failed")
		}
	}
	return ti
}

// Field returns the index of t's field name if it is a scalar of kind k,
// else -1.
func Field(t *record.Type, name string, k record.Kind) int {
	i := t.FieldIndex(name)
	if i < 0 || t.Fields[i].Kind != k || t.Fields[i].Array {
		return -1
	}
	return i
}

// TypeCache remembers TypeInfo per type. A few recent types are checked
// first: streams are long runs of few types (Before, After, …). It is not
// safe for concurrent use.
type TypeCache struct {
	recent [4]struct {
		t  *record.Type
		ti *TypeInfo
	}
	next int
	m    map[*record.Type]*TypeInfo
}

// maxCachedTypes bounds the table (types are few; a catalogue that keeps
// growing at run time must not grow it without end).
const maxCachedTypes = 4096

// Get returns the TypeInfo of t.
func (c *TypeCache) Get(t *record.Type) *TypeInfo {
	for i := range c.recent {
		if c.recent[i].t == t {
			return c.recent[i].ti
		}
	}
	ti, ok := c.m[t]
	if !ok {
		ti = Classify(t)
		if c.m == nil || len(c.m) >= maxCachedTypes {
			c.m = make(map[*record.Type]*TypeInfo)
		}
		c.m[t] = ti
	}
	r := &c.recent[c.next]
	r.t, r.ti = t, ti
	c.next = (c.next + 1) % len(c.recent)
	return ti
}
