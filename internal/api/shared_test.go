package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/objstore"
	"github.com/tracebridge/tracebridge/internal/store"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestJaegerSharedBucketCopies: two stores on one bucket (two nodes of a
// cluster) hold copies of the same traces, whole or in part (the second
// node assembled again what the first had not acknowledged); Jaeger's
// search and trace by id through the first show each trace once, each
// span once.
func TestJaegerSharedBucketCopies(t *testing.T) {
	bucketDir := t.TempDir()
	openNode := func(node string) *store.Store {
		b, err := objstore.NewLocal(bucketDir)
		if err != nil {
			t.Fatal(err)
		}
		st, err := store.Open(t.TempDir(), store.Options{Bucket: b, Node: node, Refresh: 50 * time.Millisecond, ListAll: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	a, b := openNode("a"), openNode("b")
	base := time.Now().Add(-time.Minute)
	const n = 12
	traces := shop(n, base)
	copies := shop(n, base)
	for i := n / 2; i < n; i++ {
		// The second node's copy: all spans but the root.
		copies[i].Spans = copies[i].Spans[1:]
		for k := range copies[i].Spans {
			copies[i].Spans[k].Parent = -1
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, w := range []struct {
		st *store.Store
		ts []*trace.Trace
	}{{a, traces}, {b, copies}} {
		if _, err := w.st.Append(w.ts); err != nil {
			t.Fatal(err)
		}
		if err := w.st.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	e := newEnv(t, func(o *Options) { o.Store = func() *store.Store { return a } })
	deadline := time.Now().Add(90 * time.Second)
	for {
		stored := 0
		for _, p := range a.Partitions() {
			stored += p.Traces
		}
		if stored == 2*n {
			break // a lists b's blocks too
		}
		if time.Now().After(deadline) {
			t.Fatalf("a lists blocks of %d traces, want %d (its own and b's copies)", stored, 2*n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	onceEach := func(jt jTrace, want int) error {
		seen := map[string]bool{}
		for _, s := range jt.Spans {
			if seen[s.SpanID] {
				return fmt.Errorf("trace %s: span %s twice", jt.TraceID, s.SpanID)
			}
			seen[s.SpanID] = true
		}
		if len(jt.Spans) != want {
			return fmt.Errorf("trace %s: %d spans, want %d", jt.TraceID, len(jt.Spans), want)
		}
		return nil
	}
	q := url.Values{"service": {"svc-0"}, "limit": {"100"}, "lookback": {"1h"}, "start": {"0"}}
	var got struct {
		Data []jTrace `json:"data"`
	}
	e.get("/api/traces?"+q.Encode(), &got)
	if len(got.Data) != n {
		t.Fatalf("the search lists %d traces, want %d once each", len(got.Data), n)
	}
	ids := map[string]bool{}
	for _, jt := range got.Data {
		if ids[jt.TraceID] {
			t.Fatalf("trace %s listed twice", jt.TraceID)
		}
		ids[jt.TraceID] = true
		if err := onceEach(jt, len(traces[0].Spans)); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{0, n - 1} {
		var one struct {
			Data []jTrace `json:"data"`
		}
		body := e.get("/api/traces/"+jaegerID(traces[i].ID), nil)
		if err := json.Unmarshal(body, &one); err != nil || len(one.Data) != 1 {
			t.Fatalf("trace %d: %v %s", i, err, body)
		}
		if err := onceEach(one.Data[0], len(traces[i].Spans)); err != nil {
			t.Fatal(err)
		}
	}
}
