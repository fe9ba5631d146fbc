package main

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/codec/zico"
	"github.com/tracebridge/tracebridge/internal/codec/zico/zicotest"
)

// TestZorkaTraceTypeIsItsName: a zorka agent's traces are named by their
// trace type (the TraceMarker's), as zico lists and searches them: in the
// API's search and name list, `query --name`, and EQL's `trace` (and
// zico's `type`); the root span's operation stays the root method. The
// root's ERROR_MARK, zico's error filter, is the attribute zorka.error.
func TestZorkaTraceTypeIsItsName(t *testing.T) {
	dir := t.TempDir()
	cfg := `flush_interval: 100ms
traces: {window: 200ms}
receivers:
  - {name: zico, type: zico, listen: "127.0.0.1:0"}
sinks:
  - {type: store, path: store}
`
	p := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, cfg), "--http", "127.0.0.1:0")
	base := httpURL(t, p)
	agent := zicotest.NewAgent(p.Addr("zico"), "zorka-host", "")
	defer agent.Close()

	clock := time.Now().Add(-time.Minute)
	threw := zicotest.Record("com.acme.Dao", "load", "()V", 1000)
	threw.Exception = &zico.Exception{Class: "java.lang.IllegalStateException", Message: "no row"}
	threw.Errors = 1
	http1 := zicotest.Root(zicotest.Record("com.acme.web.Controller", "handle", "()V", 5000, threw), "HTTP", clock)
	http2 := zicotest.Root(zicotest.Record("com.acme.web.Controller", "list", "()V", 3000), "HTTP", clock.Add(time.Second))
	jms := zicotest.Root(zicotest.Record("com.acme.jms.Listener", "onMessage", "()V", 2000), "JMS", clock.Add(2*time.Second))
	jms.Marker.Flags |= zico.MarkerError // ended with an error, though no call threw
	sql := zicotest.Root(zicotest.Record("com.acme.Dao", "query", "()V", 1000), "SQL", clock.Add(3*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, r := range []*zico.TraceRecord{&http1, &http2, &jms, &sql} {
		if err := agent.Send(ctx, r); err != nil {
			t.Fatal(err)
		}
	}

	type summary struct{ TraceID, Name string }
	search := func(query string) []summary {
		t.Helper()
		code, b := apiGet(t, "GET", base+"/api/v1/traces?limit=100&"+query, "", "")
		if code != 200 {
			t.Fatalf("search %s: %d %s", query, code, b)
		}
		var page struct{ Traces []summary }
		if err := json.Unmarshal(b, &page); err != nil {
			t.Fatal(err)
		}
		return page.Traces
	}
	var all []summary
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if all = search(""); len(all) == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d traces found over the API, want 4", len(all))
		}
	}
	var names []string
	for _, s := range all {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"HTTP", "HTTP", "JMS", "SQL"}) {
		t.Fatalf("names in the list %q, want the trace types", names)
	}
	if got := search("name=jms"); len(got) != 1 || got[0].Name != "JMS" {
		t.Fatalf("name=jms: %+v", got)
	}
	if got := search("name=" + url.QueryEscape(http1.Operation())); len(got) != 0 {
		t.Fatalf("name=%s (a root method): %+v, want none", http1.Operation(), got)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		_, b := apiGet(t, "GET", base+"/api/v1/names", "", "")
		var n struct{ Names []string }
		json.Unmarshal(b, &n)
		slices.Sort(n.Names)
		if slices.Equal(n.Names, []string{"HTTP", "JMS", "SQL"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("names %q, want the trace types", n.Names)
		}
	}

	count := func(args ...string) int {
		t.Helper()
		r := ok(t, append([]string{"query", "--url", base, "--json", "--limit", "100"}, args...)...)
		return strings.Count(r.stdout, `"traceId"`)
	}
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"--name", "HTTP"}, 2},
		{[]string{"--name", "sql"}, 1},
		{[]string{"--eql", "trace = 'HTTP'"}, 2},
		{[]string{"--eql", "type = 'JMS'"}, 1},
		{[]string{"--eql", "trace ~= '^(JMS|SQL)$'"}, 2},
		{[]string{"--errors"}, 1},                   // a call threw
		{[]string{"--attr", "zorka.error=true"}, 1}, // zico's error filter: ERROR_MARK
	} {
		if got := count(c.args...); got != c.want {
			t.Errorf("query %q: %d traces, want %d", c.args, got, c.want)
		}
	}

	// The root span's operation stays the root method.
	id := search("name=JMS")[0].TraceID
	r := ok(t, "query", "--url", base, "--trace-id", id, "--json")
	if !strings.Contains(r.stdout, `"operation":"`+jms.Operation()+`"`) {
		t.Fatalf("JMS trace's tree:\n%s\nwant its root operation %s", r.stdout, jms.Operation())
	}
}
