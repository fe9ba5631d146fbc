package sysmodel

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tracebridge/tracebridge/internal/analysis/analysistest"
)

// model reads a log through the assembler and Kieker's trace rules into
// execution traces.
func model(t *testing.T, dir string) (*Model, []*ExecutionTrace) {
	t.Helper()
	m := New()
	analysistest.Messages(t, dir, m.Add)
	return m, m.Finish()
}

func text(ts []*ExecutionTrace, msg bool) string {
	var b []byte
	for _, t := range ts {
		if msg {
			b = AppendMessageTrace(b, t)
		} else {
			b = AppendExecutionTrace(b, t)
		}
	}
	return string(b)
}

// The expected outputs below are worked out by hand from Kieker's rules
// (see the package comment) for the records in testdata; Kieker's own
// tool cannot run here (no Kieker jars are reachable).

// TestOERLog: OERs are numbered in the order they are read (the order
// their calls return), across traces and hosts; traces come out by the
// tin of their first execution.
func TestOERLog(t *testing.T) {
	m, ts := model(t, "testdata/oer")
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
	if d := cmp.Diff(exp, text(ts, false)); d != "" {
		t.Errorf("execution traces (-want +got):\n%s", d)
	}
	// Allocation components: A::b.B, B::b.B, A::c.C, B::c.C, B::a.A, A::a.A.
	var allocs []string
	for _, a := range m.Repo.Allocations {
		allocs = append(allocs, a.String())
	}
	wantAllocs := []string{"A::@1:b.B", "B::@1:b.B", "A::@2:c.C", "B::@2:c.C", "B::@3:a.A", "A::@3:a.A"}
	if d := cmp.Diff(wantAllocs, allocs); d != "" {
		t.Errorf("allocation components (-want +got):\n%s", d)
	}
	var ops []string
	for _, o := range m.Repo.Operations {
		ops = append(ops, o.Type.FullName()+"."+o.Sig.Name)
	}
	if d := cmp.Diff([]string{"b.B.work", "c.C.run", "a.A.main"}, ops); d != "" {
		t.Errorf("operations (-want +got):\n%s", d)
	}
	msg := `Trace 3:
<SYNC-CALL 1700000000120000000 'Entry' --> 3[0,0] 1700000000120000000-1700000000300000000 A::@2:c.C.run s1>
<SYNC-RPLY 1700000000300000000 3[0,0] 1700000000120000000-1700000000300000000 A::@2:c.C.run s1 --> 'Entry'>

`
	if d := cmp.Diff(msg, text(ts[2:3], true)); d != "" {
		t.Errorf("message trace (-want +got):\n%s", d)
	}
}

// TestEventLog: a thread trace is handed on when its first call returns
// (trace 2 before trace 1), and its executions are made as their calls
// return (y.Y before x.X); a call below the root that no
// CallOperationEvent announced is "assumed".
func TestEventLog(t *testing.T) {
	_, ts := model(t, "testdata/events")
	exp := `TraceId 2 (minTin=1700000000004000000 (Tue, 14 Nov 2023 22:13:20.004 +0000 (UTC)); maxTout=1700000000005000000 (Tue, 14 Nov 2023 22:13:20.005 +0000 (UTC)); maxEss=0):
<2[0,0] 1700000000004000000-1700000000005000000 H::@1:z.Z.only s>

TraceId 1 (minTin=1700000000001000000 (Tue, 14 Nov 2023 22:13:20.001 +0000 (UTC)); maxTout=1700000000009000000 (Tue, 14 Nov 2023 22:13:20.009 +0000 (UTC)); maxEss=1):
<1[0,0] 1700000000001000000-1700000000009000000 H::@3:x.X.outer s>
<1[1,1] 1700000000002000000-1700000000003000000 H::@2:y.Y.inner s (assumed)>

`
	if d := cmp.Diff(exp, text(ts, false)); d != "" {
		t.Errorf("execution traces (-want +got):\n%s", d)
	}
	x := "1[0,0] 1700000000001000000-1700000000009000000 H::@3:x.X.outer s"
	y := "1[1,1] 1700000000002000000-1700000000003000000 H::@2:y.Y.inner s (assumed)"
	msg := `Trace 1:
<SYNC-CALL 1700000000001000000 'Entry' --> ` + x + `>
<SYNC-CALL 1700000000002000000 ` + x + ` --> ` + y + `>
<SYNC-RPLY 1700000000003000000 ` + y + ` --> ` + x + `>
<SYNC-RPLY 1700000000009000000 ` + x + ` --> 'Entry'>

`
	if d := cmp.Diff(msg, text(ts[1:], true)); d != "" {
		t.Errorf("message trace (-want +got):\n%s", d)
	}
}

// TestMessagesUnwind: replies come when a call at the same depth or above
// starts, deepest first, and the rest at the end.
func TestMessagesUnwind(t *testing.T) {
	tr := &ExecutionTrace{Execs: []Execution{
		{EOI: 0, ESS: 0, Tin: 0, Tout: 100},
		{EOI: 1, ESS: 1, Tin: 10, Tout: 50},
		{EOI: 2, ESS: 2, Tin: 20, Tout: 30},
		{EOI: 3, ESS: 1, Tin: 60, Tout: 90},
	}}
	want := []Message{
		{Time: 0, From: Entry, To: 0},
		{Time: 10, From: 0, To: 1},
		{Time: 20, From: 1, To: 2},
		{Reply: true, Time: 30, From: 2, To: 1},
		{Reply: true, Time: 50, From: 1, To: 0},
		{Time: 60, From: 0, To: 3},
		{Reply: true, Time: 90, From: 3, To: 0},
		{Reply: true, Time: 100, From: 0, To: Entry},
	}
	if d := cmp.Diff(want, tr.Messages()); d != "" {
		t.Errorf("messages (-want +got):\n%s", d)
	}
}

func TestPostOrder(t *testing.T) {
	// a(b(c, d), e), f
	got := postOrder([]int{0, 1, 2, 2, 1, 0})
	if d := cmp.Diff([]int{2, 3, 1, 4, 0, 5}, got); d != "" {
		t.Errorf("post order (-want +got):\n%s", d)
	}
}

// TestSystemModelHTML: Kieker's system-entities.html lists each kind in
// descending id order (java.util.Hashtable's values(); checked with
// OpenJDK 17 for ids 1…n, n ≤ 3000), names signatures as Kieker's
// Signature.toString does and escapes '/' too.
func TestSystemModelHTML(t *testing.T) {
	m, _ := model(t, "testdata/oer")
	var b bytes.Buffer
	if err := m.Repo.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	pos := 0
	for _, want := range []string{
		"<html><head><title>System Model Reconstructed by Kieker.TraceAnalysis</title>\n",
		`<tr><th class="tabTitle" colspan="4">Component Types</th></tr>`,
		`<td class="space"><a name="COMPONENT_TYPE-3">3</a></td>` + "\n" + `<td class="space">a</td>` + "\n" + `<td class="space">A</td>` + "\n" +
			`<td class="space"><li><a href="#OPERATION-3">public static main(java.lang.String[]):void</a></li></td>`,
		`<a name="COMPONENT_TYPE-1">1</a>`,
		`<tr><th class="tabTitle" colspan="5">Operations</th></tr>`,
		`<td class="space"><a name="OPERATION-3">3</a></td>` + "\n" + `<td class="space"><a href="#COMPONENT_TYPE-3">a.A</a></td>` + "\n" +
			`<td class="space">main</td>` + "\n" + `<td class="space"><li>java.lang.String[]</li></td>` + "\n" + `<td class="space">void</td>`,
		`<a name="OPERATION-1">1</a></td>` + "\n" + `<td class="space"><a href="#COMPONENT_TYPE-1">b.B</a></td>` + "\n" +
			`<td class="space">work</td>` + "\n" + `<td class="space">&nbsp;</td>`,
		`Assembly Components`, `<a name="ASSEMBLY_COMPONENT-3">3</a></td>` + "\n" + `<td class="space">@3</td>`,
		`Execution Containers`, `<a name="EXECUTION_CONTAINER-2">2</a></td>` + "\n" + `<td class="space">B</td>`,
		`<a name="EXECUTION_CONTAINER-1">1</a></td>` + "\n" + `<td class="space">A</td>`,
		`Deployment Components`, `<a name="ALLOCATION_COMPONENT-6">6</a></td>` + "\n" +
			`<td class="space"><a href="#ALLOCATION_COMPONENT-3">@3:a.A</a></td>` + "\n" + `<td class="space"><a href="#EXECUTION_CONTAINER-1">A</a></td>`,
		`<a name="ALLOCATION_COMPONENT-1">1</a>`,
		"</span>\n<pre>\n" + strings.Repeat(".\n", 50) + "</pre>\n</body></html>\n",
	} {
		i := strings.Index(html[pos:], want)
		if i < 0 {
			t.Fatalf("system model lacks (after byte %d) %q:\n%s", pos, want, html)
		}
		pos += i + len(want)
	}
	if pos != len(html) {
		t.Errorf("%d bytes after the end", len(html)-pos)
	}
}
