package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/api"
	"github.com/tracebridge/tracebridge/internal/clusterstatus"
	"github.com/tracebridge/tracebridge/internal/pipeline"
)

// TestClusterStatusCommand: `cluster status` against a node's API (the
// real handler, a cluster status of three nodes, one gone): the tables,
// --json, and the exit codes of a degraded cluster, a single node and a
// node that does not answer.
func TestClusterStatusCommand(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	st := clusterstatus.Status{
		Node: "n1",
		Nodes: []clusterstatus.Node{
			{Name: "n1", URL: "http://127.0.0.1:16686", Alive: true, LastSeen: now},
			{Name: "n2", URL: "http://127.0.0.2:16686", Alive: true, LastSeen: now},
			{Name: "n3", URL: "http://127.0.0.3:16686", Alive: false, LastSeen: now.Add(-time.Minute)},
		},
		Partitions: []clusterstatus.Partition{{ID: 0, Owner: "n1", Lag: 3, Checkpoint: 100}, {ID: 1, Owner: "n2", Checkpoint: 90}, {ID: 2, Lag: 40}},
		Stream:     clusterstatus.Stream{Name: "TRACEBRIDGE_INGEST", Replicas: 3, Leader: "n2", Messages: 1234, Bytes: 3 << 20, MaxBytes: 4 << 30, Healthy: true},
		Store:      clusterstatus.Store{Backend: "s3", Healthy: true},
	}
	var degraded []string
	srv := httptest.NewServer(api.New(api.Options{Shared: &pipeline.Shared{}, Cluster: clusterstatus.SourceFunc(func(context.Context) (clusterstatus.Status, error) {
		s := st
		s.Degraded = degraded
		return s, nil
	})}))
	defer srv.Close()
	status := func(args ...string) (int, string, string) {
		var stdout, stderr strings.Builder
		code := run(context.Background(), append([]string{"cluster", "status", "--url", srv.URL}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}

	code, out, errs := status()
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{
		"cluster as n1 sees it: 3 nodes (2 alive), 3 partitions (2 owned), lag 43 messages",
		"STREAM  TRACEBRIDGE_INGEST  replicas 3  leader n2  1234 messages  3.0 MiB of 4.0 GiB  healthy",
		"STORE   s3                  healthy",
		"2          (none)  40   0\n",
		"nothing degraded",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	if !regexp.MustCompile(`\nn3 +NO +1m[0-9]+s ago +http://127\.0\.0\.3:16686\n`).MatchString(out) {
		t.Errorf("no line of node n3:\n%s", out)
	}

	degraded = []string{"node n3 gone since " + now.Add(-time.Minute).Format(time.TimeOnly), "partition 2 has no owner"}
	code, out, errs = status("--json")
	if code != exitData || !strings.Contains(errs, "degraded: node n3 gone") {
		t.Errorf("degraded: exit %d, stderr %s", code, errs)
	}
	var got clusterstatus.Status
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	want := st
	want.Degraded = degraded
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("--json (-want +got):\n%s", d)
	}
	if _, out, _ = status(); !strings.Contains(out, "DEGRADED\n  node n3 gone") {
		t.Errorf("table without what is degraded:\n%s", out)
	}

	alone := httptest.NewServer(api.New(api.Options{Shared: &pipeline.Shared{}}))
	defer alone.Close()
	var stdout, stderr strings.Builder
	if code := run(context.Background(), []string{"cluster", "status", "--url", alone.URL}, &stdout, &stderr); code != exitConfig || !strings.Contains(stderr.String(), "not a cluster node") {
		t.Errorf("single node: exit %d, stderr %s", code, stderr.String())
	}
	alone.Close()
	stderr.Reset()
	if code := run(context.Background(), []string{"cluster", "status", "--url", alone.URL}, &stdout, &stderr); code != exitComm {
		t.Errorf("no node: exit %d, stderr %s", code, stderr.String())
	}
	if code := run(context.Background(), []string{"cluster", "frob"}, &stdout, &stderr); code != exitUsage {
		t.Errorf("cluster frob: exit %d", code)
	}
}
