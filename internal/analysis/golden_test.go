package analysis

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("%s (-golden +got):\n%s", p, d)
	}
}

func dot(t *testing.T, g *Graph, o DOTOptions) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteDOT(&b, g, o); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func jsonOf(t *testing.T, g *Graph) []byte {
	t.Helper()
	b, err := json.MarshalIndent(g, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// TestGolden pins the DOT and JSON of a few graphs of real logs.
func TestGolden(t *testing.T) {
	tea := analyzeLog(t, logDir(t, "kieker-1.15-ascii-applicationtracemetadata-teastore"))
	book := analyzeLog(t, logDir(t, "kieker-1.10-binary-event-trace"))
	graph := func(an *Analyzer, k Kind) *Graph {
		g, err := an.Graph(k)
		if err != nil {
			t.Fatal(err)
		}
		return g.WithoutSelfLoops()
	}
	for _, tc := range []struct {
		name string
		got  []byte
	}{
		{"teastore-deployment-operation.dot", dot(t, graph(tea, DeploymentOperationGraph), DOTOptions{Unit: "ms"})},
		{"teastore-deployment-component.dot", dot(t, graph(tea, DeploymentComponentGraph).WithoutStats(), DOTOptions{})},
		{"teastore-aggregated-assembly-call-tree.dot", dot(t, graph(tea, AggregatedAssemblyCallTree).WithoutStats(), DOTOptions{ShortLabels: true})},
		{"teastore-assembly-operation.json", jsonOf(t, graph(tea, AssemblyOperationGraph))},
		{"bookstore-container.dot", dot(t, graph(book, ContainerGraph).WithoutStats(), DOTOptions{})},
		{"bookstore-assembly-component.dot", dot(t, graph(book, AssemblyComponentGraph), DOTOptions{Unit: "us"})},
		{"bookstore-assembly-operation.dot", dot(t, graph(book, AssemblyOperationGraph).WithoutStats(), DOTOptions{})},
		{"bookstore-deployment-component.json", jsonOf(t, graph(book, DeploymentComponentGraph))},
		{"bookstore-container.json", jsonOf(t, graph(book, ContainerGraph).WithoutStats())},
		{"bookstore-aggregated-deployment-call-tree.json", jsonOf(t, graph(book, AggregatedDeploymentCallTree).WithoutStats())},
	} {
		t.Run(tc.name, func(t *testing.T) { golden(t, tc.name, tc.got) })
	}

	ct := TraceCallTree(teastoreTrace(t)).WithoutStats()
	golden(t, "teastore-call-tree.dot", dot(t, ct, DOTOptions{ShortLabels: true}))
	golden(t, "teastore-call-tree.json", jsonOf(t, ct))
}
