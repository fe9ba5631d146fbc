package analysis

// An independent computation of what Kieker's trace analysis draws for a
// list of records, written from Kieker's rules (kieker-tools:
// EventRecordTraceReconstructionFilter, TraceEventRecords2ExecutionAnd-
// MessageTraceFilter, TraceReconstructionFilter, ExecutionTrace.
// toMessageTrace, the dependency-graph filters and the response-time
// decorator) straight over the raw records, without the assembler or the
// analysis package, to check both against it.

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/source/kiekerlog"
)

// raw is what the oracle keeps of a record.
type raw struct {
	kind            string // meta, before, after, failed, oer, other
	traceID, parent int64
	order           int32
	ts              int64
	op, class, host string
	tin, tout       int64
	eoi, ess        int32
	isEvent         bool
}

func rawOf(r *record.Record) raw {
	var x raw
	str := func(n string) string { v, _ := r.Field(n); return v.Str() }
	num := func(n string) int64 { v, _ := r.Field(n); return v.Int() }
	has := func(n string) bool { return r.Type.FieldIndex(n) >= 0 }
	short := r.Type.ShortName()
	switch {
	case r.Type.Name == record.TraceMetadata || r.Type.Name == record.ApplicationTraceMetadata:
		x.kind = "meta"
		x.traceID, x.parent, x.host = num("traceId"), num("parentTraceId"), str("hostname")
	case r.Type.Name == record.OperationExecutionRecord:
		x.kind = "oer"
		x.traceID, x.op, x.host = num("traceId"), str("operationSignature"), str("hostname")
		x.tin, x.tout, x.eoi, x.ess = num("tin"), num("tout"), int32(num("eoi")), int32(num("ess"))
	case has("traceId") && has("orderIndex"):
		x.traceID, x.order, x.ts = num("traceId"), int32(num("orderIndex")), num("timestamp")
		x.op, x.class = str("operationSignature"), str("classSignature")
		x.isEvent = true
		switch {
		case strings.HasPrefix(short, "Before"):
			x.kind = "before"
		case strings.HasPrefix(short, "After") && strings.Contains(short, "Failed"):
			x.kind = "failed"
		case strings.HasPrefix(short, "After"):
			x.kind = "after"
		default:
			x.kind = "other"
		}
	default:
		x.kind = "none"
	}
	return x
}

// readRaw reads a Kieker log's records.
func readRaw(t *testing.T, dir string) []raw {
	t.Helper()
	r, err := kiekerlog.Open(dir, kiekerlog.Options{Catalog: record.Builtin()})
	if err != nil {
		t.Fatal(err)
	}
	var out []raw
	err = r.Run(context.Background(), pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		for i := range b.Records {
			out = append(out, rawOf(&b.Records[i]))
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// oExec is an execution; caller -1 is 'Entry'.
type oExec struct {
	host, asm, op string
	dur           int64
	failed        bool
	caller        int
}

type oracle struct {
	traces  [][]oExec // valid message traces, executions in eoi order
	ids     []int64
	invalid int
}

// simpleClass is the class of an operation signature: the last word before
// '(' up to its last dot.
func simpleClass(op string) string {
	s, _, _ := strings.Cut(op, "(")
	if i := strings.LastIndexByte(s, ' '); i >= 0 {
		s = s[i+1:]
	}
	if i := strings.LastIndexByte(s, '.'); i >= 0 {
		return s[:i]
	}
	return ""
}

type obuf struct {
	meta      *raw
	events    map[int32]raw
	open      int
	maxOrder  int32
	closeable bool
	damaged   bool
}

func (b *obuf) valid() bool {
	return b.meta != nil && !b.damaged && b.open == 0 && int(b.maxOrder)+1 == len(b.events) && len(b.events) > 0
}

// runOracle computes Kieker's valid message traces of recs.
func runOracle(recs []raw) *oracle {
	o := &oracle{}
	bufs := map[int64]*obuf{}
	get := func(id int64) *obuf {
		b := bufs[id]
		if b == nil {
			b = &obuf{events: map[int32]raw{}, maxOrder: -1}
			bufs[id] = b
		}
		return b
	}
	oers := map[int64][]raw{}
	for _, r := range recs {
		var b *obuf
		switch {
		case r.kind == "meta":
			b = get(r.traceID)
			if b.meta != nil {
				b.damaged = true
			}
			m := r
			b.meta = &m
		case r.isEvent:
			b = get(r.traceID)
			if _, dup := b.events[r.order]; dup {
				b.damaged = true
			}
			b.events[r.order] = r
			b.maxOrder = max(b.maxOrder, r.order)
			switch r.kind {
			case "before":
				if r.order == 0 {
					b.closeable = true
				}
				b.open++
			case "after", "failed":
				b.open--
			}
		case r.kind == "oer":
			oers[r.traceID] = append(oers[r.traceID], r)
			continue
		default:
			continue
		}
		if b.closeable && b.valid() {
			o.events(r.traceID, b)
			delete(bufs, r.traceID)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(bufs)) {
		if b := bufs[id]; b.valid() {
			o.events(id, b)
		} else {
			o.invalid++
		}
	}
	for _, id := range slices.Sorted(maps.Keys(oers)) {
		o.oers(id, oers[id])
	}
	return o
}

// events turns a complete thread trace into executions.
func (o *oracle) events(id int64, b *obuf) {
	var stack []int // execution indexes of open Befores
	var befores []raw
	var execs []oExec
	for _, k := range slices.Sorted(maps.Keys(b.events)) {
		e := b.events[k]
		switch e.kind {
		case "before":
			caller := -1
			if len(stack) > 0 {
				caller = stack[len(stack)-1]
			}
			asm := e.class
			if asm == "" {
				asm = simpleClass(e.op)
			}
			execs = append(execs, oExec{host: b.meta.host, asm: asm, op: e.op, caller: caller})
			stack = append(stack, len(execs)-1)
			befores = append(befores, e)
		case "after", "failed":
			if len(stack) == 0 {
				o.invalid++
				return
			}
			bf := befores[len(befores)-1]
			if bf.op != e.op || bf.class != e.class {
				o.invalid++
				return
			}
			x := &execs[stack[len(stack)-1]]
			x.dur = e.ts - bf.ts
			x.failed = e.kind == "failed"
			stack, befores = stack[:len(stack)-1], befores[:len(befores)-1]
		}
	}
	o.traces = append(o.traces, execs)
	o.ids = append(o.ids, id)
}

// oers checks the OERs of one traceId as ExecutionTrace.toMessageTrace does.
func (o *oracle) oers(id int64, rs []raw) {
	slices.SortStableFunc(rs, func(a, b raw) int {
		return cmp.Or(cmp.Compare(a.eoi, b.eoi), cmp.Compare(a.ess, b.ess), cmp.Compare(a.tin, b.tin), cmp.Compare(a.tout, b.tout))
	})
	var execs []oExec
	var stack []int
	for i, r := range rs {
		if int(r.eoi) != i || (i == 0 && r.ess != 0) || r.ess < 0 || (i > 0 && r.ess > rs[i-1].ess+1) {
			o.invalid++
			return
		}
		stack = stack[:r.ess]
		caller := -1
		if len(stack) > 0 {
			caller = stack[len(stack)-1]
		}
		execs = append(execs, oExec{host: r.host, asm: simpleClass(r.op), op: r.op, dur: r.tout - r.tin, caller: caller})
		stack = append(stack, len(execs)-1)
	}
	o.traces = append(o.traces, execs)
	o.ids = append(o.ids, id)
}

const oEntry = "'Entry'"

// oKey names an execution's node at level k (as graphKey names ours).
func oKey(k Kind, e *oExec) string {
	switch k {
	case ContainerGraph:
		return e.host
	case DeploymentComponentGraph:
		return e.host + "::" + e.asm
	case AssemblyComponentGraph:
		return e.asm
	case DeploymentOperationGraph, AggregatedDeploymentCallTree, CallTree:
		return e.host + "::" + e.asm + "." + e.op
	}
	return e.asm + "." + e.op
}

// graphKey names a node of one of our graphs like oKey.
func graphKey(k Kind, n *Node) string {
	if n.Entry {
		return oEntry
	}
	return oKey(k, &oExec{host: n.Container, asm: n.Component, op: n.Operation})
}

type oStats struct{ count, min, max, total int64 }

// depGraph returns the edges (from key → to key → calls) and the
// response times per node key of the dependency graph of kind k.
func (o *oracle) depGraph(k Kind) (map[[2]string]int64, map[string]oStats) {
	edges := map[[2]string]int64{}
	rt := map[string]oStats{}
	for _, tr := range o.traces {
		for i := range tr {
			e := &tr[i]
			from := oEntry
			if e.caller >= 0 {
				from = oKey(k, &tr[e.caller])
			}
			to := oKey(k, e)
			edges[[2]string{from, to}]++
			if from != to {
				s := rt[to]
				if s.count == 0 || e.dur < s.min {
					s.min = e.dur
				}
				s.max = max(s.max, e.dur)
				s.count++
				s.total += e.dur
				rt[to] = s
			}
		}
	}
	return edges, rt
}

// treePaths returns the calls per path (keys from 'Entry' down, joined by
// " > ") of the aggregated call tree of kind k.
func (o *oracle) treePaths(k Kind) map[string]int64 {
	out := map[string]int64{}
	for _, tr := range o.traces {
		paths := make([]string, len(tr))
		for i := range tr {
			p := oEntry
			if c := tr[i].caller; c >= 0 {
				p = paths[c]
			}
			paths[i] = p + " > " + oKey(k, &tr[i])
			out[paths[i]]++
		}
	}
	return out
}

type oOp struct{ count, total, self, errors int64 }

// ops returns the statistics per assembly operation.
func (o *oracle) ops() map[string]oOp {
	out := map[string]oOp{}
	for _, tr := range o.traces {
		child := make([]int64, len(tr))
		for i := range tr {
			if c := tr[i].caller; c >= 0 {
				child[c] += tr[i].dur
			}
		}
		for i := range tr {
			k := oKey(AssemblyOperationGraph, &tr[i])
			s := out[k]
			s.count++
			s.total += tr[i].dur
			s.self += max(0, tr[i].dur-child[i])
			if tr[i].failed {
				s.errors++
			}
			out[k] = s
		}
	}
	return out
}
