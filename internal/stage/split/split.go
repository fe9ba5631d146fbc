package split

import (
	"context"
	"fmt"
	"github.com/tracebridge/tracebridge/internal/trace"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// Stage cuts traces into partial traces where a call crosses a component
// boundary and passes every record on to the next consumer. See the
// package documentation for the rules.
type Stage struct {
	relay
	res *resolver

	traces  map[int64]*etrace
	lru     etrace // sentinel of the list of open traces, most recent first
	last    *etrace
	frames  int
	pool    []*etrace
	otraces map[int64]*group
	gaveUp  idSet // OER traces passed through unsplit
	unknown idSet // traces without TraceMetadata already reported
	tmType  *record.Type
	tmInfo  *trace.TypeInfo
	scratch oerScratch
}

var _ pipeline.Consumer = (*Stage)(nil)

// New returns a stage that splits traces at the boundaries b and passes
// the result to next.
func New(b *Boundaries, next pipeline.Consumer, o Options) *Stage {
	o = o.withDefaults()
	s := &Stage{relay: relay{next: next, opt: o}, res: newResolver(b), traces: map[int64]*etrace{}, otraces: map[int64]*group{}}
	s.lru.prev, s.lru.next = &s.lru, &s.lru
	s.tmType = o.Catalog.Lookup(record.TraceMetadata)
	if s.tmType != nil {
		s.tmInfo = trace.Classify(s.tmType)
		if s.tmInfo.Role != trace.RoleMeta {
			s.tmType, s.tmInfo = nil, nil
		}
	}
	return s
}

// trace is the state of one open event trace.
type etrace struct {
	id      int64
	meta    record.Record // the trace's TraceMetadata (values owned)
	metaBuf [8]record.Value
	mi      *trace.TypeInfo
	started bool
	nextIn  int32 // orderIndex the next event must have
	depth   int64 // open calls (Before minus After events)
	flat    bool  // passing through unsplit
	frames  []frame
	parts   []part // open partial traces; parts[0] is the trace itself

	prev, next *etrace // the LRU list
}

// frame is an open call: its component and whether it opened a partial
// trace.
type frame struct {
	c     comp
	cross bool
}

// part is an open partial trace. Its events carry orderIndex in - shift;
// leafOut is the orderIndex of the crossing call's Before in the parent.
type part struct {
	id      int64
	shift   int32
	leafOut int32
}

// Consume splits the traces in b and passes the records on. Records of
// incomplete OperationExecutionRecord traces are held back (with every
// record after them) until their trace completes, so the next consumer
// may see fewer records than b holds, and more later.
func (s *Stage) Consume(ctx context.Context, b *record.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.publish()
	if s.finished {
		return ErrFinished
	}
	for i := range b.Records {
		s.record(&b.Records[i])
	}
	s.stats.RecordsIn += int64(len(b.Records))
	s.expire()
	return s.flush(ctx)
}

// Flush passes on the records held back longer than MaxHold (their traces
// are reported and pass through unsplit). A bridge calls it periodically.
func (s *Stage) Flush(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.publish()
	if s.finished {
		return nil
	}
	s.expire()
	return s.flush(ctx)
}

// Finish ends the input: OperationExecutionRecord traces still incomplete
// pass through unsplit, event traces still open are reported as never
// closed, and every record held back is passed on. Consume fails after
// Finish. Finish is safe to call twice.
func (s *Stage) Finish(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.publish()
	if s.finished {
		return nil
	}
	s.finished = true
	for s.out.win.n > 0 {
		s.out.drain()
		if s.out.win.n > 0 {
			s.giveUp(s.out.win.at(s.out.win.start).wait, "never completed (no record with ess 0)")
		}
	}
	for t := s.lru.prev; t != &s.lru; t = s.lru.prev {
		if t.depth > 0 && !t.flat {
			s.report(t.id, fmt.Sprintf("never closed: %d calls open at the end of the input", t.depth))
		}
		s.end(t)
	}
	return s.flush(ctx)
}

// Stats returns the counts so far. It may be called from any goroutine.
// Held returns how many records the stage holds back (incomplete
// OperationExecutionRecord traces and every record behind them): the
// bridge acknowledges a broker's messages only once none of their records
// is held. Records come out in input order, so the held ones are always the
// latest ones in. It is called on the goroutine that calls Consume.
func (s *Stage) Held() int { return int(s.out.win.n) }

func (s *Stage) record(r *record.Record) {
	ti := s.types.Get(r.Type)
	switch ti.Role {
	case trace.RoleNone:
		s.out.share(r)
	case trace.RoleMeta:
		s.meta(r, ti)
	case trace.RoleOER:
		s.oer(r, ti)
	default:
		s.event(r, ti)
	}
	if s.out.win.n > s.opt.MaxBuffered {
		s.trim()
	}
}

// meta starts a trace.
func (s *Stage) meta(r *record.Record, ti *trace.TypeInfo) {
	s.out.share(r)
	s.stats.TracesIn++
	s.stats.TracesOut++
	s.stats.MaxNesting = max(s.stats.MaxNesting, 1)
	id := r.Values[ti.TraceID].Int()
	if old := s.traces[id]; old != nil {
		if old.depth > 0 && !old.flat {
			s.report(id, "TraceMetadata repeated while the trace was open")
		}
		s.end(old)
	}
	if len(s.traces) >= s.opt.MaxOpenTraces {
		old := s.lru.prev
		s.stats.Evicted++
		s.report(old.id, fmt.Sprintf("evicted: more than %d traces open", s.opt.MaxOpenTraces))
		s.end(old)
	}
	t := s.newTrace()
	t.id = id
	t.mi = ti
	t.meta = record.Record{Type: r.Type, LoggingTimestamp: r.LoggingTimestamp}
	if len(r.Values) <= len(t.metaBuf) {
		t.meta.Values = t.metaBuf[:len(r.Values)]
		copy(t.meta.Values, r.Values)
		deepCopyLists(t.meta.Values)
	} else {
		t.meta.Values = r.Clone().Values
	}
	t.parts = append(t.parts, part{id: id})
	s.traces[id] = t
	s.pushFront(t)
	s.last = t
}

func (s *Stage) newTrace() *etrace {
	if n := len(s.pool); n > 0 {
		t := s.pool[n-1]
		s.pool = s.pool[:n-1]
		return t
	}
	return &etrace{}
}

// end forgets a trace.
func (s *Stage) end(t *etrace) {
	delete(s.traces, t.id)
	t.prev.next, t.next.prev = t.next, t.prev
	s.frames -= len(t.frames)
	if s.last == t {
		s.last = nil
	}
	frames, parts := t.frames[:0], t.parts[:0]
	if cap(frames) > 64 {
		frames = nil
	}
	if cap(parts) > 64 {
		parts = nil
	}
	*t = etrace{frames: frames, parts: parts}
	if len(s.pool) < 1024 {
		s.pool = append(s.pool, t)
	}
}

func (s *Stage) pushFront(t *etrace) {
	t.prev, t.next = &s.lru, s.lru.next
	s.lru.next.prev = t
	s.lru.next = t
}

// flatten passes the rest of t through unsplit: its events go to the
// trace itself with the orderIndex shift in effect there, so merging (which
// tracks the same shift) restores them, and no partial trace is opened.
func (s *Stage) flatten(t *etrace, reason string) {
	s.report(t.id, reason)
	t.flat = true
	s.frames -= len(t.frames)
	t.frames = t.frames[:0]
	t.parts = t.parts[:1]
}

func (s *Stage) event(r *record.Record, ti *trace.TypeInfo) {
	id := r.Values[ti.TraceID].Int()
	t := s.last
	if t == nil || t.id != id {
		t = s.traces[id]
		if t == nil {
			s.out.share(r)
			if !s.unknown.has(id) {
				s.unknown.add(id)
				s.report(id, "events without an open trace (no TraceMetadata, or after the trace ended)")
			}
			return
		}
		s.last = t
	}
	if s.lru.next != t {
		t.prev.next, t.next.prev = t.next, t.prev
		s.pushFront(t)
	}
	oi := int32(r.Values[ti.OrderIndex].Int())
	if !t.flat {
		switch {
		case t.started && oi != t.nextIn:
			s.flatten(t, fmt.Sprintf("orderIndex %d where %d was expected", oi, t.nextIn))
		case ti.Role == trace.RoleAfter && len(t.frames) == 0:
			s.flatten(t, fmt.Sprintf("After event (orderIndex %d) without its Before", oi))
		case ti.Role == trace.RoleBefore && len(t.frames) >= s.opt.MaxDepth:
			s.flatten(t, fmt.Sprintf("more than %d nested calls (the depth limit)", s.opt.MaxDepth))
		case ti.Role == trace.RoleBefore && s.frames >= s.opt.MaxFrames:
			s.flatten(t, fmt.Sprintf("more than %d calls open in all traces (the frame limit)", s.opt.MaxFrames))
		}
	}
	t.started = true
	t.nextIn = oi + 1
	if t.flat {
		s.emit(r, ti, t.id, oi-t.parts[0].shift)
		switch ti.Role {
		case trace.RoleBefore:
			t.depth++
		case trace.RoleAfter:
			t.depth--
			if t.depth <= 0 {
				s.end(t)
			}
		}
		return
	}
	p := &t.parts[len(t.parts)-1]
	switch ti.Role {
	case trace.RoleBefore:
		c := s.res.event(str(r, ti.Class), str(r, ti.Op))
		out := oi - p.shift
		s.emit(r, ti, p.id, out)
		cross := len(t.frames) > 0 && t.frames[len(t.frames)-1].c != c
		if cross {
			child := childID(p.id, out)
			s.childMeta(t, child, p.id, out, r.LoggingTimestamp)
			s.emit(r, ti, child, 0)
			t.parts = append(t.parts, part{id: child, shift: oi, leafOut: out})
			s.stats.Partial++
			s.stats.TracesOut++
			s.stats.MaxNesting = max(s.stats.MaxNesting, len(t.parts))
		}
		t.frames = append(t.frames, frame{c: c, cross: cross})
		s.frames++
		t.depth++
		s.stats.MaxDepth = max(s.stats.MaxDepth, len(t.frames))
	case trace.RoleAfter:
		f := t.frames[len(t.frames)-1]
		t.frames = t.frames[:len(t.frames)-1]
		s.frames--
		s.emit(r, ti, p.id, oi-p.shift)
		if f.cross {
			leafOut := p.leafOut
			t.parts = t.parts[:len(t.parts)-1]
			q := &t.parts[len(t.parts)-1]
			q.shift = oi - (leafOut + 1)
			s.emit(r, ti, q.id, leafOut+1)
		}
		t.depth--
		if t.depth == 0 {
			s.end(t)
		}
	default:
		s.emit(r, ti, p.id, oi-p.shift)
	}
}

// emit passes on a copy of the event r with its traceId and orderIndex set.
func (s *Stage) emit(r *record.Record, ti *trace.TypeInfo, id int64, oi int32) {
	if r.Values[ti.TraceID].Int() == id && r.Values[ti.OrderIndex].Int() == int64(oi) {
		s.out.share(r)
		return
	}
	c := s.out.add(r)
	c.Values[ti.TraceID] = record.IntValue(id)
	c.Values[ti.OrderIndex] = record.IntValue(int64(oi))
}

// childMeta announces a partial trace: a copy of the trace's metadata
// (same thread, session, host, application) with its own id and the link
// to its parent.
func (s *Stage) childMeta(t *etrace, id, parent int64, order int32, loggingTimestamp int64) {
	m := s.out.addNew(t.meta.Type, loggingTimestamp)
	copy(m.Values, t.meta.Values)
	m.Values[t.mi.TraceID] = record.IntValue(id)
	m.Values[t.mi.ParentTraceID] = record.IntValue(parent)
	m.Values[t.mi.ParentOrderID] = record.IntValue(int64(order))
}

func str(r *record.Record, i int) string {
	if i < 0 {
		return ""
	}
	return r.Values[i].Str()
}
