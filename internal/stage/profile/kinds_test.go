package profile

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/flame"
	"github.com/tracebridge/tracebridge/internal/record"
)

// allocSample is jdk.ObjectAllocationSample as internal/codec/jfr makes it.
var allocSample = record.MustType("jdk.ObjectAllocationSample",
	record.Field{Name: "startTime", Kind: record.Long},
	record.Field{Name: "eventThread", Kind: record.String},
	record.Field{Name: "eventThread.javaThreadId", Kind: record.Long},
	record.Field{Name: "eventThread.osThreadId", Kind: record.Long},
	record.Field{Name: "stackTrace", Kind: record.String, Array: true},
	record.Field{Name: "stackTrace.truncated", Kind: record.Bool},
	record.Field{Name: "objectClass", Kind: record.String},
	record.Field{Name: "weight", Kind: record.Long})

func addAlloc(b *record.Batch, ts int64, class string, weight int64, frames ...string) {
	r := b.Add(allocSample, ts)
	r.Values[0] = record.IntValue(ts)
	r.Values[1] = record.StringValue("worker")
	r.Values[2] = record.IntValue(7)
	r.Values[4] = b.NewList(record.String, len(frames))
	for i, f := range frames {
		r.Values[4].List().Items[i] = record.StringValue(f)
	}
	r.Values[6] = record.StringValue(class)
	r.Values[7] = record.IntValue(weight)
}

// TestKindHistory: allocation samples weigh their stacks by bytes, with
// the class allocated (arrays as Java writes them) above the top frame;
// a null class adds no frame; a weight that is not positive adds nothing;
// the cpu graph does not see them; an unknown kind is an error. Adding
// known stacks allocates nothing.
func TestKindHistory(t *testing.T) {
	s := New(&discard{}, Options{})
	now := time.Now().UnixNano()
	b := &record.Batch{Origin: record.Origin{Host: "jvm"}}
	addAlloc(b, now, "[B", 1000, "App.fill() line: 3", "App.main() line: 1")
	addAlloc(b, now, "[B", 500, "App.fill() line: 4", "App.main() line: 1")
	addAlloc(b, now, "[Ljava.lang.String;", 64, "App.names()", "App.main()")
	addAlloc(b, now, "", 10, "App.main()")
	addAlloc(b, now, "java.lang.Object", 0, "App.main()")
	addAlloc(b, now, "java.lang.Object", -5, "App.main()")
	if err := s.Consume(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	st, err := s.Stacks(context.Background(), "alloc", "jvm", now-int64(time.Minute), now+int64(time.Minute))
	if err != nil || st == nil {
		t.Fatalf("alloc stacks %v, %v", st, err)
	}
	want := map[string]int64{
		"App.main();App.fill();byte[]":              1500,
		"App.main();App.names();java.lang.String[]": 64,
		"App.main()": 10,
	}
	got := map[string]int64{}
	for k := range want {
		got[k] = st.Count(k)
	}
	if diff := cmp.Diff(want, got); diff != "" || st.Total() != 1574 {
		t.Errorf("alloc stacks (-want +got), total %d:\n%s", st.Total(), diff)
	}
	if st, _ := s.Stacks(context.Background(), "cpu", "jvm", now-int64(time.Minute), now+int64(time.Minute)); st != nil {
		t.Errorf("cpu stacks from allocations: %d", st.Total())
	}
	if st, _ := s.Stacks(context.Background(), "lock", "jvm", now-int64(time.Minute), now+int64(time.Minute)); st != nil {
		t.Errorf("lock stacks from allocations: %d", st.Total())
	}
	if _, err := s.Stacks(context.Background(), "heap", "jvm", 0, now); err == nil {
		t.Error("unknown kind: no error")
	}
	allocs := testing.AllocsPerRun(100, func() {
		s.Consume(context.Background(), b)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per batch of known stacks", allocs)
	}
}

// TestKindEmptyStack: an event whose stack trace is recorded but holds no
// frame (the JVM's Attach Listener thread allocating java.lang.Class
// objects while it runs a jcmd JFR.start) weighs with its class as the
// whole stack, as analyze --flame (flame.Aggregator) and jfr print count
// it; an event without a stack trace (null) adds nothing. Before, the
// served graph left out the empty stacks: after a jcmd in the JVM, its
// java.lang.Class weight fell short of jfr print's.
func TestKindEmptyStack(t *testing.T) {
	s := New(&discard{}, Options{})
	now := time.Now().UnixNano()
	b := &record.Batch{Origin: record.Origin{Host: "jvm"}}
	addAlloc(b, now, "java.lang.Class", 4096)
	addAlloc(b, now, "java.lang.String", 100, "App.main()")
	addAlloc(b, now, "[B", 1000)
	r := b.Add(allocSample, now) // a null stack trace
	r.Values[6] = record.StringValue("java.lang.Long")
	r.Values[7] = record.IntValue(77)
	if err := s.Consume(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	st, err := s.Stacks(context.Background(), "alloc", "jvm", now-int64(time.Minute), now+int64(time.Minute))
	if err != nil || st == nil {
		t.Fatalf("alloc stacks %v, %v", st, err)
	}
	want := map[string]int64{"java.lang.Class": 4096, "App.main();java.lang.String": 100, "byte[]": 1000}
	got := foldedMap(t, st)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("served alloc stacks (-want +got):\n%s", diff)
	}
	kind, err := flame.KindOf("alloc")
	if err != nil {
		t.Fatal(err)
	}
	a := flame.Aggregator{Kind: kind}
	a.Consume(context.Background(), b)
	if diff := cmp.Diff(foldedMap(t, a.Merged()), got); diff != "" {
		t.Errorf("served (+) and analyze --flame (-) differ:\n%s", diff)
	}
}

// foldedMap is st's folded stacks and their weights.
func foldedMap(t *testing.T, st *flame.Stacks) map[string]int64 {
	t.Helper()
	var buf strings.Builder
	if err := st.WriteFolded(&buf); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		i := strings.LastIndexByte(line, ' ')
		n, err := strconv.ParseInt(line[i+1:], 10, 64)
		if i < 0 || err != nil {
			t.Fatalf("folded line %q", line)
		}
		out[line[:i]] += n
	}
	return out
}
