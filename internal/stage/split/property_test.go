package split

import (
	"fmt"
	"github.com/tracebridge/tracebridge/internal/trace"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/record"
)

// seeds returns the fixed seeds plus a few new ones per run (logged, so a
// failure can be replayed).
func seeds(t *testing.T, fixed ...uint64) []uint64 {
	now := uint64(time.Now().UnixNano())
	out := append([]uint64(nil), fixed...)
	for i := uint64(0); i < 3; i++ {
		out = append(out, now+i*0x9e3779b9)
	}
	t.Logf("seeds %v", out)
	return out
}

// TestPropertySplitMerge: random call trees of random depth and fan-out,
// many traces interleaved, split at random boundaries and in random batch
// sizes, then merged, give back the input record for record; the split
// output is well formed and cut exactly at the boundaries.
func TestPropertySplitMerge(t *testing.T) {
	for _, seed := range seeds(t, 1, 2, 3, 42, 2024) {
		g := newGen(seed)
		for round := 0; round < 20; round++ {
			g.maxDepth = 1 + g.rng.IntN(8)
			g.maxFan = 1 + g.rng.IntN(4)
			g.maxCalls = 1 + g.rng.IntN(200)
			in := g.workload(1+g.rng.IntN(12), round%2 == 1)
			spec := g.randomSpecs()
			b := mustParse(t, spec)
			name := fmt.Sprintf("seed=%d/round=%d/%s", seed, round, spec)
			sp := splitRecs(t, b, in, g.randomSizes(), Options{})
			if len(sp.malformed) > 0 {
				t.Fatalf("%s: well-formed input reported malformed: %v", name, sp.malformed)
			}
			checkSplit(t, name, b, in, sp.out)
			mg := mergeRecs(t, sp.out, g.randomSizes(), Options{})
			if d := diffRecords(in, mg.out); d != "" {
				t.Fatalf("%s: merge(split(x)) != x (-want +got):\n%s", name, d)
			}
			if len(mg.malformed) > 0 {
				t.Fatalf("%s: merge reported %v", name, mg.malformed)
			}
			if sp.stats.Partial != mg.stats.Partial {
				t.Fatalf("%s: split cut %d partial traces, merge joined %d", name, sp.stats.Partial, mg.stats.Partial)
			}
			// Batching never changes the result.
			again := splitRecs(t, b, in, []int{1}, Options{})
			if d := diffRecords(sp.out, again.out); d != "" {
				t.Fatalf("%s: split depends on batch sizes:\n%s", name, d)
			}
		}
	}
}

// TestPropertyNoCrossingUnchanged: with a single component nothing is cut
// and the output is the input.
func TestPropertyNoCrossingUnchanged(t *testing.T) {
	for _, seed := range seeds(t, 7) {
		g := newGen(seed)
		in := g.workload(20, true)
		sp := splitRecs(t, mustParse(t, "regex:.*"), in, g.randomSizes(), Options{})
		if d := diffRecords(in, sp.out); d != "" {
			t.Fatalf("seed %d: split without crossings changed the log:\n%s", seed, d)
		}
		if sp.stats.Partial != 0 {
			t.Fatalf("seed %d: %d partial traces", seed, sp.stats.Partial)
		}
		mg := mergeRecs(t, in, nil, Options{})
		if d := diffRecords(in, mg.out); d != "" {
			t.Fatalf("seed %d: merging an unsplit log changed it:\n%s", seed, d)
		}
	}
}

// TestPropertyMalformed: random damage (dropped, duplicated, swapped and
// truncated events, lost TraceMetadata) never loses or invents a record:
// merge(split(x)) == x, also with tiny limits.
func TestPropertyMalformed(t *testing.T) {
	for _, seed := range seeds(t, 11, 12, 13) {
		g := newGen(seed)
		for round := 0; round < 30; round++ {
			in := damage(g.rng, g.workload(1+g.rng.IntN(10), round%3 == 0))
			o := Options{}
			if g.rng.IntN(2) == 0 {
				o = Options{MaxOpenTraces: 1 + g.rng.IntN(4), MaxDepth: 1 + g.rng.IntN(5), MaxFrames: 1 + g.rng.IntN(10), MaxBuffered: 1 + g.rng.IntN(30)}
			}
			b := mustParse(t, g.randomSpecs())
			sp := splitRecs(t, b, in, g.randomSizes(), o)
			mg := mergeRecs(t, sp.out, g.randomSizes(), o)
			if d := diffRecords(in, mg.out); d != "" {
				t.Fatalf("seed %d round %d (%+v, %s): merge(split(x)) != x:\n%s", seed, round, o, b, d)
			}
		}
	}
}

func damage(rng *rand.Rand, recs []record.Record) []record.Record {
	out := append([]record.Record(nil), recs...)
	for n := rng.IntN(4); n > 0 && len(out) > 2; n-- {
		i := rng.IntN(len(out) - 1)
		switch rng.IntN(4) {
		case 0: // lose a record
			out = append(out[:i], out[i+1:]...)
		case 1: // duplicate one
			out = append(out[:i+1], out[i:]...)
		case 2: // swap two
			out[i], out[i+1] = out[i+1], out[i]
		case 3: // cut the log short
			out = out[:i]
		}
	}
	return out
}

// checkSplit verifies the split output of in: non-trace records in order,
// every (partial) trace numbered densely, no call inside a partial trace
// crossing a boundary except the leaf of a partial trace announced right
// after it, and children linked to their parents.
func checkSplit(t *testing.T, name string, b *Boundaries, in, out []record.Record) {
	t.Helper()
	var tc trace.TypeCache
	res := newResolver(b)
	others := func(recs []record.Record) []record.Record {
		var o []record.Record
		for _, r := range recs {
			if tc.Get(r.Type).Role == trace.RoleNone {
				o = append(o, r)
			}
		}
		return o
	}
	if d := diffRecords(others(in), others(out)); d != "" {
		t.Fatalf("%s: non-trace records changed:\n%s", name, d)
	}
	type link struct {
		parent int64
		order  int32
	}
	metas := map[int64]link{}
	events := map[int64][]record.Record{}
	var order []int64
	for i, r := range out {
		ti := tc.Get(r.Type)
		switch ti.Role {
		case trace.RoleMeta:
			id := r.Values[ti.TraceID].Int()
			l := link{r.Values[ti.ParentTraceID].Int(), int32(r.Values[ti.ParentOrderID].Int())}
			metas[id] = l
			if id == childID(l.parent, l.order) {
				// The leaf Before is the last event written to the parent.
				pe := events[l.parent]
				if len(pe) == 0 {
					break // a partial OperationExecutionRecord trace: checkOERSplit
				}
				last := pe[len(pe)-1]
				lti := tc.Get(last.Type)
				if lti.Role != trace.RoleBefore || int32(last.Values[lti.OrderIndex].Int()) != l.order {
					t.Fatalf("%s: record %d: partial trace %d does not follow its leaf Before", name, i, id)
				}
			}
			order = append(order, id)
		case trace.RoleBefore, trace.RoleAfter, trace.RoleEvent:
			id := r.Values[ti.TraceID].Int()
			events[id] = append(events[id], r)
		}
	}
	for _, id := range order {
		evs := events[id]
		if len(evs) == 0 {
			continue
		}
		l := metas[id]
		child := id == childID(l.parent, l.order)
		type open struct {
			c    comp
			oi   int32
			leaf bool
		}
		var stack []open
		for k, e := range evs {
			ti := tc.Get(e.Type)
			oi := int32(e.Values[ti.OrderIndex].Int())
			first := int32(evs[0].Values[tc.Get(evs[0].Type).OrderIndex].Int())
			if child && first != 0 {
				t.Fatalf("%s: partial trace %d starts at orderIndex %d", name, id, first)
			}
			if oi != first+int32(k) {
				t.Fatalf("%s: trace %d: event %d has orderIndex %d, want %d", name, id, k, oi, first+int32(k))
			}
			if len(stack) > 0 && stack[len(stack)-1].leaf && !(ti.Role == trace.RoleAfter) {
				t.Fatalf("%s: trace %d: leaf at orderIndex %d has events inside it", name, id, stack[len(stack)-1].oi)
			}
			switch ti.Role {
			case trace.RoleBefore:
				c := res.event(str(&e, ti.Class), str(&e, ti.Op))
				leaf := false
				if len(stack) > 0 && stack[len(stack)-1].c != c {
					leaf = true
					cid := childID(id, oi)
					if l, ok := metas[cid]; !ok || l.parent != id || l.order != oi {
						t.Fatalf("%s: trace %d: crossing call at orderIndex %d has no partial trace", name, id, oi)
					}
				}
				stack = append(stack, open{c: c, oi: oi, leaf: leaf})
			case trace.RoleAfter:
				if len(stack) == 0 {
					t.Fatalf("%s: trace %d: After at orderIndex %d without Before", name, id, oi)
				}
				stack = stack[:len(stack)-1]
			}
		}
		if len(stack) != 0 {
			t.Fatalf("%s: trace %d: %d calls never closed", name, id, len(stack))
		}
	}
	checkOERSplit(t, name, b, out)
}

// checkOERSplit verifies split OperationExecutionRecord traces: every
// (partial) trace has eoi 0…n-1 and a tree of ess from 0, and no call
// inside one crosses a boundary unless it is the leaf of a partial trace.
func checkOERSplit(t *testing.T, name string, b *Boundaries, out []record.Record) {
	var tc trace.TypeCache
	res := newResolver(b)
	type node struct {
		eoi, ess int32
		c        comp
	}
	traces := map[int64][]node{}
	kids := map[int64]bool{}
	for _, r := range out {
		ti := tc.Get(r.Type)
		switch ti.Role {
		case trace.RoleMeta:
			kids[r.Values[ti.TraceID].Int()] = true
		case trace.RoleOER:
			id := r.Values[ti.TraceID].Int()
			traces[id] = append(traces[id], node{int32(r.Values[ti.EOI].Int()), int32(r.Values[ti.ESS].Int()), res.operation(str(&r, ti.Op))})
		}
	}
	for id, nodes := range traces {
		if id == -1 {
			continue
		}
		sort.Slice(nodes, func(i, j int) bool { return nodes[i].eoi < nodes[j].eoi })
		var stack []node
		for i, n := range nodes {
			if n.eoi != int32(i) {
				t.Fatalf("%s: OER trace %d: eoi %v", name, id, nodes)
			}
			if i == 0 {
				if n.ess != 0 {
					t.Fatalf("%s: OER trace %d: root ess %d", name, id, n.ess)
				}
				stack = append(stack, n)
				continue
			}
			if n.ess < 1 || int(n.ess) > len(stack) {
				t.Fatalf("%s: OER trace %d: eoi %d ess %d after depth %d", name, id, n.eoi, n.ess, len(stack))
			}
			stack = append(stack[:n.ess], n)
			if caller := stack[n.ess-1]; caller.c != n.c {
				// Must be a leaf with a partial trace of its own.
				if i+1 < len(nodes) && nodes[i+1].ess > n.ess {
					t.Fatalf("%s: OER trace %d: crossing call eoi %d has callees in the same trace", name, id, n.eoi)
				}
				if !kids[childID(id, n.eoi)] {
					t.Fatalf("%s: OER trace %d: crossing call eoi %d has no partial trace", name, id, n.eoi)
				}
			}
		}
	}
}
