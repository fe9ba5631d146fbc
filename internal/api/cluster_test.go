package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/clusterstatus"
	"github.com/tracebridge/tracebridge/internal/pipeline"
)

func TestClusterStatus(t *testing.T) {
	seen := time.Date(2026, 11, 28, 18, 0, 0, 0, time.UTC)
	full := clusterstatus.Status{
		Node: "n1",
		Nodes: []clusterstatus.Node{
			{Name: "n1", URL: "http://127.0.0.1:16686", Alive: true, LastSeen: seen},
			{Name: "n2", URL: "http://127.0.0.2:16686", Alive: false, LastSeen: seen.Add(-time.Minute)},
		},
		Partitions: []clusterstatus.Partition{{ID: 0, Owner: "n1", Lag: 12, Checkpoint: 345}, {ID: 1, Owner: "", Lag: 7}},
		Stream:     clusterstatus.Stream{Name: "TB_INGEST", Replicas: 3, Leader: "n1", Messages: 352, Bytes: 1 << 20, MaxBytes: 2 << 30, Full: true, Healthy: true},
		Store:      clusterstatus.Store{Backend: "s3", Healthy: false, Error: "connection refused"},
		Degraded:   []string{"node n2 gone since 18:59:00", "partition 1 has no owner", "store: connection refused"},
	}
	t.Run("cluster", func(t *testing.T) {
		e := newEnv(t, func(o *Options) {
			o.Cluster = clusterstatus.SourceFunc(func(context.Context) (clusterstatus.Status, error) { return full, nil })
		})
		var got clusterstatus.Status
		raw := e.get("/api/v1/cluster", &got)
		if d := cmp.Diff(full, got); d != "" {
			t.Errorf("status (-want +got):\n%s", d)
		}
		// The keys the CLI, the UI and scripts read.
		for _, k := range []string{`"nodes":[{"name":"n1","url":`, `"alive":true,"last_seen":"2026-11-28T18:00:00Z"`,
			`"partitions":[{"id":0,"owner":"n1","lag":12,"checkpoint":345}`, `"stream":{"name":"TB_INGEST","replicas":3,"leader":"n1","messages":352,"bytes":1048576,"max_bytes":2147483648,"full":true,"healthy":true}`,
			`"store":{"backend":"s3","healthy":false,"error":"connection refused"}`, `"degraded":["node n2`} {
			if !strings.Contains(string(raw), k) {
				t.Errorf("answer lacks %s:\n%s", k, raw)
			}
		}
	})
	t.Run("published in Shared", func(t *testing.T) {
		e := newEnv(t, nil)
		if code, b, _ := e.do("GET", "/api/v1/cluster", ""); code != http.StatusNotFound || !strings.Contains(string(b), "not a cluster node") {
			t.Fatalf("single node: %d %s", code, b)
		}
		clusterstatus.Publish(e.api.opt.Shared, clusterstatus.SourceFunc(func(context.Context) (clusterstatus.Status, error) {
			return clusterstatus.Status{Node: "n3"}, nil
		}))
		raw := e.get("/api/v1/cluster", nil)
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		// Empty lists are lists, never null.
		for _, k := range []string{"nodes", "partitions", "degraded"} {
			if string(m[k]) != "[]" {
				t.Errorf("%s = %s, want []", k, m[k])
			}
		}
	})
	t.Run("error", func(t *testing.T) {
		e := newEnv(t, func(o *Options) {
			o.Cluster = clusterstatus.SourceFunc(func(context.Context) (clusterstatus.Status, error) {
				return clusterstatus.Status{}, errors.New("no NATS server reachable")
			})
		})
		code, b, _ := e.do("GET", "/api/v1/cluster", "")
		if code != http.StatusServiceUnavailable || !strings.Contains(string(b), "no NATS server reachable") {
			t.Fatalf("got %d %s", code, b)
		}
	})
}

// TestJFRWhereOnClusterNode: on a cluster node the JFR routes' 404s say
// that a node shows the JFR data it received; a bridge that runs alone
// says nothing of clusters (TestServicesOfComponents).
func TestJFRWhereOnClusterNode(t *testing.T) {
	shared := &pipeline.Shared{}
	e := newEnv(t, func(o *Options) {
		o.Shared = shared
		o.Cluster = clusterstatus.SourceFunc(func(context.Context) (clusterstatus.Status, error) { return clusterstatus.Status{Node: "n1"}, nil })
	})
	const where = "a cluster node shows the JFR data of the hosts whose recordings it received"
	for _, route := range []string{"/api/v1/profiles/flame?host=jvm-1", "/api/v1/profiles/views?host=jvm-1", "/api/v1/jfr/types?host=jvm-1"} {
		if code, b, _ := e.do("GET", route, ""); code != http.StatusNotFound || !strings.Contains(string(b), where) {
			t.Errorf("no profile stage, %s: %d %s", route, code, b)
		}
	}
	shared.SetProfiles(fakeProfiles{})
	for _, route := range []string{"/api/v1/profiles/flame?host=jvm-2&since=1h", "/api/v1/profiles/views?host=jvm-2&since=1h"} {
		if code, b, _ := e.do("GET", route, ""); code != http.StatusNotFound || !strings.Contains(string(b), "of host jvm-2") || !strings.Contains(string(b), where) {
			t.Errorf("another host, %s: %d %s", route, code, b)
		}
	}
	if code, b, _ := e.do("GET", "/api/v1/profiles/flame?host=jvm-1&since=1h", ""); code != http.StatusOK {
		t.Errorf("the node's host: %d %s", code, b)
	}
}
