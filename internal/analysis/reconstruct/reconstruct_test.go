package reconstruct

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tracebridge/tracebridge/internal/analysis/sysmodel"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/source/kiekerlog"
)

// The expected outputs below are worked out by hand from Kieker's rules
// (see the package comment); Kieker's own tool cannot run here (no Kieker
// jars are reachable).

// result is what a reconstruction handed on, as Kieker's files print it.
type result struct {
	repo    *sysmodel.Repository
	exec    strings.Builder // executionTraces.txt
	msg     strings.Builder // messageTraces.txt
	invalid strings.Builder // invalidTraceArtifacts.txt
	reasons []string
}

func (res *result) options(o Options) Options {
	o.Valid = func(t *sysmodel.ExecutionTrace) {
		res.exec.Write(sysmodel.AppendExecutionTrace(nil, t))
		res.msg.Write(sysmodel.AppendMessageTrace(nil, t))
	}
	o.Invalid = func(v *Invalid) {
		res.reasons = append(res.reasons, v.String())
		if v.Trace != nil {
			res.invalid.Write(sysmodel.AppendExecutionTrace(nil, v.Trace))
		}
	}
	return o
}

// readLog reconstructs the traces of the log in dir.
func readLog(t *testing.T, dir string, o Options) *result {
	t.Helper()
	res := &result{repo: sysmodel.NewRepository()}
	r := New(res.repo, res.options(o))
	lr, err := kiekerlog.Open(dir, kiekerlog.Options{Catalog: record.Builtin()})
	if err != nil {
		t.Fatal(err)
	}
	if err := lr.Run(context.Background(), pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		r.Add(b)
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	r.Finish()
	return res
}

// batch builds records of the built-in types: each rec is a type's short
// name (its last dotted part) and its values (int64, int or string).
type batch struct{ record.Batch }

// types caches the built-in types by the names add is given.
var types = map[string]*record.Type{}

func (b *batch) add(typ string, vals ...any) {
	t := types[typ]
	if t == nil {
		for _, ty := range record.Builtin().Types() {
			if ty.Name == typ || strings.HasSuffix(ty.Name, "."+typ) {
				t = ty
				break
			}
		}
		if t == nil {
			panic("no type " + typ)
		}
		types[typ] = t
	}
	r := b.Add(t, 0)
	for i, v := range vals {
		switch v := v.(type) {
		case int:
			r.Values[i] = record.IntValue(int64(v))
		case int64:
			r.Values[i] = record.IntValue(v)
		case string:
			r.Values[i] = record.StringValue(v)
		}
	}
}

// meta adds a TraceMetadata of trace id on host H, session s.
func (b *batch) meta(id int) { b.add("TraceMetadata", id, 1, "s", "H", -1, -1) }

func (b *batch) before(ts, id, order int, op, class string) {
	b.add("operation.BeforeOperationEvent", ts, id, order, op, class)
}

func (b *batch) after(ts, id, order int, op, class string) {
	b.add("operation.AfterOperationEvent", ts, id, order, op, class)
}

func (b *batch) call(ts, id, order int, op, class, callee, calleeClass string) {
	b.add("operation.CallOperationEvent", ts, id, order, op, class, callee, calleeClass)
}

func (b *batch) run(t *testing.T, o Options) *result {
	t.Helper()
	res := &result{repo: sysmodel.NewRepository()}
	r := New(res.repo, res.options(o))
	r.Add(&b.Batch)
	r.Finish()
	if s := r.Stats(); s.Open != 0 || s.Buffered != 0 {
		t.Errorf("after Finish: %d traces, %d events or executions left", s.Open, s.Buffered)
	}
	return res
}

func diff(t *testing.T, what, want, got string) {
	t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}

const epoch = "Thu, 1 Jan 1970 00:00:00.000 +0000 (UTC)"

// TestOERLog: OERs are numbered as they are read, across traces and
// hosts; at the end of the log the traces come out by the tin of their
// first execution (the same expectations as sysmodel's TestOERLog).
func TestOERLog(t *testing.T) {
	res := readLog(t, "../sysmodel/testdata/oer", Options{})
	exp := `TraceId 7 (minTin=1700000000100000000 (Tue, 14 Nov 2023 22:13:20.100 +0000 (UTC)); maxTout=1700000000400000000 (Tue, 14 Nov 2023 22:13:20.400 +0000 (UTC)); maxEss=1):
<7[0,0] 1700000000100000000-1700000000400000000 A::@3:a.A.main s1>
<7[1,1] 1700000000150000000-1700000000200000000 A::@1:b.B.work s1>
<7[2,1] 1700000000250000000-1700000000350000000 A::@2:c.C.run s1>

TraceId 5 (minTin=1700000000110000000 (Tue, 14 Nov 2023 22:13:20.110 +0000 (UTC)); maxTout=1700000000390000000 (Tue, 14 Nov 2023 22:13:20.390 +0000 (UTC)); maxEss=1):
<5[0,0] 1700000000110000000-1700000000390000000 B::@3:a.A.main s1>
<5[1,1] 1700000000160000000-1700000000210000000 B::@1:b.B.work s1>
<5[2,1] 1700000000260000000-1700000000340000000 B::@2:c.C.run s1>

TraceId 3 (minTin=1700000000120000000 (Tue, 14 Nov 2023 22:13:20.120 +0000 (UTC)); maxTout=1700000000300000000 (Tue, 14 Nov 2023 22:13:20.300 +0000 (UTC)); maxEss=0):
<3[0,0] 1700000000120000000-1700000000300000000 A::@2:c.C.run s1>

TraceId 9 (minTin=1700000000500000000 (Tue, 14 Nov 2023 22:13:20.500 +0000 (UTC)); maxTout=1700000000800000000 (Tue, 14 Nov 2023 22:13:20.800 +0000 (UTC)); maxEss=1):
<9[0,0] 1700000000500000000-1700000000800000000 A::@3:a.A.main s1>
<9[1,1] 1700000000550000000-1700000000600000000 A::@1:b.B.work s1>
<9[2,1] 1700000000650000000-1700000000750000000 A::@2:c.C.run s1>

`
	diff(t, "execution traces", exp, res.exec.String())
	var allocs []string
	for _, a := range res.repo.Allocations {
		allocs = append(allocs, a.String())
	}
	diff(t, "allocation components", "A::@1:b.B B::@1:b.B A::@2:c.C B::@2:c.C B::@3:a.A A::@3:a.A", strings.Join(allocs, " "))

	// With a maximum trace duration of 250 ms, a trace is handed on once
	// a tout more than 250 ms after its earliest tin is read, the one
	// whose lowest eoi has the earliest tin first: 5 (.110) and 3 (.120)
	// when the OER with tout .390 is read (7's earliest tin is still .150:
	// 240 ms), 7 with the next, 9 with its last.
	res = readLog(t, "../sysmodel/testdata/oer", Options{MaxTraceDuration: 250e6})
	var ids []string
	for _, l := range strings.Split(res.exec.String(), "\n") {
		if id, ok := strings.CutPrefix(l, "TraceId "); ok {
			ids = append(ids, id[:strings.IndexByte(id, ' ')])
		}
	}
	diff(t, "trace order", "5 3 7 9", strings.Join(ids, " "))
	if len(res.reasons) > 0 {
		t.Errorf("invalid: %q", res.reasons)
	}

	// With 100 ms, traces are cut: 3 whole when .300 is read (valid), 7
	// and 5 with eoi 1 only (invalid: no root); later 5 with eois 0 and
	// 2, 7 with eoi 2, 9 with 1 and 2 (invalid), and the roots of 7 and 9
	// alone: valid, but later parts of traces found invalid.
	res = readLog(t, "../sysmodel/testdata/oer", Options{MaxTraceDuration: 100e6})
	diff(t, "invalid", `trace 7 (1 executions): First execution must have ess 0 (found 1)
trace 5 (1 executions): First execution must have ess 0 (found 1)
trace 5 (2 executions): Eois must increment by 1 -- but found sequence <0,2>
trace 7 (1 executions): First execution must have ess 0 (found 1)
trace 7 (1 executions): a later part of a trace found invalid
trace 9 (2 executions): First execution must have ess 0 (found 1)
trace 9 (1 executions): a later part of a trace found invalid`, strings.Join(res.reasons, "\n"))
	if !strings.HasPrefix(res.exec.String(), "TraceId 3 ") || strings.Count(res.exec.String(), "TraceId") != 1 {
		t.Errorf("valid traces at 100 ms:\n%s", res.exec.String())
	}
}

// TestEventLog: a thread trace is handed on when its first call returns
// (trace 2 before trace 1), and its executions are made as their calls
// return (y.Y before x.X). A call below the root that no
// CallOperationEvent announces is "assumed" (Kieker's handleAfterEvent:
// a definite call has an empty stack below it or a matching call event),
// which Execution.toString prints.
func TestEventLog(t *testing.T) {
	res := readLog(t, "../sysmodel/testdata/events", Options{})
	exp := `TraceId 2 (minTin=1700000000004000000 (Tue, 14 Nov 2023 22:13:20.004 +0000 (UTC)); maxTout=1700000000005000000 (Tue, 14 Nov 2023 22:13:20.005 +0000 (UTC)); maxEss=0):
<2[0,0] 1700000000004000000-1700000000005000000 H::@1:z.Z.only s>

TraceId 1 (minTin=1700000000001000000 (Tue, 14 Nov 2023 22:13:20.001 +0000 (UTC)); maxTout=1700000000009000000 (Tue, 14 Nov 2023 22:13:20.009 +0000 (UTC)); maxEss=1):
<1[0,0] 1700000000001000000-1700000000009000000 H::@3:x.X.outer s>
<1[1,1] 1700000000002000000-1700000000003000000 H::@2:y.Y.inner s (assumed)>

`
	diff(t, "execution traces", exp, res.exec.String())
	x := "1[0,0] 1700000000001000000-1700000000009000000 H::@3:x.X.outer s"
	y := "1[1,1] 1700000000002000000-1700000000003000000 H::@2:y.Y.inner s (assumed)"
	msg := `Trace 2:
<SYNC-CALL 1700000000004000000 'Entry' --> 2[0,0] 1700000000004000000-1700000000005000000 H::@1:z.Z.only s>
<SYNC-RPLY 1700000000005000000 2[0,0] 1700000000004000000-1700000000005000000 H::@1:z.Z.only s --> 'Entry'>

Trace 1:
<SYNC-CALL 1700000000001000000 'Entry' --> ` + x + `>
<SYNC-CALL 1700000000002000000 ` + x + ` --> ` + y + `>
<SYNC-RPLY 1700000000003000000 ` + y + ` --> ` + x + `>
<SYNC-RPLY 1700000000009000000 ` + x + ` --> 'Entry'>

`
	diff(t, "message traces", msg, res.msg.String())
}

const (
	mainOp = "public void a.A.main()"
	extOp  = "public void b.B.ext()"
	libOp  = "public void c.C.lib()"
	innOp  = "public void d.D.inner()"
)

// TestAssumedCalls: a CallOperationEvent whose callee has no events of
// its own is an assumed execution, from the call until the caller's next
// event (TraceEventRecordHandler.closeOpenCalls); a Before that follows
// a call of another operation runs under it, assumed; a Before that
// follows the call of its own operation is a definite call.
func TestAssumedCalls(t *testing.T) {
	var b batch
	b.meta(1)
	b.before(1, 1, 0, mainOp, "a.A")
	b.call(2, 1, 1, mainOp, "a.A", extOp, "b.B") // closed by the next call
	b.call(3, 1, 2, mainOp, "a.A", libOp, "c.C") // closed by main's After
	b.before(4, 1, 3, innOp, "d.D")              // not what lib was called as: assumed
	b.after(5, 1, 4, innOp, "d.D")
	b.after(9, 1, 5, mainOp, "a.A")
	b.meta(2)
	b.before(10, 2, 0, mainOp, "a.A")
	b.call(11, 2, 1, mainOp, "a.A", extOp, "b.B")
	b.before(12, 2, 2, extOp, "b.B") // the call's callee: definite
	b.after(13, 2, 3, extOp, "b.B")
	b.after(20, 2, 4, mainOp, "a.A")
	res := b.run(t, Options{})
	// Executions are made (and numbered) in the order ext, inner, lib,
	// main.
	exp := `TraceId 1 (minTin=1 (` + epoch + `); maxTout=9 (` + epoch + `); maxEss=2):
<1[0,0] 1-9 H::@4:a.A.main s>
<1[1,1] 2-3 H::@1:b.B.ext s (assumed)>
<1[2,1] 3-9 H::@3:c.C.lib s (assumed)>
<1[3,2] 4-5 H::@2:d.D.inner s (assumed)>

TraceId 2 (minTin=10 (` + epoch + `); maxTout=20 (` + epoch + `); maxEss=1):
<2[0,0] 10-20 H::@4:a.A.main s>
<2[1,1] 12-13 H::@1:b.B.ext s>

`
	diff(t, "execution traces", exp, res.exec.String())
	if len(res.reasons) > 0 {
		t.Errorf("invalid: %q", res.reasons)
	}
	res = b.run(t, Options{IgnoreAssumed: true})
	diff(t, "execution traces with --ignore-assumed-calls", strings.ReplaceAll(exp, " (assumed)", ""), res.exec.String())
}

// TestConstructor: a constructor event's signature has no return type
// (every word before the name is a modifier); an OER's signature is a
// constructor's when it contains "<init>".
func TestConstructor(t *testing.T) {
	var b batch
	b.meta(1)
	b.add("constructor.BeforeConstructorEvent", 1, 1, 0, "public e.E(int)", "e.E")
	b.add("constructor.AfterConstructorEvent", 2, 1, 1, "public e.E(int)", "e.E")
	b.add("OperationExecutionRecord", "public f.F.<init>()", "s", 2, 5, 6, "H", 0, 0)
	res := b.run(t, Options{})
	var got []string
	for _, o := range res.repo.Operations {
		got = append(got, o.Type.FullName()+"|"+strings.Join(o.Sig.Modifiers, " ")+"|"+o.Sig.ReturnType+"|"+o.Sig.Name)
	}
	diff(t, "operations", "e.E|public||E f.F|public||<init>", strings.Join(got, " "))
	if !strings.Contains(res.exec.String(), "<1[0,0] 1-2 H::@1:e.E.E s>") {
		t.Errorf("execution traces:\n%s", res.exec.String())
	}
}

// TestRepair: --repair-event-based-traces gives the Befores an After
// skipped at the time of the After that skips them, and those left open
// at the end an After at their own time; without it such traces are
// invalid.
func TestRepair(t *testing.T) {
	var b batch
	b.meta(1)
	b.before(1, 1, 0, mainOp, "a.A")
	b.before(2, 1, 1, extOp, "b.B") // its After is missing
	b.after(5, 1, 2, mainOp, "a.A")
	b.meta(2)
	b.before(10, 2, 0, mainOp, "a.A")
	b.before(11, 2, 1, extOp, "b.B") // the log ends inside both calls
	res := b.run(t, Options{})
	if res.exec.String() != "" || len(res.reasons) != 2 {
		t.Errorf("without repair: traces\n%s\ninvalid %q", res.exec.String(), res.reasons)
	}
	res = b.run(t, Options{Repair: true})
	exp := `TraceId 1 (minTin=1 (` + epoch + `); maxTout=5 (` + epoch + `); maxEss=1):
<1[0,0] 1-5 H::@2:a.A.main s>
<1[1,1] 2-5 H::@1:b.B.ext s (assumed)>

TraceId 2 (minTin=10 (` + epoch + `); maxTout=11 (` + epoch + `); maxEss=1):
<2[0,0] 10-10 H::@2:a.A.main s>
<2[1,1] 11-11 H::@1:b.B.ext s (assumed)>

`
	diff(t, "repaired execution traces", exp, res.exec.String())
	if len(res.reasons) > 0 {
		t.Errorf("invalid: %q", res.reasons)
	}
}

// TestDates: the date bounds drop records, not traces: an OER trace
// loses the executions outside, an event trace that loses events has a
// gap and is invalid.
func TestDates(t *testing.T) {
	var b batch
	b.add("OperationExecutionRecord", mainOp, "s", 7, 100, 400, "H", 0, 0)
	b.add("OperationExecutionRecord", extOp, "s", 7, 150, 200, "H", 1, 1)
	b.add("OperationExecutionRecord", libOp, "s", 7, 250, 500, "H", 2, 1) // ends after 450
	b.meta(1)
	b.before(100, 1, 0, mainOp, "a.A")
	b.before(460, 1, 1, extOp, "b.B") // dropped
	b.after(470, 1, 2, extOp, "b.B")  // dropped
	b.after(480, 1, 3, mainOp, "a.A") // dropped
	res := b.run(t, Options{Dates: true, Before: 0, After: 450})
	exp := `TraceId 7 (minTin=100 (` + epoch + `); maxTout=400 (` + epoch + `); maxEss=1):
<7[0,0] 100-400 H::@1:a.A.main s>
<7[1,1] 150-200 H::@2:b.B.ext s>

`
	diff(t, "execution traces", exp, res.exec.String())
	diff(t, "invalid", "trace 1 (1 records): 1 calls without their After event", strings.Join(res.reasons, "\n"))
	if len(res.repo.Operations) != 2 {
		t.Errorf("%d operations, want 2 (the dropped OER names none)", len(res.repo.Operations))
	}
}

// TestInvalidNumbered: an invalid OER trace is printed with the numbers
// of its components, made when its records were read; an event trace
// whose After names another operation is invalid after its executions so
// far were made.
func TestInvalidNumbered(t *testing.T) {
	var b batch
	b.add("OperationExecutionRecord", extOp, "s", 7, 150, 200, "H", 1, 1)
	b.add("OperationExecutionRecord", mainOp, "s", 7, 100, 400, "H", 0, 2) // ess 2 first: invalid
	b.meta(1)
	b.before(1, 1, 0, mainOp, "a.A")
	b.before(2, 1, 1, libOp, "c.C")
	b.after(3, 1, 2, libOp, "c.C")
	b.after(4, 1, 3, extOp, "b.B") // not main
	res := b.run(t, Options{})
	t1 := `TraceId 1 (minTin=2 (` + epoch + `); maxTout=3 (` + epoch + `); maxEss=1):
<1[1,1] 2-3 H::@3:c.C.lib s (assumed)>

`
	t7 := `TraceId 7 (minTin=100 (` + epoch + `); maxTout=400 (` + epoch + `); maxEss=2):
<7[0,2] 100-400 H::@2:a.A.main s>
<7[1,1] 150-200 H::@1:b.B.ext s>

`
	// Trace 1 is reported twice, as Kieker does: for the After that does
	// not match, and for the Before left open at the end.
	diff(t, "invalid traces", t1+t1+t7, res.invalid.String())
	if res.exec.String() != "" {
		t.Errorf("valid traces:\n%s", res.exec.String())
	}
}

// TestLogTimeUnit: times are the records' own (a log in microseconds
// gives microseconds), and the dates beside them read them as
// nanoseconds, as Kieker's LoggingTimestampConversionUtils does.
func TestLogTimeUnit(t *testing.T) {
	res := readLog(t, "testdata/micros", Options{})
	exp := `TraceId 1 (minTin=1700000000001000 (Tue, 20 Jan 1970 16:13:20.000 +0000 (UTC)); maxTout=1700000000009000 (Tue, 20 Jan 1970 16:13:20.000 +0000 (UTC)); maxEss=0):
<1[0,0] 1700000000001000-1700000000009000 H::@1:x.X.outer s>

`
	diff(t, "execution traces", exp, res.exec.String())
}
