package trace

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
)

// genTraces writes well-formed traces of every source into records, as r
// chooses: Kieker event traces with threads started by SplitEvents
// (TraceMetadata naming the parent) and by tasks with invocation
// identifiers (in other processes too), OperationExecutionRecord traces
// across hosts, and span trees across services.
func genTraces(r *rand.Rand) []record.Record {
	var recs []record.Record
	kid := int64(1000)
	ts := int64(1_000_000)
	// calls appends nested calls to thread k from orderIndex *oi, calling
	// hop inside some of them (a thread or task started there).
	var calls func(k int64, oi *int32, depth int, hop func(oi *int32))
	calls = func(k int64, oi *int32, depth int, hop func(oi *int32)) {
		for range 1 + r.IntN(3) {
			op := fmt.Sprintf("void p.C%d.m%d()", r.IntN(4), r.IntN(5))
			recs = append(recs, before(k, *oi, ts, op))
			*oi++
			ts += int64(1 + r.IntN(50))
			if hop != nil && r.IntN(3) == 0 {
				hop(oi)
			}
			if depth < 3 && r.IntN(2) == 0 {
				calls(k, oi, depth+1, hop)
			}
			ts += int64(1 + r.IntN(50))
			if r.IntN(6) == 0 {
				recs = append(recs, failed(k, *oi, ts, op, "java.lang.IllegalStateException"))
			} else {
				recs = append(recs, after(k, *oi, ts, op))
			}
			*oi++
		}
	}
	for range 1 + r.IntN(4) {
		switch r.IntN(3) {
		case 0: // a Kieker event trace with threads and tasks
			root := kid
			kid++
			invID := root // unique within the process, as a counter makes it
			recs = append(recs, tm(root, 1, "n1", -1, -1), inv("n1", 10, invID, root, "", 0, -1, -1))
			var oi int32
			hop := func(oi *int32) {
				at := *oi
				child := kid
				kid++
				if r.IntN(2) == 0 {
					// A thread split off: Kieker's SplitEvent and metadata.
					recs = append(recs, split(root, at, ts), tm(child, int64(2+r.IntN(8)), "n1", root, at))
					*oi++
				} else {
					// A task: run by a pooled thread or in another process.
					node, pid := "n1", int32(10)
					if r.IntN(2) == 0 {
						node, pid = "n2", 20
					}
					recs = append(recs, tm(child, 7, node, -1, -1), inv(node, pid, invID+child, child, "n1", 10, invID, at))
				}
				var coi int32
				calls(child, &coi, 1, nil)
			}
			calls(root, &oi, 0, hop)
		case 1: // OperationExecutionRecords across hosts
			id := kid
			kid++
			var eoi int32
			var exec func(ess int32)
			exec = func(ess int32) {
				for range 1 + r.IntN(3) {
					tin := ts
					ts += 10
					i := len(recs)
					recs = append(recs, record.Record{})
					me := eoi
					eoi++
					if ess < 3 && r.IntN(2) == 0 {
						exec(ess + 1)
					}
					ts += 10
					recs[i] = oerRec(fmt.Sprintf("int q.S%d.f()", r.IntN(3)), id, tin, ts, fmt.Sprintf("host%d", r.IntN(3)), me, ess)
				}
			}
			exec(0)
		default: // spans across services
			id := ID{Hi: uint64(kid), Lo: uint64(r.Uint32()) + 1}
			kid++
			var b record.Batch
			sid := SpanID(1)
			var span func(parent SpanID, depth int)
			span = func(parent SpanID, depth int) {
				me := sid
				sid++
				start := ts
				ts += 5
				if depth < 3 && r.IntN(2) == 0 {
					span(me, depth+1)
				}
				ts += 5
				spanRec(&b, id, me, parent, fmt.Sprintf("GET /r%d", r.IntN(4)), fmt.Sprintf("svc%d", r.IntN(3)), start, ts)
			}
			for range 1 + r.IntN(2) {
				span(0, 0)
			}
			for i := range b.Records {
				recs = append(recs, b.Records[i].Clone())
			}
		}
	}
	return recs
}

// shapes renders traces sorted, for comparing assemblies.
func shapes(trs []*Trace) string {
	var out []string
	for _, tr := range trs {
		out = append(out, fmt.Sprintf("%s %v\n%s", tr.ID, tr.Broken, shape(tr)))
	}
	slices.Sort(out)
	return strings.Join(out, "")
}

// checkTree checks a trace's structure: parents before their children,
// depths one more than the parent's, span ids unique.
func checkTree(t *testing.T, tr *Trace) {
	t.Helper()
	ids := map[SpanID]bool{}
	for i, s := range tr.Spans {
		if ids[s.SpanID] {
			t.Fatalf("trace %s: span id %s twice", tr.ID, s.SpanID)
		}
		ids[s.SpanID] = true
		switch {
		case s.Parent >= int32(i):
			t.Fatalf("trace %s: span %d has parent %d", tr.ID, i, s.Parent)
		case s.Parent >= 0 && s.Depth != tr.Spans[s.Parent].Depth+1:
			t.Fatalf("trace %s: span %d at depth %d under depth %d", tr.ID, i, s.Depth, tr.Spans[s.Parent].Depth)
		case s.Parent < 0 && s.Depth != 0:
			t.Fatalf("trace %s: root %d at depth %d", tr.ID, i, s.Depth)
		}
	}
}

// FuzzAssembleAnyOrder: the records of well-formed traces, in any order,
// give the same trees as in the order they were made, sound ones.
func FuzzAssembleAnyOrder(f *testing.F) {
	for _, s := range [][]byte{{0}, {1, 2, 3, 4, 5, 6, 7, 8}, {9, 9, 9, 9, 9, 9, 9, 9, 1, 2, 3, 4, 5, 6, 7, 8}, []byte("tracebridge assembles"), {255, 0, 255, 0, 255, 0, 255, 0, 7}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var seed [16]byte
		copy(seed[:], data)
		recs := genTraces(rand.New(rand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), 1)))
		want := assemble(t, recs, Options{})
		for _, tr := range want {
			checkTree(t, tr)
			if len(tr.Broken) > 0 {
				t.Fatalf("a well-formed trace is broken: %v\n%s", tr.Broken, shape(tr))
			}
		}
		shuffled := slices.Clone(recs)
		rand.New(rand.NewPCG(binary.LittleEndian.Uint64(seed[8:]), 2)).Shuffle(len(shuffled), func(i, j int) {
			shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
		})
		if w, g := shapes(want), shapes(assemble(t, shuffled, Options{})); w != g {
			t.Fatalf("in order:\n%s\nshuffled:\n%s", w, g)
		}
	})
}

// FuzzAssembleGarbage: records with arbitrary traceIds, order indexes,
// parents (themselves, cycles, missing), times and span ids never crash
// the assembler, and what it emits is a tree.
func FuzzAssembleGarbage(f *testing.F) {
	for _, s := range [][]byte{{0, 1, 2, 3}, {4, 4, 4, 4, 4, 4, 4, 4}, {7, 0, 0, 7, 1, 1, 5, 5, 5, 2, 2}, []byte("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09")} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		small := func(i int) int64 {
			if i < len(data) {
				return int64(data[i]%8) - 1 // -1 … 6
			}
			return 0
		}
		var recs []record.Record
		var b record.Batch
		for i := 0; i+4 <= len(data) && len(recs) < 400; i += 4 {
			k, o, x := small(i+1), int32(small(i+2)), small(i+3)
			switch data[i] % 9 {
			case 0:
				recs = append(recs, tm(k, x, "h", small(i+2), int32(x)))
			case 1:
				recs = append(recs, before(k, o, x*10, "void a.B.c()"))
			case 2:
				recs = append(recs, after(k, o, x*10, "void a.B.c()"))
			case 3:
				recs = append(recs, failed(k, o, x*10, "void a.B.d()", "E"))
			case 4:
				recs = append(recs, split(k, o, x))
			case 5:
				recs = append(recs, oerRec("int a.B.e()", k, x*10, x*5, "h", o, int32(x)))
			case 6:
				spanRec(&b, ID{Lo: uint64(k + 2)}, SpanID(o+2), SpanID(x+2), "s", "svc", x*10, int64(o)*10)
				recs = append(recs, b.Records[len(b.Records)-1].Clone())
			case 7:
				recs = append(recs, inv("n", int32(o), k, x, "n", int32(o), small(i+2), o))
			default:
				recs = append(recs, call(k, o, x, "void a.B.c()", "void a.X.y()"))
			}
		}
		for _, o := range []Options{{}, {MaxSpans: 3}, {MaxOpenTraces: 2}} {
			for _, tr := range assemble(t, recs, o) {
				checkTree(t, tr)
			}
		}
	})
}
