package split

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tracebridge/tracebridge/internal/record"
)

var cat = record.Builtin()

func typ(name string) *record.Type {
	t := cat.Lookup(name)
	if t == nil {
		panic("no type " + name)
	}
	return t
}

var (
	tTM     = typ(record.TraceMetadata)
	tATM    = typ(record.ApplicationTraceMetadata)
	tBefore = typ(record.BeforeOperationEvent)
	tAfter  = typ(record.AfterOperationEvent)
	tFailed = typ(record.AfterOperationFailedEvent)
	tCall   = typ(record.CallOperationEvent)
	tSplitE = typ(record.SplitEvent)
	tOER    = typ(record.OperationExecutionRecord)
	tCPU    = typ(record.CPUUtilizationRecord)
)

func rec(t *record.Type, ts int64, vals ...record.Value) record.Record {
	if len(vals) != len(t.Fields) {
		panic(fmt.Sprintf("%s: %d values for %d fields", t.Name, len(vals), len(t.Fields)))
	}
	return record.Record{Type: t, LoggingTimestamp: ts, Values: vals}
}

func iv(v int64) record.Value  { return record.IntValue(v) }
func sv(s string) record.Value { return record.StringValue(s) }

func tm(id, thread, parent int64, porder int32) record.Record {
	return rec(tTM, 1, iv(id), iv(thread), sv("<no-session-id>"), sv("host"), iv(parent), iv(int64(porder)))
}

func op(class, method string) string { return "public void " + class + "." + method + "()" }

func before(id int64, oi int32, class, method string) record.Record {
	return rec(tBefore, 2, iv(int64(oi)*10), iv(id), iv(int64(oi)), sv(op(class, method)), sv(class))
}

func after(id int64, oi int32, class, method string) record.Record {
	return rec(tAfter, 3, iv(int64(oi)*10), iv(id), iv(int64(oi)), sv(op(class, method)), sv(class))
}

func failed(id int64, oi int32, class, method string) record.Record {
	return rec(tFailed, 3, iv(int64(oi)*10), iv(id), iv(int64(oi)), sv(op(class, method)), sv(class), sv("boom"))
}

func call(id int64, oi int32, class, callee string) record.Record {
	return rec(tCall, 4, iv(int64(oi)*10), iv(id), iv(int64(oi)), sv(op(class, "caller")), sv(class), sv(op(callee, "callee")), sv(callee))
}

func splitEv(id int64, oi int32) record.Record {
	return rec(tSplitE, 5, iv(int64(oi)*10), iv(id), iv(int64(oi)))
}

func oer(id int64, class string, eoi, ess int32) record.Record {
	return rec(tOER, 6, sv(op(class, "m")), sv("sess"), iv(id), iv(int64(eoi)), iv(int64(eoi)+1), sv("host"), iv(int64(eoi)), iv(int64(ess)))
}

func cpu(ts int64) record.Record {
	return rec(tCPU, ts, iv(ts), sv("host"), sv("cpu0"), record.DoubleValue(0.5), record.DoubleValue(0.1),
		record.DoubleValue(0), record.DoubleValue(0), record.DoubleValue(0), record.DoubleValue(0.6), record.DoubleValue(0.4))
}

// collector keeps copies of every record it is handed.
type collector struct{ recs []record.Record }

func (c *collector) Consume(_ context.Context, b *record.Batch) error {
	for i := range b.Records {
		c.recs = append(c.recs, b.Records[i].Clone())
	}
	return nil
}

// consumer is what Stage and Merger have in common.
type consumer interface {
	Consume(context.Context, *record.Batch) error
	Finish(context.Context) error
	Stats() Stats
}

// feed hands recs to c in batches whose sizes come from sizes (cycled; nil
// means one batch), then finishes.
func feed(t testing.TB, c consumer, recs []record.Record, sizes []int) {
	t.Helper()
	ctx := context.Background()
	var b record.Batch
	for i, k := 0, 0; i < len(recs); k++ {
		n := len(recs) - i
		if len(sizes) > 0 {
			n = min(n, sizes[k%len(sizes)])
		}
		b.Reset()
		for _, r := range recs[i : i+n] {
			b.AddRecord(&r)
		}
		// Scribble over the batch after Consume: nothing may keep it.
		if err := c.Consume(ctx, &b); err != nil {
			t.Fatal(err)
		}
		for j := range b.Records {
			for v := range b.Records[j].Values {
				b.Records[j].Values[v] = record.IntValue(-777)
			}
		}
		i += n
	}
	if err := c.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(ctx); err != nil {
		t.Fatalf("second Finish: %v", err)
	}
}

type runResult struct {
	out       []record.Record
	stats     Stats
	malformed []Malformed
}

func splitRecs(t testing.TB, b *Boundaries, recs []record.Record, sizes []int, o Options) runResult {
	t.Helper()
	var res runResult
	o.OnMalformed = func(m Malformed) { res.malformed = append(res.malformed, m) }
	if o.MaxHold == 0 {
		o.MaxHold = -1 // results must not depend on the machine's speed
	}
	col := &collector{}
	s := New(b, col, o)
	feed(t, s, recs, sizes)
	res.out, res.stats = col.recs, s.Stats()
	return res
}

func mergeRecs(t testing.TB, recs []record.Record, sizes []int, o Options) runResult {
	t.Helper()
	var res runResult
	o.OnMalformed = func(m Malformed) { res.malformed = append(res.malformed, m) }
	col := &collector{}
	m := NewMerger(col, o)
	feed(t, m, recs, sizes)
	res.out, res.stats = col.recs, m.Stats()
	return res
}

func mustParse(t testing.TB, specs ...string) *Boundaries {
	t.Helper()
	b, err := Parse(specs...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// recordsCmp compares records by type name, logging timestamp and values.
var recordsCmp = cmp.Comparer(func(a, b record.Record) bool { return a.Equal(&b) })

// diffRecords returns a readable difference of two record lists, or "".
func diffRecords(want, got []record.Record) string {
	if cmp.Equal(want, got, recordsCmp) {
		return ""
	}
	return cmp.Diff(format(want), format(got))
}

func format(recs []record.Record) []string {
	out := make([]string, len(recs))
	for i := range recs {
		out[i] = formatRecord(&recs[i])
	}
	return out
}

func formatRecord(r *record.Record) string {
	var b strings.Builder
	b.WriteString(r.Type.ShortName())
	fmt.Fprintf(&b, " @%d", r.LoggingTimestamp)
	for i, f := range r.Type.Fields {
		if f.Name == "operationSignature" || f.Name == "calleeOperationSignature" {
			continue
		}
		fmt.Fprintf(&b, " %s=%s", f.Name, r.Values[i].Format(f.Kind))
	}
	return b.String()
}

// gen builds random workloads: many traces on several threads, their
// events interleaved, with non-trace records in between.
type gen struct {
	rng     *rand.Rand
	classes []string
	// maxDepth and maxFan bound the call trees.
	maxDepth, maxFan int
	// maxCalls bounds the calls of one trace.
	maxCalls int
}

func newGen(seed uint64) *gen {
	return &gen{
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		classes:  []string{"a.b.c.D", "a.b.c.E", "a.b.x.F", "a.y.G", "z.H", "I", "a.b.c.d.J", "q.r.s.t.K"},
		maxDepth: 6, maxFan: 3, maxCalls: 60,
	}
}

// tree appends the events of one well-formed event trace (without its
// TraceMetadata).
func (g *gen) tree(id int64) []record.Record {
	var evs []record.Record
	oi := int32(0)
	calls := 0
	var walk func(depth int)
	walk = func(depth int) {
		class := g.classes[g.rng.IntN(len(g.classes))]
		method := fmt.Sprintf("m%d", g.rng.IntN(5))
		evs = append(evs, before(id, oi, class, method))
		oi++
		calls++
		if g.rng.IntN(8) == 0 {
			evs = append(evs, call(id, oi, class, g.classes[g.rng.IntN(len(g.classes))]))
			oi++
		}
		if g.rng.IntN(12) == 0 {
			evs = append(evs, splitEv(id, oi))
			oi++
		}
		if depth < g.maxDepth {
			for n := g.rng.IntN(g.maxFan + 1); n > 0 && calls < g.maxCalls; n-- {
				walk(depth + 1)
			}
		}
		if g.rng.IntN(10) == 0 {
			evs = append(evs, failed(id, oi, class, method))
		} else {
			evs = append(evs, after(id, oi, class, method))
		}
		oi++
	}
	walk(0)
	return evs
}

// oerTree returns the records of one OperationExecutionRecord trace in
// the order they are written (callees first).
func (g *gen) oerTree(id int64) []record.Record {
	type node struct {
		class    string
		eoi, ess int32
	}
	var out []record.Record
	eoi := int32(0)
	var walk func(ess int32)
	walk = func(ess int32) {
		n := node{class: g.classes[g.rng.IntN(len(g.classes))], eoi: eoi, ess: ess}
		eoi++
		if int(ess) < g.maxDepth {
			for k := g.rng.IntN(g.maxFan + 1); k > 0 && eoi < int32(g.maxCalls); k-- {
				walk(ess + 1)
			}
		}
		out = append(out, oer(id, n.class, n.eoi, n.ess))
	}
	walk(0)
	return out
}

// workload interleaves ntraces traces (event traces and, with oers, some
// OperationExecutionRecord traces) and non-trace records. Trace ids are
// distinct.
func (g *gen) workload(ntraces int, oers bool) []record.Record {
	var queues [][]record.Record
	for i := 0; i < ntraces; i++ {
		id := int64(1000 + i*7)
		if oers && g.rng.IntN(3) == 0 {
			queues = append(queues, g.oerTree(id))
			continue
		}
		var meta record.Record
		if g.rng.IntN(2) == 0 {
			meta = tm(id, int64(g.rng.IntN(4)), id, -1)
		} else {
			meta = rec(tATM, 1, iv(id), iv(int64(g.rng.IntN(4))), sv("s"), sv("h"), iv(-1), iv(0), sv("app"))
		}
		queues = append(queues, append([]record.Record{meta}, g.tree(id)...))
	}
	var out []record.Record
	ts := int64(0)
	for len(queues) > 0 {
		k := g.rng.IntN(len(queues))
		n := 1 + g.rng.IntN(4)
		q := queues[k]
		n = min(n, len(q))
		out = append(out, q[:n]...)
		queues[k] = q[n:]
		if len(queues[k]) == 0 {
			queues = append(queues[:k], queues[k+1:]...)
		}
		if g.rng.IntN(10) == 0 {
			ts++
			out = append(out, cpu(ts))
		}
	}
	return out
}

// randomSpecs returns a random boundary spec.
func (g *gen) randomSpecs() string {
	switch g.rng.IntN(4) {
	case 0:
		return fmt.Sprintf("package:%d", 1+g.rng.IntN(4))
	case 1:
		var pats []string
		for _, c := range g.classes {
			if g.rng.IntN(2) == 0 {
				pats = append(pats, strings.ReplaceAll(c, ".", `\.`))
			}
		}
		if len(pats) == 0 {
			pats = []string{`a\..*`}
		}
		return "regex:" + strings.Join(pats, " ")
	case 2:
		return `regex:a\.b\..* z\..*;package:1`
	}
	return "regex:.*" // one component: nothing crosses
}

// randomSizes returns batch sizes to cut an input into.
func (g *gen) randomSizes() []int {
	switch g.rng.IntN(3) {
	case 0:
		return nil
	case 1:
		return []int{1}
	}
	sizes := make([]int, 1+g.rng.IntN(5))
	for i := range sizes {
		sizes[i] = 1 + g.rng.IntN(50)
	}
	return sizes
}
