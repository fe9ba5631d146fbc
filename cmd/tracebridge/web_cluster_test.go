package main

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tracebridge/tracebridge/internal/api"
	"github.com/tracebridge/tracebridge/internal/clusterstatus"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/web"
)

// TestWebClusterPanel: the console of a cluster node shows the cluster
// (nodes, stream and store, partition owners and lag) and what is
// degraded, and follows a change (a node gone, a partition without
// owner) on its next refresh; a bridge that runs alone shows no cluster
// panel. The page is the real UI served by the real API, over a cluster
// status the test sets.
func TestWebClusterPanel(t *testing.T) {
	now := time.Now().UTC()
	var mu sync.Mutex
	st := clusterstatus.Status{
		Node: "n1",
		Nodes: []clusterstatus.Node{
			{Name: "n1", URL: "http://127.0.0.1:16686", Alive: true, LastSeen: now},
			{Name: "n2", URL: "http://127.0.0.2:16686", Alive: true, LastSeen: now},
		},
		Partitions: []clusterstatus.Partition{{ID: 0, Owner: "n1", Lag: 5, Checkpoint: 100}, {ID: 1, Owner: "n2", Lag: 0, Checkpoint: 80}},
		Stream:     clusterstatus.Stream{Name: "TRACEBRIDGE_INGEST", Replicas: 3, Leader: "n2", Messages: 185, Bytes: 4096, Healthy: true},
		Store:      clusterstatus.Store{Backend: "s3", Healthy: true},
	}
	srv := httptest.NewServer(api.New(api.Options{Shared: &pipeline.Shared{}, UI: web.Handler(),
		Cluster: clusterstatus.SourceFunc(func(context.Context) (clusterstatus.Status, error) {
			mu.Lock()
			defer mu.Unlock()
			return st, nil
		})}))
	defer srv.Close()
	alone := httptest.NewServer(api.New(api.Options{Shared: &pipeline.Shared{}, UI: web.Handler()}))
	defer alone.Close()

	ctx := browser(t)
	act(t, ctx, "open the console", chromedp.Navigate(srv.URL+"/console"))
	waitJS(t, ctx, "the cluster panel", `(() => { const p = document.querySelector('section.cluster'); return p && !p.hidden && p.dataset.node === 'n1'; })()`)
	summary := eval[string](t, ctx, `document.querySelector('.cluster-summary').textContent`)
	if want := "as n1 sees it: 2 nodes (2 alive) · 2 partitions (2 owned) · lag 5 messages"; summary != want {
		t.Errorf("summary %q, want %q", summary, want)
	}
	if got := eval[string](t, ctx, `document.querySelector('.cluster-degraded').textContent`); got != "nothing degraded" {
		t.Errorf("degraded: %q", got)
	}
	if got := eval[string](t, ctx, `document.querySelector('.cluster-parts').textContent`); !containsAll(got, "TRACEBRIDGE_INGEST", "3 replicas", "leader n2", "s3", "healthy") {
		t.Errorf("stream and store: %q", got)
	}
	if got := eval[string](t, ctx, `document.querySelector('.cluster-partitions tr[data-id="0"]').textContent`); got != "0n15100" {
		t.Errorf("partition 0's row: %q", got)
	}
	shot(t, ctx, "cluster-panel")

	// Node n2 goes: the next refresh (2 s) shows it and what is degraded.
	mu.Lock()
	st.Nodes[1].Alive = false
	st.Partitions[1].Owner = ""
	st.Store = clusterstatus.Store{Backend: "s3", Error: "dial tcp 127.0.0.1:7070: connection refused"}
	st.Degraded = []string{"node n2 gone", "partition 1 has no owner", "store: dial tcp 127.0.0.1:7070: connection refused"}
	mu.Unlock()
	waitJS(t, ctx, "the degraded cluster", `document.querySelector('section.cluster').dataset.degraded === '3'`)
	if got := eval[string](t, ctx, `document.querySelector('.cluster-degraded').textContent`); !containsAll(got, "Degraded", "node n2 gone", "partition 1 has no owner") {
		t.Errorf("degraded: %q", got)
	}
	if got := eval[string](t, ctx, `document.querySelector('.cluster-nodes tr[data-name="n2"]').textContent`); !containsAll(got, "gone") {
		t.Errorf("node n2's row: %q", got)
	}
	if got := eval[string](t, ctx, `document.querySelector('.cluster-parts').textContent`); !containsAll(got, "unhealthy: dial tcp 127.0.0.1:7070") {
		t.Errorf("store: %q", got)
	}
	if got := eval[string](t, ctx, `document.querySelector('.cluster-partitions tr[data-id="1"]').textContent`); got != "1(none)080" {
		t.Errorf("partition 1's row: %q", got)
	}
	shot(t, ctx, "cluster-panel-degraded")

	// A bridge that runs alone: the console loads, without the panel.
	act(t, ctx, "open a single node's console", chromedp.Navigate(alone.URL+"/console"))
	waitJS(t, ctx, "the bridge panel", `document.querySelector('.console-status') && document.querySelector('.console-status').dataset.version !== undefined`)
	if !eval[bool](t, ctx, `document.querySelector('section.cluster').hidden`) {
		t.Error("a single node shows a cluster panel")
	}
}

// containsAll reports whether s contains every one of subs.
func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
