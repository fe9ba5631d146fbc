package main

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

// TestLiveOverHTTP: the HTTP listener's /api/live is the live stream over
// WebSocket (what the web UI's live view reads): metadata first, then the
// records a replay sends, filtered by type; a cross-origin page is refused.
func TestLiveOverHTTP(t *testing.T) {
	p := bridgetest.StartConfig(t, `flush_interval: 100ms
http: "127.0.0.1:0"
receivers: [{name: k, type: kieker-tcp, listen: "127.0.0.1:0"}]
sinks: [{type: kieker-log, path: logs}]
stream: {listen: "127.0.0.1:0"}
`)
	base := httpURL(t, p)
	ws := "ws" + strings.TrimPrefix(base, "http") + "/api/live?type=BeforeOperationEvent"
	if _, resp, err := websocket.DefaultDialer.Dial(ws, http.Header{"Origin": {"http://evil.example"}}); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a cross-origin page connected: %v %v", resp, err)
	}
	c, resp, err := websocket.DefaultDialer.Dial(ws, http.Header{"Origin": {base}})
	if err != nil {
		var body []byte
		if resp != nil {
			body, _ = io.ReadAll(resp.Body)
		}
		t.Fatalf("%v: %v %s", err, resp, body)
	}
	defer c.Close()
	log := testcorpus.Path(t, "kieker-logs", "kieker-2.0-binary-event-trace")
	ok(t, "replay", log, "--to", "kieker-tcp://"+p.Addr("k"))
	var kinds []string
	befores := 0
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	for befores < 124 { // the log's BeforeOperationEvents
		var m struct {
			Kind    string `json:"kind"`
			Records []struct {
				Record struct {
					Type string `json:"type"`
				} `json:"record"`
			} `json:"records"`
			Metadata json.RawMessage `json:"metadata"`
		}
		if err := c.ReadJSON(&m); err != nil {
			t.Fatalf("after %d BeforeOperationEvents (%v): %v", befores, kinds, err)
		}
		kinds = append(kinds, m.Kind)
		for _, r := range m.Records {
			if r.Record.Type != "kieker.common.record.flow.trace.operation.BeforeOperationEvent" {
				t.Fatalf("a record of type %s through a filter on BeforeOperationEvent", r.Record.Type)
			}
			befores++
		}
	}
	if kinds[0] != "metadata" {
		t.Fatalf("the first message is %q, not the metadata", kinds[0])
	}
	p.Stop()
}

// TestLiveWithToken: where reads need a token, a page opens the live
// WebSocket with its token as a subprotocol after tracebridge.bearer
// (a browser cannot set the Authorization header; a token must not be
// in a URL): accepted, answered with tracebridge.bearer alone; without
// a token or with a wrong one, 401.
func TestLiveWithToken(t *testing.T) {
	dir := t.TempDir()
	pair := strings.Split(strings.TrimSpace(ok(t, "token").stdout), "\n")
	writeFile(t, filepath.Join(dir, "tokens"), pair[1]+"\n")
	p := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, `flush_interval: 100ms
http: {listen: "127.0.0.1:0", api_tokens_file: tokens, read_token_required: true}
receivers: [{name: k, type: kieker-tcp, listen: "127.0.0.1:0"}]
sinks: [{type: kieker-log, path: logs}]
stream: {listen: "127.0.0.1:0"}
`))
	base := httpURL(t, p)
	ws := "ws" + strings.TrimPrefix(base, "http") + "/api/live"
	origin := http.Header{"Origin": {base}}
	for _, protos := range [][]string{nil, {"tracebridge.bearer", "tbt_wrong"}} {
		d := websocket.Dialer{Subprotocols: protos}
		if _, resp, err := d.Dial(ws, origin); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("subprotocols %v: %v %v", protos, resp, err)
		}
	}
	d := websocket.Dialer{Subprotocols: []string{"tracebridge.bearer", pair[0]}}
	c, resp, err := d.Dial(ws, origin)
	if err != nil {
		t.Fatalf("with the token: %v %v", resp, err)
	}
	defer c.Close()
	if got := resp.Header.Get("Sec-WebSocket-Protocol"); got != "tracebridge.bearer" {
		t.Errorf("the server answered the subprotocol %q", got)
	}
	var m struct{ Kind string }
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := c.ReadJSON(&m); err != nil || m.Kind != "metadata" {
		t.Errorf("the first message: %+v %v", m, err)
	}
	p.Stop()
}
