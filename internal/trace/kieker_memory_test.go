package trace

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/tracebridge/tracebridge/internal/record"
)

// TestHugeKiekerTraceBoundedMemory: one Kieker trace of hugeTraceEvents
// events (10 M; fewer under the race detector) streams through the
// assembler in parts of at most maxEventPart events (under the default
// MaxSpans): what the assembler holds
// never exceeds a part's events (16 bytes each) and the calls left open,
// and the live heap stays bounded, however long the trace is.
func TestHugeKiekerTraceBoundedMemory(t *testing.T) {
	n := hugeTraceEvents
	if testing.Short() {
		n = 1_000_000
	}
	const batch = 4096
	if size := unsafe.Sizeof(kevc{}); size > 16 {
		t.Fatalf("a buffered event takes %d bytes, want at most 16", size)
	}
	var parts, spans, lastPart int
	a := NewAssembler(Options{Clock: RecordClock, Emit: func(tr *Trace) {
		parts++
		spans += len(tr.Spans)
		if tr.Part != lastPart+1 {
			t.Fatalf("part %d after part %d", tr.Part, lastPart)
		}
		lastPart = tr.Part
		if len(tr.Spans) > maxEventPart/2+12 {
			t.Fatalf("part %d has %d spans", tr.Part, len(tr.Spans))
		}
		for _, r := range tr.Broken {
			if !strings.Contains(r, "part") && !strings.Contains(r, "missing") && !strings.Contains(r, "no TraceMetadata") {
				t.Fatalf("part %d: %s", tr.Part, r)
			}
		}
	}})
	g := newKiekerGen(1, n/2)
	var b record.Batch
	var ms runtime.MemStats
	var peakEvents, peakCalls int
	var peakHeap uint64
	for done := 0; done < n; done += batch {
		b.Reset()
		g.next(&b, min(batch, n-done))
		a.AddBatch(&b)
		events, calls := a.held()
		peakEvents, peakCalls = max(peakEvents, events), max(peakCalls, calls)
		// A part is cut when the events reach maxEventPart; the slice
		// they are in is at most twice as large (append's growth).
		if events > 2*maxEventPart || calls > 64 {
			t.Fatalf("after %d events the assembler holds room for %d events and %d calls", done, events, calls)
		}
		if done%(1<<20) == 0 {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			peakHeap = max(peakHeap, ms.HeapAlloc)
		}
	}
	a.Flush()
	if spans != n/2 {
		t.Errorf("%d spans emitted, want %d", spans, n/2)
	}
	if want := n / maxEventPart; parts < want {
		t.Errorf("%d parts, want at least %d", parts, want)
	}
	// What is live between parts: a part's events (1.5 MiB at 24 bytes)
	// in a slice up to twice as large, the symbols, the open calls.
	if peakHeap > 16<<20 {
		t.Errorf("live heap reached %d MiB", peakHeap>>20)
	}
	t.Logf("%d events: %d parts, held at most %d events and %d calls, live heap at most %.1f MiB", n, parts, peakEvents, peakCalls, float64(peakHeap)/(1<<20))
	if st := a.Stats(); st.Open != 0 || len(a.threads) != 0 {
		t.Errorf("after Flush: %d traces open, %d threads", st.Open, len(a.threads))
	}
}

// TestPartsInTreeOrder: the parts of Kieker traces larger than MaxSpans
// (their open calls left for the next part, their children roots until
// the parts are merged) come out as tree orders them (TestMain checks
// every trace), and merged they are the whole trace.
func TestPartsInTreeOrder(t *testing.T) {
	for _, maxSpans := range []int{7, 50, 301} {
		var parts []*Trace
		a := NewAssembler(Options{Clock: RecordClock, MaxSpans: maxSpans, Emit: func(tr *Trace) { parts = append(parts, tr) }})
		whole := NewAssembler(Options{Clock: RecordClock})
		var ref *Trace
		whole.opt.Emit = func(tr *Trace) { ref = tr }
		g, h := newKiekerGen(5, 400), newKiekerGen(5, 400)
		var b, c record.Batch
		g.next(&b, 800)
		h.next(&c, 800)
		a.AddBatch(&b)
		whole.AddBatch(&c)
		a.Flush()
		whole.Flush()
		if len(parts) < 2 || ref == nil {
			t.Fatalf("max %d: %d parts", maxSpans, len(parts))
		}
		merged := MergeParts(parts)
		if len(merged.Spans) != len(ref.Spans) {
			t.Fatalf("max %d: %d spans merged, want %d", maxSpans, len(merged.Spans), len(ref.Spans))
		}
		for i := range ref.Spans {
			if !sameSpan(&merged.Spans[i], &ref.Spans[i]) || merged.Spans[i].Parent != ref.Spans[i].Parent {
				t.Fatalf("max %d: span %d differs: %+v, want %+v", maxSpans, i, merged.Spans[i], ref.Spans[i])
			}
		}
	}
}

// TestEventBuffersReused: traces completed one after another reuse the
// event buffers of those before them (evBuffers), and each is the trace
// a fresh assembler makes of its events alone.
func TestEventBuffersReused(t *testing.T) {
	var got []*Trace
	a := NewAssembler(Options{Clock: RecordClock, Window: 1, Emit: func(tr *Trace) { got = append(got, tr) }})
	byID := map[int64]*record.Batch{}
	g := newKiekerGen(11, 40)
	reused := 0
	for range 60 {
		var b record.Batch
		g.next(&b, 80) // one trace of 40 calls
		for i := range b.Records {
			r := &b.Records[i]
			own := byID[r.Values[1].Int()]
			if own == nil {
				own = &record.Batch{}
				byID[r.Values[1].Int()] = own
			}
			c := own.Add(r.Type, record.NoTimestamp)
			copy(c.Values, r.Values)
		}
		if len(a.freeEvs.free) > 0 {
			reused++
		}
		a.AddBatch(&b)
		a.Tick()
	}
	a.Flush()
	if reused < 50 {
		t.Errorf("a kept buffer was there for %d of 60 traces", reused)
	}
	if len(got) != len(byID) {
		t.Fatalf("%d traces, want %d", len(got), len(byID))
	}
	for _, tr := range got {
		var ref *Trace
		fresh := NewAssembler(Options{Clock: RecordClock, Emit: func(x *Trace) { ref = x }})
		fresh.AddBatch(byID[tr.Spans[0].KiekerTrace])
		fresh.Flush()
		if ref == nil || len(ref.Spans) != len(tr.Spans) || !slices.Equal(ref.Broken, tr.Broken) {
			t.Fatalf("trace %d: %d spans (broken %q), alone %d (broken %q)", tr.Spans[0].KiekerTrace, len(tr.Spans), tr.Broken, len(ref.Spans), ref.Broken)
		}
		for i := range ref.Spans {
			if !sameSpan(&tr.Spans[i], &ref.Spans[i]) || tr.Spans[i].Parent != ref.Spans[i].Parent {
				t.Fatalf("trace %d span %d: %+v, alone %+v", tr.Spans[0].KiekerTrace, i, tr.Spans[i], ref.Spans[i])
			}
		}
	}
}

// TestEventBufferStart: with no buffer kept, a new thread's buffer starts
// at the size typical of the threads replayed before, and a rare huge
// thread does not make the small ones' buffers large.
func TestEventBufferStart(t *testing.T) {
	var b evBuffers
	for range 64 {
		b.put(nil, 2000)
	}
	if c := cap(b.take()); c < 2000 || c > 4096 {
		t.Errorf("after threads of 2,000 events a new buffer holds %d", c)
	}
	for range 64 {
		b.put(nil, 10)
	}
	for i := range 200 {
		n := 10
		if i%100 == 99 {
			n = 1_000_000
		}
		b.put(nil, n)
		if c := cap(b.take()); c > 64 {
			t.Fatalf("threads of 10 events, one in 100 of a million: a new buffer holds %d", c)
		}
	}
	for range 64 {
		b.put(nil, 1<<20)
	}
	if c := cap(b.take()); c != evBufferStart {
		t.Errorf("after huge threads a new buffer holds %d, want the bound %d", c, evBufferStart)
	}
}

// TestEventsCompactRoundTrip: what a thread buffers (16 bytes an event:
// times as differences to the event before, roles and flags beside the
// extra's index) comes back as it went in, times near and far (beyond
// 2.1 s either way, the first of a thread), every role and flag.
func TestEventsCompactRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var free evBuffers
	th := &thread{}
	var dst []kev
	for round := range 50 {
		n := 1 + rng.IntN(3000)
		want := make([]kev, n)
		ts := rng.Int64N(1 << 62)
		for i := range want {
			switch rng.IntN(8) {
			case 0:
				ts += rng.Int64N(1<<40) - 1<<39 // seconds to minutes away
			case 1:
				ts = rng.Int64() - 1<<62
			default:
				ts += rng.Int64N(2_000_000) - 500_000
			}
			for _, edge := range []int64{math.MaxInt32, math.MinInt32, math.MaxInt32 + 1, math.MinInt32 - 1} {
				if rng.IntN(200) == 0 {
					ts = want[max(i-1, 0)].ts + edge
				}
			}
			want[i] = kev{ts: ts, order: rng.Int32(), sig: rng.Uint32N(maxSymbols), extra: rng.Uint32N(maxEventPart + 1),
				role: Role(rng.IntN(int(RoleInvocation) + 1)), flags: uint8(rng.IntN(8))}
			th.push(want[i], &free)
		}
		evs := th.evs
		dst = th.events(dst)
		if !slices.Equal(dst, want) {
			for i := range want {
				if dst[i] != want[i] {
					t.Fatalf("round %d: event %d of %d comes back as %+v, went in as %+v", round, i, n, dst[i], want[i])
				}
			}
			t.Fatalf("round %d: %d events come back, %d went in", round, len(dst), n)
		}
		if len(th.evs) != 0 || len(th.wides) != 0 {
			t.Fatalf("round %d: the thread still holds %d events, %d times", round, len(th.evs), len(th.wides))
		}
		free.put(evs, len(evs))
	}
}

// TestHeldEventsShed: past MaxHeldEvents the traces idle longest that
// look whole are completed before their window ends, as they would have
// been at its end (the same spans, the same reports), and the events held stay
// near the bound; a trace with a call still open, an orderIndex missing
// or one twice waits for its window, and more such traces than shed
// looks at a call (idler than all others) do not stop it. The count of
// held events is exact all along.
func TestHeldEventsShed(t *testing.T) {
	const maxHeld, calls, traces, batch = 20_000, 100, 2_000, 1000
	// The generated events are about 1 µs apart: a trace is idle long
	// enough to be shed (an eighth of the window) 1,250 events later.
	const window = 10 * time.Millisecond
	flushing := false
	run := func(bound int, extra func(a *Assembler)) (map[ID]*Trace, *Assembler, int) {
		flushing = false
		got := map[ID]*Trace{}
		a := NewAssembler(Options{Clock: RecordClock, Window: window, MaxHeldEvents: bound, Emit: func(tr *Trace) {
			if got[tr.ID] != nil {
				t.Fatalf("trace %v emitted twice", tr.ID)
			}
			got[tr.ID] = tr
		}})
		if extra != nil {
			extra(a)
		}
		peak := 0
		for _, b := range kiekerLoad(1, traces, calls, batch) {
			a.AddBatch(b)
			n := 0
			for _, th := range a.threads {
				n += len(th.evs)
			}
			if n != a.heldEvs {
				t.Fatalf("the threads hold %d events, the assembler counts %d", n, a.heldEvs)
			}
			peak = max(peak, n)
		}
		flushing = true
		a.Flush()
		if a.heldEvs != 0 {
			t.Fatalf("after Flush the assembler counts %d events held", a.heldEvs)
		}
		return got, a, peak
	}
	want, a0, peak0 := run(0, nil)
	if a0.Stats().Early != 0 || peak0 < 10*maxHeld {
		t.Fatalf("unbounded: %d early, peak %d events held (the load is too small)", a0.Stats().Early, peak0)
	}
	// Traces from 1,000,000 on: shedScan+50 calls that never return;
	// then orderIndex 1 missing, and orderIndex 1 twice (3 missing).
	const firstStuck = 1_000_000
	gap, dup := int64(firstStuck+shedScan+50), int64(firstStuck+shedScan+51)
	stuckIDs := map[ID]bool{}
	stuck := func(a *Assembler) {
		var b record.Batch
		add := func(tp *record.Type, kid, order int64) {
			r := b.Add(tp, record.NoTimestamp)
			r.Values[0], r.Values[1], r.Values[2] = record.IntValue(1_735_689_600_000_000_000), record.IntValue(kid), record.IntValue(order)
			r.Values[3], r.Values[4] = record.StringValue("void a.B.c()"), record.StringValue("a.B")
			stuckIDs[KiekerID(kid)] = true
		}
		before, after := typ(record.BeforeOperationEvent), typ(record.AfterOperationEvent)
		for kid := int64(firstStuck); kid < gap; kid++ {
			add(before, kid, 0)
		}
		add(before, gap, 0)
		add(after, gap, 2)
		add(before, dup, 0)
		add(before, dup, 1)
		add(after, dup, 1)
		add(after, dup, 3)
		a.AddBatch(&b)
	}
	var early []ID
	got, a, peak := run(maxHeld, func(a *Assembler) {
		stuck(a)
		emit := a.opt.Emit
		a.opt.Emit = func(tr *Trace) {
			if !flushing && stuckIDs[tr.ID] {
				early = append(early, tr.ID)
			}
			emit(tr)
		}
	})
	st := a.Stats()
	t.Logf("%d traces of %d calls: %d completed early, at most %d events held (bound %d; unbounded %d)", traces, calls, st.Early, peak, maxHeld, peak0)
	if st.Early < traces/2 {
		t.Errorf("%d traces completed early, want most of %d", st.Early, traces)
	}
	if peak > maxHeld+batch {
		t.Errorf("%d events held, bound %d", peak, maxHeld)
	}
	if len(early) > 0 {
		t.Errorf("traces %v (a call open, an orderIndex missing or twice) completed early", early)
	}
	for id := range stuckIDs {
		if got[id] == nil {
			t.Fatalf("trace %v never came", id)
		}
	}
	for id, w := range want {
		g := got[id]
		if g == nil {
			t.Fatalf("trace %v missing", id)
		}
		if !slices.Equal(g.Broken, w.Broken) || !slices.EqualFunc(g.Spans, w.Spans, func(x, y Span) bool {
			return sameSpan(&x, &y) && x.Parent == y.Parent && x.Depth == y.Depth
		}) {
			t.Fatalf("trace %v: %d spans (broken %q), at its window's end %d (broken %q)", id, len(g.Spans), g.Broken, len(w.Spans), w.Broken)
		}
	}
}
