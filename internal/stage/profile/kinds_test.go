package profile

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
