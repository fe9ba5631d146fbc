package split

import (
	"cmp"
	"context"
	"fmt"
	"github.com/tracebridge/tracebridge/internal/trace"
	"slices"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// Merger puts split traces back together: it reverses a Stage, passing
// every other record on unchanged. See the package documentation.
type Merger struct {
	relay

	traces  map[int64]*mtrace // open traces by their own id
	parts   map[int64]*mtrace // open traces by the id of any of their partial traces
	lru     mtrace            // sentinel, most recent first
	last    *mtrace
	lastID  int64
	fams    map[int64]*group // split OperationExecutionRecord families by member id
	scratch mergeScratch
}

var _ pipeline.Consumer = (*Merger)(nil)

// NewMerger returns a Merger passing its output to next. Use the Options
// the log was split with.
func NewMerger(next pipeline.Consumer, o Options) *Merger {
	o = o.withDefaults()
	m := &Merger{relay: relay{next: next, opt: o}, traces: map[int64]*mtrace{}, parts: map[int64]*mtrace{}, fams: map[int64]*group{}}
	m.lru.prev, m.lru.next = &m.lru, &m.lru
	return m
}

// mtrace is an open trace being merged.
type mtrace struct {
	id    int64
	depth int64
	parts []mpart // parts[0] is the trace itself, then its open partial traces
	prev  *mtrace
	next  *mtrace
}

// mpart is an open partial trace: the original orderIndex of its event
// with orderIndex out is out + shift.
type mpart struct {
	id          int64
	shift       int32
	lastOut     int32
	lastBefore  bool
	depth       int64 // calls open in this partial trace
	expectRoot  bool  // the next event is the copy of the crossing Before
	pendingLeaf bool  // a child closed: the next event is the copy of its After
	pendingOrig int32 // the original orderIndex of that After
}

// Consume merges the records of b and passes them on (records of split
// OperationExecutionRecord traces are held back until their family is
// complete).
func (m *Merger) Consume(ctx context.Context, b *record.Batch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.publish()
	if m.finished {
		return ErrFinished
	}
	for i := range b.Records {
		m.record(&b.Records[i])
	}
	m.stats.RecordsIn += int64(len(b.Records))
	return m.flush(ctx)
}

// Finish ends the input: incomplete split families pass through unchanged
// and every record held back is passed on. It is safe to call twice.
func (m *Merger) Finish(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.publish()
	if m.finished {
		return nil
	}
	m.finished = true
	for m.out.win.n > 0 {
		m.out.drain()
		if m.out.win.n > 0 {
			m.giveUp(m.out.win.at(m.out.win.start).wait, "split family incomplete at the end of the input")
		}
	}
	for t := m.lru.prev; t != &m.lru; t = m.lru.prev {
		m.end(t)
	}
	return m.flush(ctx)
}

func (m *Merger) record(r *record.Record) {
	ti := m.types.Get(r.Type)
	switch ti.Role {
	case trace.RoleNone:
		m.out.share(r)
	case trace.RoleMeta:
		m.meta(r, ti)
	case trace.RoleOER:
		m.oer(r, ti)
	default:
		m.event(r, ti)
	}
	if m.out.win.n > 3*m.opt.MaxBuffered {
		m.trim()
	}
}

func (m *Merger) meta(r *record.Record, ti *trace.TypeInfo) {
	id := r.Values[ti.TraceID].Int()
	pid := r.Values[ti.ParentTraceID].Int()
	po := int32(r.Values[ti.ParentOrderID].Int())
	if id == childID(pid, po) {
		if m.eventChild(id, pid, po) || m.oerChild(r, id, pid, po) {
			return
		}
	}
	m.out.share(r)
	m.stats.TracesIn++
	m.stats.TracesOut++
	m.stats.MaxNesting = max(m.stats.MaxNesting, 1)
	// The same bookkeeping as the Stage's, so both forget the same traces.
	if old := m.traces[id]; old != nil {
		m.end(old)
	}
	if len(m.traces) >= m.opt.MaxOpenTraces {
		m.stats.Evicted++
		m.end(m.lru.prev)
	}
	t := &mtrace{id: id}
	t.parts = append(t.parts, mpart{id: id})
	m.traces[id] = t
	m.parts[id] = t
	m.pushFront(t)
}

// eventChild takes a TraceMetadata for the announcement of a partial
// event trace if its parent is the innermost open partial trace of its
// trace and has just written the crossing Before.
func (m *Merger) eventChild(id, pid int64, po int32) bool {
	t := m.parts[pid]
	if t == nil || m.parts[id] != nil || len(t.parts) >= m.opt.MaxDepth {
		return false
	}
	top := &t.parts[len(t.parts)-1]
	if top.id != pid || !top.lastBefore || top.lastOut != po || top.expectRoot || top.pendingLeaf {
		return false
	}
	t.parts = append(t.parts, mpart{id: id, shift: po + top.shift, expectRoot: true})
	m.parts[id] = t
	m.touch(t)
	m.stats.TracesIn++
	m.stats.Partial++
	m.stats.MaxNesting = max(m.stats.MaxNesting, len(t.parts))
	return true
}

func (m *Merger) pushFront(t *mtrace) {
	t.prev, t.next = &m.lru, m.lru.next
	m.lru.next.prev = t
	m.lru.next = t
}

func (m *Merger) touch(t *mtrace) {
	if m.lru.next != t {
		t.prev.next, t.next.prev = t.next, t.prev
		m.pushFront(t)
	}
}

func (m *Merger) end(t *mtrace) {
	delete(m.traces, t.id)
	for _, p := range t.parts {
		if m.parts[p.id] == t {
			delete(m.parts, p.id)
		}
	}
	t.prev.next, t.next.prev = t.next, t.prev
	t.prev, t.next = nil, nil
	if m.last == t {
		m.last = nil
	}
}

func (m *Merger) event(r *record.Record, ti *trace.TypeInfo) {
	id := r.Values[ti.TraceID].Int()
	t := m.last
	if t == nil || m.lastID != id {
		t = m.parts[id]
		if t == nil {
			m.out.share(r)
			return
		}
		m.last, m.lastID = t, id
	}
	m.touch(t)
	lvl := len(t.parts) - 1
	for lvl > 0 && t.parts[lvl].id != id {
		lvl--
	}
	p := &t.parts[lvl]
	out := int32(r.Values[ti.OrderIndex].Int())
	if p.expectRoot {
		p.expectRoot = false
		if ti.Role == trace.RoleBefore && out == 0 {
			// The child's copy of the crossing Before.
			p.depth, p.lastOut, p.lastBefore = 1, 0, true
			return
		}
	}
	if p.pendingLeaf {
		p.pendingLeaf = false
		if ti.Role == trace.RoleAfter && out == p.lastOut+1 {
			// The parent's copy of the After that closed the child: it
			// closes the leaf call here too.
			p.shift = p.pendingOrig - out
			p.lastOut, p.lastBefore = out, false
			p.depth--
			return
		}
	}
	orig := out + p.shift
	if lvl == 0 && orig == out {
		m.out.share(r)
	} else {
		c := m.out.add(r)
		c.Values[ti.TraceID] = record.IntValue(t.id)
		c.Values[ti.OrderIndex] = record.IntValue(int64(orig))
	}
	p.lastOut, p.lastBefore = out, ti.Role == trace.RoleBefore
	switch ti.Role {
	case trace.RoleBefore:
		t.depth++
		p.depth++
		m.stats.MaxDepth = max(m.stats.MaxDepth, int(min(t.depth, 1<<30)))
	case trace.RoleAfter:
		t.depth--
		p.depth--
		if lvl > 0 && lvl == len(t.parts)-1 && p.depth == 0 {
			delete(m.parts, p.id)
			if m.lastID == p.id {
				m.last = nil
			}
			t.parts = t.parts[:lvl]
			q := &t.parts[lvl-1]
			q.pendingLeaf, q.pendingOrig = true, orig
		}
		if t.depth <= 0 {
			m.end(t)
		}
	}
}

// OperationExecutionRecord families: the Stage writes the TraceMetadata
// of every partial trace of a split trace before the trace's first record,
// parents first. The family is held back until its root record (ess 0 in
// the trace itself) arrives, then put back together.

func (m *Merger) oerChild(r *record.Record, id, pid int64, po int32) bool {
	if m.fams[id] != nil {
		return false
	}
	f := m.fams[pid]
	if f == nil {
		f = &group{root: pid, ids: []int64{pid}, kids: map[int64]kid{}}
		m.fams[pid] = f
	}
	f.kids[id] = kid{parent: pid, leaf: po}
	f.ids = append(f.ids, id)
	m.fams[id] = f
	f.seqs = append(f.seqs, m.out.hold(r, f))
	return true
}

func (m *Merger) oer(r *record.Record, ti *trace.TypeInfo) {
	id := r.Values[ti.TraceID].Int()
	ess := r.Values[ti.ESS].Int()
	f := m.fams[id]
	if f == nil {
		m.out.share(r)
		if ess == 0 && id != -1 {
			m.stats.TracesIn++
			m.stats.TracesOut++
		}
		return
	}
	f.seqs = append(f.seqs, m.out.hold(r, f))
	if id == f.root && ess == 0 {
		m.resolve(f)
	}
}

func (m *Merger) trim() {
	for m.out.win.n > 3*m.opt.MaxBuffered {
		m.out.drain()
		if m.out.win.n <= 3*m.opt.MaxBuffered {
			return
		}
		m.giveUp(m.out.win.at(m.out.win.start).wait, fmt.Sprintf("more than %d records held back before the split family completed (the buffer limit)", 3*m.opt.MaxBuffered))
	}
}

func (m *Merger) forget(f *group) {
	for _, id := range f.ids {
		if m.fams[id] == f {
			delete(m.fams, id)
		}
	}
}

func (m *Merger) giveUp(f *group, reason string) {
	m.forget(f)
	release(&m.out.win, f)
	m.report(f.root, reason)
	m.out.drain()
}

type mergeScratch struct {
	slots []mslot
	stack []mframe
	patch []mpatch
}

// mslot is a record of a family: its partial trace, eoi and ess there,
// and its window position.
type mslot struct {
	part     int32
	eoi, ess int32
	pos      uint64
}

type mframe struct {
	part    int32
	next    int // index into the partial's slots
	baseEss int32
}

type mpatch struct {
	pos      uint64
	eoi, ess int32
	drop     bool
}

// resolve puts the complete family f back together.
func (m *Merger) resolve(f *group) {
	m.forget(f)
	w := &m.out.win
	defer m.out.drain()
	defer release(w, f)
	nparts := len(f.ids)
	index := make(map[int64]int32, nparts)
	for i, id := range f.ids {
		index[id] = int32(i)
	}
	sc := &m.scratch
	slots := sc.slots[:0]
	var metas []uint64
	for _, pos := range f.seqs {
		r := &w.at(pos).rec
		ti := m.types.Get(r.Type)
		if ti.Role == trace.RoleMeta {
			metas = append(metas, pos)
			continue
		}
		slots = append(slots, mslot{
			part: index[r.Values[ti.TraceID].Int()],
			eoi:  int32(r.Values[ti.EOI].Int()), ess: int32(r.Values[ti.ESS].Int()),
			pos: pos,
		})
	}
	sc.slots = slots
	bad := func(reason string) { m.report(f.root, "split family not merged: "+reason) }
	// Each partial trace's records in eoi order, which must be 0, 1, ….
	slices.SortStableFunc(slots, func(a, b mslot) int {
		if c := cmp.Compare(a.part, b.part); c != 0 {
			return c
		}
		return cmp.Compare(a.eoi, b.eoi)
	})
	start := make([]int, nparts+1)
	for i := range slots {
		start[slots[i].part+1]++
	}
	for i := 1; i <= nparts; i++ {
		start[i] += start[i-1]
	}
	for i := range slots {
		if int(slots[i].eoi) != i-start[slots[i].part] {
			bad(fmt.Sprintf("partial trace %d has eoi %d out of order", f.ids[slots[i].part], slots[i].eoi))
			return
		}
	}
	type leafKey struct {
		part int32
		eoi  int32
	}
	leaves := make(map[leafKey]int32, nparts)
	for i, id := range f.ids[1:] {
		k := f.kids[id]
		p, ok := index[k.parent]
		if !ok {
			bad(fmt.Sprintf("partial trace %d has an unknown parent", id))
			return
		}
		leaves[leafKey{p, k.leaf}] = int32(i + 1)
	}
	// Walk the family in pre-order, replacing each leaf by its child.
	patches := sc.patch[:0]
	stack := append(sc.stack[:0], mframe{part: 0})
	visited, nest := 1, 1
	counter := int32(0)
	for len(stack) > 0 {
		nest = max(nest, len(stack))
		fr := &stack[len(stack)-1]
		if start[fr.part]+fr.next == start[fr.part+1] {
			stack = stack[:len(stack)-1]
			continue
		}
		sl := &slots[start[fr.part]+fr.next]
		fr.next++
		if child, ok := leaves[leafKey{fr.part, sl.eoi}]; ok {
			if start[child] == start[child+1] || slots[start[child]].ess != 0 {
				bad(fmt.Sprintf("partial trace %d has no root record", f.ids[child]))
				return
			}
			patches = append(patches, mpatch{pos: sl.pos, drop: true})
			stack = append(stack, mframe{part: child, baseEss: fr.baseEss + sl.ess})
			visited++
			continue
		}
		patches = append(patches, mpatch{pos: sl.pos, eoi: counter, ess: fr.baseEss + sl.ess})
		counter++
	}
	sc.stack, sc.patch = stack, patches
	if visited != nparts {
		bad(fmt.Sprintf("%d of %d partial traces are not linked to the trace", nparts-visited, nparts))
		return
	}
	for _, pos := range metas {
		w.at(pos).drop = true
	}
	for _, p := range patches {
		e := w.at(p.pos)
		if p.drop {
			e.drop = true
			continue
		}
		patchOER(&e.rec, m.types.Get(e.rec.Type), f.root, p.eoi, p.ess)
	}
	m.stats.TracesIn += int64(nparts)
	m.stats.TracesOut++
	m.stats.Partial += int64(nparts - 1)
	m.stats.MaxNesting = max(m.stats.MaxNesting, nest)
}
