package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

func teastoreLog(t *testing.T) string {
	t.Helper()
	ds, _ := filepath.Glob(testcorpus.Path(t, "kieker-logs", "kieker-1.15-ascii-applicationtracemetadata-teastore", "kieker-*"))
	if len(ds) != 1 {
		t.Fatalf("teastore log: %v", ds)
	}
	return ds[0]
}

func TestAnalyzeGraphs(t *testing.T) {
	log := teastoreLog(t)
	r := ok(t, "analyze", "--graph", "deployment-component", "--response-times", log)
	for _, want := range []string{"digraph G {", "<<execution container>>\\nbe7db5e0e5f0", "<<deployment component>>\\n@1:tools.descartes.teastore.recommender.servlet.TrainingSynchronizer",
		"min: ", "depNode_0->depNode_1[label=2,"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("dot output lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "analysed 2 traces (13 calls)") {
		t.Errorf("stderr %q", r.stderr)
	}

	r = ok(t, "analyze", log, "--graph", "assembly-operation", "--format", "json")
	var g struct {
		Nodes []struct {
			ID        string
			Container *string
			Component *string
			Operation *string
			Stats     *struct{ Count int64 }
		}
		Edges []struct {
			From, To string
			Calls    int64
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &g); err != nil {
		t.Fatalf("%v:\n%s", err, r.stdout)
	}
	if len(g.Nodes) != 9 || g.Nodes[0].ID != "entry" || g.Nodes[1].Container != nil || g.Nodes[1].Operation == nil || g.Nodes[1].Stats != nil {
		t.Errorf("nodes %+v", g.Nodes)
	}
	var calls int64
	for _, e := range g.Edges {
		calls += e.Calls
	}
	if calls != 13 {
		t.Errorf("%d calls on the edges, want 13", calls)
	}

	r = ok(t, "analyze", "--graph", "call-tree:-4143345278184849407", "--short-labels", log)
	if !strings.Contains(r.stdout, `label="12." ]`) || !strings.Contains(r.stdout, "@1:..TrainingSynchronizer") {
		t.Errorf("call tree:\n%s", r.stdout)
	}
	r = tb(t, "analyze", "--graph", "call-tree:42", log)
	if r.code != exitData || !strings.Contains(r.stderr, "no trace 42") {
		t.Errorf("unknown trace: exit %d, stderr %q", r.code, r.stderr)
	}

	out := filepath.Join(t.TempDir(), "tree.json")
	ok(t, "analyze", "--graph", "aggregated-assembly-call-tree", "--format", "json", "-o", out, log)
	if b, err := os.ReadFile(out); err != nil || !bytes.Contains(b, []byte(`"calls": 3`)) {
		t.Errorf("-o file: %v\n%s", err, b)
	}
}

func TestAnalyzeStats(t *testing.T) {
	log := teastoreLog(t)
	r := ok(t, "analyze", "--stats", log)
	if !strings.Contains(r.stdout, "errors  operation") || !strings.Contains(r.stdout, "      3  tools.descartes.teastore.registryclient.rest.LoadBalancedCRUDOperations.lambda$getEntities$5(..)") {
		t.Errorf("stats table:\n%s", r.stdout)
	}
	r = ok(t, "analyze", "--stats", "--format", "json", log)
	var s struct {
		Operations []struct {
			Component, Operation           string
			Count, TotalNs, SelfNs, Errors int64
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil || len(s.Operations) != 8 {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	var count, errs int64
	for _, o := range s.Operations {
		count += o.Count
		errs += o.Errors
		if o.SelfNs > o.TotalNs || o.SelfNs < 0 {
			t.Errorf("self time %d of %d in %s", o.SelfNs, o.TotalNs, o.Operation)
		}
	}
	if count != 13 || errs != 5 {
		t.Errorf("%d calls, %d errors; want 13, 5", count, errs)
	}
}

func TestAnalyzeUsage(t *testing.T) {
	log := teastoreLog(t)
	for _, args := range [][]string{
		{"analyze", log},
		{"analyze", "--graph", "container", "--stats", log},
		{"analyze", "--graph", "containers", log},
		{"analyze", "--graph", "call-tree", log},
		{"analyze", "--graph", "container", "--format", "png", log},
		{"analyze", "--stats", "--format", "dot", log},
		{"analyze", "--graph", "container"},
	} {
		if r := tb(t, args...); r.code != exitUsage {
			t.Errorf("%v: exit %d, want %d; stderr %q", args, r.code, exitUsage, r.stderr)
		}
	}
}

// TestAnalyzeSVG renders with Graphviz when dot is on PATH, and says how
// to get it when it is not.
func TestAnalyzeSVG(t *testing.T) {
	log := teastoreLog(t)
	if _, err := exec.LookPath("dot"); err == nil {
		r := ok(t, "analyze", "--graph", "container", "--format", "svg", log)
		if !strings.Contains(r.stdout, "<svg") || !strings.Contains(r.stdout, "be7db5e0e5f0") {
			t.Errorf("svg output:\n%.500s", r.stdout)
		}
	} else {
		t.Log("Graphviz's dot is not installed: only the message without it is checked")
	}
	cmd := exec.Command(bridgetest.Binary(t), "analyze", "--graph", "container", "--format", "svg", log)
	cmd.Env = append(os.Environ(), "PATH="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee, isExit := err.(*exec.ExitError); !isExit || ee.ExitCode() != exitConfig || !strings.Contains(stderr.String(), "apt-get install graphviz") {
		t.Errorf("without dot: %v, stderr %q", err, stderr.String())
	}
}
