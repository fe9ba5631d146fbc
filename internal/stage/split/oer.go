package split

import (
	"fmt"
	"github.com/tracebridge/tracebridge/internal/trace"

	"github.com/tracebridge/tracebridge/internal/record"
)

// OperationExecutionRecord traces. A record is written when its operation
// returns, so a callee arrives before its caller and whether a call
// crosses a boundary is known only once its caller has arrived; the
// records of a trace are therefore held back until the trace's root (ess
// 0) arrives, and then written, in their original places, split.

// oerScratch is reused by every resolution.
type oerScratch struct {
	nodes []onode
	byEoi []int32
	stack []int32
	parts []opart
}

type onode struct {
	pos      uint64 // window position
	eoi, ess int32
	c        comp
	parent   int32 // node index of the caller, -1 for the root
	part     int32 // index of the partial trace the node is in
}

type opart struct {
	id      int64
	baseEss int32
	counter int32 // next eoi
	nest    int
}

func (s *Stage) oer(r *record.Record, ti *trace.TypeInfo) {
	id := r.Values[ti.TraceID].Int()
	eoi, ess := r.Values[ti.EOI].Int(), r.Values[ti.ESS].Int()
	if id == -1 || eoi < 0 || ess < 0 || s.gaveUp.has(id) {
		s.out.share(r) // not part of a trace, or passed through unsplit
		return
	}
	g := s.otraces[id]
	if g == nil {
		if ess == 0 { // a trace of one record: nothing to split
			s.out.share(r)
			s.stats.TracesIn++
			s.stats.TracesOut++
			s.stats.MaxNesting = max(s.stats.MaxNesting, 1)
			return
		}
		g = &group{root: id}
		if s.opt.MaxHold > 0 {
			g.since = s.opt.Now()
		}
		s.otraces[id] = g
	}
	g.seqs = append(g.seqs, s.out.hold(r, g))
	if ess == 0 {
		s.resolveOER(g)
		s.out.drain()
	}
}

// trim keeps the window within MaxBuffered by passing the oldest held-back
// trace through unsplit.
func (s *Stage) trim() {
	for s.out.win.n > s.opt.MaxBuffered {
		s.out.drain()
		if s.out.win.n <= s.opt.MaxBuffered {
			return
		}
		s.giveUp(s.out.win.at(s.out.win.start).wait, fmt.Sprintf("more than %d records held back before the trace completed (the buffer limit)", s.opt.MaxBuffered))
	}
}

// expire passes through unsplit the held-back traces older than MaxHold.
func (s *Stage) expire() {
	if s.opt.MaxHold <= 0 || s.out.win.n == 0 {
		return
	}
	now := s.opt.Now()
	for s.out.win.n > 0 {
		s.out.drain()
		if s.out.win.n == 0 {
			return
		}
		g := s.out.win.at(s.out.win.start).wait
		if now.Sub(g.since) <= s.opt.MaxHold {
			return
		}
		s.giveUp(g, fmt.Sprintf("incomplete for more than %v (the hold limit)", s.opt.MaxHold))
	}
}

func release(w *window, g *group) {
	for _, pos := range g.seqs {
		w.at(pos).wait = nil
	}
}

// giveUp passes the held-back records of g on unchanged, and the rest of
// its trace after them.
func (s *Stage) giveUp(g *group, reason string) {
	release(&s.out.win, g)
	delete(s.otraces, g.root)
	s.gaveUp.add(g.root)
	s.stats.TracesIn++
	s.stats.TracesOut++
	s.report(g.root, reason)
	s.out.drain()
}

// resolveOER splits the complete trace g (its last record has ess 0).
func (s *Stage) resolveOER(g *group) {
	delete(s.otraces, g.root)
	s.stats.TracesIn++
	s.stats.TracesOut++
	s.stats.MaxNesting = max(s.stats.MaxNesting, 1)
	w := &s.out.win
	defer release(w, g)
	sc := &s.scratch
	n := len(g.seqs)
	sc.byEoi = resize(sc.byEoi, n)
	for i := range sc.byEoi {
		sc.byEoi[i] = -1
	}
	sc.nodes = resize(sc.nodes, n)
	for k, pos := range g.seqs {
		r := &w.at(pos).rec
		ti := s.types.Get(r.Type)
		eoi, ess := r.Values[ti.EOI].Int(), r.Values[ti.ESS].Int()
		if eoi >= int64(n) || sc.byEoi[eoi] >= 0 {
			s.report(g.root, fmt.Sprintf("eoi %d of %d records: the eoi values are not 0 to %d", eoi, n, n-1))
			return
		}
		sc.byEoi[eoi] = int32(k)
		sc.nodes[k] = onode{pos: pos, eoi: int32(eoi), ess: int32(ess), c: s.res.operation(str(r, ti.Op))}
	}
	// The tree: in eoi order each ess is at most one deeper than the one
	// before; the caller is the last record one level up.
	stack := sc.stack[:0]
	cross := false
	for i := 0; i < n; i++ {
		k := sc.byEoi[i]
		nd := &sc.nodes[k]
		if i == 0 {
			if nd.ess != 0 {
				s.report(g.root, fmt.Sprintf("eoi 0 has ess %d", nd.ess))
				return
			}
			nd.parent = -1
			stack = append(stack, k)
			continue
		}
		if nd.ess < 1 || int(nd.ess) > len(stack) {
			s.report(g.root, fmt.Sprintf("eoi %d has ess %d after ess %d", i, nd.ess, len(stack)-1))
			return
		}
		stack = append(stack[:nd.ess], k)
		nd.parent = stack[nd.ess-1]
		if nd.c != sc.nodes[nd.parent].c {
			cross = true
		}
	}
	sc.stack = stack
	s.stats.MaxDepth = max(s.stats.MaxDepth, len(stack))
	if !cross || s.tmType == nil {
		return
	}
	parts := append(sc.parts[:0], opart{id: g.root, nest: 1})
	first := w.at(g.seqs[0])
	for i := 0; i < n; i++ {
		k := sc.byEoi[i]
		nd := &sc.nodes[k]
		e := w.at(nd.pos)
		ti := s.types.Get(e.rec.Type)
		if nd.parent < 0 {
			nd.part = 0
			parts[0].counter = 1
			continue // eoi 0, ess 0 in the trace itself: unchanged
		}
		q := sc.nodes[nd.parent].part
		if nd.c == sc.nodes[nd.parent].c {
			nd.part = q
			p := &parts[q]
			patchOER(&e.rec, ti, p.id, p.counter, nd.ess-p.baseEss)
			p.counter++
			continue
		}
		p := &parts[q]
		leafEoi, leafEss := p.counter, nd.ess-p.baseEss
		p.counter++
		child := childID(p.id, leafEoi)
		leaf := e.rec.Clone()
		patchOER(&leaf, ti, p.id, leafEoi, leafEss)
		e.after = &leaf
		first.before = append(first.before, s.oerMeta(&e.rec, ti, child, p.id, leafEoi, first.rec.LoggingTimestamp))
		patchOER(&e.rec, ti, child, 0, 0)
		parts = append(parts, opart{id: child, baseEss: nd.ess, counter: 1, nest: p.nest + 1})
		nd.part = int32(len(parts) - 1)
		s.stats.Partial++
		s.stats.TracesOut++
		s.stats.MaxNesting = max(s.stats.MaxNesting, parts[len(parts)-1].nest)
	}
	sc.parts = parts
}

func patchOER(r *record.Record, ti *trace.TypeInfo, id int64, eoi, ess int32) {
	r.Values[ti.TraceID] = record.IntValue(id)
	r.Values[ti.EOI] = record.IntValue(int64(eoi))
	r.Values[ti.ESS] = record.IntValue(int64(ess))
}

// oerMeta announces a partial OperationExecutionRecord trace: a
// TraceMetadata with the session and host of its root record, threadId -1
// (unknown) and the link to its parent.
func (s *Stage) oerMeta(root *record.Record, ti *trace.TypeInfo, id, parent int64, order int32, loggingTimestamp int64) record.Record {
	m := record.Record{Type: s.tmType, LoggingTimestamp: loggingTimestamp, Values: make([]record.Value, len(s.tmType.Fields))}
	mi := s.tmInfo
	m.Values[mi.TraceID] = record.IntValue(id)
	m.Values[mi.ParentTraceID] = record.IntValue(parent)
	m.Values[mi.ParentOrderID] = record.IntValue(int64(order))
	if i := trace.Field(s.tmType, "threadId", record.Long); i >= 0 {
		m.Values[i] = record.IntValue(-1)
	}
	if i := trace.Field(s.tmType, "sessionId", record.String); i >= 0 && ti.Session >= 0 {
		m.Values[i] = root.Values[ti.Session]
	}
	if i := trace.Field(s.tmType, "hostname", record.String); i >= 0 && ti.Host >= 0 {
		m.Values[i] = root.Values[ti.Host]
	}
	return m
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
