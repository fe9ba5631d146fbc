package profile

import (
	"context"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestStacksOfAHostAndWindow: the stage answers a host's stacks in a time
// window (to the minute), merged over threads, apart from other hosts',
// and forgets minutes older than its history.
func TestStacksOfAHostAndWindow(t *testing.T) {
	s := New(&discard{}, Options{History: 10 * time.Minute})
	base := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC).UnixNano() // before now: a recording read later
	min := int64(time.Minute)
	feed(t, s, "shop-1", func(b *record.Batch) {
		addSample(b, 1, base+5e9, "a.Leaf.run()", "a.Main.main()")
		addSample(b, 2, base+6e9, "a.Leaf.run()", "a.Main.main()")
		addSample(b, 1, base+min+1e9, "b.Other.go()", "a.Main.main()")
	})
	feed(t, s, "shop-2", func(b *record.Batch) {
		addSample(b, 1, base+5e9, "c.Elsewhere.x()")
	})
	st, err := s.Stacks(context.Background(), "", "shop-1", base, base+30e9)
	if err != nil || st == nil {
		t.Fatalf("first minute: %v %v", st, err)
	}
	if st.Total() != 2 || st.Count("a.Main.main();a.Leaf.run()") != 2 {
		t.Errorf("first minute: total %d, main;run %d", st.Total(), st.Count("a.Main.main();a.Leaf.run()"))
	}
	st, _ = s.Stacks(context.Background(), "", "shop-1", base, base+2*min)
	if st.Total() != 3 || st.Count("a.Main.main();b.Other.go()") != 1 {
		t.Errorf("two minutes: total %d", st.Total())
	}
	if st, _ := s.Stacks(context.Background(), "", "shop-1", base+5*min, base+6*min); st != nil {
		t.Errorf("a window without samples: %d samples", st.Total())
	}
	if st, _ := s.Stacks(context.Background(), "", "nobody", base, base+min); st != nil {
		t.Errorf("an unknown host has samples")
	}
	// Ten minutes on, the first minute is forgotten (ten are kept), and
	// shop-2, which sent nothing since, with it.
	feed(t, s, "shop-1", func(b *record.Batch) { addSample(b, 1, base+10*min+1e9, "a.Leaf.run()") })
	st, _ = s.Stacks(context.Background(), "", "shop-1", base, base+12*min)
	if st.Total() != 2 {
		t.Errorf("after the history's span: %d samples, want the two newest", st.Total())
	}
	if st, _ := s.Stacks(context.Background(), "", "shop-2", base, base+12*min); st != nil {
		t.Errorf("a host silent for the whole history still has %d samples", st.Total())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Stacks(ctx, "", "shop-1", base, base+12*min); err == nil {
		t.Errorf("a cancelled request was answered")
	}
}

// TestHistoryIgnoresSamplesFromTheFuture: a sample far ahead of the
// clock (a skewed clock, a damaged recording) is not kept, and the
// host's real minutes stay.
func TestHistoryIgnoresSamplesFromTheFuture(t *testing.T) {
	s := New(&discard{}, Options{})
	now := time.Now().UnixNano()
	feed(t, s, "shop-1", func(b *record.Batch) {
		addSample(b, 1, now-1e9, "a.Leaf.run()")
		addSample(b, 1, now+int64(24*time.Hour), "x.Future.run()")
		addSample(b, 1, now, "a.Leaf.run()")
	})
	st, _ := s.Stacks(context.Background(), "", "shop-1", now-int64(time.Minute), now+int64(48*time.Hour))
	if st == nil || st.Total() != 2 || st.Count("x.Future.run()") != 0 {
		t.Errorf("after a sample a day ahead: %v", st)
	}
	if s.hist.ahead != 1 {
		t.Errorf("%d samples counted as ahead of the clock", s.hist.ahead)
	}
}

// TestHistoryWhileSampling: flame graphs are asked for while samples
// arrive (run with -race).
func TestHistoryWhileSampling(t *testing.T) {
	s := New(&discard{}, Options{})
	now := time.Now().UnixNano()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.Stacks(context.Background(), "", "shop-1", now-int64(time.Hour), now+int64(time.Hour)); err != nil {
				t.Errorf("Stacks: %v", err)
			}
		}
	}()
	for i := range 2000 {
		feed(t, s, "shop-1", func(b *record.Batch) {
			addSample(b, int64(i%7), now+int64(i)*1e6, "a.Leaf.run()", "f"+string(rune('a'+i%26)))
		})
	}
	close(stop)
	<-done
	st, _ := s.Stacks(context.Background(), "", "shop-1", now-int64(time.Hour), now+int64(time.Hour))
	if st.Total() != 2000 {
		t.Errorf("%d samples, want 2000", st.Total())
	}
}

// TestNoSpans: a stage with NoSpans (a cluster node's) keeps a host's
// flame graph as one with spans does, but no samples per thread, and
// attaches none to a span of the sampled thread; its factory builds no
// pipeline.Enricher, so the engine may assemble on several goroutines.
func TestNoSpans(t *testing.T) {
	base := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC).UnixNano()
	fill := func(b *record.Batch) {
		addSample(b, 21, base+5e9, "a.Leaf.run()", "a.Main.main()")
		addSample(b, 21, base+6e9, "a.Leaf.run()", "a.Main.main()")
		addSample(b, 22, base+7e9, "b.Other.go()")
	}
	for _, noSpans := range []bool{false, true} {
		s := New(&discard{}, Options{NoSpans: noSpans})
		feed(t, s, "box", fill)
		st, err := s.Stacks(context.Background(), "", "box", base, base+time.Minute.Nanoseconds())
		if err != nil || st == nil || st.Total() != 3 || st.Count("a.Main.main();a.Leaf.run()") != 2 {
			t.Fatalf("NoSpans %v: stacks %v %v", noSpans, st, err)
		}
		tr := &trace.Trace{Spans: []trace.Span{{SpanID: 1, Parent: -1, Operation: "GET /", Host: "box", Thread: "21", Start: base, End: base + 10e9}}}
		s.Enrich(tr)
		got, _ := tr.Spans[0].Attr("profile.samples")
		st2 := s.Stats()
		want := Stats{Samples: 3, Attached: 2, Spans: 1, Threads: 2, Held: 3}
		wantAttr := "2"
		if noSpans {
			want, wantAttr = Stats{Samples: 3}, ""
		}
		if st2 != want || got.Value != wantAttr {
			t.Errorf("NoSpans %v: stats %+v, want %+v; profile.samples %q, want %q", noSpans, st2, want, got.Value, wantAttr)
		}
	}
	for _, noSpans := range []bool{false, true} {
		stage, err := Factory().NewStage(&FactoryConfig{NoSpans: noSpans}, pipeline.Settings{Shared: &pipeline.Shared{}})
		if err != nil {
			t.Fatal(err)
		}
		_, enricher := stage(&discard{}).(pipeline.Enricher)
		if enricher == noSpans {
			t.Errorf("NoSpans %v: the built stage is an Enricher: %v", noSpans, enricher)
		}
	}
}
