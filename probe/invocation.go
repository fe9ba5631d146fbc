package probe

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
)

// Invocation identifiers (the bridge's tracebridge.trace.InvocationRecord)
// link the trace of a task — a goroutine, a worker pool's job, a request
// handled on behalf of a caller in another process — to the invocation
// that created it, and to the call that was open there, across reused
// goroutines, processes and nodes.
//
// Every trace that hands work on is an invocation with an id unique within
// the process (invIDs). A child trace (Fork, Go, Writer.Start with a Parent
// or a Remote header) records its InvocationRecord with its TraceMetadata:
// its invocation id, process, node, threadId (the runnable), creation time
// and traceId, and its parent's invocation, process, node and next
// orderIndex when the child was created (the orderIndex of the SplitEvent,
// or the one a header carries). A root trace records its own (parent -1)
// only when it first needs one, when it forks a child or exports a header:
// a trace that hands nothing on costs nothing more, and its creation time
// is that moment.

// InvocationHeaderName is a name for the header (HTTP, gRPC metadata, a
// message property) that carries InvocationHeader's value to another
// process.
const InvocationHeaderName = "Tracebridge-Invocation"

// classInvocation is the bridge's record type of invocation identifiers.
const classInvocation = "tracebridge.trace.InvocationRecord"

// invIDs hands out invocation ids, process-wide, from 1.
var invIDs atomic.Int64

// pid is the process id in every InvocationRecord.
var pid = int32(os.Getpid())

// invMask bounds the invocation ids the ring carries (60 bits: a str and
// an op field); a process would need 36 years at a billion tasks a second
// to exceed it.
const invMask = 1<<(32+opBits) - 1

// invocation returns t's invocation id; a trace without one yet (a root)
// gets one, and its InvocationRecord (no parent) goes into its block.
func (t *Trace) invocation() int64 {
	if t.inv == 0 {
		t.inv = invIDs.Add(1) & invMask
		b := t.room(2)
		b.ev[b.n] = event{kind: kindInv, ts: stamp(), trace: t.id, order: -1, str: strEmpty}
		b.ev[b.n+1] = invExt(t.inv, t.thread, -1, 0)
		b.n += 2
	}
	return t.inv
}

// invoke gives child trace c a new invocation, created by invocation
// parent (of process ppid on node pnode, a string id) while that one's
// next orderIndex was porder, and puts its InvocationRecord into c's
// block, after its TraceMetadata.
func (c *Trace) invoke(parent int64, ppid int32, pnode uint32, porder int32) {
	c.inv = invIDs.Add(1) & invMask
	b := c.room(2)
	b.ev[b.n] = event{kind: kindInv, ts: stamp(), trace: c.id, order: porder, str: pnode}
	b.ev[b.n+1] = invExt(c.inv, c.thread, parent, ppid)
	b.n += 2
}

// invExt is the second event of an InvocationRecord: the invocation id in
// str and op, the runnable in ts, the parent invocation and its process.
func invExt(inv, runnable, parent int64, ppid int32) event {
	return event{kind: kindInvExt, ts: runnable, trace: parent, order: ppid, str: uint32(inv), op: uint32(inv>>32) & (1<<opBits - 1)}
}

// room returns t's block with room for n more events, publishing a fuller
// one first.
func (t *Trace) room(n int) *block {
	b := t.blk
	if b != nil && b.n+n > len(b.ev) {
		t.publish()
		b = nil
	}
	if b == nil {
		b = blocks.Get().(*block)
		t.blk = b
	}
	return b
}

// InvocationHeader returns the identifier of the call open in t now, for
// a request to another process: "tb1-NODE-PID-INVOCATION-ORDER", the
// writer's hostname (percent-escaped), the process id, t's invocation id
// and t's next orderIndex (see ParseInvocationHeader). The other process
// starts the trace of its work with Writer.Start(TraceOptions{Remote: h});
// the bridge hangs that trace under the call open here. Call it on t's
// goroutine, inside the call that makes the request; it records t's
// InvocationRecord when t has none yet. It returns "" for a nil or ended
// trace, while the probes are off, with Config.NoInvocations, and when the
// hostname is longer than MaxHeaderNodeLen bytes.
func (t *Trace) InvocationHeader() string {
	if t == nil || t.w == nil || t.ended || disabled.Load() || t.w.cfg.NoInvocations || len(t.w.node) > MaxHeaderNodeLen {
		return ""
	}
	inv := t.invocation()
	t.named = true
	return string(appendHeader(make([]byte, 0, 48), t.w.node, pid, inv, t.order))
}

// InvocationHeader is the InvocationHeader of the trace ctx carries ("" when
// it carries none).
func InvocationHeader(ctx context.Context) string {
	return FromContext(ctx).InvocationHeader()
}

// Invocation is what an invocation header identifies: a call open in
// an invocation of a process on a node.
type Invocation struct {
	Node  string // the node (hostname)
	PID   int32  // the process id
	ID    int64  // the invocation id
	Order int32  // the invocation's next orderIndex when the header was made
}

// Limits of an invocation header.
const (
	headerVersion    = "tb1"
	MaxHeaderNodeLen = 255                         // bytes of the node, unescaped (DNS names have at most 253)
	MaxHeaderLen     = 4 + 3*MaxHeaderNodeLen + 42 // the longest header: a node of escapes, numbers of 10, 19 and 10 digits
)

// ParseInvocationHeader parses a header InvocationHeader made (here or in
// another client of tracebridge):
//
//	tb1-NODE-PID-INVOCATION-ORDER
//
// fields separated by '-': the version "tb1"; the node, with '%', '-' and
// every byte outside the printable ASCII range written %XX (two hex
// digits; any %XX is decoded); the process id, the invocation id and the
// orderIndex as unsigned decimal numbers (int32, int64, int32). It reports
// false for anything else, a node longer than MaxHeaderNodeLen bytes, or a
// header longer than MaxHeaderLen.
func ParseInvocationHeader(s string) (Invocation, bool) {
	var h Invocation
	if len(s) > MaxHeaderLen || len(s) < len(headerVersion)+1 || s[:len(headerVersion)+1] != headerVersion+"-" {
		return h, false
	}
	s = s[len(headerVersion)+1:]
	var f [4]string
	for i := range f {
		j := len(s)
		if i < len(f)-1 {
			j = indexByte(s, '-')
			if j < 0 {
				return h, false
			}
		}
		f[i], s = s[:j], s[min(j+1, len(s)):]
	}
	node, ok := unescapeNode(f[0])
	if !ok {
		return h, false
	}
	p, ok1 := decimal(f[1], 31)
	inv, ok2 := decimal(f[2], 63)
	order, ok3 := decimal(f[3], 31)
	if !ok1 || !ok2 || !ok3 {
		return h, false
	}
	return Invocation{Node: node, PID: int32(p), ID: inv, Order: int32(order)}, true
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// decimal parses digits only (no sign) into a number below 2^bits.
func decimal(s string, bits int) (int64, bool) {
	if s == "" || len(s) > 19 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || bits < 63 && n >= 1<<bits {
		return 0, false
	}
	return n, true
}

const hexDigits = "0123456789ABCDEF"

// appendHeader appends the invocation header of the given identifier.
func appendHeader(dst []byte, node string, pid int32, inv int64, order int32) []byte {
	dst = append(dst, headerVersion...)
	dst = append(dst, '-')
	for i := 0; i < len(node); i++ {
		c := node[i]
		if c == '-' || c == '%' || c <= ' ' || c > '~' {
			dst = append(dst, '%', hexDigits[c>>4], hexDigits[c&15])
			continue
		}
		dst = append(dst, c)
	}
	dst = append(dst, '-')
	dst = strconv.AppendInt(dst, int64(pid), 10)
	dst = append(dst, '-')
	dst = strconv.AppendInt(dst, inv, 10)
	dst = append(dst, '-')
	return strconv.AppendInt(dst, int64(order), 10)
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// unescapeNode decodes the %XX escapes of a header's node.
func unescapeNode(s string) (string, bool) {
	if indexByte(s, '%') < 0 {
		return s, len(s) <= MaxHeaderNodeLen
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b = append(b, s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", false
		}
		b = append(b, hi<<4|lo)
		i += 2
	}
	return string(b), len(b) <= MaxHeaderNodeLen
}
