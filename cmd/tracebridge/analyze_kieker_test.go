package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/analysis/analysistest"
	"github.com/tracebridge/tracebridge/internal/store"
)

const oerLog = "../../internal/analysis/sysmodel/testdata/oer"

// TestKiekerTraceAnalysisDropIn: Kieker's trace-analysis command line
// writes Kieker's files under Kieker's names; the contents are those
// worked out by hand in internal/analysis (sysmodel, equivalence,
// sequence) for the same log.
func TestKiekerTraceAnalysisDropIn(t *testing.T) {
	out := t.TempDir()
	r := ok(t, "analyze", "--kieker-trace-analysis", "-i", oerLog, "-o", out,
		"--print-Execution-Traces", "--print-Message-Traces", "--print-Deployment-Equivalence-Classes",
		"--print-Assembly-Equivalence-Classes", "--print-System-Model", "--plot-Deployment-Sequence-Diagrams",
		"--plot-Assembly-Sequence-Diagrams", "--plot-Container-Dependency-Graph",
		"--plot-Deployment-Component-Dependency-Graph", "responseTimes-ms", "--plot-Aggregated-Assembly-Call-Tree",
		"--plot-Call-Trees", "--ignore-invalid-traces")
	if !strings.Contains(r.stderr, "analysed 4 traces (10 calls)") {
		t.Errorf("stderr: %s", r.stderr)
	}
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got, want := read("traceDeploymentEquivClasses.txt"), `Class 0; cardinality: 1; # executions: 1; representative: 3; max. stack depth: 0
Class 1; cardinality: 1; # executions: 3; representative: 5; max. stack depth: 1
Class 2; cardinality: 2; # executions: 3; representative: 7; max. stack depth: 1
`; got != want {
		t.Errorf("traceDeploymentEquivClasses.txt:\n%s\nwant\n%s", got, want)
	}
	if got := read("traceAssemblyEquivClasses.txt"); !strings.HasPrefix(got, "Class 0; cardinality: 1; # executions: 1; representative: 3;") || strings.Count(got, "\n") != 2 {
		t.Errorf("traceAssemblyEquivClasses.txt:\n%s", got)
	}
	if got := read("executionTraces.txt"); !strings.HasPrefix(got, "TraceId 7 (minTin=1700000000100000000 (Tue, 14 Nov 2023 22:13:20.100 +0000 (UTC)); maxTout=") ||
		!strings.Contains(got, "\n<9[2,1] 1700000000650000000-1700000000750000000 A::@2:c.C.run s1>\n\n") {
		t.Errorf("executionTraces.txt:\n%s", got)
	}
	if got := read("messageTraces.txt"); !strings.HasPrefix(got, "Trace 7:\n<SYNC-CALL 1700000000100000000 'Entry' --> 7[0,0] ") || strings.Count(got, "SYNC-RPLY") != 10 {
		t.Errorf("messageTraces.txt:\n%s", got)
	}
	if got := read("deploymentSequenceDiagram-5.pic"); !strings.HasPrefix(got, ".PS\ncopy \"sequence.pic\";\n") || !strings.Contains(got, `object(O5,"B::","@3:a.A");`) {
		t.Errorf("deploymentSequenceDiagram-5.pic:\n%s", got)
	}
	if got := read("assemblySequenceDiagram-3.pic"); !strings.Contains(got, `object(O2,"","@2:c.C");`) {
		t.Errorf("assemblySequenceDiagram-3.pic:\n%s", got)
	}
	if got := read("system-entities.html"); !strings.Contains(got, "Deployment Components") {
		t.Errorf("system-entities.html:\n%s", got)
	}
	for _, name := range []string{"containerDependencyGraph.dot", "deploymentComponentDependencyGraph.dot", "aggregatedAssemblyCallTree.dot", "callTree-7.dot", "callTree-3.dot"} {
		if got := read(name); !strings.HasPrefix(got, "digraph G {") {
			t.Errorf("%s:\n%s", name, got)
		}
	}
	if got := read("deploymentComponentDependencyGraph.dot"); !strings.Contains(got, "min: ") {
		t.Errorf("responseTimes-ms asked for response times:\n%s", got)
	}
	ents, _ := os.ReadDir(out)
	if len(ents) != 7+4+4+4+1 { // 7 files, 4 diagrams of each kind, 4 call trees, 1 aggregated tree
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("%d files: %v", len(ents), names)
	}
}

// TestKiekerTraceAnalysisSelect: --select-traces keeps the traces named,
// and the system model numbers only what they use (Kieker filters the
// records before it builds executions); -p prefixes the text files.
func TestKiekerTraceAnalysisSelect(t *testing.T) {
	out := t.TempDir()
	ok(t, "analyze", "--kieker-trace-analysis", "-i", oerLog, "-o", out, "-p", "x-", "--select-traces", "3", "5", "--print-Execution-Traces")
	b, err := os.ReadFile(filepath.Join(out, "x-executionTraces.txt"))
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	if !strings.HasPrefix(got, "TraceId 5 ") || strings.Contains(got, "TraceId 7") || !strings.Contains(got, "<3[0,0] 1700000000120000000-1700000000300000000 A::@2:c.C.run s1>") ||
		!strings.Contains(got, "<5[1,1] 1700000000160000000-1700000000210000000 B::@1:b.B.work s1>") {
		t.Errorf("x-executionTraces.txt:\n%s", got)
	}
}

func TestAnalyzeKiekerOutputs(t *testing.T) {
	r := ok(t, "analyze", "--message-traces", "--format", "json", oerLog)
	var traces []struct {
		TraceID  string `json:"traceId"`
		Messages []struct {
			Kind     string
			From, To int
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &traces); err != nil {
		t.Fatalf("%v:\n%s", err, r.stdout)
	}
	if len(traces) != 4 || traces[2].TraceID != "3" || len(traces[2].Messages) != 2 || traces[2].Messages[1].Kind != "reply" || traces[2].Messages[1].To != -1 {
		t.Errorf("message traces %+v", traces)
	}
	r = ok(t, "analyze", "--equivalence-classes", "assembly", oerLog)
	if !strings.HasPrefix(r.stdout, "Class 0; cardinality: 1; # executions: 1; representative: 3; max. stack depth: 0\nClass 1; cardinality: 3;") {
		t.Errorf("classes:\n%s", r.stdout)
	}
	r = ok(t, "analyze", "--sequence-diagram", "assembly:7", "--format", "svg", oerLog)
	if !strings.HasPrefix(r.stdout, "<svg ") || !strings.Contains(r.stdout, "main(..)") {
		t.Errorf("svg:\n%s", r.stdout)
	}
	r = ok(t, "analyze", "--system-model", "--format", "json", oerLog)
	var sys struct {
		Allocations []struct{ Name string } `json:"allocationComponents"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &sys); err != nil || len(sys.Allocations) != 6 || sys.Allocations[4].Name != "B::@3:a.A" {
		t.Errorf("system model %v %+v", err, sys)
	}
	if r := tb(t, "analyze", "--sequence-diagram", "assembly", oerLog); r.code == 0 || !strings.Contains(r.stderr, "-o") {
		t.Errorf("all diagrams without -o: exit %d, %s", r.code, r.stderr)
	}
	if r := tb(t, "analyze", "--kieker-trace-analysis", "-i", oerLog, "-o", t.TempDir(), "--plot-Deployment-Component-Dependency-Graph", "responseTimeColoring", "5"); r.code == 0 || !strings.Contains(r.stderr, "unsupported") {
		t.Errorf("unsupported option: exit %d, %s", r.code, r.stderr)
	}
}

// TestAnalyzeStore: the traces of a trace store give the same Kieker
// outputs as the log they came from (the store keeps what Kieker's
// analysis needs: traceId, eoi/ess, hosts, sessions).
func TestAnalyzeStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	traces := analysistest.Traces(t, oerLog)
	if len(traces) != 4 {
		t.Fatalf("%d traces assembled", len(traces))
	}
	if _, err := st.Append(traces); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--execution-traces"}, {"--message-traces"}, {"--equivalence-classes", "deployment"}, {"--system-model", "--format", "json"}} {
		fromLog := ok(t, append(append([]string{"analyze"}, args...), oerLog)...)
		fromStore := ok(t, append(append([]string{"analyze"}, args...), "--store", dir)...)
		if fromStore.stdout != fromLog.stdout || fromLog.stdout == "" {
			t.Errorf("analyze %v: from the store\n%s\nfrom the log\n%s", args, fromStore.stdout, fromLog.stdout)
		}
	}
	if r := tb(t, "analyze", "--execution-traces", "--store", dir, oerLog); r.code == 0 {
		t.Error("--store with a log directory: exit 0")
	}
}

// TestGraphKiekerNumbers: the graphs name assembly components with
// Kieker's numbers (the order Kieker creates them: b.B, c.C, a.A in the
// OER log), not the order of their names.
func TestGraphKiekerNumbers(t *testing.T) {
	r := ok(t, "analyze", "--graph", "deployment-component", oerLog)
	for _, want := range []string{"@1:b.B", "@2:c.C", "@3:a.A"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the graph lacks %s:\n%s", want, r.stdout)
		}
	}
	out := t.TempDir()
	ok(t, "analyze", "--kieker-trace-analysis", "-i", oerLog, "-o", out, "--plot-Assembly-Component-Dependency-Graph", "--plot-Call-Trees")
	for _, name := range []string{"assemblyComponentDependencyGraph.dot", "callTree-7.dot"} {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "@3:a.A") {
			t.Errorf("%s lacks @3:a.A:\n%s", name, b)
		}
	}
}

const eventLog = "../../internal/analysis/sysmodel/testdata/events"

// TestKiekerTraceAnalysisFlags: the flags of Kieker's tool that change
// what is reconstructed (their rules are tested in
// internal/analysis/reconstruct).
func TestKiekerTraceAnalysisFlags(t *testing.T) {
	read := func(dir, name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// The nested call of the event log is assumed (no CallOperationEvent
	// announces it), unless --ignore-assumed-calls.
	out := t.TempDir()
	ok(t, "analyze", "--kieker-trace-analysis", "-i", eventLog, "-o", out, "--print-Execution-Traces", "--traceColoring", "colors.properties", "--addDescriptions", "d.properties")
	if got := read(out, "executionTraces.txt"); !strings.Contains(got, "H::@2:y.Y.inner s (assumed)>\n") {
		t.Errorf("executionTraces.txt:\n%s", got)
	}
	out = t.TempDir()
	ok(t, "analyze", "--kieker-trace-analysis", "-i", eventLog, "-o", out, "--print-Execution-Traces", "--ignore-assumed-calls")
	if got := read(out, "executionTraces.txt"); strings.Contains(got, "assumed") || !strings.Contains(got, "H::@2:y.Y.inner s>\n") {
		t.Errorf("executionTraces.txt with --ignore-assumed-calls:\n%s", got)
	}
	if r := ok(t, "analyze", "--execution-traces", "--format", "json", eventLog); strings.Count(r.stdout, `"assumed": true`) != 1 {
		t.Errorf("JSON execution traces mark %d executions assumed, want 1:\n%s", strings.Count(r.stdout, `"assumed": true`), r.stdout)
	}
	// Dropping the OERs that end after .350 leaves traces 7 and 5 without
	// their roots: invalid, printed with their components' numbers.
	out = t.TempDir()
	r := ok(t, "analyze", "--kieker-trace-analysis", "-i", oerLog, "-o", out, "--print-Execution-Traces", "--print-invalid-Execution-Traces",
		"--ignore-executions-after-date", "1700000000350000000", "--ignore-invalid-traces")
	if !strings.Contains(r.stderr, "analysed 1 traces (1 calls)") || !strings.Contains(r.stderr, "left out 2 invalid traces") {
		t.Errorf("stderr: %s", r.stderr)
	}
	if got := read(out, "invalidTraceArtifacts.txt"); !strings.HasPrefix(got, "TraceId 7 (minTin=1700000000150000000 ") ||
		!strings.Contains(got, "<5[1,1] 1700000000160000000-1700000000210000000 B::@1:b.B.work s1>") {
		t.Errorf("invalidTraceArtifacts.txt:\n%s", got)
	}
	if got := read(out, "executionTraces.txt"); !strings.HasPrefix(got, "TraceId 3 ") {
		t.Errorf("executionTraces.txt:\n%s", got)
	}
}
