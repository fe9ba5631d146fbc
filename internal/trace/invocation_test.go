package trace

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
)

// inv is an invocation identifier record.
func inv(node string, pid int32, id int64, kid int64, pnode string, ppid int32, parent int64, porder int32) record.Record {
	var b record.Batch
	AppendInvocation(&b, Invocation{ID: id, ProcessID: pid, Node: node, RunnableID: id * 10, CreationTime: 1, ParentID: parent,
		ParentProcessID: ppid, ParentNode: pnode, ParentOrderID: porder, TraceID: kid})
	return b.Records[0].Clone()
}

// TestInvocationIdentifiers: a task run by a pooled thread (whose
// TraceMetadata names no parent) and a task in another process on another
// node (with the same invocation id, unique only with its process and
// node) hang under the calls that created them, whatever the order the
// records arrive in.
func TestInvocationIdentifiers(t *testing.T) {
	const main, pooled, remote = 100, 300, 400
	recs := []record.Record{
		tm(main, 1, "n1", -1, -1),
		inv("n1", 10, 1, main, "", 0, -1, -1),
		before(main, 0, 10, "void a.Main.main()"),
		before(main, 1, 20, "void a.Main.submit()"),
		after(main, 2, 30, "void a.Main.submit()"),
		after(main, 3, 90, "void a.Main.main()"),

		tm(pooled, 7, "n1", -1, -1), // a reused thread: Kieker's metadata names no parent
		inv("n1", 10, 2, pooled, "n1", 10, 1, 2),
		before(pooled, 0, 40, "void a.Task.run()"),
		before(pooled, 1, 45, "void a.Client.call()"),
		after(pooled, 2, 60, "void a.Client.call()"),
		after(pooled, 3, 70, "void a.Task.run()"),

		tm(remote, 1, "n2", -1, -1),
		inv("n2", 20, 1, remote, "n1", 10, 2, 2),
		before(remote, 0, 50, "void b.Server.handle()"),
		after(remote, 1, 55, "void b.Server.handle()"),
	}
	want := `void a.Main.main() [10,90]
  void a.Main.submit() [20,30]
    void a.Task.run() [40,70]
      void a.Client.call() [45,60]
        void b.Server.handle() [50,55]
`
	for seed := range 300 {
		shuffled := slices.Clone(recs)
		if seed > 0 {
			r := rand.New(rand.NewPCG(uint64(seed), 11))
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		}
		trs := assemble(t, shuffled, Options{})
		if len(trs) != 1 {
			t.Fatalf("seed %d: %d traces", seed, len(trs))
		}
		if got := shape(trs[0]); got != want || len(trs[0].Broken) != 0 {
			t.Fatalf("seed %d: got\n%s\nbroken %v", seed, got, trs[0].Broken)
		}
		if trs[0].ID != KiekerID(main) || trs[0].Spans[4].Host != "n2" {
			t.Fatalf("seed %d: trace %s, %+v", seed, trs[0].ID, trs[0].Spans[4])
		}
	}
}

// TestInvocationParentMissing: a task whose creator's identifier never
// comes is a trace of its own, marked broken with the reason.
func TestInvocationParentMissing(t *testing.T) {
	trs := assemble(t, []record.Record{
		tm(5, 1, "n1", -1, -1),
		inv("n1", 10, 9, 5, "n1", 10, 8, 3),
		before(5, 0, 10, "void a.Task.run()"),
		after(5, 1, 20, "void a.Task.run()"),
	}, Options{})
	if len(trs) != 1 || len(trs[0].Spans) != 1 || len(trs[0].Broken) != 1 || !strings.Contains(trs[0].Broken[0], "parent invocation n1/10/8, which is missing") {
		t.Fatalf("%d traces: %+v", len(trs), trs)
	}
}

// TestInvocationStateIsReleased: the assembler keeps nothing of an
// invocation once its trace is emitted.
func TestInvocationStateIsReleased(t *testing.T) {
	a := NewAssembler(Options{Clock: RecordClock, Emit: func(*Trace) {}})
	var b record.Batch
	for i := range int64(1000) {
		for _, r := range []record.Record{
			inv("n", 1, i, i+1, "n", 1, i-1, 0),
			before(i+1, 0, i*10, "void a.B.c()"), after(i+1, 1, i*10+5, "void a.B.c()"),
		} {
			b.AddRecord(&r)
		}
	}
	a.AddBatch(&b)
	a.Flush()
	if len(a.invs) != 0 || len(a.waiting) != 0 || len(a.threads) != 0 {
		t.Fatalf("kept %d invocations, %d waiting, %d threads", len(a.invs), len(a.waiting), len(a.threads))
	}
}

// TestReachAcrossLinks: positions (SetPosition) count where traces began;
// a record that links a task to its creator reaches back to the earlier
// of the two, even when the task arrived first and is not touched again
// (OldestOpen and Reach: a cluster owner's safe point).
func TestReachAcrossLinks(t *testing.T) {
	a := NewAssembler(Options{Clock: RecordClock})
	add := func(pos uint64, recs ...record.Record) uint64 {
		a.SetPosition(pos)
		for i := range recs {
			a.Add(&recs[i], &record.Origin{})
		}
		return a.Reach()
	}
	if r := add(5, tm(7, 1, "n1", -1, -1), inv("n1", 10, 2, 7, "n1", 10, 1, 0)); r != 5 {
		t.Fatalf("reach of a new task's records = %d, want 5", r)
	}
	if r := add(6); r != math.MaxUint64 {
		t.Fatalf("reach of nothing = %d, want none", r)
	}
	// The creator arrives: its records link the waiting task.
	if r := add(9, tm(3, 1, "n1", -1, -1), inv("n1", 10, 1, 3, "", 0, -1, -1)); r != 5 {
		t.Fatalf("reach of the creator's records = %d, want 5 (the task it linked began there)", r)
	}
	if o, ok := a.OldestOpen(); !ok || o != 5 {
		t.Fatalf("OldestOpen = %d, %v; want 5", o, ok)
	}
	if r := add(12, before(3, 0, 10, "void a.Main.main()")); r != 5 {
		t.Fatalf("reach of a later event = %d, want 5", r)
	}
}
