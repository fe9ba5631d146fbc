package profile_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/jfrtest"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	jfr "github.com/tracebridge/tracebridge/internal/source/jfr"
	"github.com/tracebridge/tracebridge/internal/stage/profile"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestRealSamples records the Java workload, reads its execution samples
// through the stage, and asks for spans as a tracing agent on that JVM
// would report them: one span per sampled thread and 500 ms. Each span
// gets exactly the samples of its thread and time, and the contending
// threads' spans show where they spent it (Workload.busy).
func TestRealSamples(t *testing.T) {
	tools := jfrtest.Require(t)
	rec, err := tools.Record(t.TempDir(), jfrtest.Options{Seconds: 3, Settings: jfrtest.Small})
	if err != nil {
		t.Fatal(err)
	}
	src, err := jfr.New(jfr.Config{Path: rec, Host: "jvm-host"}, jfr.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	type win struct {
		tid, start int64
	}
	const width = int64(500e6)
	want := map[win]int{}
	names := map[int64]string{}
	stage := profile.New(pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		for i := range b.Records {
			r := &b.Records[i]
			if r.Type.Name != "jdk.ExecutionSample" {
				continue
			}
			tid, _ := r.Field("sampledThread.javaThreadId")
			name, _ := r.Field("sampledThread")
			names[tid.Int()] = name.Str()
			want[win{tid.Int(), r.LoggingTimestamp / width * width}]++
		}
		return nil
	}), profile.Options{MaxEventsPerSpan: 1000})
	if err := src.Run(context.Background(), stage); err != nil {
		t.Fatal(err)
	}
	if len(want) < 5 {
		t.Fatalf("only %d thread windows with samples", len(want))
	}
	tr := &trace.Trace{}
	var wins []win
	for w := range want {
		wins = append(wins, w)
		// End is inclusive: end one nanosecond before the next window.
		tr.Spans = append(tr.Spans, trace.Span{Parent: -1, Operation: names[w.tid], Host: "jvm-host", Thread: strconv.FormatInt(w.tid, 10), Start: w.start, End: w.start + width - 1})
	}
	stage.Enrich(tr)
	busy, contenders, contenderSamples := 0, 0, 0
	var otherStacks []string
	for i, w := range wins {
		sp := &tr.Spans[i]
		a, _ := sp.Attr(profile.AttrSamples)
		if a.Value != strconv.Itoa(want[w]) || len(sp.Events) != want[w] {
			t.Errorf("%s at %d: %s samples, %d events; the recording has %d", names[w.tid], w.start, a.Value, len(sp.Events), want[w])
		}
		f, _ := sp.Attr(profile.AttrFolded)
		if strings.HasPrefix(names[w.tid], "contender") {
			contenders++
			contenderSamples += want[w]
			if strings.Contains(f.Value, "Workload.busy(long)") {
				busy++
			} else {
				otherStacks = append(otherStacks, f.Value)
			}
		}
	}
	// A contender runs Workload.busy nearly all the time it runs; on a
	// busy machine JFR's sampler may not catch one running at all (it
	// samples a few running threads a period), or catch it only a time
	// or two between two calls of busy (taking the lock, or in pause),
	// and then there is nothing to say.
	if contenderSamples >= 5 && busy == 0 {
		t.Errorf("none of the %d contender spans with %d samples shows Workload.busy; their stacks:\n%s", contenders, contenderSamples, strings.Join(otherStacks, "\n"))
	}
	st := stage.Stats()
	t.Logf("%d samples of %d threads on %d spans; %d contender spans show Workload.busy", st.Attached, len(names), st.Spans, busy)
	if st.Attached != st.Samples {
		t.Errorf("stats %+v: every sample belongs to a span", st)
	}
}
