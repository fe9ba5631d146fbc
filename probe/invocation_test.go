package probe

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

func TestInvocationHeaderFormat(t *testing.T) {
	for _, tc := range []struct {
		node  string
		pid   int32
		inv   int64
		order int32
		want  string
	}{
		{"web-1", 4242, 7, 3, "tb1-web%2D1-4242-7-3"},
		{"a%b", 1, 1, 0, "tb1-a%25b-1-1-0"},
		{"host.example.org", 2147483647, 9223372036854775807, 2147483647, "tb1-host.example.org-2147483647-9223372036854775807-2147483647"},
		{"nöde x", 0, 1, 0, "tb1-n%C3%B6de%20x-0-1-0"},
		{"", 5, 6, 7, "tb1--5-6-7"},
	} {
		got := string(appendHeader(nil, tc.node, tc.pid, tc.inv, tc.order))
		if got != tc.want {
			t.Errorf("header of %q: %q, want %q", tc.node, got, tc.want)
		}
		h, ok := ParseInvocationHeader(got)
		if want := (Invocation{tc.node, tc.pid, tc.inv, tc.order}); !ok || h != want {
			t.Errorf("parse %q: %+v %v, want %+v", got, h, ok, want)
		}
	}
	// Other clients may escape more, in lower case: any %XX decodes.
	if h, ok := ParseInvocationHeader("tb1-%61%2db-1-2-3"); !ok || h.Node != "a-b" {
		t.Errorf("lower-case escapes: %+v %v", h, ok)
	}
	for _, bad := range []string{
		"", "tb1", "tb1-", "tb2-a-1-2-3", "tb1-a-1-2", "tb1-a-1-2-3-4", "tb1-a-1-2-", "tb1-a--2-3",
		"tb1-a-+1-2-3", "tb1-a-1-2-x", "tb1-a-2147483648-1-1", "tb1-a-1-9223372036854775808-1", "tb1-a-1-1-2147483648",
		"tb1-%-1-2-3", "tb1-%4-1-2-3", "tb1-%zz-1-2-3", "TB1-a-1-2-3",
		"tb1-" + strings.Repeat("x", MaxHeaderNodeLen+1) + "-1-2-3",
		"tb1-" + strings.Repeat("%2D", MaxHeaderNodeLen+1) + "-1-2-3",
	} {
		if h, ok := ParseInvocationHeader(bad); ok {
			t.Errorf("%q parsed: %+v", bad, h)
		}
	}
}

// FuzzInvocationHeader: parsing never fails on its own output and what
// parses formats back to the same header (bar the escapes' case and the
// escapes of characters that need none).
func FuzzInvocationHeader(f *testing.F) {
	f.Add("tb1-web%2D1-4242-7-3")
	f.Add("tb1-%61%2db-1-2-3")
	f.Add("tb1--0-0-0")
	f.Fuzz(func(t *testing.T, s string) {
		h, ok := ParseInvocationHeader(s)
		if !ok {
			return
		}
		again := string(appendHeader(nil, h.Node, h.PID, h.ID, h.Order))
		h2, ok := ParseInvocationHeader(again)
		if !ok || h2 != h {
			t.Fatalf("%q → %+v → %q → %+v %v", s, h, again, h2, ok)
		}
	})
}

// invocations returns the InvocationRecords of recs by invocation id.
func invocations(recs []record.Record) map[int64]trace.Invocation {
	out := map[int64]trace.Invocation{}
	for _, in := range bridgetest.Invocations(recs) {
		out[in.ID] = in
	}
	return out
}

// TestInvocationRecords: a root records its invocation when it first
// forks (and only then); every child names it and the split's orderIndex;
// a trace started from a header names the remote invocation; a root that
// hands nothing on records none.
func TestInvocationRecords(t *testing.T) {
	fb := newFakeBridge(t, false)
	w := newWriter(t, Config{Addr: fb.addr(), Shards: 1, Hostname: "node-1"})
	lone := w.StartTrace()
	lone.EnterOp(opOuter).Exit() // no task: no invocation

	root := w.Start(TraceOptions{ThreadID: 77})
	ctx := WithTrace(context.Background(), root)
	outer := root.EnterOp(opOuter)
	before := time.Now().UnixNano()
	jobs := make(chan context.Context, 2)
	jobs <- Fork(ctx) // split at orderIndex 1
	jobs <- Fork(ctx) // split at orderIndex 2
	close(jobs)
	done := make(chan struct{})
	go func() { // one pooled worker runs both
		defer close(done)
		for jc := range jobs {
			FromContext(jc).EnterOp(opInner).Exit()
			FromContext(jc).End()
		}
	}()
	<-done
	inner := root.EnterOp(opInner) // orderIndex 3
	hdr := root.InvocationHeader()
	inner.Exit()
	outer.Exit()
	root.End()
	if h, ok := ParseInvocationHeader(hdr); !ok || h.Node != "node-1" || h.PID != pid || h.Order != 4 {
		t.Fatalf("header %q: %+v", hdr, h)
	}
	remote := w.Start(TraceOptions{Remote: hdr})
	remote.EnterOp(opInner).Exit()
	bad := w.Start(TraceOptions{Remote: "tb1-x"}) // not a header: a root
	bad.EnterOp(opInner).Exit()
	idle := w.Start(TraceOptions{Remote: hdr}) // records nothing: sends nothing
	idle.End()
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := time.Now().UnixNano()
	// lone 3; root: meta, inv, Before, Split, Split, Before, After, After;
	// two children: meta, inv, Before, After; remote 4; bad 3.
	recs := fb.waitRecords(3 + 8 + 2*4 + 4 + 3)
	invs := invocations(recs)
	if len(invs) != 4 {
		t.Fatalf("%d invocation records, want 4: %+v", len(invs), invs)
	}
	var rootInv trace.Invocation
	for _, in := range invs {
		if in.TraceID == root.ID() {
			rootInv = in
		}
		if in.CreationTime < before || in.CreationTime > after {
			t.Errorf("invocation %d created at %d, outside [%d, %d]", in.ID, in.CreationTime, before, after)
		}
	}
	want := trace.Invocation{ID: rootInv.ID, ProcessID: pid, Node: "node-1", RunnableID: 77, CreationTime: rootInv.CreationTime,
		ParentID: -1, ParentOrderID: -1, TraceID: root.ID()}
	if diff := cmp.Diff(want, rootInv); diff != "" {
		t.Errorf("root invocation (-want +got):\n%s", diff)
	}
	children := map[int32]bool{}
	for _, in := range invs {
		if in.ID == rootInv.ID {
			continue
		}
		if in.ParentID != rootInv.ID || in.ParentProcessID != pid || in.ParentNode != "node-1" || in.Node != "node-1" || in.RunnableID != 77 && in.TraceID != remote.ID() {
			t.Errorf("child invocation %+v", in)
		}
		children[in.ParentOrderID] = true
		if in.TraceID == remote.ID() && in.ParentOrderID != 4 {
			t.Errorf("remote invocation at parent order %d, want 4", in.ParentOrderID)
		}
	}
	if diff := cmp.Diff(map[int32]bool{1: true, 2: true, 4: true}, children); diff != "" {
		t.Errorf("children's parent orders (-want +got):\n%s", diff)
	}
	for _, r := range recs {
		if r.Type.Name == record.TraceMetadata && field(r, "traceId") == remote.ID() && field(r, "parentTraceId") != remote.ID() {
			t.Errorf("the remote trace's metadata names a parent: %v", r)
		}
	}

	// Assembled from the invocation records alone (no metadata links),
	// the root's trace holds every child.
	var trs []*trace.Trace
	a := trace.NewAssembler(trace.Options{Clock: trace.RecordClock, Emit: func(tr *trace.Trace) { trs = append(trs, tr) }})
	for i := range recs {
		r := recs[i].Clone()
		if r.Type.Name == record.TraceMetadata {
			r.Values[4] = r.Values[0]
			r.Values[5] = record.IntValue(-1)
		}
		a.Add(&r, nil)
	}
	a.Flush()
	if len(trs) != 3 { // lone, root with its children, bad
		t.Fatalf("%d traces", len(trs))
	}
	o, i := opOuter.Operation(), opInner.Operation()
	wantPaths := []string{o + "\tok", o + " | " + i + "\tok", o + " | " + i + "\tok", o + " | " + i + "\tok", o + " | " + i + " | " + i + "\tok"}
	found := false
	for _, tr := range trs {
		if id, _ := tr.ID.Kieker(); id == root.ID() {
			found = true
			if got, _ := paths(tr); !cmp.Equal(wantPaths, got) || len(tr.Broken) > 0 {
				t.Errorf("root trace (-want +got):\n%s\nbroken %q", cmp.Diff(wantPaths, got), tr.Broken)
			}
		}
	}
	if !found {
		t.Error("no trace of the root")
	}
}

// TestNoInvocations: with Config.NoInvocations nothing but Kieker's
// records is sent (for a reader that knows only those), and there is no
// header to export.
func TestNoInvocations(t *testing.T) {
	fb := newFakeBridge(t, false)
	w := newWriter(t, Config{Addr: fb.addr(), Shards: 1, NoInvocations: true})
	root := w.StartTrace()
	outer := root.EnterOp(opOuter)
	c := root.Fork()
	c.EnterOp(opInner).Exit()
	d := w.Start(TraceOptions{Parent: root})
	d.EnterOp(opInner).Exit()
	if h := root.InvocationHeader(); h != "" {
		t.Errorf("header %q", h)
	}
	outer.Exit()
	remote := w.Start(TraceOptions{Remote: "tb1-x-1-2-3"})
	remote.EnterOp(opInner).Exit()
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	// root: meta, Before, 2 Splits, After; c, d, remote: meta, Before, After
	recs := fb.waitRecords(5 + 3*3)
	time.Sleep(20 * time.Millisecond)
	all, _, _ := fb.snapshot()
	if len(all) != len(recs) || len(invocations(all)) != 0 {
		t.Errorf("%d records, %d InvocationRecords; want %d, none", len(all), len(invocations(all)), len(recs))
	}
}
