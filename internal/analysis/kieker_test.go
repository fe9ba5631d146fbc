package analysis

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/source/kiekerlog"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// logDir returns the one log directory inside a corpus sample.
func logDir(t testing.TB, sample string) string {
	t.Helper()
	ds, err := filepath.Glob(filepath.Join(testcorpus.Path(t, "kieker-logs", sample), "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if filepath.Base(d) != "PROVENANCE.txt" {
			return d
		}
	}
	t.Fatalf("no log in %s", sample)
	return ""
}

// assemble reads a log through the assembler (record clock, flushed at the
// end) and hands every trace to emit.
func assemble(t testing.TB, dir string, emit func(*trace.Trace)) {
	t.Helper()
	a := trace.NewAssembler(trace.Options{Clock: trace.RecordClock, Emit: emit})
	r, err := kiekerlog.Open(dir, kiekerlog.Options{Catalog: record.Builtin()})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Run(context.Background(), pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		a.AddBatch(b)
		a.Tick()
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	a.Flush()
}

func analyzeLog(t *testing.T, dir string) *Analyzer {
	t.Helper()
	an := New(Options{})
	assemble(t, dir, an.Add)
	return an
}

// edgesOf returns our graph's edges by node keys, and its response times.
func edgesOf(t *testing.T, g *Graph) (map[[2]string]int64, map[string]oStats) {
	t.Helper()
	key := map[string]string{}
	rt := map[string]oStats{}
	for i := range g.Nodes {
		n := &g.Nodes[i]
		k := graphKey(g.Kind, n)
		if _, dup := rt[k]; dup {
			t.Errorf("%s: two nodes named %s", g.Kind, k)
		}
		key[n.ID] = k
		if s := n.Stats; s != nil && s.Count > 0 {
			rt[k] = oStats{s.Count, s.Min, s.Max, s.Total}
		}
	}
	edges := map[[2]string]int64{}
	for _, e := range g.Edges {
		edges[[2]string{key[e.From], key[e.To]}] += e.Calls
	}
	return edges, rt
}

// pathsOf returns an aggregated tree's calls per path.
func pathsOf(g *Graph) map[string]int64 {
	path := map[string]string{EntryID: oEntry}
	out := map[string]int64{}
	for _, e := range g.Edges { // edges come parents first
		p := path[e.From] + " > " + graphKey(g.Kind, g.Node(e.To))
		path[e.To] = p
		out[p] += e.Calls
	}
	return out
}

// compareWithOracle checks every graph, the response times and the
// statistics of an against Kieker's rules applied to recs.
func compareWithOracle(t *testing.T, an *Analyzer, recs []raw) {
	t.Helper()
	o := runOracle(recs)
	if s := an.Summary(); s.Messages != int64(len(o.traces)) {
		t.Errorf("analysed %d traces, Kieker %d (invalid: ours %d %v, Kieker %d)", s.Messages, len(o.traces), s.Invalid, s.InvalidList, o.invalid)
	}
	for k := ContainerGraph; k <= AssemblyOperationGraph; k++ {
		g, err := an.Graph(k)
		if err != nil {
			t.Fatal(err)
		}
		gotE, gotRT := edgesOf(t, g)
		wantE, wantRT := o.depGraph(k)
		if d := cmp.Diff(wantE, gotE); d != "" {
			t.Errorf("%s edges (-Kieker +ours):\n%s", k, d)
		}
		if d := cmp.Diff(wantRT, gotRT, cmp.AllowUnexported(oStats{})); d != "" {
			t.Errorf("%s response times (-Kieker +ours):\n%s", k, d)
		}
		// Every node of the graph is an end of an edge (or the entry).
		if len(g.Nodes) != 1+countEnds(wantE) {
			t.Errorf("%s: %d nodes, want %d", k, len(g.Nodes), 1+countEnds(wantE))
		}
	}
	for _, k := range []Kind{AggregatedDeploymentCallTree, AggregatedAssemblyCallTree} {
		g, err := an.Graph(k)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(o.treePaths(k), pathsOf(g)); d != "" {
			t.Errorf("%s (-Kieker +ours):\n%s", k, d)
		}
	}
	got := map[string]oOp{}
	for _, s := range an.Operations() {
		got[oKey(AssemblyOperationGraph, &oExec{asm: s.Component, op: s.Operation})] = oOp{s.Count, s.Total, s.Self, s.Errors}
	}
	if d := cmp.Diff(o.ops(), got, cmp.AllowUnexported(oOp{})); d != "" {
		t.Errorf("statistics (-oracle +ours):\n%s", d)
	}
}

func countEnds(edges map[[2]string]int64) int {
	ends := map[string]bool{}
	for e := range edges {
		ends[e[0]], ends[e[1]] = true, true
	}
	delete(ends, oEntry)
	return len(ends)
}

// TestCorpusLikeKieker computes every graph of the corpus's trace logs
// and compares it with Kieker's rules applied to the raw records.
func TestCorpusLikeKieker(t *testing.T) {
	for _, tc := range []struct {
		sample        string
		traces, calls int64
		containers    int
		minComponents int
	}{
		{"kieker-1.10-ascii-event-trace", 1, 52, 1, 1},
		{"kieker-1.10-binary-event-trace", 100, 396, 1, 3},
		{"kieker-1.15-ascii-applicationtracemetadata-teastore", 2, 13, 1, 3},
		{"kieker-2.0-ascii-event-trace", 31, 186, 1, 1},
		{"kieker-2.0-binary-event-trace", 31, 186, 1, 1},
		{"kieker-2.0-compressed/gzip-binary-rotated", 31, 186, 1, 1},
		{"kieker-1.8-ascii-operationexecution", 0, 0, 0, 0}, // every OER has traceId -1
	} {
		t.Run(strings.ReplaceAll(tc.sample, "/", "_"), func(t *testing.T) {
			dir := logDir(t, tc.sample)
			an := analyzeLog(t, dir)
			s := an.Summary()
			if s.Messages != tc.traces || s.Calls != tc.calls || s.Invalid != 0 {
				t.Errorf("analysed %d traces, %d calls, %d invalid; want %d, %d, 0", s.Messages, s.Calls, s.Invalid, tc.traces, tc.calls)
			}
			g, _ := an.Graph(ContainerGraph)
			if len(g.Nodes)-1 != tc.containers {
				t.Errorf("%d containers, want %d", len(g.Nodes)-1, tc.containers)
			}
			g, _ = an.Graph(AssemblyComponentGraph)
			if len(g.Nodes)-1 < tc.minComponents {
				t.Errorf("%d components, want at least %d", len(g.Nodes)-1, tc.minComponents)
			}
			compareWithOracle(t, an, readRaw(t, dir))
		})
	}
}

// teastoreTrace is the message trace -4143345278184849407 of the TeaStore
// log.
func teastoreTrace(t *testing.T) *MessageTrace {
	t.Helper()
	var m *MessageTrace
	assemble(t, logDir(t, "kieker-1.15-ascii-applicationtracemetadata-teastore"), func(tr *trace.Trace) {
		ms, _ := Messages(tr, Options{})
		for _, x := range ms {
			if x.ID == "-4143345278184849407" {
				m = x
			}
		}
	})
	if m == nil {
		t.Fatal("trace -4143345278184849407 not found")
	}
	return m
}

// TestTeastoreCallTree checks the call tree of one trace of the TeaStore
// log: the nodes in call order, the edges numbered 1., 2., … as Kieker
// labels them.
func TestTeastoreCallTree(t *testing.T) {
	g := TraceCallTree(teastoreTrace(t))
	type call struct {
		from, to string
		order    int
	}
	var got []call
	name := func(id string) string {
		n := g.Node(id)
		if n.Entry {
			return "Entry"
		}
		return n.Container + "::" + strings.TrimPrefix(n.Component, "tools.descartes.teastore.") + "." + n.Sig.Short()
	}
	for _, e := range g.Edges {
		got = append(got, call{name(e.From), name(e.To), e.Order})
	}
	const h = "be7db5e0e5f0::"
	ts := h + "recommender.servlet.TrainingSynchronizer."
	lb := h + "registryclient.rest.LoadBalancedCRUDOperations."
	rc := h + "registryclient.util.RESTClient$2.getRawType()"
	want := []call{
		{"Entry", ts + "retrieveDataAndRetrain()", 1},
		{ts + "retrieveDataAndRetrain()", ts + "setReady(..)", 2},
		{ts + "retrieveDataAndRetrain()", ts + "waitForPersistence()", 3},
		{ts + "waitForPersistence()", rc, 4},
		{ts + "waitForPersistence()", rc, 5},
		{ts + "waitForPersistence()", ts + "lambda$waitForPersistence$0(..)", 6},
		{ts + "retrieveDataAndRetrain()", lb + "getEntities(..)", 7},
		{lb + "getEntities(..)", rc, 8},
		{lb + "getEntities(..)", rc, 9},
		{lb + "getEntities(..)", lb + "lambda$getEntities$5(..)", 10},
		{lb + "getEntities(..)", lb + "lambda$getEntities$5(..)", 11},
		{lb + "getEntities(..)", lb + "lambda$getEntities$5(..)", 12},
	}
	if d := cmp.Diff(want, got, cmp.AllowUnexported(call{})); d != "" {
		t.Errorf("call tree (-want +got):\n%s", d)
	}
	if len(g.Nodes) != 13 {
		t.Errorf("%d nodes, want 13 (entry and 12 executions)", len(g.Nodes))
	}
}
