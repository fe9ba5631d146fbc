package profile

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/record/recordtest"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// addSample adds a sample of thread tid at time ts with the given frames
// (top first).
var addSample = recordtest.AddSample

type discard struct{ n int }

func (d *discard) Consume(_ context.Context, b *record.Batch) error { d.n += b.Len(); return nil }

func feed(t *testing.T, s *Stage, host string, fill func(b *record.Batch)) {
	t.Helper()
	b := &record.Batch{Origin: record.Origin{Host: host, Session: "4242"}}
	fill(b)
	if err := s.Consume(context.Background(), b); err != nil {
		t.Fatal(err)
	}
}

func attr(sp *trace.Span, key string) string {
	a, _ := sp.Attr(key)
	return a.Value
}

func TestEnrich(t *testing.T) {
	next := &discard{}
	s := New(next, Options{MaxEventsPerSpan: 3})
	feed(t, s, "box", func(b *record.Batch) {
		addSample(b, 21, 50, "App.before() line: 1") // before the spans
		addSample(b, 21, 150, "App.work() line: 10", "App.handle() line: 5")
		addSample(b, 21, 160, "App.work() line: 11", "App.handle() line: 5") // same method, other line
		addSample(b, 21, 250, "App.query() line: 3", "App.handle() line: 6") // inside the child
		addSample(b, 21, 270, "App.query() line: 3", "App.handle() line: 6")
		addSample(b, 21, 350, "App.work() line: 10", "App.handle() line: 5")
		addSample(b, 22, 150, "Other.run()") // another thread
		addSample(b, 21, 999, "App.after()") // after
	})
	feed(t, s, "elsewhere", func(b *record.Batch) {
		addSample(b, 21, 151, "Elsewhere.run()") // another host, same thread id
	})
	if next.n != 9 {
		t.Fatalf("%d records handed on, want 9", next.n)
	}
	tr := &trace.Trace{Spans: []trace.Span{
		{SpanID: 1, Parent: -1, Operation: "GET /", Host: "box", Thread: "21", Start: 100, End: 400},
		{SpanID: 2, Parent: 0, Depth: 1, Operation: "query", Host: "box", Thread: "21", Start: 200, End: 300},
		{SpanID: 3, Parent: 0, Depth: 1, Operation: "remote", Host: "box", Thread: "main", Start: 100, End: 400},
		{SpanID: 4, Parent: 0, Depth: 1, Operation: "other pid", Host: "box", Thread: "21", Process: "7", Start: 100, End: 400},
	}}
	s.Enrich(tr)
	root, child := &tr.Spans[0], &tr.Spans[1]
	if got := attr(root, AttrSamples); got != "3" {
		t.Errorf("root samples %q, want 3", got)
	}
	if diff := cmp.Diff("App.handle();App.work() 3\n", attr(root, AttrFolded)); diff != "" {
		t.Errorf("root folded (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("App.handle();App.query() 2\n", attr(child, AttrFolded)); diff != "" {
		t.Errorf("child folded (-want +got):\n%s", diff)
	}
	wantEvents := []trace.Event{
		{Name: EventName, Time: 150, Attributes: []trace.Attr{{Key: AttrStack, Value: "0", Type: trace.TypeInt}, {Key: AttrState, Value: "STATE_RUNNABLE", Type: trace.TypeString}}},
		{Name: EventName, Time: 160, Attributes: []trace.Attr{{Key: AttrStack, Value: "0", Type: trace.TypeInt}, {Key: AttrState, Value: "STATE_RUNNABLE", Type: trace.TypeString}}},
		{Name: EventName, Time: 350, Attributes: []trace.Attr{{Key: AttrStack, Value: "0", Type: trace.TypeInt}, {Key: AttrState, Value: "STATE_RUNNABLE", Type: trace.TypeString}}},
	}
	if diff := cmp.Diff(wantEvents, root.Events); diff != "" {
		t.Errorf("root events (-want +got):\n%s", diff)
	}
	if len(child.Events) != 2 || child.Events[0].Time != 250 {
		t.Errorf("child events %+v", child.Events)
	}
	for _, sp := range tr.Spans[2:] {
		if len(sp.Events) != 0 || len(sp.Attributes) != 0 {
			t.Errorf("span %s got samples: %+v", sp.Operation, sp)
		}
	}
	if st := s.Stats(); st.Attached != 5 || st.Spans != 2 || st.Samples != 9 || st.Threads != 3 {
		t.Errorf("stats %+v", st)
	}

	// Lines kept, and a span of another host matched when hosts are
	// ignored (the span then takes the other host's sample too).
	s = New(&discard{}, Options{Lines: true, IgnoreHost: true, MaxStacksPerSpan: 1})
	feed(t, s, "box", func(b *record.Batch) {
		addSample(b, 21, 150, "App.work() line: 10")
		addSample(b, 21, 160, "App.work() line: 11")
		addSample(b, 21, 170, "App.work() line: 11")
	})
	tr = &trace.Trace{Spans: []trace.Span{{Parent: -1, Host: "other-name", Thread: "21", Start: 100, End: 400}}}
	s.Enrich(tr)
	if diff := cmp.Diff("App.work() line: 11 2\n[other stacks] 1\n", attr(&tr.Spans[0], AttrFolded)); diff != "" {
		t.Errorf("folded (-want +got):\n%s", diff)
	}
	if ev := tr.Spans[0].Events; len(ev) != 3 || ev[0].Attributes[0].Value != "1" || ev[1].Attributes[0].Value != "0" {
		t.Errorf("events %+v", ev)
	}
}

// TestLimits: rings, threads and samples stay within their bounds.
func TestLimits(t *testing.T) {
	s := New(&discard{}, Options{PerThread: 10, MaxThreads: 5, MaxSamples: 30, Retain: 1000, MaxFrames: 2, MaxStacks: 4})
	for i := int64(0); i < 2000; i++ {
		feed(t, s, "h", func(b *record.Batch) {
			addSample(b, i%7, i*10, "a()", "b()", strings.Repeat("c", int(i%9)))
		})
		st := s.Stats()
		if st.Threads > 5 || st.Held > 30 || len(s.stacks) > 4 {
			t.Fatalf("after %d samples: %+v, %d stacks", i+1, st, len(s.stacks))
		}
		for _, rg := range s.rings {
			if rg.n > 10 {
				t.Fatalf("ring of %d samples", rg.n)
			}
			for j := 1; j < rg.n; j++ {
				if rg.at(j).time < rg.at(j-1).time || rg.at(rg.n-1).time-rg.at(0).time > 1000 {
					t.Fatal("ring out of order or older than Retain")
				}
			}
			if len(rg.at(0).stack.frames) > 2 {
				t.Fatal("more than MaxFrames frames")
			}
		}
	}
	// Samples arriving out of order are put in order.
	s = New(&discard{}, Options{})
	feed(t, s, "h", func(b *record.Batch) {
		for _, ts := range []int64{30, 10, 20, 50, 40} {
			addSample(b, 1, ts, "f()")
		}
	})
	rg := s.rings[key{"h", 1}]
	for j := 0; j < rg.n; j++ {
		if rg.at(j).time != int64(10*(j+1)) {
			t.Fatalf("order: sample %d at %d", j, rg.at(j).time)
		}
	}
}
